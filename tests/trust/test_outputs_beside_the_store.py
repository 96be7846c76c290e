"""Reports written where the store lives, through the real CLI.

``run --junit-xml .oloproof/store.sqlite`` and ``report latest -o .oloproof/store.sqlite``
renamed the report over the store: every stored run was gone (``runs``: "the store cannot
be read"), and the command exited 0. An output path in the project's store folder, or one
a symbolic link leads there, is refused (exit 2) before anything runs or is written.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from tests.conftest import RELEASE_FLOOR, labelled_cases, run_cli, write_project

from oloproof.store.db import store_path

APP = """
def answer(case_input):
    return {"label": "ok"}
"""


def _stored(root: Path) -> list[str]:
    result = run_cli("runs", "--json", cwd=root)
    assert result.code == 0, result.text
    return [r["id"] for r in json.loads(result.out)]


def _refused(result: object, flag: str) -> None:
    code, err = result.code, result.err  # type: ignore[attr-defined]
    assert code == 2, result
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{flag} " in err and "is in the project's store folder (.oloproof/)" in err, err


def test_no_report_replaces_the_store(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12),
                         release=RELEASE_FLOOR)
    assert run_cli("run", cwd=root).code == 0
    before = _stored(root)
    store = Path(store_path(root))
    (root / "link.html").symlink_to(store)
    attempts = [
        (("run", "--junit-xml", ".oloproof/store.sqlite"), "--junit-xml"),
        (("run", "--junit-xml", "./.oloproof/../.oloproof/store.sqlite-wal"), "--junit-xml"),
        (("gate", "latest", "--junit-xml", str(store)), "--junit-xml"),
        (("report", "latest", "-o", ".oloproof/store.sqlite"), "--output"),
        (("report", "latest", "-o", "link.html"), "--output"),
        (("report", "latest", "--config", str(root), "-o", str(root / ".oloproof")), "--output"),
    ]
    for args, flag in attempts:
        _refused(run_cli(*args, cwd=root), flag)
        assert _stored(root) == before, args
    assert os.path.islink(root / "link.html")
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    # Beside the store, not in it, is where reports go.
    assert run_cli("gate", "latest", "--junit-xml", "report.xml", cwd=root).code == 0
    assert run_cli("report", "latest", "-o", "report.html", cwd=root).code == 0
    assert (root / "report.xml").is_file() and (root / "report.html").is_file()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_junit_report_into_a_pipe_is_written_into_it(tmp_path: Path) -> None:
    """``--junit-xml`` renamed its file over whatever was there: a named pipe became a
    regular file, and as root ``--junit-xml /dev/stdout`` (or ``/dev/null``) replaced the
    device in /dev with a file, for every process of the machine. It is written into, as
    ``report -o`` does."""
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12),
                         release=RELEASE_FLOOR)
    pipe = root / "junit.pipe"
    os.mkfifo(pipe)
    got: list[bytes] = []

    def read() -> None:
        with open(pipe, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    result = run_cli("run", "--junit-xml", "junit.pipe", cwd=root, timeout=60)
    if reader.is_alive():  # nothing was written into the pipe: let the reader go
        with open(pipe, "wb"):
            pass
    reader.join(10)
    assert result.code == 0, result.text
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode), "the pipe was replaced by a file"
    assert got and got[0].startswith(b"<?xml") and b"<testsuites" in got[0]
