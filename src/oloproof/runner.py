"""One run, start to finish: load, execute, store, decide (SPEC §3–§6).

This is where the parts meet: the project files are loaded and checked
before anything is called; the engine emits events; the store writer, the
live view and the ``--json`` writer consume them; the decision is computed
from what the store holds, never from what the engine kept in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oloproof.engine.pipeline import Engine, EngineCase, EngineTotals
from oloproof.engine.retry import RetryPolicy
from oloproof.errors import ConfigError
from oloproof.events import Event, RunFinished, RunPhaseChanged
from oloproof.ids import new_run_id
from oloproof.policy.decide import Decision, MetricSummary, decide_run, gate
from oloproof.project import Project, load_project
from oloproof.project.loader import default_release_policy, resolve_release_policy
from oloproof.render.tables import preload
from oloproof.store.cache import Cache
from oloproof.store.db import open_store, store_path
from oloproof.store.reader import RunRecord, get_run, load_evidence
from oloproof.store.writer import StoreWriter


@dataclass
class RunResult:
    run_id: str
    status: str
    completeness: str
    exit_code: int
    gate: str
    decisions: list[Decision]
    summaries: list[MetricSummary]
    totals: EngineTotals
    stop_reason: str | None = None


@dataclass
class Prepared:
    """Everything checked and built before the first call."""

    project: Project
    policy: Any
    policy_path: str | None
    system: Any
    inline: list[Any]
    judges: list[Any]
    cases: list[EngineCase]
    suite_digest: str
    metrics: list[dict[str, Any]]
    retry: RetryPolicy


def resolve_policy(project: Project, policy_arg: str | None) -> tuple[Any, str | None]:
    resolved = resolve_release_policy(project, policy_arg)
    return resolved.policy, resolved.path


def build_evaluators(project: Project) -> tuple[list[Any], list[Any]]:
    from oloproof.evaluators.custom import Custom
    from oloproof.evaluators.deterministic import INLINE

    inline: list[Any] = []
    judges: list[Any] = []
    file = project.config_path.name
    for i, ev in enumerate(project.config.evaluators):
        if ev.type in INLINE:
            inline.append(INLINE[ev.type](ev))
        elif ev.type == "custom":
            inline.append(Custom(ev, project.root, file=file, field=f"evaluators[{i}].function"))
        elif ev.type == "rubric_judge":
            from oloproof.evaluators.judge import RubricJudge

            judges.append(RubricJudge(ev, project, field=f"evaluators[{i}]"))
        else:  # pragma: no cover - the config model admits no other type
            raise ConfigError(f"unknown evaluator type {ev.type!r}", file=file)
    return inline, judges


def build_system(project: Project) -> Any:
    cfg = project.config.system
    conc = project.config.concurrency.system
    if cfg.http is not None:
        from oloproof.systems.http import HttpSystem

        return HttpSystem.from_config(cfg, concurrency=conc, file=project.config_path.name)
    from oloproof.systems.callable import CallableSystem

    return CallableSystem(cfg, project.root, concurrency=conc, file=project.config_path.name)


def describe_system(project: Project, system: Any) -> dict[str, Any]:
    """What ``runs`` and ``inspect`` show of a system: kind, name, version, target."""
    cfg = project.config.system
    if cfg.http is not None:
        return {"kind": "http", "name": cfg.name, "version": cfg.http.version,
                "url": cfg.http.url, "method": cfg.http.method}
    return {"kind": "callable", "name": cfg.name, "version": system.version,
            "callable": cfg.callable}


def prepare(config_path: str | Path, policy_arg: str | None) -> Prepared:
    project = load_project(config_path)
    policy, policy_path = resolve_policy(project, policy_arg)
    suite = project.load_suite()
    system = build_system(project)
    inline, judges = build_evaluators(project)
    metrics = [
        {
            "criterion": e.criterion,
            "kind": e.metric_kind,
            "range": list(e.value_range) if e.value_range else None,
            "identity": e.identity,
        }
        for e in [*inline, *judges]
    ]
    # Keep the declared order of criteria.
    order = list(project.config.metrics())
    metrics.sort(key=lambda m: order.index(m["criterion"]))
    cases = [
        EngineCase(c.id, c.input, c.expected, c.metadata, i) for i, c in enumerate(suite.cases)
    ]
    retry = RetryPolicy(max_retry_wait_s=float(project.config.retry.max_retry_wait_s))
    # The final report's modules load while the first calls are in flight.
    preload()
    return Prepared(
        project, policy, policy_path, system, inline, judges, cases, suite.digest, metrics, retry
    )


def policy_json(policy: Any) -> dict[str, Any]:
    return dict(policy.model_dump(mode="json"))


def stored_policy(run: RunRecord) -> Any:
    """The release policy a run was decided under, as stored with it."""
    from oloproof.project.models import ReleasePolicy

    if run.policy is None:
        return default_release_policy()
    return ReleasePolicy.model_validate(run.policy)


def decide_stored(
    conn: sqlite3.Connection, run_id: str, policy: Any
) -> tuple[list[Decision], dict[str, MetricSummary]]:
    """Decide a run from what its store holds (the one path for run and gate)."""
    record = get_run(conn, run_id)
    return decide_run(load_evidence(conn, record), policy)


SIGNALS = (
    (signal.SIGINT, "interrupted (Ctrl-C)"),
    (signal.SIGTERM, "terminated (SIGTERM)"),
)


class StopRequest:
    """Set by a signal or a closed pipe; the run then stops starting calls.

    The first request cancels the run's main task, through the loop so that it
    is safe from a signal handler: calls in flight are cancelled, what finished
    is stored, and the run is recorded as RUN_ERROR/PARTIAL. Every further
    request calls ``on_second`` (the CLI exits at once). The handlers are plain
    ``signal.signal`` handlers, not loop callbacks, so a second Ctrl-C works
    even when a system blocks the event loop.
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        self.count = 0
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_second: Callable[[], None] | None = None
        self._before_second: list[Callable[[], None]] = []

    def attach(self, task: asyncio.Task[Any]) -> None:
        self._task = task
        self._loop = task.get_loop()
        if self.reason is not None:  # asked to stop before the run began
            self._cancel()

    def before_second(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` on a second request, before ``on_second``."""
        self._before_second.append(hook)

    def __call__(self, reason: str) -> None:
        self.count += 1
        if self.reason is None:
            self.reason = reason
        if self.count >= 2:
            for hook in list(self._before_second):
                hook()
            if self.on_second is not None:
                self.on_second()
        self._cancel()

    def _cancel(self) -> None:
        task, loop = self._task, self._loop
        if task is None or task.done():
            return
        if loop is not None and not loop.is_closed():
            try:
                # Wakes the loop even from a signal handler.
                loop.call_soon_threadsafe(task.cancel)
                return
            except RuntimeError:
                pass
        task.cancel()

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        """Route SIGINT and SIGTERM to this request while the block runs (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        reasons = dict(SIGNALS)

        def handler(signum: int, _frame: object) -> None:
            self(reasons[signal.Signals(signum)])

        previous = {sig: signal.signal(sig, handler) for sig in reasons}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, signal.SIG_DFL if old is None else old)


class _UntilStopped(list[EngineCase]):
    """The suite's cases, handed to the engine's workers until a stop is requested.

    Cancelling the run's task is not enough on its own to stop starting calls: on
    Python 3.11, ``asyncio.wait_for`` swallows a cancellation that races with the
    call it waits on finishing, and that worker would go on through the suite.
    """

    def __init__(self, cases: list[EngineCase], stop: StopRequest) -> None:
        super().__init__(cases)
        self._stop = stop

    def __iter__(self) -> Iterator[EngineCase]:
        for case in super().__iter__():
            if self._stop.reason is not None:
                return
            yield case


def execute(
    prepared: Prepared,
    *,
    use_cache: bool,
    sinks: list[Callable[[Event], None]],
    stop: StopRequest | None = None,
    run_id: str | None = None,
) -> RunResult:
    """Run the suite, store every result, decide; SIGINT/SIGTERM stop it (SPEC §3)."""
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
    project = prepared.project
    conn = open_store(store_path(project.root))
    run_id = run_id or new_run_id()
    writer = StoreWriter(conn, run_id)
    writer.set_cases(prepared.cases)
    writer.create_run(
        project=project.config.project,
        suite_digest=prepared.suite_digest,
        dataset=project.config.dataset,
        cases_total=len(prepared.cases),
        system_identity=prepared.system.identity,
        system=describe_system(prepared.project, prepared.system),
        metrics=prepared.metrics,
        policy=policy_json(prepared.policy),
        policy_path=prepared.policy_path,
    )
    all_sinks = [writer.handle, *sinks]

    def emit(event: Event) -> None:
        for sink in all_sinks:
            sink(event)

    engine = Engine(
        run_id=run_id,
        suite_digest=prepared.suite_digest,
        system=prepared.system,
        inline=prepared.inline,
        judges=prepared.judges,
        cases=_UntilStopped(prepared.cases, stop),
        cache=Cache(conn, enabled=use_cache),
        emit=emit,
        system_concurrency=project.config.concurrency.system,
        judge_concurrency=project.config.concurrency.judge,
        retry=prepared.retry,
    )
    for judge in prepared.judges:
        judge.bind_limits(project.config.concurrency.judge, prepared.retry)
    finished = False

    def record_hard_stop() -> None:
        # A second signal: the CLI exits at once. Record why, on a connection of
        # our own, if the store is free within half a second; otherwise the run
        # reads back as ended without finishing (store.reader), which is also true.
        if finished:
            return
        try:
            own = sqlite3.connect(str(store_path(project.root)), timeout=0.5, isolation_level=None)
            try:
                StoreWriter(own, run_id).finish_run(
                    status="RUN_ERROR", completeness="PARTIAL", exit_code=5, gate="BLOCK",
                    cache=engine.totals.cache_json(), decisions=[],
                    stop_reason=f"{stop.reason}; then stopped at once by a second signal",
                )
            finally:
                own.close()
        except Exception:  # noqa: BLE001, S110 - best effort, from a signal handler
            pass

    stop.before_second(record_hard_stop)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        writer.bind(loop.call_soon)
        task = asyncio.current_task()
        assert task is not None
        stop.attach(task)
        for judge in prepared.judges:
            await judge.start()
        try:
            await engine.run()
        finally:
            for judge in prepared.judges:
                await judge.aclose()

    try:
        asyncio.run(main())
    except asyncio.CancelledError:
        pass
    except KeyboardInterrupt:
        stop("interrupted (Ctrl-C)")
    writer.flush()

    if stop.reason is not None:
        decisions: list[Decision] = []
        summaries = list(
            decide_run(load_evidence(conn, get_run(conn, run_id)), prepared.policy)[1].values()
        )
        finished = True
        writer.finish_run(
            status="RUN_ERROR", completeness="PARTIAL", exit_code=5, gate="BLOCK",
            cache=engine.totals.cache_json(), decisions=[], stop_reason=stop.reason,
        )
        emit(RunFinished(run_id, status="RUN_ERROR", completeness="PARTIAL", exit_code=5,
                         decisions=[]))
        conn.close()
        return RunResult(run_id, "RUN_ERROR", "PARTIAL", 5, "BLOCK", decisions, summaries,
                         engine.totals, stop.reason)

    emit(RunPhaseChanged(run_id, phase="ANALYZING"))
    decisions, by_metric = decide_stored(conn, run_id, prepared.policy)
    gate_label, code = gate(decisions)
    decision_json = [d.to_json() for d in decisions]
    finished = True
    writer.finish_run(
        status="DECIDED", completeness="COMPLETE", exit_code=code, gate=gate_label,
        cache=engine.totals.cache_json(), decisions=decision_json,
    )
    emit(RunFinished(run_id, status="DECIDED", completeness="COMPLETE", exit_code=code,
                     decisions=decision_json))
    conn.close()
    return RunResult(run_id, "DECIDED", "COMPLETE", code, gate_label, decisions,
                     list(by_metric.values()), engine.totals)
