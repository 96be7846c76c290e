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
from pathlib import Path

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
