"""The store writer: rows committed at the end of a loop turn, spaced commits, cache refreshes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import Backend

from oloproof.engine.pipeline import EngineCase
from oloproof.events import CaseExecuted, CaseJudged
from oloproof.store import writer as writer_module
from oloproof.store.db import open_store
from oloproof.store.writer import StoreWriter

# Every test runs on both store backends (tests/conftest.py `backend`).
pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def count(backend: Backend, tmp_path: Path) -> Callable[[Path, str], int]:
    def _count(path: Path, table: str) -> int:
        return backend.count(tmp_path, table)

    return _count


def _writer(tmp_path: Path, run_id: str = "run_A") -> tuple[StoreWriter, Path]:
    from oloproof.store.location import locate

    (tmp_path / "oloproof.yaml").write_text("project: test-project\n")
    path = tmp_path / ".oloproof" / "store.sqlite"
    writer = StoreWriter(open_store(locate(tmp_path / "oloproof.yaml")), run_id)
    writer.set_cases([EngineCase(f"c{i}", {"n": i}, {"label": "ok"}, None, i) for i in range(50)])
    writer.create_run(
        project="p", suite_digest="sha256:x", dataset="d.jsonl", cases_total=50,
        system_identity="sha256:s", system={"kind": "callable"}, metrics=[], policy=None,
        policy_path=None,
    )
    return writer, path


def _executed(i: int, output: object, latency: float = 1.0) -> CaseExecuted:
    return CaseExecuted(
        "run_A", scenario_id=f"c{i}", status="OK", from_cache=False, latency_ms=latency,
        attempts=1, error=None, index=i, exec_key=f"sha256:e{i}", output=output,
    )


def _judged(i: int, passed: bool) -> CaseJudged:
    return CaseJudged(
        "run_A", scenario_id=f"c{i}", criterion="exact_label", status="OK", passed=passed,
        score=None, from_cache=False, judge_key=f"sha256:j{i}", attempts=1,
    )


def test_rows_are_committed_at_the_end_of_the_loop_turn(
    tmp_path: Path, count: Callable[[Path, str], int]
) -> None:
    _count = count
    writer, path = _writer(tmp_path)

    async def main() -> None:
        writer.bind(asyncio.get_running_loop().call_soon)
        for i in range(3):
            writer.handle(_executed(i, {"label": "ok"}))
            writer.handle(_judged(i, True))
        assert _count(path, "run_cases") == 0  # still this turn of the loop
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        if writer._committer is not None:
            # PostgreSQL: the rows were handed to the committer thread at the end of the
            # turn; wait for what it was handed (nothing more is handed over here).
            writer._committer.drain()
        assert _count(path, "run_cases") == 3
        assert _count(path, "run_judgments") == 3

    asyncio.run(main())
    writer.close()


def test_commits_are_spaced_and_nothing_is_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: Callable[[Path, str], int]
) -> None:
    _count = count
    # A clock and a call_later of our own: the spacing is checked without timing anything.
    now = [100.0]
    monkeypatch.setattr(writer_module.time, "monotonic", lambda: now[0])
    later: list[tuple[float, Callable[[], None]]] = []
    writer, path = _writer(tmp_path)

    async def main() -> None:
        writer.bind(
            asyncio.get_running_loop().call_soon, lambda delay, fn: later.append((delay, fn))
        )
        writer.handle(_executed(0, {"label": "ok"}))
        await asyncio.sleep(0)
        assert _count(path, "run_cases") == 1  # the first commit is not held back
        now[0] += 0.001
        writer.handle(_executed(1, {"label": "ok"}))
        await asyncio.sleep(0)
        assert _count(path, "run_cases") == 1  # within the interval: waits for its end
        assert [round(delay, 6) for delay, _ in later] == [
            round(writer_module.MIN_COMMIT_INTERVAL_S - 0.001, 6)
        ]
        writer.handle(_executed(2, {"label": "ok"}))
        await asyncio.sleep(0)
        assert len(later) == 1  # one commit already due takes the new rows too
        later[0][1]()
        assert _count(path, "run_cases") == 3
        writer.handle(_executed(3, {"label": "ok"}))

    asyncio.run(main())
    writer.flush()  # what the loop did not get to is committed by the last flush
    assert _count(path, "run_cases") == 4


def test_a_fresh_call_refreshes_its_cache_entry(tmp_path: Path, backend: Backend) -> None:
    writer, _ = _writer(tmp_path)
    writer.handle(_executed(0, {"label": "old"}, latency=5.0))
    writer.handle(_judged(0, False))
    writer.run_id = "run_B"
    writer.handle(_executed(0, {"label": "new", "extra": [1]}, latency=7.0))
    writer.handle(_judged(0, True))
    conn = backend.connect(tmp_path)
    assert conn.execute("SELECT output_json, latency_ms FROM exec_cache").fetchall() == [
        ('{"label":"new","extra":[1]}', 7.0)
    ]
    assert conn.execute("SELECT passed FROM judge_cache").fetchall() == [(1,)]
    assert conn.execute("SELECT count(*) FROM run_cases").fetchone()[0] == 2


def test_small_commits_are_spaced_by_what_the_last_one_cost_within_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: Callable[[Path, str], int]
) -> None:
    _count = count
    # The clock moves only inside a commit, by what we say it cost: the spacing is
    # checked without timing anything.
    now = [100.0]
    cost = [0.0]
    monkeypatch.setattr(writer_module.time, "monotonic", lambda: now[0])
    later: list[tuple[float, Callable[[], None]]] = []
    writer, path = _writer(tmp_path)
    commit = writer._commit

    def costly(rows: tuple[list[tuple[object, ...]], ...]) -> None:
        commit(rows)
        now[0] += cost[0]

    monkeypatch.setattr(writer, "_commit", costly)
    delays: list[float] = []
    big = writer_module.SMALL_COMMIT_ROWS  # cases of one row each: a commit of that many rows
    case = iter(range(10_000))

    async def main() -> None:
        writer.bind(
            asyncio.get_running_loop().call_soon, lambda delay, fn: later.append((delay, fn))
        )
        for spent, cases in ((0.0003, 1), (0.0001, 1), (0.01, 1), (0.01, big)):
            cost[0] = spent
            for _ in range(cases):
                writer.handle(_executed(next(case), {"label": "ok"}))
            await asyncio.sleep(0)
            if later:  # the commit that was waiting for the interval to end
                later.pop()[1]()
            writer.handle(_executed(next(case), {"label": "ok"}))
            await asyncio.sleep(0)
            assert len(later) == 1  # within the interval: waits for its end
            delays.append(round(later[0][0], 6))

    asyncio.run(main())
    writer.flush()
    assert _count(path, "run_cases") == 7 + big
    # A small commit of 0.3 ms: 40 x 0.3 = 12 ms; of 0.1 ms: 4 ms, raised to the 5 ms floor;
    # of 10 ms: capped at 20 ms. A large one (its rows, not the commit, cost the time): 5 ms.
    assert delays == [
        round(writer_module.COMMIT_COST_FACTOR * 0.0003, 6),
        writer_module.MIN_COMMIT_INTERVAL_S,
        writer_module.MAX_COMMIT_INTERVAL_S,
        writer_module.MIN_COMMIT_INTERVAL_S,
    ]
