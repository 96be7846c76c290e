"""A symlink loop (or a symlink to nothing) where a file is named is said to be one, by
every command alike: it was "file not found", "no such file", or, for the store, "no store
... nothing has been run yet" from `runs` (exit 2) but "cannot be read" from `run` (exit 5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="t", version="1")
def answer(case_input):
    return {"label": "ok"}
"""
RELEASE = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
LOOP = "symlink loop (ELOOP: too many levels of symbolic links)"


def _project(root: Path) -> Path:
    write_project(root, app=APP, cases=labelled_cases(12), release=RELEASE)
    assert run_cli("run", cwd=root).code == 0
    return root


def _loop(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.symlink(path.name, path)  # a link to itself


def _error(root: Path, *args: str) -> tuple[int, str]:
    result = run_cli(*args, cwd=root)
    assert "Traceback" not in result.err and result.out == "", result.text
    return result.code, result.err


def test_project_files_that_are_symlink_loops(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    dataset = root / "data" / "cases.jsonl"
    kept = dataset.read_bytes()
    _loop(dataset)
    assert _error(root, "run") == (2, (
        f"oloproof run: error: oloproof.yaml:3: dataset: {LOOP}: data/cases.jsonl (relative"
        " to the project directory)\n"))
    dataset.unlink()
    os.symlink("gone.jsonl", dataset)
    assert _error(root, "run") == (2, (
        "oloproof run: error: oloproof.yaml:3: dataset: symlink to a missing file"
        " (gone.jsonl): data/cases.jsonl (relative to the project directory)\n"))
    dataset.unlink()
    dataset.write_bytes(kept)

    for name, args in (("release.yaml", ["run"]),
                       ("release.yaml", ["gate", "latest", "--policy", "release.yaml"]),
                       ("compare.yaml", ["compare", "latest", "latest"])):
        path = root / name
        kept = path.read_bytes() if path.exists() else None
        _loop(path)
        assert _error(root, *args) == (2, f"oloproof {args[0]}: error: {name}: {LOOP}\n")
        path.unlink()
        if kept is not None:
            path.write_bytes(kept)

    config = root / "oloproof.yaml"
    kept = config.read_bytes()
    _loop(config)
    for command in ("run", "runs"):
        code, err = _error(root, command)
        assert code == 2 and err.startswith(
            f"oloproof {command}: error: oloproof.yaml: {LOOP}; "), err


@pytest.mark.parametrize("command", [["runs"], ["run"], ["gate", "latest"], ["inspect", "latest"]])
def test_a_store_that_is_a_symlink_loop_is_one_error_for_every_command(
    tmp_path: Path, command: list[str]
) -> None:
    root = _project(tmp_path / "p")
    store = root / ".oloproof" / "store.sqlite"
    store.rename(root / "kept.sqlite")
    _loop(store)
    assert _error(root, *command) == (2, (
        f"oloproof {command[0]}: error: {store}: {LOOP}; remove the link, or point it at the"
        " store\n"))
    store.unlink()
    (root / "kept.sqlite").rename(store)
    assert run_cli("runs", cwd=root).code == 0  # the store, untouched
