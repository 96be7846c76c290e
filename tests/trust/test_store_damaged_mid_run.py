"""A store whose pages SQLite finds damaged only once a run reads (or writes) them: the
header, the schema and the runs table are sound, so the run starts; then a cache look-up,
or a commit, meets "database disk image is malformed". The run ends as every reader does
on a damaged store (one line, exit 5) and writes nothing more into it: it used to store a
RUN_ERROR end there and say "Finished cases are stored; the next run takes them from the
cache", when nothing had finished and the cache was what was damaged."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project
from tests.store._support import INSTANT, RELEASE, runs_json, store_of


def _damage(db: Path, tables: tuple[str, ...]) -> None:
    """Random bytes over the root page of each of ``tables`` and of their indexes."""
    conn = sqlite3.connect(db)
    try:
        roots = [r[0] for r in conn.execute(
            f"SELECT rootpage FROM sqlite_master WHERE tbl_name IN ({','.join('?' * len(tables))})",
            tables,
        )]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    assert roots
    data = bytearray(db.read_bytes())
    rnd = random.Random(7)
    for page in roots:
        data[(page - 1) * size : page * size] = rnd.randbytes(size)
    db.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("tables", "new_first", "args"),
    [
        (("exec_cache", "judge_cache"), False, ()),  # every result cached: read at once
        (("exec_cache", "judge_cache"), True, ()),  # a new case first: read on the loop
        (("run_cases",), False, ("--no-cache",)),  # nothing read: a commit meets it
    ],
    ids=["cache-all-cached", "cache-on-the-loop", "commit"],
)
def test_a_run_that_meets_a_damaged_page_writes_nothing_more(
    tmp_path: Path, tables: tuple[str, ...], new_first: bool, args: tuple[str, ...]
) -> None:
    root = write_project(tmp_path / "proj", app=INSTANT, cases=labelled_cases(200),
                         release=RELEASE)
    first = run_cli("run", cwd=root)
    assert first.code == 0, first.text
    db = store_of(root)
    _damage(db, tables)
    if new_first:
        suite = root / "data" / "cases.jsonl"
        new = {"id": "new", "input": {"n": -1}, "expected": {"label": "ok"}}
        suite.write_text(json.dumps(new) + "\n" + suite.read_text())

    result = run_cli("run", *args, cwd=root)
    assert result.code == 5, result.text
    assert "Traceback" not in result.text
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert "the store cannot be read (database disk image is malformed)" in result.err
    assert "wrote nothing more into it" in result.err
    assert "Finished cases are stored" not in result.text  # nothing finished
    assert "ALLOW" not in result.out

    # No end was written for it: its row (stored as it started, before the damage was
    # met) reads as the row of a process that ended without finishing.
    latest = runs_json(root)[0]
    assert latest["status"] == "RUN_ERROR", latest
    assert latest["stop_reason"] == "the process running it ended without finishing", latest
