"""Words for messages: the closest choice, a list of what is accepted, a value as written.

Kept apart from the pydantic error mapper (project/_errors.py) so that the suite and
labels readers, and a run that needs no validation, import no pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["accepted_list", "closest", "describe"]


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word`` (ignoring case), if any is close enough."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    import difflib  # only for a message

    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def accepted_list(choices: Iterable[str], got: object = None) -> str:
    """``a, b, c`` plus ``; did you mean 'b'?`` when ``got`` is close to one."""
    options = [str(c) for c in choices]
    text = ", ".join(options)
    if isinstance(got, str):
        hint = closest(got, options)
        if hint is not None and hint != got:
            text += f"; did you mean '{hint}'?"
    return text


def describe(value: object) -> str:
    """A value as a user would write it in YAML or JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"'{shown}'"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"
