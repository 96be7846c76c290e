"""Running a built run: store it, execute it, decide it (SPEC §3–§6).

The engine emits events; the store writer, the live view and the ``--json``
writer consume them; the decision is computed from what the store holds,
never from what the engine kept in memory.

What :func:`execute` guarantees, whatever user code does:

- a run whose row was stored never stays RUNNING: it ends DECIDED, or
  RUN_ERROR/PARTIAL (exit 5) with the reason stored in ``stop_reason``, even if
  something fails in between (``try``/``finally``);
- a run is DECIDED only if every case of the suite finished, and the system and
  each judge gave at least one result (from a call or the cache); anything else
  (a signal, a store fault, a failure every call would repeat, a source whose
  every call failed, a cancellation that is not ours) is RUN_ERROR/PARTIAL with
  exit 5, never a pass;
- the first commit that fails stops the run: no more calls, what was
  committed stays, and a ``run_finished`` event is still emitted.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence

from oloproof._json import canonical_json
from oloproof._loop import running_loop
from oloproof._records import dataclass, field
from oloproof.analysis.stored import decide_stored, judge_reports, sequential_reading
from oloproof.engine.pipeline import Engine, EngineTotals
from oloproof.enums import Completeness, ExitCode, GateAction, RunStatus
from oloproof.errors import OloproofError
from oloproof.events import Event, RunFinished, RunPhaseChanged
from oloproof.evidence import group_name
from oloproof.ids import new_run_id
from oloproof.policy.decide import (
    Decision,
    MetricSummary,
    decide_run,
    gate,
    gate_notes,
    patched_notes,
)
from oloproof.policy.judges import AnyJudgeReport
from oloproof.project._snapshot import save_stored_policy
from oloproof.runner.build import Prepared, describe_system, expand_trials, policy_json
from oloproof.runner.sources import run_sources
from oloproof.runner.stop import StopRequest, UntilStopped
from oloproof.store.cache import Cache
from oloproof.store.db import (
    StoreUnreadable,
    begin_write,
    connect_quickly,
    in_a_statement,
    local_folder,
    open_store,
    set_busy_timeout,
)
from oloproof.store.dbapi import ERRORS, OPERATIONAL_ERRORS, is_damaged
from oloproof.store.location import PostgresLocation, StoreLocation, locate
from oloproof.store.reader import get_run, load_evidence
from oloproof.store.reserve import Reserve, sweep
from oloproof.store.writer import MIN_COMMIT_INTERVAL_S, StoreWriter
from oloproof.transport.threads import describe_exception

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.project.config import ReleasePolicy
    from oloproof.runner.sequential import SequentialSink
    from oloproof.store.dbapi import Connection

# What a stopped run's summary may meet (store/dbapi.py ERRORS: either backend's).
_PARTIAL_FAULTS: tuple[type[Exception], ...] = (*ERRORS, OloproofError)

# How long the run's last write waits for a lock after a store fault stopped it.
FINAL_BUSY_TIMEOUT_S = 10.0


class StoreUnwritable(OloproofError):
    """The store could not take the run's first row (full, locked, read-only): exit 5."""

    exit_code = int(ExitCode.INCOMPLETE)


@dataclass
class RunResult:
    """How a run ended, as stored: the CLI renders it, the exit code is ``exit_code``.

    ``notice`` is one line when every call of the system or of a judge failed
    (or a share past ``limits.failure_threshold``); ``stop_reason`` says why a
    run ended RUN_ERROR/PARTIAL.
    """

    run_id: str
    status: str
    completeness: str
    exit_code: int
    gate: str
    decisions: list[Decision]
    summaries: list[MetricSummary]
    totals: EngineTotals
    stop_reason: str | None = None
    notice: str | None = None
    judges: list[AnyJudgeReport] = field(default_factory=list)
    #: A sequential run's reading (analysis/stored.py ``sequential_reading``): JSON, sentence.
    sequential: tuple[dict[str, Any], str] | None = None
    #: False when the store file went away during the run: what finished is not kept.
    kept: bool = True


def execute(
    prepared: Prepared,
    *,
    use_cache: bool,
    sinks: list[Callable[[Event], None]],
    stop: StopRequest | None = None,
    run_id: str | None = None,
) -> RunResult:
    """Run the suite, store every result, decide; SIGINT/SIGTERM stop it (SPEC §3).

    Refused (before anything is stored) on a thread whose event loop is running: the run
    needs a loop of its own (``oloproof.run`` moves to a helper thread then)."""
    if running_loop() is not None:
        raise OloproofError(
            "a run cannot start on a thread whose event loop is running (Jupyter, async"
            " code): call oloproof.run(), which then runs it in a helper thread, or await"
            " oloproof.run_async()"
        )
    stop = stop or StopRequest()
    with stop.signals():
        return _execute(prepared, use_cache=use_cache, sinks=sinks, stop=stop, run_id=run_id)


def _execute(
    prepared: Prepared,
    *,
    use_cache: bool,
    sinks: list[Callable[[Event], None]],
    stop: StopRequest,
    run_id: str | None,
) -> RunResult:
    run = _Run(prepared, stop, run_id or new_run_id())
    run.store_start()
    engine = run.make_engine(use_cache, sinks)
    run.make_room()
    stop.before_second(run.record_hard_stop)
    try:
        _drive(prepared, engine, run.writer, stop)
        run.writer.flush()
        done, total = engine.totals.cases_done, len(prepared.cases)
        decided_early = run.sequential is not None and run.sequential.decided
        if stop.reason is None and done < total and not decided_early:
            # Never decide on cases that did not run, whatever ended the engine early.
            stop.internal(f"only {done} of {total} cases finished"
                          " (the run was cancelled from inside)")
        failed = engine.totals.failed_source()
        shard = prepared.subset is not None and prepared.subset.get("shard") is not None
        if stop.reason is None and failed is not None and not shard:
            # SPEC §5: no result of the system (or of a judge) is not evidence; whatever
            # the policy (policy: none, max_missing: 1, warn_on), the run is incomplete.
            # Not a shard's: its slice may hold only the cases the system fails on, and a
            # stopped shard could never be merged; `merge` applies the rule to the shards
            # together (runner/merge.py, _no_result_of). A shard never allows on its own.
            stop.internal(f"incomplete: {failed}")
        notice = engine.totals.failure_notice(prepared.project.config.limits.failure_threshold)
        if stop.reason is None:
            decided = run.decide(notice)
            if decided is not None:
                return decided
        return run.stopped(notice)
    except BaseException as exc:
        if is_damaged(exc):
            # SQLite found the store damaged (a cache page, the evidence being decided):
            # nothing read from it can be trusted, and nothing more is written into it.
            raise run.unreadable(exc) from exc
        run.abandon(exc)
        raise
    finally:
        run.close()


class _Run:
    """One run from its first row to its last: the store connection and writer, the
    engine, the reserve for its end, and each way it can end (decided, stopped, failed, or
    stopped at once by a second signal). Each ending stores the run's end exactly once."""

    def __init__(self, prepared: Prepared, stop: StopRequest, run_id: str) -> None:
        self.prepared, self.stop, self.run_id = prepared, stop, run_id
        self.root = prepared.project.root
        self.location = locate(prepared.project.config_path)
        if isinstance(self.location, PostgresLocation):
            _check_keys(self.location, prepared)
        self.conn = open_store(self.location)
        self.store_file = _file_id(self.location)
        self.store_lost = False
        set_busy_timeout(self.conn, prepared.project.config.limits.store_busy_timeout_s)
        self.writer = StoreWriter(self.conn, run_id, on_fault=stop.internal)
        if isinstance(self.location, PostgresLocation):
            from oloproof.store.pgshared import CONNECT_TIMEOUT_S  # a team store's only

            # A commit waits for a lock up to lock_timeout (store_busy_timeout_s); an answer
            # later than that and as long as connecting may take is a server that stopped.
            self.writer.answer_wait_s = (
                prepared.project.config.limits.store_busy_timeout_s + CONNECT_TIMEOUT_S)
        # A shard's cases keep their places in the whole suite (api/_run.py): by index.
        self.writer.set_cases(prepared.cases if _in_order(prepared.cases)
                              else {c.index: c for c in prepared.cases})
        self.stored_policy = policy_json(prepared.policy)
        self.system_description = describe_system(prepared.project, prepared.system)
        patched = [*(prepared.patched or ()), *(prepared.patched_checks or ())]
        if patched:  # a test's fake ran: nothing it made is cached, read or kept
            self.system_description["patched"] = sorted(set(patched))
            self.writer.cache_outputs = not prepared.patched
            self.writer.cache_verdicts = not prepared.patched_checks
        if prepared.matrix is not None:
            self.system_description["matrix"] = dict(prepared.matrix)
        self.sinks: list[Callable[[Event], None]] = [self.writer.handle]
        self.engine: Engine | None = None
        self.sequential: SequentialSink | None = None
        self.reserve = Reserve(None)
        self.finished = False  # the run's end is being stored (or was)
        self.ended = False  # the run's end is stored
        self.damaged = False  # SQLite found the store damaged: nothing more is written
        self.hard_stopping = False  # a second signal's record of the end is being written

    def store_start(self) -> None:
        """The run's row (and its labels), or :class:`StoreUnwritable` before any call."""
        prepared, config = self.prepared, self.prepared.project.config
        try:
            # One transaction, its lock waited for in slices: the row was stored in one C
            # call, and with another writer holding the lock no Ctrl-C was heard for up to
            # store_busy_timeout_s (an hour at most); a stop meanwhile now ends the wait.
            if not begin_write(self.conn, give_up=lambda: self.stop.reason is not None):
                self.conn.close()
                raise StoreUnwritable(
                    f"{self.stop.reason} while the run's first row waited for the store's"
                    " write lock, held by another process: nothing was stored, nothing"
                    " was called"
                )
            self.writer.create_run(
                project=config.project, suite_digest=prepared.suite_digest,
                dataset=config.dataset, cases_total=len(prepared.cases),
                system_identity=prepared.system.identity, system=self.system_description,
                metrics=prepared.metrics, policy=self.stored_policy,
                policy_path=prepared.policy_path, subset=prepared.subset,
                trials=prepared.trials, sequential=_sequential_json(prepared),
            )
            self.writer.store_sources(run_sources(prepared))
            if prepared.labels is not None:
                self.writer.store_labels(
                    prepared.labels.path, prepared.labels.digest,
                    [label.to_json() for label in prepared.labels.labels],
                )
            self.conn.execute("COMMIT")
        except ERRORS as exc:
            with contextlib.suppress(*ERRORS):
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
            self.conn.close()
            raise StoreUnwritable(
                f"the run could not be stored ({exc}); nothing was called"
            ) from exc
        # What the next run and `gate` would validate again, kept validated (project/_snapshot.py);
        # beside a team store too, in a .oloproof/ that then holds nothing else.
        if isinstance(self.location, PostgresLocation):
            local_folder(self.root)
        if prepared.keep is not None:
            prepared.keep()
        save_stored_policy(self.root, self.stored_policy)

    def emit(self, event: Event) -> None:
        for sink in self.sinks:
            sink(event)

    def make_engine(self, use_cache: bool, sinks: list[Callable[[Event], None]]) -> Engine:
        prepared, concurrency = self.prepared, self.prepared.project.config.concurrency
        self.sinks.extend(sinks)
        until: Callable[[], bool] | None = None
        if prepared.sequential is not None:
            from oloproof.runner.sequential import SequentialSink  # a sequential run only

            # Last: a rule_decided follows the case_judged that decided it in every sink.
            self.sequential = SequentialSink(prepared, self.run_id, self.emit)
            self.sinks.append(self.sequential.handle)
            until = _decided(self.sequential)
        self.engine = Engine(
            run_id=self.run_id,
            suite_digest=prepared.suite_digest,
            system=prepared.system,
            inline=prepared.inline,
            judges=prepared.judges,
            cases=UntilStopped(expand_trials(prepared.cases, prepared.trials), self.stop, until),
            trials=prepared.trials,
            cache=Cache(self.conn, enabled=use_cache and not (
                prepared.patched or prepared.patched_checks)),
            emit=self.emit,
            system_concurrency=concurrency.system,
            judge_concurrency=concurrency.judge,
            evaluator_concurrency=concurrency.evaluator_limit(),
            system_adaptive=concurrency.adaptive.system,
            judge_adaptive=concurrency.adaptive.judge,
            retry=prepared.retry,
            on_fatal=lambda line: self.stop.internal(f"stopped early: {line}"),
            max_consecutive_failures=prepared.project.config.limits.max_consecutive_failures,
        )
        return self.engine

    def make_room(self) -> None:
        """Room for the run's end, whatever fills the disk meanwhile (store/reserve.py); and
        the reserves of runs killed before they could delete theirs. A team store on a
        server has no file beside it to set room aside in."""
        if isinstance(self.location, PostgresLocation):
            return
        store_dir = os.path.dirname(self.location)
        sweep(store_dir, lambda other: _still_running(self.conn, other))
        self.reserve = Reserve.make(store_dir, self.run_id, row_bytes=len(canonical_json(
            [self.system_description, self.prepared.metrics, self.stored_policy]
        )))

    def _cache_json(self) -> dict[str, int]:
        return self.engine.totals.cache_json() if self.engine is not None else {}

    def finish(
        self, status: RunStatus, exit_code: int, gate_label: str,
        decisions: list[dict[str, object]], reason: str | None, notes: Sequence[str] = (),
    ) -> str | None:
        """Store the run's end and emit ``run_finished``; the store's error as one line if
        it could not be stored (then nothing is emitted for a DECIDED end: the caller
        ends the run as RUN_ERROR instead). A commit that found the store damaged raises
        :class:`StoreUnreadable` instead, and nothing is written."""
        if self.writer.damage is not None:
            raise self.unreadable(self.writer.damage)
        self.finished = True
        completeness = (
            _completeness(self.prepared) if status == RunStatus.DECIDED else Completeness.PARTIAL
        )
        if self.writer.fault is not None:
            # The run's end matters more than its pace: wait longer for the lock
            # that stopped it (a full disk fails at once anyway).
            with contextlib.suppress(*ERRORS):
                set_busy_timeout(self.conn, FINAL_BUSY_TIMEOUT_S)
        self.reserve.release()  # its room is for this transaction
        failed = None
        end: dict[str, Any] = {
            "status": status, "completeness": completeness, "exit_code": exit_code,
            "gate": gate_label, "cache": self._cache_json(), "decisions": decisions,
            "stop_reason": reason,
        }
        try:
            self.writer.finish_run(**end)
            self.ended = True
        except ERRORS as exc:
            failed = f"the end of the run could not be stored ({exc})"
            if status == RunStatus.DECIDED:
                return failed  # the caller stops the run and stores that end instead
            self.ended = self._finish_anew(end, exc)
            if self.ended:
                failed = None
        self.emit(RunFinished(self.run_id, status=status, completeness=completeness,
                              exit_code=exit_code, decisions=decisions, gate_notes=list(notes)))
        return failed

    def _finish_anew(self, end: dict[str, Any], exc: Exception) -> bool:
        """A team store whose connection was lost (the server restarted or failed over, a
        proxy or an administrator cut it: the fault that stopped the run, often): the run's
        end on a new connection, so that it says why it stopped rather than read as
        ended without finishing. Whether it was stored."""
        if not isinstance(self.location, PostgresLocation) or not isinstance(
                exc, OPERATIONAL_ERRORS):
            return False
        try:
            own = connect_quickly(self.location, FINAL_BUSY_TIMEOUT_S)
        except _PARTIAL_FAULTS:  # the server still away, a wrong password now...
            return False
        try:
            StoreWriter(own, self.run_id).finish_run(**end)
        except ERRORS:
            return False
        finally:
            own.close()
        return True

    def decide(self, notice: str | None) -> RunResult | None:
        """Decide the stored evidence and store the DECIDED end; ``None`` when that end could
        not be stored (the run is then stopped, and ends as RUN_ERROR)."""
        prepared, engine = self.prepared, self.engine
        assert engine is not None
        if _file_id(self.location) != self.store_file:
            # Removed (`git clean -fdx`, a system under test) or replaced while the run
            # wrote: SQLite went on writing to the file it had open, which nobody can
            # read again. The evidence is gone: never decide it.
            self.store_lost = True
            self.stop.internal(f"the store {self.location} was removed or replaced during"
                               " the run: what the run wrote is not in it")
            return None
        engine.last_provisional()
        self.emit(RunPhaseChanged(self.run_id, phase="ANALYZING"))
        # A subset is decided on its own cases, but never allows the release the
        # full policy guards: it blocks as incomplete unless a rule FAILs.
        # Nor does a run of patched code (a test's fake): its outputs are not the project's.
        subset = prepared.subset is not None or bool(prepared.patched or prepared.patched_checks)
        decisions, by_metric, gate_label, code = decide_and_gate(
            self.conn, self.run_id, prepared.policy, incomplete=subset
        )
        if self.stop.reason is not None:
            # A stop asked for while the evidence was being decided (a Ctrl-C, a SIGTERM):
            # it came before the run was decided, so the run ends as a stopped one does.
            return None
        shard = (prepared.subset or {}).get("shard")
        notes = [*gate_notes(decisions, prepared.policy, self.run_id,
                             shard=tuple(shard) if shard is not None else None),
                 *patched_notes(sorted({*(prepared.patched or ()),
                                        *(prepared.patched_checks or ())}))]
        failed = self.finish(RunStatus.DECIDED, code, gate_label,
                             [d.to_json() for d in decisions], None, notes)
        if failed is not None:
            self.stop.internal(failed)
            return None
        reports = judge_reports(self.conn, self.run_id, float(prepared.policy.confidence_level))
        completeness = _completeness(prepared)
        sequential = (sequential_reading(self.conn, self.run_id, prepared.policy)
                      if prepared.sequential is not None else None)
        return RunResult(self.run_id, RunStatus.DECIDED, completeness, code, gate_label,
                         decisions, list(by_metric.values()), engine.totals,
                         notice=notice, judges=reports, sequential=sequential)

    def stopped(self, notice: str | None) -> RunResult:
        """Store a stopped run's end: RUN_ERROR/PARTIAL, exit 5, with why."""
        assert self.engine is not None
        reason = self.stop.reason or "stopped"
        summaries = _partial_summaries(self.conn, self.run_id, self.prepared)
        failed = self.finish(RunStatus.RUN_ERROR, ExitCode.INCOMPLETE, GateAction.BLOCK, [],
                             reason)
        if failed is not None and failed != reason:
            reason = f"{reason}; {failed}"
        return RunResult(self.run_id, RunStatus.RUN_ERROR, Completeness.PARTIAL,
                         ExitCode.INCOMPLETE, GateAction.BLOCK, [], summaries,
                         self.engine.totals, reason, notice, kept=not self.store_lost)

    def unreadable(self, exc: BaseException) -> StoreUnreadable:
        """The run's end when SQLite finds the store damaged: as for ``runs`` and ``gate``,
        the store cannot be read (exit 5), and nothing more is written into it. Its
        ``RUNNING`` row, stored before the damage was met, reads as ended without
        finishing once this process is gone."""
        self.damaged = True
        return StoreUnreadable(
            f"{self.location}: the store cannot be read ({exc}); the run stopped there and"
            " wrote nothing more into it, and nothing was decided. Restore the store from a"
            " backup, or move it away to start a new one"
        )

    def abandon(self, exc: BaseException) -> None:
        """Never leave a RUNNING row behind, whatever happened (the error is raised again),
        unless the store is damaged: then nothing is written into it."""
        if self.finished or self.damaged:
            return
        self.reserve.release()
        try:
            self.writer.finish_run(
                status=RunStatus.RUN_ERROR, completeness=Completeness.PARTIAL,
                exit_code=ExitCode.INCOMPLETE, gate=GateAction.BLOCK, cache=self._cache_json(),
                decisions=[], stop_reason=f"the run failed: {describe_exception(exc)}",
            )
        except BaseException:  # noqa: BLE001, S110 - the original error matters more
            pass

    def record_hard_stop(self) -> None:
        """A second signal: the CLI exits at once. Record why, on a connection of our own,
        if the store is free within half a second; otherwise the run reads back as ended
        without finishing (store.reader), which is also true. Not ``finished``: a second
        signal in the middle of storing the end (1 run in 14 at 40-110 ms) left the row
        RUNNING. A further signal while this one is recorded exits without waiting for
        it (it waits for the store's lock in slices, between which signals are handled:
        store.db ``begin_write``)."""
        if self.ended or self.hard_stopping:
            return
        self.hard_stopping = True
        self.reserve.release()
        with contextlib.suppress(Exception):
            # The handler runs on the thread that owns ``conn``, between two of its
            # statements: a commit it interrupted holds the write lock our own
            # connection needs. Its rows go, as the calls in flight do. Never inside a
            # statement (a team store's cache read, its decision): psycopg's lock, held
            # by the statement the handler interrupted, made the ROLLBACK wait for ever,
            # and the second Ctrl-C hung the run instead of ending it.
            if self.conn.in_transaction and not in_a_statement(self.conn):
                self.conn.execute("ROLLBACK")
        try:
            own = connect_quickly(self.location, 0.5)
            try:
                StoreWriter(own, self.run_id).finish_run(
                    status=RunStatus.RUN_ERROR, completeness=Completeness.PARTIAL,
                    exit_code=ExitCode.INCOMPLETE, gate=GateAction.BLOCK,
                    cache=self._cache_json(), decisions=[],
                    stop_reason=f"{self.stop.reason}; then stopped at once by a second signal",
                )
            finally:
                own.close()
        except Exception:  # noqa: BLE001, S110 - best effort, from a signal handler
            pass

    def close(self) -> None:
        self.reserve.release()
        self.writer.close()  # a team store's committer thread and its connection
        self.conn.close()
        _close_guards(self.prepared)


def decide_and_gate(
    conn: Connection, run_id: str, policy: ReleasePolicy, *, incomplete: bool
) -> tuple[list[Decision], dict[str, MetricSummary], str, int]:
    """Decide a stored run that finished, and its gate: the one way a run is decided when
    it ends (``run``, and ``merge`` for the run it makes of a suite's shards).
    ``incomplete``: a subset or a shard, decided on its own cases, which never allows."""
    decisions, by_metric = decide_stored(conn, run_id, policy)
    gate_label, code = gate(decisions, incomplete=incomplete)
    return decisions, by_metric, gate_label, int(code)


def _completeness(prepared: Prepared) -> Completeness:
    """A decided run's completeness: SUBSET, SEQUENTIAL (docs/sequential-decisions.md), or
    COMPLETE."""
    if prepared.subset is not None:
        return Completeness.SUBSET
    if prepared.sequential is not None:
        return Completeness.SEQUENTIAL
    return Completeness.COMPLETE


def _decided(sink: SequentialSink) -> Callable[[], bool]:
    return lambda: sink.decided


def _sequential_json(prepared: Prepared) -> dict[str, Any] | None:
    if prepared.sequential is None:
        return None
    from oloproof.runner.sequential import sequential_json  # a sequential run only

    return sequential_json(prepared)


def _file_id(location: StoreLocation) -> tuple[int, int] | None:
    """Which file an SQLite store is (device, inode); ``None`` for none there, or a team
    store (which no local file holds)."""
    if isinstance(location, PostgresLocation):
        return None
    try:
        st = os.stat(location)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _check_keys(location: PostgresLocation, prepared: Prepared) -> None:
    """Refuse a run whose case ids or decisions' rule ids (those of each group of an
    ``each_group`` rule hold the group's value) a team store cannot hold apart, before
    anything is called (store/pgshared.py)."""
    from oloproof.store.pgshared import check_keys  # a team store's only

    # A shard is checked over its whole suite: two ids in two slices are two keys of the
    # run `oloproof merge` makes of the shards, and each shard alone held one of them.
    cases = prepared.cases if prepared.suite is None else prepared.suite
    group_by = {m["criterion"]: m.get("group_by", []) for m in prepared.metrics}
    rule_ids: list[str] = []
    for rule in prepared.policy.rules:
        rule_ids.append(rule.id)
        if getattr(rule, "each_group", False):
            for key in group_by.get(rule.metric, []):
                values = {canonical_json(v): v for v in
                          ((c.metadata or {}).get(key) for c in cases)}
                rule_ids += [rule.id + group_name(rule.metric, key, v)[len(rule.metric):]
                             for v in values.values()]
    refused = "nothing was run" if prepared.suite is None else (
        "nothing was run (a shard is checked over its whole suite: `oloproof merge` makes"
        " one run of the shards, which would hold both)")
    check_keys(location, project=prepared.project.config.project,
               case_ids=(c.id for c in cases),
               criteria=[m["criterion"] for m in prepared.metrics], rule_ids=rule_ids,
               refused=refused)


def _in_order(cases: list[Any]) -> bool:
    """Whether case i is at index i (a whole suite, a subset), not a shard's slice."""
    return all(case.index == i for i, case in enumerate(cases))


def _still_running(conn: Connection, run_id: str) -> bool:
    """Whether ``run_id`` is a stored run whose process still runs it (store/liveness.py)."""
    if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
        return False
    return get_run(conn, run_id).status == RunStatus.RUNNING


def _close_guards(prepared: Prepared) -> None:
    """End the child processes of the run's evaluators (runner/build.py): the regex and
    json_schema guards', and the worker processes of ``concurrency.evaluator_processes``."""
    for evaluator in prepared.inline:
        pool = getattr(evaluator, "process_pool", None)
        if pool is not None:
            pool.close()  # shared by the custom evaluators: closing twice does nothing
    # Imported for a regex or a json_schema evaluator only.
    guard = sys.modules.get("oloproof.transport.regex_guard")
    if guard is None:
        return
    for evaluator in prepared.inline:
        for held in (getattr(evaluator, "pattern", None), getattr(evaluator, "guard", None)):
            if isinstance(held, guard.GuardedPattern):  # GuardedSchema is one too
                held.close()


def _drive(prepared: Prepared, engine: Engine, writer: StoreWriter, stop: StopRequest) -> None:
    """Run the engine until it ends or the run is stopped: without an event loop when
    every result is in the cache, else on a fresh loop."""
    try:
        if engine.all_cached():
            _run_cached(engine, writer)
        else:
            if stop.reason is None:
                engine.start_early()
            _run_on_a_loop(prepared, engine, writer, stop)
    except KeyboardInterrupt:
        stop("interrupted (Ctrl-C)")
    except ERRORS as exc:
        if is_damaged(exc):
            raise  # a damaged page: the run ends at once (_execute), writing nothing more
        # A cache read that failed (an I/O error, a vanished file): a store fault.
        stop.internal(f"the store could not be read ({exc})")
    except Exception:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit... from code that is not ours
        if _is_cancellation(exc):
            if stop.reason is None:
                stop.internal("the run was cancelled from inside (not by a signal)")
        else:
            stop.internal(f"stopped by {describe_exception(exc)} raised during the run")


def _is_cancellation(exc: BaseException) -> bool:
    asyncio = sys.modules.get("asyncio")  # not imported: nothing was cancelled
    return asyncio is not None and isinstance(exc, asyncio.CancelledError)


def _run_cached(engine: Engine, writer: StoreWriter) -> None:
    """Every result from the cache, case after case; committed as on a loop, at most every
    MIN_COMMIT_INTERVAL_S (a stop between two cases keeps every case before it)."""
    writer.bind(lambda _due: None, lambda _wait, _flush: None)  # committed here instead
    last = time.monotonic()

    def after_case() -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= MIN_COMMIT_INTERVAL_S:
            writer.flush()
            last = now

    engine.run_cached(after_case=after_case)


def _run_on_a_loop(
    prepared: Prepared, engine: Engine, writer: StoreWriter, stop: StopRequest
) -> None:
    import asyncio

    async def main() -> None:
        loop = asyncio.get_running_loop()
        writer.bind(loop.call_soon)
        task = asyncio.current_task()
        assert task is not None
        with stop.attached(task):
            limit = prepared.project.config.concurrency.judge
            # concurrency.judge bounds the provider calls of every judge together: an
            # adaptive limiter's slots, or these (a panel calls all its judges at once).
            slots = asyncio.Semaphore(limit) if engine.judge_limiter is None else None
            for judge in prepared.judges:
                judge.bind_limits(limit, prepared.retry, engine.judge_limiter, slots)
                await judge.start()
            try:
                await engine.run()
            finally:
                for judge in prepared.judges:
                    await judge.aclose()

    asyncio.run(main())


def _partial_summaries(
    conn: Connection, run_id: str, prepared: Prepared
) -> list[MetricSummary]:
    """The metrics of what finished, for the report of a stopped run (best effort)."""
    try:
        return list(decide_run(load_evidence(conn, get_run(conn, run_id)), prepared.policy)[1]
                    .values())
    except _PARTIAL_FAULTS:
        return []
