"""A store removed or replaced while a run writes to it: the run is not decided.

SQLite goes on writing to the file it has open, which nobody can read again once its name
is gone (`git clean -fdx` in another shell, a system under test cleaning up). The run used
to print DECIDED/COMPLETE and exit 0 with every result lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import RELEASE_FLOOR, events, labelled_cases, run_cli, write_project

APP = """
import os, shutil
STORE = os.path.join(".oloproof", "store.sqlite")

def answer(case_input):
    if case_input["n"] == 10 and os.environ.get("MODE") == "remove" and os.path.isdir(".oloproof"):
        shutil.rmtree(".oloproof")
    if case_input["n"] == 10 and os.environ.get("MODE") == "replace" and os.path.exists("spare.sqlite"):
        os.replace("spare.sqlite", STORE)
    return {"label": "ok"}
"""


@pytest.mark.parametrize("mode", ["remove", "replace"])
def test_a_store_that_went_away_during_the_run_is_not_decided(tmp_path: Path, mode: str) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(20), release=RELEASE_FLOOR,
                         concurrency=(1, 1))
    first = run_cli("run", "--no-cache", cwd=root)  # a store to copy, for "replace"
    assert first.code == 0, first.text
    (root / "spare.sqlite").write_bytes((root / ".oloproof" / "store.sqlite").read_bytes())
    result = run_cli("run", "--no-cache", "--json", cwd=root, env={"MODE": mode})
    last = events(result.out)[-1]
    assert (last["type"], last["status"], last["exit_code"]) == ("run_finished", "RUN_ERROR", 5)
    assert result.code == 5, result.text
    assert "was removed or replaced during the run" in result.err
    assert "Finished cases are stored" not in result.err
