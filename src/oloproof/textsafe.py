"""Making stored and model-supplied text safe to print and to write as JSON.

Case ids, outputs, judge reasons and error messages come from users and
models. They can hold lone surrogates (``"\\udcff"`` decoded from a JSON
escape, or left by ``surrogateescape``), control characters and ANSI escape
sequences. This module is the one place that turns such text into something
every reader can take:

* :func:`printable` for people: lone surrogates become U+FFFD, and control
  characters (C0 but newline and tab, DEL, C1), the invisible format
  characters (the bidirectional overrides, zero-width spaces and joiners, the
  soft hyphen: Unicode's category Cf) and the line and paragraph separators
  (U+2028, U+2029) are written as visible escapes (``\\x1b``, ``\\u202e``,
  ``\\u200b``), so a model's output can neither move the cursor nor recolour a
  terminal nor reorder what is shown, and two ids that differ only by an
  invisible character look different.
* :func:`json_safe` / :func:`dumps` for programs: strict JSON, always. Lone
  surrogates become U+FFFD (a JSON parser may refuse an unpaired ``\\ud8xx``
  escape), and NaN and ±infinity, which JSON has no words for, become ``null``.

It is the bottom layer: it imports nothing of Oloproof's.
"""

from __future__ import annotations

import json
import math
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self

__all__ = [
    "TextHead", "dumps", "escape_separators", "first_line", "inert_commands", "json_safe",
    "one_line", "printable",
]

REPLACEMENT = "\ufffd"

# Patterns, compiled by `re` (and kept in its cache) on first use: compiling the second
# takes 0.3 ms or more, and most text never needs it (the shortcuts below).
_SURROGATES = "[\ud800-\udfff]"
# Newline and tab are kept: they lay text out and cannot drive a terminal. The rest:
# control characters (C0, DEL, C1: Unicode's Cc), the invisible format characters (Cf:
# the bidirectional controls, zero-width spaces and joiners, the soft hyphen, the byte
# order mark, the tags), the line and paragraph separators (Zl, Zp) and the surrogates
# (Cs). Cf as of Unicode 15.1 (Python 3.13); tests/render/test_textsafe.py checks the
# list against the running Python's unicodedata, code point by code point.
_UNPRINTABLE = (
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
    "\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        return REPLACEMENT
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` as it may be shown to a person: nothing in it acts on a terminal.

    Only characters that would act, could not be encoded or would not be seen
    change; all other text, any script, comes back as it was (spaces of every
    width included).
    """
    # Nothing the pattern matches is printable to str.isprintable() (it is all in Unicode's
    # categories Cc, Cf, Cs, Zl and Zp): text that is
    # printable, or is once its newlines and tabs are set aside, has nothing that acts, and
    # is returned without the pattern (compiling it is 4.4 million instructions; a "·" in
    # a table line sent every `gate` through it).
    if text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return re.sub(_UNPRINTABLE, _escape, text)


def one_line(text: str) -> str:
    """A name shown on one line (a case id): :func:`printable`, and a newline or a tab in it
    written ``\\n``, ``\\t`` too. Kept, they would lay the name out over lines of a listing
    of its own: the id ``"q1\\n  Status     PASS"`` would print a line of its own that reads
    as another case's."""
    shown = printable(text)
    if "\n" in shown or "\t" in shown:
        shown = shown.replace("\n", "\\n").replace("\t", "\\t")
    return shown


# A line a CI runner reads as a workflow command: GitHub's runner trims the blanks at its
# start and takes it as one when "::" follows (`::stop-commands::TOKEN` turns off every
# command after it, the run's own annotations too; `::add-mask::`, `::error::`).
_COMMAND_LINE = r"(^|[\r\n])([^\S\r\n]*)::"


def inert_commands(text: str) -> str:
    """``text`` with no line that a CI runner would read as a workflow command: a line whose
    first characters but blanks are ``::`` (a rule or case id, a file name that a report
    puts at the start of a line) has its first colon written ``\\x3a``, as
    :func:`printable` writes the characters that would act. Oloproof's own annotations
    (``--github-annotations``) are written without it."""
    if "::" not in text:
        return text
    return re.sub(_COMMAND_LINE, lambda m: f"{m.group(1)}{m.group(2)}\\x3a:", text)


def first_line(text: str | None) -> str:
    """The first line of ``text`` (stripped), ended by a newline only.

    Not ``str.splitlines()``: it also ends a line at U+2028, U+0085, a form feed and the
    other separators, so a message holding one invisibly (a model's words in an error)
    was shown cut there, the rest hidden. :func:`printable` shows those as escapes.
    """
    return (text or "").strip().split("\n", 1)[0].rstrip("\r")


def _safe_str(text: str) -> str:
    if text.isascii():
        return text
    return re.sub(_SURROGATES, REPLACEMENT, text)


class TextHead(str):
    """The start of a stored text too long to read whole, as a report reads it: the stored
    JSON of a value (``json``, not parsed), or an error or a reason. ``chars``: how long
    the whole text is, in characters. A page writes it as it is and says where it was
    cut."""

    chars: int
    json: bool

    def __new__(cls, head: str, chars: int, *, json: bool = True) -> Self:
        self = super().__new__(cls, head)
        self.chars = chars
        self.json = json
        return self


def json_safe(value: Any) -> Any:
    """``value`` with every string encodable as UTF-8 and every float finite or ``None``.

    Containers are copied only as deep as they are walked; numbers, booleans
    and ``None`` come back unchanged.
    """
    if isinstance(value, str):
        return _safe_str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            (_safe_str(k) if isinstance(k, str) else k): json_safe(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _json_escape(code: int) -> str:
    """``\\uXXXX``, or the surrogate pair JSON writes above U+FFFF."""
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}"
    return f"\\u{code:04x}"


def _unprintable_codes() -> list[int]:
    """The code points :data:`_UNPRINTABLE` lists above ASCII's controls, its surrogates
    left out (json_safe has replaced them): read from the pattern's own text."""
    body, at = _UNPRINTABLE[1:-1], 0
    codes: list[int] = []
    while at < len(body):
        if at + 2 < len(body) and body[at + 1] == "-":
            codes.extend(range(ord(body[at]), ord(body[at + 2]) + 1))
            at += 3
        else:
            codes.append(ord(body[at]))
            at += 1
    return [c for c in codes if c >= 0x7F and not 0xD800 <= c <= 0xDFFF]


# The characters JSON leaves raw that still break a line, drive a terminal or reorder what
# it shows: DEL and the C1 controls (U+0085 ends a line for str.splitlines(); U+009B is a
# terminal's CSI, U+009D its OSC), the line and paragraph separators, and the invisible
# format characters (the bidirectional overrides such as U+202E, zero-width spaces, the
# tags): everything printable() escapes. JSON may escape any character. Built on first
# use (0.2 ms): most output is ASCII and never needs it.
_JSON_ESCAPES: dict[int, str] = {}


def escape_separators(text: str) -> str:
    """JSON text ``text`` with every character :func:`printable` would escape (the C1
    controls, U+2028/U+2029, the bidirectional overrides and the other invisible format
    characters) written as ``\\uXXXX`` escapes: the same value to every parser, one line
    to every line splitter (Python's ``str.splitlines()`` too), and inert on a terminal
    (a U+202E in a case id reversed the rest of a --json line as shown). They can only
    stand inside strings, so the replacement is exact."""
    if text.isascii():
        return text
    if not _JSON_ESCAPES:
        _JSON_ESCAPES.update((code, _json_escape(code)) for code in _unprintable_codes())
    return text.translate(_JSON_ESCAPES)


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """Strict JSON for ``value`` (see :func:`json_safe`); never ``NaN``, never a lone surrogate,
    never a raw C1 control or line separator (:func:`escape_separators`).

    ``indent=None`` writes one compact line (no spaces after separators).
    """
    separators = (",", ":") if indent is None else None
    return escape_separators(json.dumps(
        json_safe(value), indent=indent, separators=separators, ensure_ascii=False,
        allow_nan=False,
    ))
