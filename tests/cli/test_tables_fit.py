"""Tables that fit a terminal (issue 14): at 60, 80, 120 and 200 columns, through a real
pseudo-terminal, no run id, interval, state or rule id is ever cut, and the suggested
``oloproof plan`` command is never wrapped. Plain output (issue 30, SPEC §10) keeps its
natural-width tables, or, when COLUMNS is set, stacks a table wider than that with the
same guarantees."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pexpect
import pytest
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

APP = """
def answer(inp):
    if inp["n"] == 3:
        raise RuntimeError("the upstream model timed out after 30 s while drafting a reply")
    return {"label": "ok" if inp["n"] % 4 else "a-rather-long-wrong-label-for-this-case"}
"""

RELEASE = """
version: 1
rules:
  - id: exact-label-floor-for-the-release
    metric: exact_label
    min: 0.7
  - id: no-more-than-two-failures
    kind: observed_count
    metric: exact_label
    max_failures: 2
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_project(tmp_path_factory.mktemp("fit") / "p", app=APP,
                         cases=labelled_cases(20), release=RELEASE)
    assert run_cli("run", cwd=root).code in (1, 3)
    return root


def _terminal(args: list[str], cwd: Path, columns: int) -> str:
    child = pexpect.spawn(
        OLOPROOF[0], [*OLOPROOF[1:], *args], cwd=str(cwd), dimensions=(60, columns),
        encoding="utf-8", codec_errors="replace", timeout=60,
        # PYTHONPATH kept: the source under test, when it is not the one installed.
        env={"PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "PYTHONUNBUFFERED": "1",
             **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}},
    )
    child.expect(pexpect.EOF)
    out = ANSI.sub("", child.before or "")
    child.close()
    assert child.exitstatus in (0, 1, 3), out
    return out


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]


def _must_show(project: Path) -> dict[tuple[str, ...], list[str]]:
    """What each command must show whole, on one line."""
    stored = json.loads(run_cli("inspect", "latest", "--json", cwd=project).out)
    run_id = stored["run"]["id"]
    intervals = {  # as printed: rounded outward to one decimal of a percent
        f"[{math.floor(m['lower'] * 1000) / 10:.1f}%, {math.ceil(m['upper'] * 1000) / 10:.1f}%]"
        for m in stored["metrics"]
    }
    return {
        ("gate", "latest"): [run_id, *intervals, "exact-label-floor-for-the-release",
                             "no-more-than-two-failures", "INSUFFICIENT_EVIDENCE",
                             f"oloproof plan {run_id} --run"],
        ("runs",): [run_id, "DECIDED/COMPLETE"],
        ("inspect", "latest"): [run_id, *intervals, "INSUFFICIENT_EVIDENCE"],
        ("inspect", "latest", "--failures"): ["q003", "q000", "ERROR",
                                              "a-rather-long-wrong-label-for-this-case"],
        ("inspect", "latest", "--case", "q003"): ["exact_label", "MISSING",
                                                 "RuntimeError"],
    }


@pytest.mark.parametrize("columns", [60, 80, 120, 200])
def test_nothing_that_matters_is_cut(project: Path, columns: int) -> None:
    for args, words in _must_show(project).items():
        out = _terminal(list(args), project, columns)
        lines = _lines(out)
        assert all(len(line) <= columns for line in lines), (args, columns, out)
        # The suite digest is shortened on purpose ("suite sha256:ab12…"); nothing else is.
        assert "…" not in re.sub(r"[0-9a-f]{8,}…", "", out), (args, columns, out)
        for word in words:
            assert any(word in line for line in lines), (args, columns, word, out)


@pytest.mark.parametrize("columns", [None, 60, 80, 120])
def test_plain_output_honours_columns(project: Path, columns: int | None) -> None:
    env = {} if columns is None else {"COLUMNS": str(columns)}
    for args, words in _must_show(project).items():
        result = run_cli(*args, cwd=project, env=env)
        assert result.code in (0, 1, 3), result.text
        out = result.out
        assert "\x1b" not in out and all(line == line.rstrip() for line in out.splitlines())
        for word in words:
            assert any(word in line for line in out.splitlines()), (args, columns, word, out)
        # Tables: at their natural width without COLUMNS; within it when it is set (a
        # wider one is printed one block per row). Lines of text are never wrapped.
        drawn = [line for line in out.splitlines() if line[:1] in ("┏", "┃", "│", "└")]
        if columns is None:
            assert drawn, (args, out)
        else:
            assert all(len(line) <= columns for line in drawn), (args, columns, out)
        if args == ("gate", "latest") and columns == 80:  # the Decisions, one block a rule
            assert "\n  State   INSUFFICIENT_EVIDENCE\n" in out, out


@pytest.mark.parametrize("columns", [12, 20])
def test_a_very_narrow_terminal_still_shows_every_value(project: Path, columns: int) -> None:
    """Below the width of a stacked block's longest name plus a few columns, rich gave
    the values none: at 12 columns 'gate' showed 'State' with no state and 'runs' 'Gate'
    with no gate. Each value then goes under its name, folded, never dropped. The command
    to copy (`oloproof plan RUN --run`), which is never wrapped, was cut at the width
    ('    oloproof plan ru' at 20 columns): it is written whole, and the terminal folds it."""
    for args, words in _must_show(project).items():
        out = _terminal(list(args), project, columns)
        flat = re.sub(r"\s+", "", out)  # values fold across lines at this width
        for word in words:
            assert re.sub(r"\s+", "", word) in flat, (args, columns, word, out)
    runs = re.sub(r"\s+", "", _terminal(["runs"], project, columns))
    assert "BLOCK(exit" in runs or "ALLOW(exit" in runs, runs


def test_columns_zero_in_a_terminal_still_prints_the_report(project: Path) -> None:
    """rich read COLUMNS=0 as a width of 0 and printed nothing: 'gate latest' in a terminal
    showed no decision and no gate line at all (the exit code was still right)."""
    for args in (["gate", "latest"], ["runs"]):
        child = pexpect.spawn(
            OLOPROOF[0], [*OLOPROOF[1:], *args], cwd=str(project), dimensions=(40, 120),
            encoding="utf-8", codec_errors="replace", timeout=60,
            env={"PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "PYTHONUNBUFFERED": "1",
                 "COLUMNS": "0"},
        )
        child.expect(pexpect.EOF)
        out = ANSI.sub("", child.before or "")
        child.close()
        assert child.exitstatus in (0, 1, 3), out
        assert "DECIDED/COMPLETE" in out, (args, out)
        if args[0] == "gate":
            assert "exit code" in out and "exact-label-floor-for-the-release" in out, out
