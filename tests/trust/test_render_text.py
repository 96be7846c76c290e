"""The one place that makes text printable and JSON-safe (oloproof.textsafe), checked over
every Unicode code point, and through a real rich console."""

from __future__ import annotations

import io
import json
import unicodedata

import pytest

from oloproof import textsafe
from oloproof.render.console import print_to
from oloproof.render.doc import line
from oloproof.textsafe import dumps, json_safe, printable

# What printable() escapes, by the running Python's Unicode database: control characters
# but newline and tab (Cc), format characters (Cf: bidi controls, zero-width spaces...),
# surrogates (Cs), the line and paragraph separators (Zl, Zp).
ACTING_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _acts(ch: str) -> bool:
    return ch not in "\n\t" and unicodedata.category(ch) in ACTING_CATEGORIES


def _escaped(ch: str) -> str:
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _reference(text: str) -> str:
    """What printable() promises, by the Unicode database and nothing else (no shortcut)."""
    return "".join(_escaped(ch) if _acts(ch) else ch for ch in text)


def test_printable_over_every_code_point() -> None:
    for start in range(0, 0x110000, 0x1000):
        chars = [chr(c) for c in range(start, min(start + 0x1000, 0x110000))]
        # Unassigned code points (Cn) are left out: one may be a format character in a
        # later Unicode (13439-1343F were, in 15.0), and escaping it early does no harm.
        chunk = "".join(ch for ch in chars if unicodedata.category(ch) != "Cn")
        out = printable(chunk)
        out.encode("utf-8")  # no lone surrogate survives
        # each acting character is replaced, by U+FFFD or a visible escape; everything
        # else is left exactly as it was
        assert out == _reference(chunk), hex(start)
        for ch in chars:
            if unicodedata.category(ch) == "Cn":
                assert printable(ch) in (ch, _escaped(ch))
    assert printable("naïve ✓ 日本語 \xa0\u3000\n\t[bold]") == "naïve ✓ 日本語 \xa0\u3000\n\t[bold]"
    assert printable("\x1b[31m\u202e\udcff") == "\\x1b[31m\\u202e\ufffd"
    assert printable("a\u2028b\u2029c\u200bd\ufeffe\x00f\U000e0041") == (
        "a\\u2028b\\u2029c\\u200bd\\ufeffe\\x00f\\U000e0041")


def test_printable_agrees_with_its_pattern_one_character_at_a_time() -> None:
    # One character at a time, alone and inside other text: printable() skips its pattern
    # for text with nothing to escape, and must give the same as the pattern there.
    for code in [*range(0x3000), *range(0xD7F0, 0xE010), *range(0xFFF0, 0x10010),
                 *range(0xE0000, 0xE0080), *range(0x10FFF0, 0x110000)]:
        ch = chr(code)
        for text in (ch, f"id-{ch}-7", f"a\n{ch}", f"· {ch}\t✓"):
            assert printable(text) == _reference(text), repr(text)


def test_printable_text_is_not_matched_against_the_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiling the pattern costs more than a whole table (4.4 million instructions):
    text in any script, and laid out in lines and tabs, is returned as it is without it."""

    def refuse(*args: object) -> str:
        raise AssertionError("matched against the pattern")

    monkeypatch.setattr(textsafe.re, "sub", refuse)
    for text in ("120 / 120 observed · 0 missing", "naïve ✓ 日本語", "a\n\tb ·", "", "\n"):
        assert printable(text) is text


def test_json_safe_is_strict_json() -> None:
    value = {"a\udcff": [float("nan"), float("inf"), -float("inf"), 1.5, "x\ud800"], "b": None}
    text_out = dumps(value)
    text_out.encode("utf-8")
    parsed = json.loads(text_out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert parsed == {"a\ufffd": [None, None, None, 1.5, "x\ufffd"], "b": None}
    assert json_safe(("t", 1)) == ["t", 1]


def test_markup_and_escapes_render_as_text_in_a_real_console() -> None:
    hostile = ["[/x]", "[bold red]", "[link=x]y[/link]", ":smile:", "\x1b]0;t\x07", "[", "]",
               "\\[", "[/]", "\x9b31m", "\udcff"]
    for terminal in (False, True):
        for s in hostile:
            out = io.StringIO()
            print_to(out, line(s), terminal=terminal)
            print_to(out, s, terminal=terminal)  # a bare str is text too
            shown = out.getvalue()
            assert "\x07" not in shown and "\x9b" not in shown and "\x1b]" not in shown
            if "\x1b" not in s and "\x9b" not in s and "\udcff" not in s:
                assert shown.count(s) == 2, (s, shown)


def test_printable_keeps_every_printable_category() -> None:
    sample = "".join(chr(c) for c in range(0x20, 0x3000) if unicodedata.category(chr(c))[0] in "LNPSZ"
                     and not _acts(chr(c)))
    assert printable(sample) == sample
