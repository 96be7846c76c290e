"""How a run on the SQLite store looks its cache up (store/cache.py): the check that every
result is cached reads the keys in bulk, one statement per table for a small suite, but
only once the first case is found; a run with nothing cached asks for one key, then for
its first wave's, and goes on to call. Counted on the store's own connection, with SQLite's statement trace."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, write_project

import oloproof
from oloproof.store import db

APP = """
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 4 else "no"}
"""


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement run on a writing connection to the store."""
    seen: list[str] = []
    real = db.connect

    def connect(path: Path) -> sqlite3.Connection:
        conn = real(path)
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(db, "connect", connect)
    return seen


def _lookups(statements: list[str]) -> dict[str, list[str]]:
    return {
        table: [s for s in statements if s.startswith("SELECT") and f"FROM {table}" in s]
        for table in ("exec_cache", "judge_cache")
    }


def test_an_unchanged_rerun_reads_its_cache_in_bulk(tmp_path: Path, traced: list[str]) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40))
    first = oloproof.run(root)
    traced.clear()
    again = oloproof.run(root)
    assert [d.to_json() for d in again.decisions] == [d.to_json() for d in first.decisions]
    lookups = _lookups(traced)
    # The first case's execution alone, then every execution key and every judgment key
    # of the outputs found: one statement each (a suite of up to 500 cases).
    assert len(lookups["exec_cache"]) == 2, lookups["exec_cache"]
    assert " IN (" in lookups["exec_cache"][1]
    assert len(lookups["judge_cache"]) == 1 and " IN (" in lookups["judge_cache"][0]
    assert lookups["exec_cache"][1].count("'sha256:") == 40
    assert lookups["judge_cache"][0].count("'sha256:") == 40  # one evaluator


def test_a_first_run_asks_for_one_key_before_it_calls(tmp_path: Path, traced: list[str]) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40))
    oloproof.run(root)
    lookups = _lookups(traced)
    # Nothing in bulk: the first case's key alone before the run; the keys of the first
    # wave (concurrency.system: 8), whose calls start before the loop if they are not
    # cached (Engine.start_early); then each case's own as it runs (a local file: a few
    # microseconds each), and its judgment's.
    assert not any(" IN (" in s for s in lookups["exec_cache"] + lookups["judge_cache"])
    assert len(lookups["exec_cache"]) == 1 + 8 + 40
    assert lookups["exec_cache"][1:9] == lookups["exec_cache"][9:17]  # the same 8 keys
    assert len(lookups["judge_cache"]) == 40


def test_a_suite_larger_than_one_statement_is_read_in_chunks(
    tmp_path: Path, traced: list[str]
) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(1201))
    oloproof.run(root)
    traced.clear()
    oloproof.run(root)
    bulk = [s for s in _lookups(traced)["exec_cache"] if " IN (" in s]
    assert [s.count("'sha256:") for s in bulk] == [500, 500, 201]
