"""Files behind a folder that may not be searched (``chmod 000``), and a labels file that
is not a regular file, through the real CLI.

``pathlib``'s ``exists()`` and ``is_file()`` raise ``PermissionError`` for a path behind
such a folder, and ``os.path.exists`` says False: the dataset, the labels, a rubric and a
policy named in oloproof.yaml ended ``run`` as an internal error (exit 70), and a store
behind such a folder was "no store ... nothing has been run in this project yet".

Root is not stopped by permission bits: as root, the command runs with the capabilities
that let it pass them dropped (``setpriv``), its user id unchanged.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, RELEASE_FLOOR, Result, labelled_cases, run_cli, write_project

APP = """
def answer(case_input):
    return {"label": "ok"}
"""

_CAPS = "-dac_override,-dac_read_search,-fowner"


def _limited(*args: str, cwd: Path) -> Result:
    """The CLI as a user whom permission bits stop (root without its capabilities)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("setpriv missing")
        prefix = ["setpriv", f"--bounding-set={_CAPS}", f"--inh-caps={_CAPS}", "--"]
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    proc = subprocess.run(
        [*prefix, *OLOPROOF, *args], cwd=cwd, env=env, capture_output=True, text=True,
        check=False, timeout=120, stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _one_line(result: Result, code: int, *needles: str) -> None:
    assert result.code == code, result.text
    assert "internal error" not in result.text and "Traceback" not in result.text
    assert result.err.count("\n") == 1, result.err
    for needle in needles:
        assert needle in result.err, (needle, result.err)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12),
                         release=RELEASE_FLOOR)
    yield root
    os.chmod(root, 0o755)  # give pytest back what it must remove
    for folder in root.rglob("*"):
        if folder.is_dir() and not folder.is_symlink():
            folder.chmod(0o755)


def test_dataset_behind_a_folder_that_cannot_be_searched(project: Path) -> None:
    (project / "data").chmod(0)
    _one_line(_limited("run", cwd=project), 2,
              "oloproof.yaml:", "dataset: cannot be read (Permission denied): data/cases.jsonl")


def test_policy_behind_a_folder_that_cannot_be_searched(project: Path) -> None:
    (project / "pol").mkdir()
    (project / "release.yaml").rename(project / "pol" / "release.yaml")
    with (project / "oloproof.yaml").open("a") as f:
        f.write("policy: pol/release.yaml\n")
    (project / "pol").chmod(0)
    _one_line(_limited("run", cwd=project), 2, "pol/release.yaml: cannot be read",
              "Permission denied")


def test_config_behind_a_folder_that_cannot_be_searched(project: Path) -> None:
    os.chmod(project, 0)
    result = _limited("run", "--config", "p/oloproof.yaml", cwd=project.parent)
    _one_line(result, 2, "p/oloproof.yaml: cannot be read", "Permission denied")


def _judged(root: Path) -> Path:
    write_project(root, app=APP, cases=labelled_cases(12), release=RELEASE_FLOOR, evaluators="""
          - type: exact_match
            criterion: exact_label
            field: label
          - type: rubric_judge
            criterion: helpful
            provider: anthropic
            model: m
            base_url: http://127.0.0.1:9
            api_key_env: OLOPROOF_TEST_UNUSED_KEY
            rubric_file: rubrics/helpful.md
        """)
    (root / "rubrics").mkdir()
    (root / "rubrics" / "helpful.md").write_text("Is the answer helpful?\n")
    (root / "priv").mkdir()
    (root / "priv" / "labels.jsonl").write_text(textwrap.dedent("""\
        {"id": "q000", "criterion": "helpful", "pass": true}
        """))
    with (root / "oloproof.yaml").open("a") as f:
        f.write("human_labels: priv/labels.jsonl\n")
    return root


def test_labels_and_rubric_behind_folders_that_cannot_be_searched(project: Path) -> None:
    root = _judged(project.parent / "j")
    try:
        (root / "priv").chmod(0)
        _one_line(_limited("run", cwd=root), 2,
                  "human_labels: cannot be read (Permission denied): priv/labels.jsonl")
        (root / "priv").chmod(0o755)
        (root / "rubrics").chmod(0)
        _one_line(_limited("run", cwd=root), 2,
                  "evaluators[1].rubric_file: rubrics/helpful.md: cannot be read",
                  "Permission denied")
    finally:
        for folder in ("priv", "rubrics"):
            (root / folder).chmod(0o755)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_labels_file_that_is_a_pipe_is_not_said_to_be_missing(project: Path) -> None:
    root = _judged(project.parent / "j")
    (root / "priv" / "labels.jsonl").unlink()
    os.mkfifo(root / "priv" / "labels.jsonl")
    result = run_cli("run", cwd=root, timeout=60)
    _one_line(result, 2, "human_labels: is not a regular file (a device, a pipe or a socket)")
    assert "not found" not in result.err
    (root / "priv" / "labels.jsonl").unlink()
    (root / "priv" / "labels.jsonl").mkdir()
    _one_line(run_cli("run", cwd=root, timeout=60), 2, "human_labels: is a directory, not a file")


def test_store_behind_a_folder_that_cannot_be_searched(project: Path) -> None:
    first = run_cli("run", cwd=project)
    assert first.code == 0, first.text
    (project / ".oloproof").chmod(0)
    for command in (("runs",), ("gate", "latest"), ("run",)):
        result = _limited(*command, cwd=project)
        _one_line(result, 5, "store.sqlite", "cannot be read (Permission denied)")
        assert "nothing has been run" not in result.err
    (project / ".oloproof").chmod(0o700)
    gate = run_cli("gate", "latest", cwd=project)
    assert gate.code == 0, gate.text


def test_merge_names_what_is_at_a_path_it_cannot_use(project: Path) -> None:
    """``merge PATH``: a pipe, a device or a link to nothing was "no such file or
    directory"; a store behind a folder that may not be searched, or in one that may not be
    read, ended as an internal error (exit 70, PermissionError from pathlib)."""
    os.mkfifo(project / "pipe.sqlite")
    (project / "link.sqlite").symlink_to("nowhere.sqlite")
    cases = [
        (("merge", "pipe.sqlite"), "pipe.sqlite: is not a regular file (a device, a pipe or"),
        (("merge", "/dev/zero"), "/dev/zero: is not a regular file"),
        (("merge", "link.sqlite"), "link.sqlite: symlink to a missing file (nowhere.sqlite)"),
    ]
    for args, needle in cases:
        _one_line(run_cli(*args, cwd=project, timeout=60), 2, needle)
    (project / "priv").mkdir()
    (project / "priv" / "store.sqlite").write_bytes(b"SQLite format 3\x00")
    (project / "priv").chmod(0)
    _one_line(_limited("merge", "priv/store.sqlite", cwd=project), 2,
              "priv/store.sqlite: cannot be read (Permission denied)")
    _one_line(_limited("merge", "priv", cwd=project), 2,
              "priv: cannot be read (Permission denied)")
