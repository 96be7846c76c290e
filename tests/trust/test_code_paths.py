"""Issue 29: absurd or unreadable ``code_paths`` are refused when the project loads (exit
2, nothing stored), and what a code path may hash is bounded (systems/loading.py:
MAX_CODE_PATH_FILES, MAX_CODE_PATH_BYTES)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from tests.store._support import snapshot
from tests.trust._support import cli, no_traceback, project, runs

from oloproof.systems.loading import MAX_CODE_PATH_BYTES, MAX_CODE_PATH_FILES

APP = "def answer(inp):\n    return {'label': 'ok'}\n"
CHECKS = {"checks.py": "def check(output):\n    return output['label'] == 'ok'\n"}
CUSTOM = "  - type: custom\n    criterion: exact_label\n    function: checks:check\n"


def _with_code_paths(root: Path, entry: str, *, custom: bool = False) -> None:
    path = root / "oloproof.yaml"
    text = path.read_text()
    if custom:
        text = text.replace("function: checks:check\n",
                            f"function: checks:check\n    code_paths: ['{entry}']\n")
    else:
        text = text.replace("  callable: app:answer\n",
                            f"  callable: app:answer\n  code_paths: ['{entry}']\n")
    path.write_text(text)


def _refused(root: Path, field: str, *needles: str) -> None:
    before = snapshot(root / ".oloproof")
    result = cli(root, "run", timeout=60)  # a hang is a failure, not a wait
    no_traceback(result)
    assert result.code == 2, result.text
    # The file, the line of the field (issue 30 item 4), the field.
    assert re.search(rf"oloproof\.yaml:\d+: {re.escape(field)}", result.err), result.err
    for needle in needles:
        assert needle in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert snapshot(root / ".oloproof") == before and len(runs(root)) == 1


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = project(tmp_path / "p", APP, n=12, files=CHECKS)
    assert cli(root, "run").code == 0
    return root


@pytest.mark.parametrize("entry", ["/", ".", "..", "./"])
def test_a_code_path_holding_the_project_is_refused(root: Path, entry: str) -> None:
    # "/" used to end the run with exit 70 (OSError: [Errno 22] reading /proc or /sys).
    _with_code_paths(root, entry)
    _refused(root, "system.code_paths[0]", "holds the whole project directory")


def test_a_custom_evaluators_code_path_is_held_to_the_same_rules(tmp_path: Path) -> None:
    root = project(tmp_path / "p", APP, n=12, evaluators=CUSTOM, files=CHECKS)
    assert cli(root, "run").code == 0
    _with_code_paths(root, "/", custom=True)
    _refused(root, "evaluators[0].code_paths[0]", "holds the whole project directory")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_as_a_code_path_is_refused_without_hanging(root: Path) -> None:
    os.mkfifo(root / "prompts.txt")
    _with_code_paths(root, "prompts.txt")
    _refused(root, "system.code_paths[0]", "is not a regular file or a directory")


def test_a_device_as_a_code_path_is_refused(root: Path) -> None:
    _with_code_paths(root, "/dev/zero")
    _refused(root, "system.code_paths[0]", "is not a regular file or a directory")


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs /proc")
def test_a_code_path_that_cannot_be_read_is_refused(root: Path) -> None:
    # A regular file by stat whose read fails (EIO): the error is named, not exit 70.
    _with_code_paths(root, "/proc/self/mem")
    _refused(root, "system.code_paths[0]", "cannot be read")


def test_a_code_path_with_too_many_files_is_refused(root: Path) -> None:
    many = root / "many"
    many.mkdir()
    for i in range(MAX_CODE_PATH_FILES + 1):
        (many / f"f{i}.py").touch()
    _with_code_paths(root, "many")
    _refused(root, "system.code_paths[0]", f"more than {MAX_CODE_PATH_FILES:,} files")
    # At the limit it is hashed, and the run goes.
    (many / "f0.py").unlink()
    assert cli(root, "run").code == 0


def test_a_code_path_too_large_to_hash_is_refused(root: Path) -> None:
    weights = root / "weights.bin"
    with weights.open("wb") as f:
        f.truncate(MAX_CODE_PATH_BYTES + 1)  # sparse: no disk is used
    _with_code_paths(root, "weights.bin")
    _refused(root, "system.code_paths[0]", f"{MAX_CODE_PATH_BYTES >> 20} MiB",
             "in the system's version")


def test_an_ordinary_code_path_is_still_part_of_the_identity(root: Path) -> None:
    (root / "prompts").mkdir()
    (root / "prompts" / "a.txt").write_text("one")
    (root / "prompts" / "sub").mkdir()
    (root / "prompts" / "sub" / "b.txt").write_text("two")
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "prompts" / "fifo")  # inside a directory: not code, passed over
    _with_code_paths(root, "prompts/")
    assert cli(root, "run").code == 0
    assert cli(root, "run").code == 0
    assert runs(root)[0]["system"] == runs(root)[1]["system"]
    doc = cli(root, "inspect", "latest", "--json")
    assert '"execution_hits": 12' in doc.out, doc.out[:2000]
    (root / "prompts" / "sub" / "b.txt").write_text("changed")
    assert cli(root, "run").code == 0
    doc = cli(root, "inspect", "latest", "--json")
    assert '"execution_misses": 12' in doc.out
