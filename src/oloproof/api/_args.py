"""The API's arguments checked where they come in: a wrong type is one ``TypeError`` that
names the function, the argument and what it accepts, raised before anything is loaded,
stored or called (as Python's own ``f() argument 'x' must be ...``).

Without these, ``run(p, cases=5)`` said ``'int' object is not iterable`` from deep inside,
``run(p, use_cache="no")`` read the cache (any non-empty text is true), and
``run(p, on_event="x")`` started the run and stored it RUN_ERROR when the first event came.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def refuse(function: str, name: str, accepted: str, value: object) -> TypeError:
    return TypeError(
        f"{function}() argument '{name}' must be {accepted}, not {type(value).__name__}"
    )


def path(value: object, name: str, function: str) -> str | os.PathLike[str]:
    """A path argument (``str`` or ``os.PathLike`` of ``str``) as given."""
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike) and isinstance(os.fspath(value), str):
        return value
    raise refuse(function, name, "a path (str or os.PathLike)", value)


def optional_path(value: object, name: str, function: str) -> str | os.PathLike[str] | None:
    return None if value is None else path(value, name, function)


def flag(value: object, name: str, function: str, *, optional: bool = False) -> bool | None:
    """``True`` or ``False`` (or ``None`` where that means "the default"): never a value
    read by its truth (``use_cache="false"`` is true)."""
    if isinstance(value, bool) or (optional and value is None):
        return value
    raise refuse(function, name, "True, False or None" if optional else "True or False", value)


def texts(value: object, name: str, function: str, what: str) -> list[str] | None:
    """One text or any iterable of texts (``cases="id"``, a list, a pandas column), as a
    list; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    accepted = f"{what} or a list of them"
    items = _items(value, name, function, accepted)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(
                f"{function}() argument '{name}' must be {accepted}; it holds"
                f" {type(item).__name__} {item!r}"
            )
    return items


def _items(value: object, name: str, function: str, accepted: str) -> list[Any]:
    if isinstance(value, bytes | bytearray) or not isinstance(value, Iterable):
        raise refuse(function, name, accepted, value)
    return list(value)


def callback(value: object, name: str, function: str) -> Any:
    if value is None or callable(value):
        return value
    raise refuse(function, name, "a function of one event, or None", value)


def count(value: object, name: str, function: str) -> int | None:
    """A whole number of 1 or more, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse(function, name, "a whole number or None", value)
    if value < 1:
        raise ValueError(f"{function}() argument '{name}' must be 1 or more, got {value}")
    return value


def optional_text(value: object, name: str, function: str, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise refuse(function, name, what + " or None", value)


def probability(value: object, name: str, function: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise refuse(function, name, "a number strictly between 0 and 1, or None", value)
    return float(value)


def sources(value: object, function: str) -> list[str]:
    """``merge``'s sources: paths or URLs; one given alone (``merge("shards/")``) is one
    source, not its characters."""
    if isinstance(value, str | os.PathLike):
        value = [value]
    accepted = "a list of project directories, store files or postgresql:// URLs"
    out = []
    for item in _items(value, "sources", function, accepted):
        if not isinstance(item, str | os.PathLike) or not isinstance(os.fspath(item), str):
            raise TypeError(
                f"{function}() argument 'sources' must be {accepted}; it holds"
                f" {type(item).__name__} {item!r}"
            )
        out.append(os.fspath(item))
    return out


def run_arguments(function: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """:func:`oloproof.run`'s (and ``run_async``'s) arguments (its ``locals()`` on entry)
    checked; ``cases``, ``where``, ``group_by`` and ``variants`` made lists. The others
    (``limit``, ``seed``, ``trials``, ``shard``, ``executor``, ``sequential``) are checked
    where they are read, with messages of their own."""
    path(arguments["project"], "project", function)
    for name in ("policy", "compare_policy"):
        optional_path(arguments.get(name), name, function)
    for name in ("use_cache", "sample", "matrix"):
        if name in arguments:
            flag(arguments[name], name, function)
    if "progress" in arguments:
        flag(arguments["progress"], "progress", function, optional=True)
    callback(arguments.get("on_event"), "on_event", function)
    optional_text(arguments.get("baseline"), "baseline", function, "a run id")
    optional_text(arguments.get("ray_address"), "ray_address", function, "an address")
    return {
        "cases": texts(arguments.get("cases"), "cases", function, "a case id"),
        "where": texts(arguments.get("where"), "where", function,
                       "an expression such as 'metadata.lang == \"fr\"'"),
        "group_by": texts(arguments.get("group_by"), "group_by", function, "a metadata key"),
        "variants": texts(arguments.get("variants"), "variants", function, "a variant's name"),
    }
