"""Issue 29: a ``json_schema`` evaluator is held to ``limits.evaluator_timeout_s`` like a
custom or regex one. A catastrophic ``pattern`` (``^(a+)+$`` on forty a's and a "!")
used to hang the run past 45 s, left RUNNING: re holds the GIL for a whole match, so a
schema with regular expressions validates in a child process killed at the limit
(transport/regex_guard.py GuardedSchema)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, run_cli
from tests.trust._support import cli, inspect, no_traceback, project, runs

APP = """
def answer(inp):
    text = "a" * 40 + "!" if inp["n"] % 3 == 0 else "aaa"
    return {"label": "ok", "answer": text, "tags": {text: 1}}
"""
SLOW_APP = """
def answer(inp):
    return {"label": "ok", "answer": "a" * 40 + "!", "tags": {}}
"""
RELEASE = "version: 1\nrules:\n  - id: valid\n    metric: valid\n    min: 0.5\n"


def _schema_project(root: Path, schema: str, *, app: str = APP, n: int = 9) -> Path:
    evaluators = (
        "  - type: json_schema\n    criterion: valid\n    field: null\n"
        f"    schema: {schema}\n"
        "  - type: exact_match\n    criterion: exact_label\n    field: label\n"
    )
    return project(root, app, n=n, evaluators=evaluators, release=RELEASE,
                   extra="limits:\n  evaluator_timeout_s: 2\n")


def _children_left(mark: str) -> list[str]:
    """Schema children alive anywhere (their code reads a setup line first) that a command
    run with ``OLOPROOF_TEST_MARK=mark`` started (they inherit its environment)."""
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if (b"setup = json.loads(sys.stdin.readline())" in cmdline
                and f"OLOPROOF_TEST_MARK={mark}".encode() in environ.split(b"\0")):
            left.append(proc.name)
    return left


@pytest.mark.parametrize(
    "schema",
    [
        '{type: object, properties: {answer: {type: string, pattern: "^(a+)+$"}}}',
        # In patternProperties, behind a $ref: the same regular expression engine.
        ('{type: object, properties: {tags: {$ref: "#/$defs/t"}},'
         ' $defs: {t: {type: object, patternProperties: {"^(a+)+$": {type: integer}}}}}'),
    ],
    ids=["pattern", "patternProperties-via-ref"],
)
def test_a_catastrophic_schema_pattern_ends_at_the_evaluator_time_limit(
    tmp_path: Path, schema: str
) -> None:
    root = _schema_project(tmp_path / "p", schema)
    mark = uuid.uuid4().hex
    started = time.monotonic()
    result = run_cli("run", cwd=root, env={"OLOPROOF_TEST_MARK": mark}, timeout=120)
    took = time.monotonic() - started
    no_traceback(result)
    # 3 of 9 missing, more than max_missing's 20% (issue 25): the evidence is incomplete.
    assert result.code == 5, result.text
    [run] = runs(root)
    assert (run["status"], run["completeness"]) == ("DECIDED", "COMPLETE")
    cases = {c["id"]: c for c in inspect(root)["cases"]}
    for i in range(9):
        judgment = cases[f"q{i}"]["judgments"]["valid"]
        if i % 3 == 0:
            assert judgment["status"] == "ERROR", judgment
            assert judgment["reason"] == "the evaluator gave no verdict within timeout_s = 2s"
        else:
            assert (judgment["status"], judgment["passed"]) == ("OK", True), judgment
        assert cases[f"q{i}"]["judgments"]["exact_label"]["passed"] is True
    # Three 2 s limits, the child killed at each: far from the minutes a match takes.
    assert took < 90, took
    assert not _children_left(mark)


def test_a_schema_without_patterns_still_judges_in_process(tmp_path: Path) -> None:
    root = _schema_project(
        tmp_path / "p", "{type: object, required: [answer], properties: {answer: {maxLength: 5}}}"
    )
    result = cli(root, "run")
    assert result.code == 3, result.text  # 6 of 9 pass: the 50% floor is undecided
    cases = {c["id"]: c for c in inspect(root)["cases"]}
    for i in range(9):
        judgment = cases[f"q{i}"]["judgments"]["valid"]
        assert judgment["status"] == "OK" and judgment["passed"] is (i % 3 != 0), judgment
        if i % 3 == 0:
            assert judgment["reason"].startswith("answer: "), judgment


def _catastrophic_run(tmp_path: Path, *, limit_s: int) -> tuple[Path, str, subprocess.Popen[str]]:
    """A run whose every case's schema validation is catastrophic (limit ``limit_s``), once a
    validation is under way: its project, the mark of its children, its process."""
    root = _schema_project(
        tmp_path / "p", '{type: object, properties: {answer: {pattern: "^(a+)+$"}}}',
        app=SLOW_APP, n=40,
    )
    text = (root / "oloproof.yaml").read_text().replace("evaluator_timeout_s: 2",
                                                        f"evaluator_timeout_s: {limit_s}")
    (root / "oloproof.yaml").write_text(text)
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    env["OLOPROOF_TEST_MARK"] = mark
    proc = subprocess.Popen([*OLOPROOF, "run"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _children_left(mark):
            assert time.monotonic() < deadline, "no validation started"
            time.sleep(0.1)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    time.sleep(0.5)
    return root, mark, proc


def test_sigterm_during_a_catastrophic_validation_ends_the_run(tmp_path: Path) -> None:
    root, mark, proc = _catastrophic_run(tmp_path, limit_s=600)
    try:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 5, (out, err)
    assert "Traceback" not in out + err
    [run] = runs(root)
    assert (run["status"], run["completeness"]) == ("RUN_ERROR", "PARTIAL")
    assert "SIGTERM" in run["stop_reason"]
    deadline = time.monotonic() + 10
    while _children_left(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _children_left(mark)
    assert json.loads(cli(root, "runs", "--json").out)[0]["exit_code"] == 5


@pytest.mark.slow  # waits out a child's own deadline
def test_a_child_of_a_killed_run_ends_itself_past_its_limit(tmp_path: Path) -> None:
    """A run killed by SIGKILL (or stopped at once by a second Ctrl-C, which exits without
    a cleanup) cannot kill its children: one in a catastrophic validation reads no pipe, so
    it used to go on for as long as the match takes (hours), orphaned. Each child now ends
    itself SELF_EXIT_S past the case's limit (faulthandler's watchdog)."""
    _root, mark, proc = _catastrophic_run(tmp_path, limit_s=3)
    try:
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _children_left(mark), "no child was left to end itself"
    killed = time.monotonic()
    # Each child's deadline: its search's start + 3 s + SELF_EXIT_S (5 s); a loaded
    # machine may be slow to end them, hence the margin.
    while _children_left(mark) and time.monotonic() - killed < 40:
        time.sleep(0.2)
    left = _children_left(mark)
    for pid in left:
        os.kill(int(pid), signal.SIGKILL)
    assert not left, f"children outlived their own deadline: {left}"
