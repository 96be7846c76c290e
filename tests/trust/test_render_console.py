"""Outside a terminal the tables are plain and at their natural width, whatever the
environment says (COLUMNS, LINES, FORCE_COLOR, TERM=dumb): the console is set up through
rich's public parameters only (issue 9 §7)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli
from tests.store._support import finished_project


def test_plain_output_ignores_the_environment(tmp_path: Path) -> None:
    root = finished_project(tmp_path / "proj", n=12)
    baseline = run_cli("inspect", "latest", cwd=root)
    assert baseline.code == 0, baseline.text
    env = {"COLUMNS": "20", "LINES": "3", "FORCE_COLOR": "1", "TTY_COMPATIBLE": "1",
           "TERM": "dumb"}
    for args in (["inspect", "latest"], ["runs"], ["gate", "latest"]):
        result = run_cli(*args, cwd=root, env=env)
        assert result.code == 0, result.text
        assert "\x1b" not in result.out
        assert max(len(line) for line in result.out.splitlines()) > 20
        assert all(line == line.rstrip() for line in result.out.splitlines())
    assert run_cli("inspect", "latest", cwd=root, env=env).out == baseline.out
    row = next(line for line in baseline.out.splitlines() if "observed" in line)
    assert "12 / 12 observed · 0 missing · 0 excluded" in row  # one row, never wrapped
