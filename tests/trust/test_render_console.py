"""Outside a terminal the output is plain text whatever the environment says (LINES,
FORCE_COLOR, TTY_COMPATIBLE, TERM=dumb: no colour, no cursor codes), and honours COLUMNS
when it is set (SPEC §10): a table wider than it is printed one block per row, every
value whole; without COLUMNS, tables keep their natural width."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli
from tests.store._support import finished_project

NOISE = {"LINES": "3", "FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "TERM": "dumb"}


def test_plain_output_ignores_the_terminal_settings_and_honours_columns(tmp_path: Path) -> None:
    root = finished_project(tmp_path / "proj", n=12)
    for args in (["inspect", "latest"], ["runs"], ["gate", "latest"]):
        natural = run_cli(*args, cwd=root)
        assert natural.code == 0, natural.text
        assert run_cli(*args, cwd=root, env=NOISE).out == natural.out, args
        narrow = run_cli(*args, cwd=root, env={**NOISE, "COLUMNS": "40"})
        assert narrow.code == 0, narrow.text
        for out in (natural.out, narrow.out):
            assert "\x1b" not in out and all(x == x.rstrip() for x in out.splitlines())
        assert max(len(x) for x in natural.out.splitlines()) > 40
        assert not any(x[:1] in ("┏", "│") and len(x) > 40 for x in narrow.out.splitlines())
    row = next(x for x in run_cli("inspect", "latest", cwd=root).out.splitlines()
               if "observed" in x)
    assert "12 / 12 observed · 0 missing · 0 excluded" in row  # one row, never wrapped
    stacked = run_cli("inspect", "latest", cwd=root, env={"COLUMNS": "40"}).out
    assert "  Cases     12 / 12 observed · 0 missing · 0 excluded" in stacked.splitlines()
