"""``.oloproof`` that is a file (or a pipe), not the store's folder, through the real CLI:
``run`` said "the store cannot be written (File exists); nothing was run" (exit 5) and the
readers "no store ... nothing has been run in this project yet". Every command says what
is there, exit 2 as for anything but a file at ``store.sqlite``, and leaves it as it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import RELEASE_FLOOR, labelled_cases, run_cli, write_project

APP = """
def answer(case_input):
    return {"label": "ok"}
"""


@pytest.mark.parametrize("kind", ["file", "pipe"])
def test_store_folder_that_is_not_a_folder(tmp_path: Path, kind: str) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12),
                         release=RELEASE_FLOOR)
    folder = root / ".oloproof"
    if kind == "file":
        folder.write_text("notes\n")
    else:
        os.mkfifo(folder)
    shown = "a file" if kind == "file" else "a pipe, a device or a socket"
    for command in (("runs",), ("gate", "latest"), ("inspect", "latest"), ("run",)):
        result = run_cli(*command, cwd=root, timeout=60)
        assert result.code == 2, (command, result.text)
        assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
        assert f".oloproof: is not a folder ({shown})" in result.err, result.err
    if kind == "file":
        assert folder.read_text() == "notes\n"


def test_project_file_that_is_a_directory(tmp_path: Path) -> None:
    """``oloproof.yaml`` made a folder: every command said "oloproof.yaml/oloproof.yaml: no
    such file", a path nobody typed."""
    root = tmp_path / "p"
    (root / "oloproof.yaml").mkdir(parents=True)
    for command in (("run",), ("runs",), ("gate", "latest")):
        result = run_cli(*command, cwd=root, timeout=60)
        assert result.code == 2, (command, result.text)
        assert result.err.count("\n") == 1, result.err
        assert "oloproof.yaml: is a directory, expected the project's file" in result.err
        assert "oloproof.yaml/oloproof.yaml" not in result.err
