"""What the team store asks of PostgreSQL, counted where it is received: the server's own
statement log (``log_statement = all``, set for our sessions only through libpq's
``PGOPTIONS``). A commit of many cases is a handful of multi-row statements, not one per
row; ``gate`` reads a run in a few statements, however many cases it holds; the writer's
commits on an event loop go through a thread of their own, and a fault there stops the run
as one on the loop's thread would."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

from oloproof.engine.pipeline import EngineCase
from oloproof.events import CaseExecuted, CaseJudged
from oloproof.store.location import PostgresLocation
from oloproof.store.writer import StoreWriter

LOG_ALL = {"PGOPTIONS": "-c log_statement=all"}
_STATEMENT = re.compile(r"LOG:  (?:statement|execute [^:]*): (.*)")

QUICK = """
from oloproof import system

@system(name="quick", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 3 else "no"}
"""
RELEASE = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"


class ServerLog:
    """The statements the test server logged since this was made."""

    def __init__(self, server: Any) -> None:
        self.path = Path(server.directory) / "server.log"
        self.start = self.path.stat().st_size

    def statements(self) -> list[str]:
        text = self.path.read_bytes()[self.start:].decode("utf-8", "replace")
        return [m.group(1).strip() for m in _STATEMENT.finditer(text)]


def _writer(root: Path, url: str, n: int) -> StoreWriter:
    from oloproof.store.db import open_store

    writer = StoreWriter(open_store(PostgresLocation(url, "test-project")), "run_A")
    writer.set_cases([EngineCase(f"c{i}", {"n": i}, {"label": "ok"}, None, i) for i in range(n)])
    writer.create_run(
        project="test-project", suite_digest="sha256:x", dataset="d.jsonl", cases_total=n,
        system_identity="sha256:s", system={"kind": "callable"}, metrics=[], policy=None,
        policy_path=None,
    )
    return writer


def _events(i: int) -> tuple[CaseExecuted, CaseJudged]:
    return (
        CaseExecuted("run_A", scenario_id=f"c{i}", status="OK", from_cache=False,
                     latency_ms=1.5, attempts=1, error=None, index=i, exec_key=f"sha256:e{i}",
                     output={"label": "ok"}),
        CaseJudged("run_A", scenario_id=f"c{i}", criterion="exact_label", status="OK",
                   passed=i % 2 == 0, score=None, from_cache=False, judge_key=f"sha256:j{i}",
                   attempts=1),
    )


def _count(url: str, table: str) -> int:
    from oloproof.store.postgres import connect

    conn = connect(PostgresLocation(url, "test-project"))
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def test_a_commit_of_many_cases_is_one_statement_per_table(
    tmp_path: Path, pg_server: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGOPTIONS", LOG_ALL["PGOPTIONS"])
    writer = _writer(tmp_path, pg_url, 300)
    writer.bind(lambda _due: None, lambda _wait, _flush: None)  # commits when flushed only
    log = ServerLog(pg_server)
    for i in range(300):
        for event in _events(i):
            writer.handle(event)
    writer.handle(_events(7)[1])  # the same judgment twice in one commit: the later one kept
    writer.flush()
    heads = [" ".join(s.split()[:3]) for s in log.statements()]
    assert heads == [
        "BEGIN", "INSERT INTO run_cases", "INSERT INTO exec_cache", "INSERT INTO run_judgments",
        "INSERT INTO judge_cache", "COMMIT",
    ]
    assert writer.fault is None
    assert _count(pg_url, "run_cases") == 300
    assert _count(pg_url, "run_judgments") == 300
    assert _count(pg_url, "judge_cache") == 300
    writer.conn.close()


@pytest.mark.parametrize("driver", ["wire", "psycopg"])
def test_gate_reads_a_run_in_a_few_statements_whatever_its_size(
    tmp_path: Path, pg_server: Any, pg_url: str, driver: str
) -> None:
    # The wire client (store/pgwire.py) leaves a connection whose PGOPTIONS it would have
    # to send to psycopg: for it, the database logs every statement instead.
    if driver == "wire":
        database = pg_url.split("/")[3].split("?")[0]
        pg_server.sql(f'ALTER DATABASE "{database}" SET log_statement = \'all\'')
        reading = {"OLOPROOF_PG_DRIVER": "wire"}
    else:
        reading = LOG_ALL | {"OLOPROOF_PG_DRIVER": "psycopg"}
    counts = []
    for n in (6, 240):
        root = write_project(tmp_path / f"p{n}", app=QUICK, cases=labelled_cases(n),
                             release=RELEASE)
        env = {"OLOPROOF_STORE": pg_url}
        assert run_cli("run", cwd=root, env=env).code in (0, 1, 3)
        log = ServerLog(pg_server)
        gate = run_cli("gate", "latest", "--json", cwd=root, env=env | reading)
        assert gate.code in (0, 1, 3), gate.text
        statements = log.statements()
        # Who the store is and which tables it has; the run; its cases' metadata (the
        # policy's checks); its labels; its judgments; its judge panels.
        assert 4 <= len(statements) <= 6, statements
        assert not any(s.startswith("SET ") for s in statements), statements
        counts.append(len(statements))
    assert counts[0] == counts[1]


def test_the_committer_thread_commits_while_the_loop_runs_and_stops_with_the_run(
    tmp_path: Path, pg_url: str
) -> None:
    writer = _writer(tmp_path, pg_url, 40)

    async def main() -> None:
        writer.bind(asyncio.get_running_loop().call_soon)
        assert any(t.name == "oloproof-store-committer" for t in threading.enumerate())
        for i in range(40):
            for event in _events(i):
                writer.handle(event)
            await asyncio.sleep(0)
        writer.flush()  # returns once the thread committed everything handed over
        assert _count(pg_url, "run_cases") == 40

    asyncio.run(main())
    writer.finish_run(status="DECIDED", completeness="COMPLETE", exit_code=0, gate="ALLOW",
                      cache={}, decisions=[])
    assert not any(t.name == "oloproof-store-committer" for t in threading.enumerate())
    assert writer.fault is None
    assert _count(pg_url, "run_judgments") == 40
    writer.conn.close()


def test_a_fault_on_the_committer_thread_reaches_the_loop(
    tmp_path: Path, pg_url: str
) -> None:
    faults: list[tuple[str, bool]] = []
    writer = _writer(tmp_path, pg_url, 10)
    writer.on_fault = lambda reason: faults.append(
        (reason, threading.current_thread() is threading.main_thread())
    )

    async def main() -> None:
        writer.bind(asyncio.get_running_loop().call_soon)
        committer = writer._committer
        assert committer is not None
        # The server ends the committer's session (what a restart or an admin would do).
        writer.conn.execute(
            "SELECT pg_terminate_backend(?)", (committer.conn.raw.info.backend_pid,)
        )
        for event in _events(0):
            writer.handle(event)
        writer.flush()
        for _ in range(100):  # on_fault is called on the loop, in a later turn
            if faults:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert writer.fault is not None and "could not be written" in writer.fault
    assert faults == [(writer.fault, True)]
    writer.handle(_events(1)[0])  # no more rows are taken
    writer.close()
    assert _count(pg_url, "run_cases") == 0
    writer.conn.close()
