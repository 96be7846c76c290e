"""In-process checks of the low-level guards: strict JSON, storable text, the regex child."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from oloproof._json import JsonLimitError, depth_of, digest, loads_strict, output_json, storable
from oloproof.transport import regex_guard
from oloproof.transport.regex_guard import GuardedPattern, RegexTimeout


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"a": NaN}', "NaN"),
        ('{"a": -Infinity}', "Infinity"),
        ('{"a": 1e400}', "overflows"),
        ('{"a": ' + "7" * 5000 + "}", "digits"),
        ('{"a": 1, "a": 2}', "twice"),
        ("[" * 100 + "]" * 100, "nested deeper"),
        ("[" * 100000 + "]" * 100000, "nested deeper"),
    ],
)
def test_loads_strict_refuses(text: str, words: str) -> None:
    with pytest.raises(JsonLimitError, match=words):
        loads_strict(text, max_depth=64)


def test_loads_strict_accepts_what_json_accepts_within_bounds() -> None:
    text = '{"a": [1, 2.5, {"b": null}], "c": "\\ud800", "d": 1e300}'
    assert loads_strict(text) == json.loads(text)
    assert depth_of(json.loads(text)) == 3
    with pytest.raises(json.JSONDecodeError):
        loads_strict("{not json")


def test_storable_replaces_only_lone_surrogates() -> None:
    assert storable("plain é 😀") == "plain é 😀"
    assert storable("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    storable("a\ud800").encode("utf-8")  # now encodable


def test_digest_is_stable_on_surrogates_and_outputs_refuse_nan() -> None:
    assert digest({"x": "\ud800"}) == digest({"x": "\ud800"})
    assert digest({"x": "\ud800"}) != digest({"x": "\ufffd"})
    for bad in (float("nan"), float("inf"), 10**5000):
        with pytest.raises(ValueError):
            output_json({"x": bad})


@pytest.mark.slow  # starts the guard's child processes and waits on a timeout
def test_guarded_pattern_matches_like_re_and_times_out() -> None:
    guarded = GuardedPattern(r"b+", re.IGNORECASE, timeout_s=5)
    try:
        found = guarded.search("aaBBc")
        assert found is not None and found.group(0) == re.search(r"b+", "aaBBc", re.IGNORECASE).group(0)  # type: ignore[union-attr]
        assert guarded.search("xyz") is None
    finally:
        guarded.close()
    slow = GuardedPattern(r"^(a+)+$", 0, timeout_s=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(RegexTimeout):
            slow.search("a" * 40 + "!")
        assert time.monotonic() - started < 3
        assert slow.search("aaa") is not None  # a fresh child after the kill
    finally:
        slow.close()


class _SlowToStart(GuardedPattern):
    """A guard whose child takes ``delay`` seconds to start, as on a loaded machine."""

    delay = 1.0

    def _start(self) -> subprocess.Popen[bytes]:
        code = f"import time\ntime.sleep({self.delay})\n" + regex_guard._CHILD
        return self._started(code, b"", "the regular expression's process")


def test_a_childs_start_is_not_part_of_a_cases_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that matches at once is not a timeout because the child took longer than
    the limit to start (a CI run on a loaded machine timed out its quick cases); the
    start has its own bound, START_S, and a child that never gets ready is an error."""
    slow_start = _SlowToStart(r"b+", 0, timeout_s=0.2)
    try:
        found = slow_start.search("abbc")
        assert found is not None and found.group(0) == "bb"
    finally:
        slow_start.close()
    monkeypatch.setattr(regex_guard, "START_S", 0.3)
    never = _SlowToStart(r"b+", 0, timeout_s=0.2)
    never.delay = 30.0
    try:
        started = time.monotonic()
        with pytest.raises(OSError, match="could not start"):
            never.search("abbc")
        assert time.monotonic() - started < 5
    finally:
        never.close()
