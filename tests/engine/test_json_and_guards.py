"""In-process checks of the low-level guards: strict JSON, storable text, the regex child."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from oloproof._json import (
    JsonLimitError,
    depth_of,
    digest,
    loads_strict,
    output_json,
    output_snapshot,
    storable,
)
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
def test_an_output_snapshot_is_a_plain_copy_in_its_own_key_order() -> None:
    class Lying(dict):  # type: ignore[type-arg]
        def __getitem__(self, key: object) -> str:
            return "ok"

    returned = {"z": (1, 2.5), "a": Lying(label="wrong"), 3: None}
    copy, text = output_snapshot(returned)
    assert copy == {"z": [1, 2.5], "a": {"label": "wrong"}, "3": None}
    assert list(copy) == ["z", "a", "3"] and type(copy["a"]) is dict
    assert text == output_json(copy) == '{"3":null,"a":{"label":"wrong"},"z":[1,2.5]}'
    returned["z"] = "changed later"
    assert copy["z"] == [1, 2.5]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({1: "a", "1": "b"}, "the key '1' appears twice"),
        ({True: 1, "true": 2}, "the key 'true' appears twice"),
        ({"a": float("nan")}, "not JSON compliant"),
        ({"a": object()}, "not JSON serializable"),
    ],
)
def test_an_output_snapshot_refuses_what_json_cannot_hold(value: object, words: str) -> None:
    with pytest.raises((TypeError, ValueError), match=words):
        output_snapshot(value)


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


@pytest.mark.slow  # starts the guard's child process and waits on it: measured 1.3 s
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


def _guard_children() -> list[int]:
    """This process's regex children (their code keeps compiled patterns in ``cache``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if ppid == os.getpid() and b"cache = {}" in cmdline:
            found.append(int(entry))
    return found


def _gone(pids: list[int]) -> bool:
    return not set(pids) & set(_guard_children())


@pytest.mark.slow  # starts a child that takes a second to start
def test_close_during_a_childs_start_leaves_no_child_behind() -> None:
    """A run that stops closes its guards while an evaluator's thread may be starting a
    child (a second or more on a loaded machine). That child was in neither of the guard's
    lists, so close() missed it; the thread then sent it a catastrophic search and the run
    exited, leaving it burning a core (seen under load: a schema child alive after its run
    ended, orphaned). close() now kills a child being started too, and a guard closed
    refuses new searches."""
    before = _guard_children()
    guard = _SlowToStart(r"^(a+)+$", 0, timeout_s=600)
    outcome: list[BaseException | None] = []

    def search() -> None:
        try:
            guard.search("a" * 40 + "!")
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - what the thread met is the test's
            outcome.append(exc)

    thread = threading.Thread(target=search, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not [p for p in _guard_children() if p not in before]:  # being started
            assert time.monotonic() < deadline, "no child was started"
            time.sleep(0.02)
        guard.close()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the search went on after close()"
        assert len(outcome) == 1 and isinstance(outcome[0], OSError), outcome
        deadline = time.monotonic() + 10
        while not _gone([p for p in _guard_children() if p not in before]):
            assert time.monotonic() < deadline, "a child outlived close()"
            time.sleep(0.05)
        with pytest.raises(OSError, match="closed"):
            guard.search("aaa")
    finally:
        for pid in set(_guard_children()) - set(before):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow  # a child whose parent is gone
def test_a_child_ends_itself_past_its_limit_when_nobody_kills_it() -> None:
    """A child in the middle of a catastrophic search cannot read its pipe, so a parent
    that dies without killing it (SIGKILL, a crash) would leave it running for as long as
    the match takes. Each child arms faulthandler's watchdog, a thread of C that needs no
    GIL, for its search's limit and a margin: past it, the child exits by itself."""
    child = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", regex_guard._CHILD], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == b"ready\n"
        # "s": when the child ends itself; a guard sends its limit plus SELF_EXIT_S.
        request = {"p": r"^(a+)+$", "f": 0, "t": "a" * 40 + "!", "s": 0.5}
        child.stdin.write((json.dumps(request) + "\n").encode())
        child.stdin.flush()
        started = time.monotonic()
        child.wait(timeout=30)  # the match alone would take hours
        assert time.monotonic() - started < 10
        assert child.returncode == 1  # faulthandler's exit
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
