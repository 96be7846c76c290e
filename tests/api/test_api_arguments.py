"""The API's arguments: a wrong type is one TypeError naming the function and the argument,
raised before anything is stored or called (real projects, real SQLite stores)."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import RELEASE_FLOOR, labelled_cases, write_project

import oloproof

APP = """
def answer(case_input):
    return {"label": "ok"}
"""


def _runs(root: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        return [tuple(r) for r in conn.execute("SELECT id, status FROM runs ORDER BY id")]
    finally:
        conn.close()


WRONG: list[tuple[Any, type[Exception], str]] = [
    # use_cache="false" is true: the run read the cache it was asked not to read.
    (lambda p: oloproof.run(p, use_cache="false"), TypeError,
     "run() argument 'use_cache' must be True or False, not str"),
    # The run started and was stored RUN_ERROR/PARTIAL at its first event.
    (lambda p: oloproof.run(p, on_event="print"), TypeError,
     "run() argument 'on_event' must be a function of one event, or None, not str"),
    (lambda p: oloproof.run(p, cases=5), TypeError,
     "run() argument 'cases' must be a case id or a list of them, not int"),
    (lambda p: oloproof.run(p, cases=["q001", 2]), TypeError,
     "run() argument 'cases' must be a case id or a list of them; it holds int 2"),
    (lambda p: oloproof.run(p, where=1), TypeError, "run() argument 'where' must be"),
    (lambda p: oloproof.run(p, group_by=3), TypeError,
     "run() argument 'group_by' must be a metadata key or a list of them, not int"),
    (lambda p: oloproof.run(p, sample="yes", limit=3), TypeError,
     "run() argument 'sample' must be True or False, not str"),
    (lambda p: oloproof.run(p, progress="on"), TypeError,
     "run() argument 'progress' must be True, False or None, not str"),
    (lambda p: oloproof.run(p, policy=5), TypeError,
     "run() argument 'policy' must be a path (str or os.PathLike), not int"),
    (lambda p: oloproof.run(None), TypeError,
     "run() argument 'project' must be a path (str or os.PathLike), not NoneType"),
    (lambda p: oloproof.run(str(p).encode()), TypeError,
     "run() argument 'project' must be a path (str or os.PathLike), not bytes"),
    (lambda p: oloproof.run(p, sequential=True, baseline=7), TypeError,
     "run() argument 'baseline' must be a run id or None, not int"),
    (lambda p: oloproof.read_run("latest", p, group_by=2), TypeError,
     "read_run() argument 'group_by' must be a metadata key or a list of them, not int"),
    (lambda p: oloproof.read_run("latest", None), TypeError,
     "read_run() argument 'project' must be a path"),
    (lambda p: oloproof.list_runs(p, limit="3"), TypeError,
     "list_runs() argument 'limit' must be a whole number or None, not str"),
    (lambda p: oloproof.list_runs(p, limit=0), ValueError,
     "list_runs() argument 'limit' must be 1 or more, got 0"),
    (lambda p: oloproof.compare("latest", "latest", project=None), TypeError,
     "compare() argument 'project' must be a path"),
    (lambda p: oloproof.plan("latest", project=p, assurance="0.9"), TypeError,
     "plan() argument 'assurance' must be a number strictly between 0 and 1, or None, not str"),
    (lambda p: oloproof.merge([p, 3], p), TypeError,
     ("merge() argument 'sources' must be a list of project directories, store files or"
      " postgresql:// URLs; it holds int 3")),
]


IDS = ["use_cache-text", "on_event-text", "cases-int", "cases-holds-int", "where-int",
       "group_by-int", "sample-text", "progress-text", "policy-int", "project-None",
       "project-bytes", "baseline-int", "read_run-group_by", "read_run-project",
       "list_runs-limit-text", "list_runs-limit-0", "compare-project", "plan-assurance",
       "merge-sources"]


@pytest.mark.parametrize(("call", "error", "message"), WRONG, ids=IDS)
def test_a_wrong_argument_is_one_clear_error_and_nothing_runs(
    project_dir: Path, call: Any, error: type[Exception], message: str
) -> None:
    write_project(project_dir, app=APP, cases=labelled_cases(10), release=RELEASE_FLOOR)
    oloproof.run(project_dir)
    before = _runs(project_dir)
    with pytest.raises(error, match="^" + re.escape(message)):
        call(project_dir)
    assert _runs(project_dir) == before  # nothing stored, nothing called


def test_case_ids_from_any_iterable_and_merge_of_one_source(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=labelled_cases(10), release=RELEASE_FLOOR)
    picked = oloproof.run(project_dir, cases=(c for c in ("q001", "q002")))
    assert picked.subset is not None and picked.subset.case_ids == ("q001", "q002")
    for i in (1, 2):
        oloproof.run(project_dir, shard=f"{i}/2")
    # A source given alone is one source: it used to be read letter by letter
    # ("/: no such file or directory", then "t", "m", "p", ...).
    merged = oloproof.merge(str(project_dir), project_dir)
    assert (merged.completeness, merged.exit_code) == ("COMPLETE", 0)
    assert merged.metrics["exact_label"].observed == 10


SLOW_APP = """
import time

def answer(case_input):
    time.sleep(0.3)
    return {"label": "ok"}
"""


def test_run_async_cancelled_twice_raises_only_once_its_end_is_stored(project_dir: Path) -> None:
    # The second cancellation (a timeout around a task that is cancelled too) raised at
    # once: the caller found the run RUNNING, its end still to be stored by a daemon
    # thread that the process's end would kill.
    write_project(project_dir, app=SLOW_APP, cases=labelled_cases(20), release=RELEASE_FLOOR,
                  concurrency=(1, 1))
    seen: list[list[tuple[str, str]]] = []

    async def main() -> None:
        executed = asyncio.Event()
        task = asyncio.create_task(oloproof.run_async(
            project_dir, use_cache=False,
            on_event=lambda e: executed.set() if e.type == "case_executed" else None,
        ))
        await executed.wait()
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        seen.append([status for _, status in _runs(project_dir)])

    asyncio.run(main())
    assert seen == [["RUN_ERROR"]]
    result = oloproof.read_run("latest", project_dir)
    assert result.stop_reason == "cancelled by the caller (run_async)"
    again = oloproof.run(project_dir, limit=2)  # a second run in this process works
    assert (again.status, again.metrics["exact_label"].observed) == ("DECIDED", 2)


def test_a_run_read_from_a_relative_path_reads_its_cases_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # read_run(id, "bot") kept "bot/oloproof.yaml": after os.chdir (a notebook changing
    # folder) cases() opened ./bot's store there, another project's, and yielded nothing.
    for where, n in (("a", 10), ("b", 6)):
        write_project(tmp_path / where / "bot", app=APP, cases=labelled_cases(n),
                      release=RELEASE_FLOOR)
        oloproof.run(tmp_path / where / "bot")
    monkeypatch.chdir(tmp_path / "a")
    stored = oloproof.read_run("latest", "bot")
    monkeypatch.chdir(tmp_path / "b")
    assert len(list(stored.cases())) == 10
    assert len(stored.to_records()) == 10


def test_a_stale_cache_warning_raised_as_an_error_stops_every_run(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under `-W error` (pytest's filterwarnings = error) the first run raised the warning
    # and the next ran silently on the cache it warns about: the next test passed.
    write_project(project_dir, app="from helpers import LABEL\n\ndef answer(case_input):\n"
                  "    return {'label': LABEL}\n", cases=labelled_cases(10),
                  release=RELEASE_FLOOR, extra_files={"helpers.py": "LABEL = 'ok'\n"})
    monkeypatch.setattr("oloproof.api._run._WARNED", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error", oloproof.StaleCacheWarning)
        for _ in range(2):
            with pytest.raises(oloproof.StaleCacheWarning, match="^app.py uses project code"):
                oloproof.run(project_dir)
    assert not (project_dir / ".oloproof" / "store.sqlite").exists()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert oloproof.run(project_dir).allowed
        assert oloproof.run(project_dir).allowed
    assert [w.category for w in caught].count(oloproof.StaleCacheWarning) == 1  # once shown
