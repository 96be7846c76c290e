"""``oloproof label``'s dialogue with the person: each case shown, each answer read.

Standard output that fails (a full disk, a terminal gone) is :class:`CannotShow`, which
the command turns into one clear error; a reader that went away (``| head``) is left to
end the command as every command ends then.
"""

from __future__ import annotations

import json
import re
import sys

from oloproof.textsafe import printable

__all__ = ["NO", "QUIT", "SKIP", "YES", "CannotShow", "ask", "out", "show"]

YES = frozenset({"y", "yes", "p", "pass"})
NO = frozenset({"n", "no", "f", "fail"})
SKIP = frozenset({"s", "skip"})
QUIT = frozenset({"q", "quit"})
_SHOWN = 2000  # characters of a value shown; the rest is one `inspect --case` away
_WHOLE = re.compile(r"-?[0-9]{1,18}")  # a whole number, as a person types a score


def show(value: object) -> str:
    if value == "":
        return "(an empty string)"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
    text = printable(text) if "\n" not in text else "\n".join(
        printable(line) for line in text.split("\n")
    )
    if len(text) > _SHOWN:
        return text[:_SHOWN] + f"\n  … ({len(text) - _SHOWN} more characters)"
    return text


class CannotShow(Exception):
    """Standard output failed (a full disk, a terminal gone): no case can be shown."""

    def __init__(self, exc: OSError) -> None:
        super().__init__(exc.strerror or str(exc))


def out(text: str, *, flush: bool = False) -> None:
    try:
        sys.stdout.write(text)
        if flush:
            sys.stdout.flush()
    except BrokenPipeError:
        raise  # its reader went away (| head): as every command
    except OSError as exc:
        raise CannotShow(exc) from None


def ask(prompt: str, scale: tuple[int, int] | None = None) -> str | None:
    """The person's answer: one of the words, or (``scale``) a whole number on the scale."""
    while True:
        out(prompt, flush=True)
        line = sys.stdin.readline()
        if not line:
            out("\n")
            return None
        answer = line.strip().lower()
        if scale is None:
            if answer in YES | NO | SKIP | QUIT:
                return answer
            out("  answer y (pass), n (fail), s (skip) or q (quit)\n")
            continue
        if answer in SKIP | QUIT:
            return answer
        low, high = scale
        if _WHOLE.fullmatch(answer) and low <= int(answer) <= high:
            return str(int(answer))
        out(f"  answer a whole number from {low} to {high}, s (skip) or q (quit)\n")
