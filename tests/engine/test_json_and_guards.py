"""In-process checks of the low-level guards: strict JSON, storable text, the regex child."""

from __future__ import annotations

import json
import re
import time

import pytest

from oloproof._json import JsonLimitError, depth_of, digest, loads_strict, output_json, storable
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
