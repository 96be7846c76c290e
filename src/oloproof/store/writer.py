"""The store writer: a sink of run events, and the run's own row.

Rows are built as events arrive and committed together at the end of the
turn of the event loop in which they arrived, so a burst of finished cases
costs one transaction and what finished is on disk before the loop waits for
more. Commits are spaced at least ``MIN_COMMIT_INTERVAL_S`` (5 ms) apart: when
cases finish faster than that, the next commit waits for the interval to end
and takes every row that arrived meanwhile. Each commit rewrites the B-tree
pages it touches, so a commit of a few rows costs mostly that fixed part: after
a commit of fewer than ``SMALL_COMMIT_ROWS`` rows, the next one waits
``COMMIT_COST_FACTOR`` times what it took (at most ``MAX_COMMIT_INTERVAL_S``),
so such commits take at most about 1/40 of the loop's time (a case every 6 ms,
each commit 0.3-0.4 ms: one commit every 12-16 ms instead of one per case).
Larger commits cost mostly their rows, which waiting longer does not save,
while a longer commit holds up the loop, and with it the results of the calls
waiting to be handed over (10,000 calls of 20 ms at ``system: 200`` measured
1.68 s at 5 ms and 1.89 s when every commit was spaced by its cost). A case that
finishes when nothing was committed for that long is committed at once. A
process killed mid-run therefore loses its calls in flight and the cases that
finished in the last few milliseconds, at most ``MAX_COMMIT_INTERVAL_S``
(SPEC §3); a custom evaluator's results may wait up to 20 ms more before they
reach the loop (engine/pipeline.py ``_EVAL_BATCH_S``).

Why not a thread that commits while the loop runs: Python's sqlite3 releases
the GIL around every statement, and a loop busy with HTTP (judges) releases
it around every system call; the two threads then hand the GIL back and forth
tens of thousands of times a run, which costs the loop more than the commits
themselves (docs/performance.md).

On PostgreSQL (the team store) the sums differ, and so does the answer. A commit is one
round trip to a server process (store/postgres.py ``write_batch``: ``BEGIN``, one
multi-row upsert per table, ``COMMIT``, pipelined), and the server does its share of the
work on its own CPU; the loop's thread waiting for that answer is time the calls'
results wait too. So on an event loop the commits go to a thread of their own
(:class:`_Committer`), on a connection of their own: the loop hands each batch over and
goes on, the thread waits for the server with the GIL released, and batches that arrive
while a commit is on its way go together in the next one. What a killed run loses is
still its calls in flight and what finished in the last few milliseconds (the batches
handed over and not yet committed: at most ``_Committer.MAX_WAITING``); :meth:`flush`
returns once everything handed over is committed, as it does on SQLite.
(docs/performance.md has what the thread buys, measured.)

Without an event loop (``bind`` not called), every event is committed at once.

Two faults are handled here, at the one boundary between text and SQLite:

- text that is not valid UTF-8 (a lone surrogate in an output, an error, a
  reason): a commit that fails on it is retried once with every string made
  :func:`~oloproof._json.storable` (the surrogate becomes U+FFFD), so a bad row
  never blocks the rows after it; the common case pays nothing;
- a commit that fails for the store itself (disk full, a lock held past the
  busy timeout, an I/O error): the writer stops accepting rows, keeps the
  error in :attr:`StoreWriter.fault` and calls ``on_fault`` once; the run then
  stops calling the system. What was committed before stays committed. A commit
  that fails because SQLite finds the file damaged ("database disk image is
  malformed") also keeps the error in :attr:`StoreWriter.damage`: the run then
  writes nothing more, not even its end (runner/orchestrate.py).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence

from oloproof._json import compact_json as _dump
from oloproof._json import storable
from oloproof.enums import CaseStatus, JudgmentStatus
from oloproof.errors import StoreError
from oloproof.events import (
    CaseExecuted,
    CaseJudged,
    ConcurrencyChanged,
    Event,
    utc_timestamp,
)
from oloproof.store.db import begin_write, claim_run
from oloproof.store.dbapi import ERRORS, RetryableError, is_damaged, is_sqlite
from oloproof.usage import Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.store.dbapi import Connection
    _Rows = list[tuple[Any, ...]]

# Rows that make a commit due whatever the interval: bounds the memory and the
# size of a transaction when a loop turn finishes very many cases.
_FLUSH_ROWS = 2000
MIN_COMMIT_INTERVAL_S = 0.005
SMALL_COMMIT_ROWS = 32
COMMIT_COST_FACTOR = 40.0
MAX_COMMIT_INTERVAL_S = 0.02

# A transaction that PostgreSQL gave up for another's sake is tried again this many times.
_RETRIES = 5


# What the writer inserts: (table, columns per row, key columns, what follows VALUES). The
# key is the first columns of a row; on SQLite each spec is one single-row statement run
# with executemany, on PostgreSQL a multi-row upsert (store/postgres.py ``Upsert``).
_Spec = tuple[str, int, int, str]


def _replace(table: str, key: str, columns: str, width: int) -> _Spec:
    """``INSERT OR REPLACE`` in the SQL both backends speak: an insert that updates the row
    already there under ``key`` with every other column."""
    sets = ", ".join(f"{c} = excluded.{c}" for c in columns.split(", "))
    return table, width, key.count(",") + 1, f" ON CONFLICT({key}) DO UPDATE SET {sets}"


def _single(spec: _Spec) -> str:
    table, width, _key, tail = spec
    return f"INSERT INTO {table} VALUES ({', '.join('?' * width)}){tail}"


# A cache entry already there (a --no-cache run) is updated in place: the same
# row as INSERT OR REPLACE leaves, for a third of the work (no delete, no insert).
_SPECS: tuple[_Spec, ...] = (
    _replace(
        "run_cases", "run_id, case_id",
        "idx, input_json, expected_json, metadata_json, status, output_json, error, attempts,"
        " latency_ms, usage_json, from_cache, exec_key, finished_at", 15,
    ),
    (
        "exec_cache", 6, 1,
        (" ON CONFLICT(key) DO UPDATE SET"
        " output_json = excluded.output_json, latency_ms = excluded.latency_ms,"
        " usage_json = excluded.usage_json, attempts = excluded.attempts,"
        " created_at = excluded.created_at"),
    ),
    _replace(
        "run_judgments", "run_id, case_id, criterion",
        "status, passed, score, reason, from_cache, judge_key, latency_ms, attempts, usage_json",
        12,
    ),
    (
        "judge_cache", 9, 1,
        (" ON CONFLICT(key) DO UPDATE"
        " SET status = excluded.status, passed = excluded.passed, score = excluded.score,"
        " reason = excluded.reason, latency_ms = excluded.latency_ms,"
        " attempts = excluded.attempts, usage_json = excluded.usage_json,"
        " created_at = excluded.created_at"),
    ),
    # Trials 1 .. k - 1 of a run with repeated trials (store/schema.py, version 3).
    _replace(
        "trial_cases", "run_id, case_id, trial",
        "idx, status, output_json, error, attempts, latency_ms, usage_json, from_cache,"
        " exec_key, finished_at", 13,
    ),
    _replace(
        "trial_judgments", "run_id, case_id, trial, criterion",
        "status, passed, score, reason, from_cache, judge_key, latency_ms, attempts, usage_json",
        13,
    ),
    _replace(
        "run_concurrency", "run_id, seq",
        "at, limit_name, previous, limit_value, ceiling, reason", 8,
    ),
)
_SQLITE_INSERTS = tuple(_single(spec) for spec in _SPECS)
# The caches are the rows two runs may both write (the same keys): on PostgreSQL each
# transaction updates them in key order, so that two never wait on each other in a cycle.
_CACHES = (1, 3)
# What opening the committer's own connection may raise (store/postgres.py connect).
_OPEN_ERRORS: tuple[type[Exception], ...] = (StoreError, *ERRORS)
# The specs as PostgreSQL's multi-row upserts, made on a team store's first commit.
_PG_UPSERTS: list[Any] = []
# The statuses handle() compares for every event, as module constants (an enum class's
# attribute costs some 900 instructions on Python 3.11: evidence.py, _STATUS_OK).
_CASE_OK = CaseStatus.OK
_CACHED_STATUSES = (JudgmentStatus.OK, JudgmentStatus.EXCLUDED)


def _pg_upserts() -> list[Any]:
    if not _PG_UPSERTS:
        from oloproof.store.postgres import Upsert

        _PG_UPSERTS.extend(Upsert(*spec) for spec in _SPECS)
    return _PG_UPSERTS


#: PostgreSQL on an event loop: commit on a thread of its own (:class:`_Committer`).
#: bench/team_store.py switches it off (bench/_off) to measure what it buys.
COMMITTER_THREAD = True


def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


def _usage(usage: Usage | None) -> str | None:
    return None if usage is None else _dump(usage.to_json())


def _storable_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(storable(v) if isinstance(v, str) else v for v in row)


def _storable_rows(rows: _Rows) -> _Rows:
    return [_storable_row(r) for r in rows]


def _execute(conn: Connection, sql: str, args: tuple[Any, ...]) -> None:
    """``conn.execute``, retried once with storable text if the text cannot be encoded."""
    try:
        conn.execute(sql, args)
    except UnicodeEncodeError:
        conn.execute(sql, _storable_row(args))


class StoreWriter:
    """Commits a run's events to the store, and writes the run's own row.

    What it guarantees: every ``case_executed`` and ``case_judged`` handed to
    :meth:`handle` is committed within a few milliseconds of the loop turn it
    arrived in (or at once, without a loop); only successes enter the caches;
    no text can block a commit (see the module's notes); the first commit
    that fails for the store itself stops the writer cleanly (:attr:`fault`,
    ``on_fault``) instead of raising into the event loop.
    """

    def __init__(
        self,
        conn: Connection,
        run_id: str,
        *,
        on_fault: Callable[[str], None] | None = None,
    ) -> None:
        self.conn = conn
        self.run_id = run_id
        self.on_fault = on_fault
        # The first store fault, as one line; once set, no more rows are taken.
        self.fault: str | None = None
        #: SQLite's error, when that fault was a damaged store file (dbapi.is_damaged).
        self.damage: Exception | None = None
        #: Whether the system's outputs enter the cache: not those of patched code (a
        #: test's fake, runner/orchestrate.py), which the files' identity does not describe.
        self.cache_outputs = True
        #: And the verdicts of its evaluators: not those of a patched custom evaluator.
        self.cache_verdicts = True
        self._cases: _Rows = []
        self._exec_cache: _Rows = []
        self._judgments: _Rows = []
        self._judge_cache: _Rows = []
        # concurrency_changed events (adaptive concurrency), for run_concurrency.
        self._concurrency: _Rows = []
        self._concurrency_seq = 0
        self._trial_cases: _Rows = []
        self._trial_judgments: _Rows = []
        self._suite: Sequence[Any] | Mapping[int, Any] = ()
        self._schedule: Callable[[Callable[[], None]], object] | None = None
        self._schedule_later: Callable[[float, Callable[[], None]], object] | None = None
        self._scheduled = False
        self._last_commit = 0.0
        self._interval = MIN_COMMIT_INTERVAL_S  # until the next commit (see the docstring)
        self._sqlite = is_sqlite(conn)
        # PostgreSQL on an event loop: the thread that commits (bind()), and the loop.
        self._committer: _Committer | None = None
        self._loop: Any = None
        #: How long the committer thread may go without a commit answered before the run
        #: stops waiting for it (a server that stopped answering): ``None``, no limit.
        self.answer_wait_s: float | None = None

    # -- the run's row -------------------------------------------------
    def create_run(
        self,
        *,
        project: str,
        suite_digest: str,
        dataset: str,
        cases_total: int,
        system_identity: str,
        system: dict[str, Any],
        metrics: list[dict[str, Any]],
        policy: dict[str, Any] | None,
        policy_path: str | None,
        subset: dict[str, Any] | None = None,
        trials: int = 1,
        sequential: dict[str, Any] | None = None,
    ) -> None:
        _execute(
            self.conn,
            "INSERT INTO runs(id, project, created_at, status, completeness, suite_digest,"
            " dataset, cases_total, system_identity, system_json, metrics_json, policy_json,"
            " policy_path, pid) VALUES (?, ?, ?, 'RUNNING', 'PARTIAL', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.run_id,
                project,
                utc_timestamp(),
                suite_digest,
                dataset,
                cases_total,
                system_identity,
                _dump(system),
                _dump(metrics),
                None if policy is None else _dump(policy),
                policy_path,
                os.getpid(),
            ),
        )
        owner = claim_run(self.conn, self.run_id)  # who runs it, beyond the PID
        if owner is not None:
            self.conn.execute("INSERT INTO run_owners VALUES (?, ?)", (self.run_id, owner))
        if subset is not None:
            self.conn.execute(
                "INSERT INTO run_subsets VALUES (?, ?)", (self.run_id, _dump(subset))
            )
        if sequential is not None:
            self.conn.execute(
                "INSERT INTO run_sequential VALUES (?, ?)", (self.run_id, _dump(sequential))
            )
        if trials > 1:  # one trial per case: no row, the run stored as it always was
            self.conn.execute("INSERT INTO run_trials VALUES (?, ?)", (self.run_id, trials))

    def store_labels(self, path: str, digest: str, labels: list[dict[str, Any]]) -> None:
        """The human labels the run is measured against (store/schema.py ``run_labels``)."""
        _execute(
            self.conn,
            "INSERT INTO run_labels(run_id, path, digest, labels_json) VALUES (?, ?, ?, ?)",
            (self.run_id, path, digest, _dump(labels)),
        )

    def store_sources(self, sources: dict[str, Any]) -> None:
        """Where the run's policy and code came from (store/schema.py ``run_sources``)."""
        _execute(
            self.conn, "INSERT INTO run_sources(run_id, sources_json) VALUES (?, ?)",
            (self.run_id, _dump(sources)),
        )

    def set_cases(self, cases: Sequence[Any] | Mapping[int, Any]) -> None:
        """The suite's cases (with ``input``, ``expected``, ``metadata``), by event index: a
        list, or a mapping for a shard (its cases keep their places in the whole suite)."""
        self._suite = cases

    def finish_run(
        self,
        *,
        status: str,
        completeness: str,
        exit_code: int,
        gate: str,
        cache: dict[str, int],
        decisions: list[dict[str, Any]],
        stop_reason: str | None = None,
    ) -> None:
        self.close()  # every row committed first, and the committer thread stopped
        self.flush()
        begin_write(self.conn)
        try:
            self.conn.execute("DELETE FROM decisions WHERE run_id = ?", (self.run_id,))
            self.conn.executemany(
                "INSERT INTO decisions(run_id, idx, rule_id, decision_json) VALUES (?, ?, ?, ?)",
                _storable_rows(
                    [(self.run_id, i, d["rule"], _dump(d)) for i, d in enumerate(decisions)]
                ),
            )
            _execute(
                self.conn,
                "UPDATE runs SET status = ?, completeness = ?, exit_code = ?, gate = ?,"
                " cache_json = ?, finished_at = ?, stop_reason = ? WHERE id = ?",
                (
                    status,
                    completeness,
                    exit_code,
                    gate,
                    _dump(cache),
                    utc_timestamp(),
                    stop_reason,
                    self.run_id,
                ),
            )
            self.conn.execute("COMMIT")
        except BaseException:
            _rollback(self.conn)
            raise

    # -- events ----------------------------------------------------------
    def bind(
        self,
        schedule: Callable[[Callable[[], None]], object],
        schedule_later: Callable[[float, Callable[[], None]], object] | None = None,
    ) -> None:
        """Commit through ``schedule`` (``loop.call_soon``) once per burst of events, and
        through ``schedule_later`` (``loop.call_later``) when the last commit is too recent.
        Without ``schedule_later``, the running loop's ``call_later``."""
        if schedule_later is None:
            import asyncio

            self._loop = asyncio.get_running_loop()
            schedule_later = self._loop.call_later
            if not self._sqlite and self._committer is None and COMMITTER_THREAD:
                try:
                    twin = self.conn.twin()  # type: ignore[attr-defined]
                except _OPEN_ERRORS:
                    twin = None  # the loop's own thread commits, as without a committer
                if twin is not None:
                    self._committer = _Committer(twin, self._write, self._thread_fault,
                                                 self.answer_wait_s)
        self._schedule = schedule
        self._schedule_later = schedule_later

    def handle(self, event: Event) -> None:
        if self.fault is not None:
            return
        if isinstance(event, CaseExecuted):
            output_json = None if event.status != _CASE_OK else _dump(event.output)
            usage_json = _usage(event.usage)
            # The status as a plain str: sqlite3 binds a str subclass (an enum member) only
            # after looking for an adapter, some 3,500 instructions a row.
            status = str(event.status)
            if event.trial:
                self._trial_cases.append(
                    (
                        self.run_id, event.scenario_id, event.trial, event.index,
                        status, output_json, event.error, event.attempts,
                        event.latency_ms, usage_json, int(event.from_cache), event.exec_key,
                        event.timestamp,
                    )
                )
            else:
                case = self._suite[event.index]
                self._cases.append(
                    (
                        self.run_id,
                        event.scenario_id,
                        event.index,
                        _dump(case.input),
                        None if case.expected is None else _dump(case.expected),
                        None if case.metadata is None else _dump(case.metadata),
                        status,
                        output_json,
                        event.error,
                        event.attempts,
                        event.latency_ms,
                        usage_json,
                        int(event.from_cache),
                        event.exec_key,
                        event.timestamp,
                    )
                )
            if event.status == _CASE_OK and not event.from_cache and self.cache_outputs:
                self._exec_cache.append(
                    (
                        event.exec_key,
                        output_json,
                        event.latency_ms,
                        usage_json,
                        event.attempts,
                        event.timestamp,
                    )
                )
        elif isinstance(event, CaseJudged):
            passed = None if event.passed is None else int(event.passed)
            usage_json = _usage(event.usage)
            status = str(event.status)  # a plain str, as above
            row = (
                self.run_id,
                event.scenario_id,
                event.criterion,
                status,
                passed,
                event.score,
                event.reason,
                int(event.from_cache),
                event.judge_key,
                event.latency_ms,
                event.attempts,
                usage_json,
            )
            if event.trial:
                self._trial_judgments.append((*row[:2], event.trial, *row[2:]))
            else:
                self._judgments.append(row)
            if (
                event.status in _CACHED_STATUSES
                and not event.from_cache
                and event.judge_key
                and self.cache_verdicts
            ):
                self._judge_cache.append(
                    (
                        event.judge_key,
                        status,
                        passed,
                        event.score,
                        event.reason,
                        event.latency_ms,
                        event.attempts,
                        usage_json,
                        event.timestamp,
                    )
                )
        elif isinstance(event, ConcurrencyChanged):
            self._concurrency.append(
                (
                    self.run_id, self._concurrency_seq, event.timestamp, event.limit_name,
                    event.previous, event.limit, event.ceiling, event.reason,
                )
            )
            self._concurrency_seq += 1
        else:
            return
        pending = (
            len(self._cases) + len(self._judgments) + len(self._trial_cases)
            + len(self._trial_judgments)
        )
        if self._schedule is None:
            self.flush()
        elif pending >= _FLUSH_ROWS:
            if self._committer is not None:
                self._hand_over()
            else:
                self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._schedule(self._due)

    def _due(self) -> None:
        """End of a loop turn with new rows: commit now, or when the interval ends."""
        wait = self._last_commit + self._interval - time.monotonic()
        commit = self.flush if self._committer is None else self._hand_over
        if wait > 0 and self._schedule_later is not None:
            self._schedule_later(wait, commit)
        else:
            commit()

    def _pending(self) -> bool:
        return bool(
            self._cases or self._judgments or self._trial_cases or self._trial_judgments
            or self._concurrency
        )

    def _take(self) -> tuple[_Rows, ...]:
        """Every row handed to the writer so far, by table (as ``_SPECS``), and none left."""
        rows = (
            self._cases, self._exec_cache, self._judgments, self._judge_cache,
            self._trial_cases, self._trial_judgments, self._concurrency,
        )
        self._cases, self._exec_cache, self._judgments, self._judge_cache = [], [], [], []
        self._concurrency = []
        self._trial_cases, self._trial_judgments = [], []
        return rows

    def flush(self) -> None:
        """Commit every row handed to the writer so far (on PostgreSQL's committer thread,
        if one runs: it returns once they are committed).

        Never raises for the store's own faults: it records the first one in
        :attr:`fault`, drops the rows it could not commit, and calls ``on_fault``.
        """
        self._scheduled = False
        if self._committer is not None:
            self._hand_over()
            self._committed_in_time(self._committer.drain())
            return
        if self.fault is not None or not self._pending():
            return
        rows = self._take()
        started = time.monotonic()
        error = self._write(self.conn, rows)
        if error is not None:
            self._fail(error)
        self._last_commit = time.monotonic()
        self._interval = MIN_COMMIT_INTERVAL_S
        if sum(map(len, rows)) < SMALL_COMMIT_ROWS:
            spent = self._last_commit - started
            self._interval = min(
                MAX_COMMIT_INTERVAL_S, max(MIN_COMMIT_INTERVAL_S, COMMIT_COST_FACTOR * spent)
            )

    def _hand_over(self) -> None:
        """PostgreSQL on a loop: hand the rows to the committer thread, and return."""
        self._scheduled = False
        if self.fault is not None or not self._pending() or self._committer is None:
            return
        self._committed_in_time(self._committer.hand(self._take()))
        self._last_commit = time.monotonic()

    def _committed_in_time(self, answered: bool) -> None:
        """A committer whose server stopped answering is a store fault: the rows it was
        given and has not committed are not stored, and the run stops."""
        if not answered:
            self._fail(
                f"the team store answered none of the run's commits for {self.answer_wait_s:g}"
                " s, past the wait for a lock (limits.store_busy_timeout_s): the cases handed"
                " to it since are not stored"
            )

    def _write(self, conn: Connection, rows: tuple[_Rows, ...]) -> str | None:
        """Commit ``rows`` on ``conn``; the store's fault as one line, or None."""
        if not is_sqlite(conn):
            rows = tuple(sorted(r, key=_first) if i in _CACHES else r for i, r in enumerate(rows))
        try:
            try:
                self._commit_retrying(conn, rows)
            except UnicodeEncodeError:
                # Rare: a lone surrogate somewhere. Clean every row, try once more.
                self._commit_retrying(conn, tuple(_storable_rows(r) for r in rows))
        except ERRORS as exc:
            if is_damaged(exc) and self.damage is None:
                self.damage = exc
            return f"the store could not be written ({exc})"
        return None

    def _commit_retrying(self, conn: Connection, rows: tuple[_Rows, ...]) -> None:
        for attempt in range(_RETRIES):
            try:
                if conn is self.conn:
                    self._commit(rows)
                else:  # the committer thread's own connection
                    _commit(conn, rows)
                return
            except RetryableError:  # PostgreSQL only: another transaction was let through
                if attempt == _RETRIES - 1:
                    raise
                time.sleep(0.005 * (attempt + 1))

    def _commit(self, rows: tuple[_Rows, ...]) -> None:
        _commit(self.conn, rows)

    def close(self) -> None:
        """Commit what is left and stop the committer thread, if one runs (the writer then
        commits on its own connection, as without a loop)."""
        committer, self._committer = self._committer, None
        if committer is not None:
            self._scheduled = False
            if self.fault is None and self._pending():
                self._committed_in_time(committer.hand(self._take()))
            self._committed_in_time(committer.close())

    def _thread_fault(self, reason: str) -> None:
        """The committer thread's store fault: recorded at once (no more rows are taken),
        reported to ``on_fault`` on the loop's thread."""
        if self.fault is not None:
            return
        self.fault = reason
        if self.on_fault is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to stop
                self._loop.call_soon_threadsafe(self.on_fault, reason)

    def _fail(self, reason: str) -> None:
        if self.fault is not None:
            return
        self.fault = reason
        if self.on_fault is not None:
            self.on_fault(reason)


def _commit(conn: Connection, rows: tuple[_Rows, ...]) -> None:
    """One transaction of every row of ``rows`` (by table, as ``_SPECS``)."""
    if not is_sqlite(conn):
        # One round trip for the whole transaction (store/postgres.py write_batch).
        conn.write_batch(  # type: ignore[attr-defined]
            [(upsert, table_rows) for upsert, table_rows in zip(_pg_upserts(), rows, strict=True)
             if table_rows]
        )
        return
    begin_write(conn)
    try:
        for sql, table_rows in zip(_SQLITE_INSERTS, rows, strict=True):
            if table_rows:
                conn.executemany(sql, table_rows)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


class _Committer:
    """PostgreSQL on an event loop: the writer's commits, on a thread and a connection of
    their own, so that the loop never waits for the server (module docstring).

    Batches are committed in the order they were handed over; those that arrive while a
    commit is on its way are merged into the next one. At most ``MAX_WAITING`` batches
    wait: a loop that produces rows faster than the server takes them then waits for it
    (bounded memory, and a killed run loses no more than those)."""

    MAX_WAITING = 8

    def __init__(self, conn: Connection, write: Callable[[Connection, tuple[_Rows, ...]], str | None],
                 on_fault: Callable[[str], None], answer_wait_s: float | None = None) -> None:
        import queue
        import threading

        self.conn = conn
        self._write = write
        self._on_fault = on_fault
        # A server that stops answering (its backend frozen, a proxy that stops forwarding)
        # leaves the thread inside psycopg for ever: the end of the run waited for it with
        # no limit, until a second Ctrl-C. Now for ``answer_wait_s`` without a commit
        # answered at most; the thread (a daemon) is then left where it waits.
        self._answer_wait_s = answer_wait_s
        self._answered = time.monotonic()
        self.stuck = False
        self._empty = queue.Empty
        self._queue: queue.SimpleQueue[tuple[_Rows, ...] | None] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._handed = 0
        self._done = 0
        self._thread = threading.Thread(
            target=self._work, name="oloproof-store-committer", daemon=True
        )
        self._thread.start()

    def hand(self, rows: tuple[_Rows, ...]) -> bool:
        """Hand ``rows`` over; ``False`` (and nothing handed) if the server stopped
        answering while :data:`MAX_WAITING` batches waited."""
        with self._cond:
            if not self._wait_until(lambda: self._handed - self._done < self.MAX_WAITING):
                return False
            self._handed += 1
        self._queue.put(rows)
        return True

    def drain(self) -> bool:
        """Return once every batch handed over is committed (or failed): ``True``; or once
        the server has answered no commit for ``answer_wait_s``: ``False``."""
        with self._cond:
            return self._wait_until(lambda: self._done >= self._handed)

    def _wait_until(self, done: Callable[[], bool]) -> bool:
        while not done() and self._thread.is_alive():
            if self.stuck:
                return False
            if self._answer_wait_s is not None:
                left = self._answered + self._answer_wait_s - time.monotonic()
                if left <= 0:
                    self.stuck = True
                    return False
                self._cond.wait(min(left, 1.0))
            else:
                self._cond.wait(1.0)
        return True

    def close(self) -> bool:
        """Stop the thread once it has committed what it was given: ``False`` if the server
        stopped answering first (the thread and its connection are then left as they are:
        closing a connection inside a statement waits for psycopg's lock)."""
        if not self.drain():
            return False
        self._queue.put(None)
        self._thread.join()
        self.conn.close()
        return True

    def _work(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                return
            batches = [first]
            while True:
                try:
                    more = self._queue.get_nowait()
                except self._empty:
                    break
                if more is None:
                    stop = True
                    break
                batches.append(more)
            rows = first if len(batches) == 1 else tuple(
                [row for batch in batches for row in batch[i]] for i in range(len(first))
            )
            try:
                error = self._write(self.conn, rows)
            except BaseException as exc:  # noqa: BLE001 - reported, never lost with the thread
                error = f"the store could not be written ({type(exc).__name__}: {exc})"
            if error is not None:
                self._on_fault(error)
            with self._cond:
                self._done += len(batches)
                self._answered = time.monotonic()
                self._cond.notify_all()


def _rollback(conn: Connection) -> None:
    # After some errors (SQLITE_FULL) SQLite has already rolled back; a second
    # ROLLBACK would raise and hide the first error.
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except ERRORS:
            pass
