"""A system that holds one case until the test says go, for the team-store tests that act
on the store while a run is in the middle of its cases (tests/store/test_pg_*.py)."""

from __future__ import annotations

#: The release policy those tests run under: one floor that the held system passes.
FLOOR = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"


def held_app(at: int) -> str:
    """app.py whose case ``at`` writes ``reached`` beside it, then waits (60 s at most) for
    the test to write ``go``; every case answers ``ok``."""
    return f"""
import time
from pathlib import Path
from oloproof import system

HERE = Path(__file__).parent

@system(name="held", version="1")
def answer(case_input):
    if case_input["n"] == {at}:
        (HERE / "reached").write_text("x")
        deadline = time.monotonic() + 60
        while not (HERE / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return {{"label": "ok"}}
"""
