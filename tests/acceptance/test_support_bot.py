"""The support_bot example, as a new user meets it: init, run, run again."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import run_cli


def _row(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith(f"│ {name} "):
            return line
    raise AssertionError(f"no row for {name} in:\n{text}")


def test_support_bot_end_to_end(tmp_path: Path) -> None:
    project = tmp_path / "bot"
    init = run_cli("init", str(project), "--example", "support_bot", cwd=tmp_path)
    assert init.code == 0, init.text
    assert (project / ".gitignore").read_text().count(".oloproof/") >= 1

    first = run_cli("run", cwd=project)
    assert first.code == 3, first.text
    assert "Traceback" not in first.text
    label = _row(first.out, "exact-label-floor")
    assert "INSUFFICIENT_EVIDENCE" in label and "BLOCK" in label
    assert "PASS" in _row(first.out, "valid-format")
    assert "PASS" in _row(first.out, "pii-free")
    metric = _row(first.out, "exact_label")
    assert "72.2%" in metric and "[46.5%, 90.4%]" in metric
    assert "13 / 18 observed · 0 missing · 0 excluded" in metric
    assert "executions 0 hits · 18 misses" in first.out
    assert "judgments 0 hits · 54 misses" in first.out
    assert "exit code 3" in first.out
    assert re.search(r"Run run_[0-9A-Z]{26} \[DECIDED/COMPLETE\]", first.out)
    assert "oloproof plan run_" in first.out

    second = run_cli("run", cwd=project)
    assert second.code == 3, second.text
    assert "executions 18 hits · 0 misses" in second.out
    assert "judgments 54 hits · 0 misses" in second.out
    assert "[46.5%, 90.4%]" in _row(second.out, "exact_label")

    runs = run_cli("runs", cwd=project)
    assert runs.code == 0
    assert runs.out.count("DECIDED/COMPLETE") == 2


def test_outside_a_terminal_no_escape_codes_natural_width_or_columns(tmp_path: Path) -> None:
    project = tmp_path / "bot"
    run_cli("init", str(project), "--example", "support_bot", cwd=tmp_path)
    result = run_cli("run", cwd=project)
    assert "\x1b[" not in result.out + result.err
    # Natural width: the decisions row is one line, never wrapped to 80 columns.
    assert len(_row(result.out, "exact-label-floor")) > 80
    # COLUMNS set (SPEC §10): the tables fit in it, one block per row, nothing cut.
    narrow = run_cli("gate", "latest", cwd=project, env={"COLUMNS": "40"})
    assert "\x1b[" not in narrow.out
    lines = narrow.out.splitlines()
    assert "exact-label-floor" in lines and "  State   INSUFFICIENT_EVIDENCE" in lines
    assert "  Interval  [46.5%, 90.4%]" in lines
    assert all(len(line) <= 40 for line in lines if line.startswith(("┏", "│", "└")))
