"""What a page reads grows with what it shows, not with the run (issue 29): the mechanisms,
on real stores made by real runs. (How long it takes is measured by bench/viewer.py, never
here.)

- a case page reads its case by key: the same statements, and about the same SQLite work,
  for a run of 20 cases and one of 1,000;
- a page of the viewer's case table reads the full rows (inputs, outputs, reasons) of its
  own cases only, by key;
- a report file carries at most ``limit`` cases, the failed and missing ones first, and
  says what it left out;
- every case's outcome, read the fast way (packed by SQL), is the outcome the case's own
  document gives (classify_outcome, the one rule).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.conftest import write_project

from oloproof.analysis.report import (
    CasePage,
    _index,
    _state,
    _unpack,
    case_document,
    case_page_document,
    run_document,
)
from oloproof.cli.main import main
from oloproof.enums import CaseStatus, JudgmentStatus, MetricKind
from oloproof.store.db import open_store_readonly, store_path
from oloproof.store.reader import get_run, load_cases

APP = """
from oloproof import system

@system(name="mix", version="1")
def answer(case_input):
    n = case_input["n"]
    if n % 50 == 7:
        raise RuntimeError(f"case {n} broke")
    return {"label": "ok" if n % 10 else "no", "days": n % 5}
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: regex
  criterion: digits
  field: label
  pattern: '^o'
- type: absolute_error
  criterion: days_error
  field: days
  range: [0, 10]
"""


def _project(root: Path, n: int) -> Path:
    cases = [{"id": f"c{i:05d}", "input": {"n": i}, "expected": {"label": "ok", "days": 2}}
             for i in range(n)]
    write_project(root, app=APP, cases=cases, evaluators=EVALUATORS)
    assert main(["run", "--config", str(root / "oloproof.yaml")]) in (0, 1, 3)
    return root


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _project(tmp_path_factory.mktemp("small"), 20)


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _project(tmp_path_factory.mktemp("large"), 1000)


@contextmanager
def traced(root: Path) -> Iterator[tuple[sqlite3.Connection, list[str], list[int]]]:
    """A read-only connection to the store, with every statement it runs and a count of
    SQLite virtual-machine steps (in tens)."""
    conn = open_store_readonly(store_path(root))
    statements: list[str] = []
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    conn.set_trace_callback(statements.append)
    conn.set_progress_handler(step, 10)
    try:
        yield conn, statements, steps
    finally:
        conn.close()


def test_a_case_page_reads_one_case(small: Path, large: Path) -> None:
    work = {}
    for name, root in (("small", small), ("large", large)):
        with traced(root) as (conn, statements, steps):
            doc = case_page_document(conn, "latest", "c00010")
            assert doc is not None and doc["case"]["id"] == "c00010"
            assert doc["case"]["outcome"] == "failed"
            assert case_page_document(conn, "latest", "c99999") is None
            work[name] = (len(statements), steps[0])
    assert work["small"][0] == work["large"][0], work  # the same statements
    # And about the same work: a scan of the run would be 50 times more.
    assert 0 < work["large"][1] <= 2 * work["small"][1], work


def test_a_page_of_the_case_table_reads_its_own_rows_only(large: Path) -> None:
    with traced(large) as (conn, statements, _):
        doc = run_document(conn, "latest", page=CasePage(page=3, size=100))
    paging = doc["paging"]
    assert (paging["page"], paging["pages"], paging["first"], paging["last"]) == (3, 10, 201, 300)
    assert [c["id"] for c in doc["cases"]] == [f"c{i:05d}" for i in range(200, 300)]
    # Inputs and outputs are read only for the cases shown, by key.
    full_reads = [s for s in statements if "input_json" in s]
    assert full_reads, statements
    for sql in full_reads:
        assert "case_id IN" in sql or "case_id = ?" in sql, sql
    assert doc["outcome_counts"] == {"passed": 880, "failed": 100, "missing": 20, "excluded": 0}


def test_filters_and_search_pick_the_cases_before_the_page(large: Path) -> None:
    with traced(large) as (conn, _, _):
        failed = run_document(conn, "latest", page=CasePage(outcome="failed", size=30, page=2))
        on_label = run_document(conn, "latest", page=CasePage(
            criterion="exact_label", outcome="failed", size=500))
        found = run_document(conn, "latest", page=CasePage(query="CASE 507 BROKE"))
        past_end = run_document(conn, "latest", page=CasePage(page=99, size=100))
    assert failed["paging"]["matching"] == 100 and failed["paging"]["pages"] == 4
    assert all(c["outcome"] == "failed" for c in failed["cases"])
    assert failed["cases"][0]["id"] == "c00300"
    assert on_label["paging"]["matching"] == 100
    assert [c["id"] for c in found["cases"]] == ["c00507"]
    assert past_end["paging"]["page"] == 10  # the last page, not an empty one


def test_a_report_carries_at_most_its_limit_failing_cases_first(large: Path) -> None:
    with traced(large) as (conn, _, _):
        everything = run_document(conn, "latest")
        capped = run_document(conn, "latest", limit=150)
        tight = run_document(conn, "latest", limit=50)
    assert len(everything["cases"]) == 1000 and everything["capped"] is None
    ids = [c["id"] for c in capped["cases"]]
    assert len(ids) == 150 and ids == sorted(ids)  # suite order
    failing = [c for c in everything["cases"] if c["outcome"] in ("failed", "missing")]
    assert len(failing) == 120
    assert {c["id"] for c in failing} <= set(ids)
    assert capped["capped"] == {
        "limit": 150, "shown": 150, "total": 1000, "left_out": 850,
        "by_outcome": {"passed": 850}, "failing_shown": 120, "failing": 120,
    }
    assert [c["outcome"] for c in tight["cases"]].count("passed") == 0
    assert tight["capped"]["left_out"] == 950
    # The first 50 failing in suite order: 41 failed (0, 10, …, 400), 9 missing (7, 57, …, 407).
    assert tight["capped"]["by_outcome"] == {"passed": 880, "failed": 59, "missing": 11}


def test_the_fast_outcomes_are_the_case_documents_outcomes(large: Path) -> None:
    with traced(large) as (conn, _, _):
        run = get_run(conn, "latest")
        kinds = {m["criterion"]: m["kind"] for m in run.metrics}
        index = _index(conn, run.id, kinds)
        docs = [case_document(c, kinds) for c in load_cases(conn, run.id)]
    assert index.ids == [d["id"] for d in docs]
    assert index.outcomes == [d["outcome"] for d in docs]
    for name in kinds:
        assert index.columns[name] == [d["criteria"][name] for d in docs]
    assert index.errored == sum(d["status"] != "OK" for d in docs) == 20


def _code(status: str | None, passed: bool | None, score: float | None) -> int | None:
    """What _JUDGMENT_CODE makes of a stored judgment, computed by SQLite itself."""
    if status is None:
        return None
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE j0 (criterion TEXT NOT NULL, status TEXT, passed INTEGER,"
                 " score REAL)")
    conn.execute("INSERT INTO j0 VALUES ('c', ?, ?, ?)",
                 (status, None if passed is None else int(passed), score))
    from oloproof.analysis.report import _JUDGMENT_CODE

    (code,), = conn.execute(f"SELECT {_JUDGMENT_CODE.format(n=0)} FROM j0").fetchall()
    return int(code)


def test_a_packed_judgment_is_sorted_as_the_judgment_itself() -> None:
    statuses = [*JudgmentStatus, "MISSING", "TIMEOUT", "SOMETHING_ELSE", None]
    for kind in MetricKind:
        for case_status in (CaseStatus.OK, CaseStatus.ERROR, CaseStatus.TIMEOUT):
            for status in statuses:
                for passed in (None, True, False):
                    for score in (None, 0.0, 0.75):
                        j = None if status is None else (str(status), passed, score)
                        packed = _unpack(_code(None if status is None else str(status),
                                               passed, score))
                        assert _state(kind, case_status, j) == _state(
                            kind, CaseStatus.OK if case_status == CaseStatus.OK
                            else CaseStatus.ERROR, packed), (kind, case_status, j)
