"""The run pipeline: execute every case, judge it as soon as it is executed.

Three independent limits: ``concurrency.system`` workers call the system under
test, ``concurrency.judge`` workers call LLM judges (SPEC §3), and
``concurrency.evaluator`` workers run the evaluators that run user code or may
backtrack (those with a ``timeout_s``: custom evaluators, guarded regular
expressions), each call in a worker thread under its ``timeout_s`` (an
``async def`` custom evaluator on a loop of its own). Deterministic evaluators
run inline, right after execution. A system worker hands a case's slow
evaluations and judgments to their queues and goes on to the next case, so an
evaluator's time never holds a system slot and is recorded as the judgment's
latency, never the system's. Caches are consulted before every call; the engine
never writes anything itself: it emits events, and the store writer (a sink)
commits them.

With ``concurrency.adaptive``, ``system`` and ``judge`` are ceilings: the workers
are as many as the ceiling, and each attempt of a call takes a slot of an
:class:`~oloproof.transport.limiter.AdaptiveLimiter` (the system's here, the
judges' in the judge, per provider call), whose limit follows the rate limits;
every move of a limit is a ``concurrency_changed`` event.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence

from oloproof._json import JsonLimitError, canonical_json, check_depth, digest, storable
from oloproof._json import output_json as output_json_of
from oloproof._records import dataclass, field
from oloproof.enums import CaseStatus, JudgmentStatus, MetricKind
from oloproof.evaluators.base import (
    CaseView,
    Outcome,
    enforce_range,
)
from oloproof.events import (
    CaseExecuted,
    CaseJudged,
    ConcurrencyChanged,
    Event,
    ProvisionalMetric,
    ProvisionalMetrics,
    RunPhaseChanged,
    RunStarted,
)
from oloproof.evidence import CriterionEvidence
from oloproof.stats.intervals import wilson
from oloproof.store.cache import Cache, CachedExecution
from oloproof.systems.base import CallResult
from oloproof.transport.retry import (
    AttemptFailure,
    RetryableFailure,
    RetryPolicy,
    call_with_retries,
)
from oloproof.transport.threads import AsyncHost, Workers, WorkersHeld, describe_exception

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any, TypeVar

    from oloproof.evaluators.base import InlineEvaluator, JudgeEvaluator
    from oloproof.systems.base import SystemRunner
    from oloproof.transport.limiter import AdaptiveLimiter, AimdSettings, LimitChange

    _E = TypeVar("_E", InlineEvaluator, JudgeEvaluator)


@dataclass(slots=True)
class EngineCase:
    """A case of the suite as the engine needs it."""

    id: str
    input: Any
    expected: dict[str, Any] | None
    metadata: dict[str, Any] | None
    index: int
    #: Which call of the case this is (0 to trials - 1); a run of one trial has only 0.
    trial: int = 0


@dataclass
class SourceFailures:
    """How the calls of one source (the system, or one judge) went.

    ``streak`` counts the calls in a row that failed for a reason another attempt could
    have fixed: their retries ran out (HTTP 429, 5xx, a refused or dropped connection,
    DNS, TLS; a ``TransientError(retryable=True)``), or they timed out. "In a row" is in
    the order the calls *started*: a failure counts only if its call started after the
    latest-started call that succeeded, and such a success drops from the streak the
    failures of calls started before it. In the order they finished, calls that hang on a
    few inputs all time out together at the end of a run at high concurrency (after the
    other calls, started later, have finished): 104 of 10,000 cases hanging at
    ``system: 200`` stopped the run as an outage with 70 cases never called. A failure of
    the call's own (an exception of your code, an HTTP 400, a body that is not JSON)
    neither counts nor ends the streak. ``streak_first`` is the first error of the streak.

    ``who`` names the source in messages (with its method and URL, or its callable);
    ``cached`` counts its results taken from the cache (successes of earlier calls:
    only successes are cached), which are not calls."""

    name: str
    who: str = ""
    cached: int = 0
    calls: int = 0
    failed: int = 0
    first_error: str | None = None
    streak: int = 0
    streak_first: str | None = None
    # When the latest-started successful call began (time.monotonic()), and the failures
    # of the streak with when each began, in the order they finished.
    ok_started: float = -math.inf
    row: list[tuple[float, str]] = field(default_factory=list)

    def add(self, error: str | None, outage: bool = True, started: float | None = None) -> None:
        """A call that ended (``error`` None: it succeeded); ``started``: when it began
        (``time.monotonic()``; now when not given)."""
        began = time.monotonic() if started is None else started
        self.calls += 1
        if error is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = error
            if outage and began > self.ok_started:
                self.row.append((began, error))
        elif began > self.ok_started:
            self.ok_started = began
            if self.row:
                self.row = [failure for failure in self.row if failure[0] > began]
        self.streak = len(self.row)
        self.streak_first = self.row[0][1] if self.row else None


def _key_identity(evaluator: Any) -> str:
    """What an evaluator's verdicts are cached under: its ``cache_identity`` when it has
    one, else its identity. A built-in evaluator whose verdicts changed meaning on some
    cases keeps its identity (what ``compare`` and ``merge`` match runs on) and gets a
    new ``cache_identity``, so that verdicts cached before the change are judged again."""
    return getattr(evaluator, "cache_identity", None) or str(evaluator.identity)


def _error_of(outcome: Outcome) -> str | None:
    """The error of an evaluator's outcome for its source's tally (None: it answered)."""
    if outcome.status == JudgmentStatus.ERROR:
        return outcome.reason or "(no reason given)"
    return None


@dataclass
class EngineTotals:
    """Counts of one run: cases, cache hits and misses, failures by source."""

    cases_done: int = 0
    cases_cached: int = 0
    cases_errored: int = 0
    exec_hits: int = 0
    exec_misses: int = 0
    judge_hits: int = 0
    judge_misses: int = 0
    failures: dict[str, SourceFailures] = field(default_factory=dict)

    def source(self, name: str, who: str = "") -> SourceFailures:
        tally = self.failures.get(name)
        if tally is None:
            tally = self.failures[name] = SourceFailures(name, who or name)
        return tally

    def failed_source(self) -> str | None:
        """One line naming each source (the system, a judge) that was called and whose
        every call failed, with no result of it from the cache either: the run holds no
        evidence of that source, so it is incomplete (SPEC §5), whatever the policy."""
        lines = []
        for tally in self.failures.values():
            if tally.calls and tally.failed == tally.calls and not tally.cached:
                share = "its only call" if tally.calls == 1 else f"all {tally.calls} calls"
                first = (tally.first_error or "").strip().splitlines()[:1]
                lines.append(
                    f"{tally.who} failed on every call ({share}), so the run holds no"
                    f" result of it; first error: {_one_line(first[0] if first else '(none given)', 400)}"
                )
        return "; ".join(lines) or None

    def failure_notice(self, threshold: float | None) -> str | None:
        """One line when every call of a source failed, or a share past ``threshold``."""
        lines = []
        for tally in self.failures.values():
            if not tally.calls or not tally.failed:
                continue
            crossed = threshold is not None and tally.failed / tally.calls >= threshold
            if tally.failed == tally.calls or crossed:
                if tally.calls == 1:
                    share = "the only call"
                elif tally.failed == tally.calls:
                    share = f"all {tally.calls} calls"
                else:
                    share = f"{tally.failed} of {tally.calls} calls"
                first = (tally.first_error or "").strip().splitlines()[:1]
                lines.append(
                    f"{share} of the {tally.name} failed; first error:"
                    f" {_one_line(first[0] if first else '(none given)')}"
                )
        return "; ".join(lines) or None

    def cache_json(self) -> dict[str, int]:
        return {
            "execution_hits": self.exec_hits,
            "execution_misses": self.exec_misses,
            "judgment_hits": self.judge_hits,
            "judgment_misses": self.judge_misses,
        }


@dataclass(slots=True)
class _CaseState:
    case: EngineCase
    view: CaseView
    output: Any
    output_json: str
    pending: int
    outcomes: list[tuple[str, str, bool | None]] = field(default_factory=list)


def _own_copies(view: CaseView, output: Any) -> tuple[CaseView, Any]:
    """Deep copies of the case an evaluator sees and of the output (plain JSON values)."""
    import copy

    input_, expected, metadata, output = copy.deepcopy(
        (view.input, view.expected, view.metadata, output))
    return CaseView(view.id, input_, expected, metadata), output


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(storable(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


# A cached case's status, read once per case (an enum class's attribute costs some 900
# instructions on Python 3.11: evidence.py, _STATUS_OK).
_CASE_OK = CaseStatus.OK
# Slow evaluations queued before the system workers wait, and queued when they go on.
_EVAL_HIGH = 256
_EVAL_LOW = 128
# The longest a slow evaluator's result waits in its worker pool for the loop, when
# calls are queued ahead (transport.threads.Workers, batch_s).
_EVAL_BATCH_S = 0.02


# What a worker process may take to start, beyond a call's own timeout_s
# (transport/processes.py START_TIMEOUT_S, with a margin).
_START_S = 65.0


def provisional_schedule(total: int) -> Callable[[int], bool]:
    """SPEC §6: after the first case, every ceil(total/10) cases, and after the last."""
    step = max(1, math.ceil(total / 10))

    def due(done: int) -> bool:
        return done == 1 or done == total or (done - 1) % step == 0

    return due


class Engine:
    """Runs every case of a suite through the system and its evaluators, as events.

    What it guarantees: each case is executed at most once per run (from the
    cache when its execution key is there) and ends as exactly one
    ``case_executed`` and one ``case_judged`` per criterion; nothing a system,
    an evaluator or a judge raises or returns ends the run: it is that case's
    error (missing), including ``BaseException``s and a ``CancelledError`` that
    is not the run's own stop; evaluators with a ``timeout_s`` run in worker
    threads under it. The engine stores nothing itself; it calls ``on_fatal``
    with one line when a failure every later call would repeat (an HTTP 401,
    403 or 404) means the run should stop.
    """

    def __init__(
        self,
        *,
        run_id: str,
        suite_digest: str,
        system: SystemRunner,
        inline: Sequence[InlineEvaluator],
        judges: Sequence[JudgeEvaluator],
        cases: Sequence[EngineCase],
        cache: Cache,
        emit: Callable[[Event], None],
        system_concurrency: int,
        judge_concurrency: int,
        retry: RetryPolicy,
        replicate: int = 0,
        on_fatal: Callable[[str], None] | None = None,
        evaluator_concurrency: int = 4,
        system_adaptive: bool = False,
        judge_adaptive: bool = False,
        aimd: AimdSettings | None = None,
        trials: int = 1,
        max_consecutive_failures: int | None = None,
    ) -> None:
        self.run_id = run_id
        self.suite_digest = suite_digest
        self.system = system
        # A system that can tell a stored output is not one (HttpSystem.refuses_cached).
        self._refuses_cached: Callable[[object], bool] | None = getattr(
            system, "refuses_cached", None)
        self.inline = list(inline)
        # Evaluators with a timeout_s run user code or may backtrack: off the loop,
        # under concurrency.evaluator. The others are pure and quick: inline.
        self._fast = [e for e in self.inline if getattr(e, "timeout_s", None) is None]
        self._slow = [e for e in self.inline if getattr(e, "timeout_s", None) is not None]
        self.evaluator_concurrency = max(1, evaluator_concurrency)
        self._async_host: AsyncHost | None = None
        self.judges = list(judges)
        self.cases = cases
        self.cache = cache
        self.emit = emit
        self.system_concurrency = system_concurrency
        self.judge_concurrency = judge_concurrency
        self.retry = retry
        self.replicate = replicate
        # With trials > 1, ``cases`` holds every case ``trials`` times (runner/build.py
        # expand_trials); cases_done counts a case once all its trials finished.
        self.trials = max(1, trials)
        self._case_total = len(cases) // self.trials
        self._trials_left: dict[int, int] = {}
        self._first_trial: dict[int, list[tuple[str, str, bool | None]]] = {}
        self.on_fatal = on_fatal
        # An outage: this many calls in a row of the system (or of one judge) failed, each
        # after its retries; the run stops through on_fatal (limits.max_consecutive_failures).
        self.max_consecutive_failures = max_consecutive_failures
        self._outage: str | None = None
        # Adaptive limits (None: the ceiling is the limit, as without adaptive). The
        # limiter's module is imported only for the option (docs/design-notes.md).
        if system_adaptive or (judge_adaptive and judges):
            from oloproof.transport.limiter import AdaptiveLimiter
        self.system_limiter: AdaptiveLimiter | None = (
            AdaptiveLimiter("system", system_concurrency, settings=aimd,
                            on_change=self._limit_changed)
            if system_adaptive else None
        )
        self.judge_limiter: AdaptiveLimiter | None = (
            AdaptiveLimiter("judge", judge_concurrency, settings=aimd,
                            on_change=self._limit_changed)
            if judge_adaptive and judges else None
        )
        self.totals = EngineTotals()
        # How the calls of each source went: the system's, then each judge's, in order.
        self._system_tally = self.totals.source("system", self._system_who)
        self._judge_tallies = [self._judge_source(judge) for judge in self.judges]
        # And each inline evaluator's (a check that failed on every case holds no evidence
        # either, as a judge that did: SPEC §5).
        self._eval_tallies = {
            e.criterion: self.totals.source(f"evaluator {e.criterion}") for e in self.inline
        }
        self._slow_tallies = [self._eval_tallies[e.criterion] for e in self._slow]
        self._binary = [
            e.criterion for e in [*self.inline, *self.judges]
            if e.metric_kind == MetricKind.BINARY
        ]
        self._evaluator_workers: Workers | None = None
        self._process_workers: Workers | None = None
        self._criteria = [e.criterion for e in [*self.inline, *self.judges]]
        # The evaluators that see the case's metadata (custom ones): keyed on it (judge_key).
        self._reads_metadata = frozenset(
            _key_identity(e) for e in [*self.inline, *self.judges]
            if getattr(e, "reads_metadata", False)
        )
        self._tallies = {c: CriterionEvidence(c, MetricKind.BINARY) for c in self._binary}
        self._due = provisional_schedule(self._case_total)
        self._provisional_at = 0  # cases_done of the last provisional_metrics emitted
        # all_cached's keys, by case (and evaluator), until run_cached ends; None otherwise.
        self._keys: dict[tuple[Any, ...], str] | None = None
        # Made by run(): a run whose every result is cached needs no event loop
        # (run_cached), and asyncio is imported only by a run that calls something.
        self._judge_queue: asyncio.Queue[tuple[_CaseState, JudgeEvaluator, str] | None]
        self._eval_queue: asyncio.Queue[tuple[_CaseState, InlineEvaluator, str] | None]
        self._eval_room: asyncio.Event

    # -- keys ------------------------------------------------------------
    def exec_key(self, case: EngineCase) -> str:
        # Trial t is replicate t: trial 0 keeps the key every earlier run stored.
        return digest(
            {
                "system": self.system.identity,
                "case": case.id,
                "input": case.input,
                "replicate": self.replicate + case.trial,
            }
        )

    @staticmethod
    def judge_key(
        identity: str, case: EngineCase, output_json: str, *, metadata: bool = False
    ) -> str:
        key: dict[str, Any] = {
            "evaluator": identity,
            "case": case.id,
            "input": case.input,
            "expected": case.expected,
            "output": output_json,
        }
        if metadata and case.metadata is not None:
            # An evaluator that can read the case's metadata (a custom one) is keyed on it
            # too; the others never read it, and keep the keys they always had.
            key["metadata"] = case.metadata
        if case.trial:
            # Each trial is judged afresh, even of an output another trial gave: a judge's
            # own variation is part of what the trials measure (docs/repeated-trials.md).
            key["trial"] = case.trial
        return digest(key)

    def _trial(self, case: EngineCase) -> int | None:
        """The trial index events carry: None in a run of one trial (its events unchanged)."""
        return case.trial if self.trials > 1 else None

    # -- the run -----------------------------------------------------------
    def _started(self) -> None:
        self.emit(RunStarted(self.run_id, suite_digest=self.suite_digest, cases=self._case_total))
        self.emit(RunPhaseChanged(self.run_id, phase="EXECUTING"))
        for limiter in (self.system_limiter, self.judge_limiter):
            if limiter is not None:
                limiter.announce()

    def all_cached(self) -> bool:
        """Whether every execution and every judgment of the run is in the cache.

        Each key is looked up once: the hits stay in memory for :meth:`run_cached`
        (forgotten again when something is missing)."""
        cache = self.cache
        if not cache.enabled:
            return False
        cache.remember(True)
        keys: dict[tuple[Any, ...], str] = {}
        self._keys = keys  # the keys computed here, for run_cached
        evaluators = [*self.inline, *self.judges]
        cases = self.cases
        # In bulk (store/cache.py); on SQLite only once the first case is found, so that a
        # run with nothing cached does not look every key up before its first call.
        if cases and not cache.bulk and self._cached_execution(self._exec_key(cases[0])) is None:
            self._forget()
            return False
        self._preload(evaluators)
        for case in cases:
            key = self._exec_key(case)
            output_json = keys.get(("output", key))  # the output's JSON, made by _preload
            if output_json is None:
                hit = self._cached_execution(key)
                if hit is None:
                    self._forget()
                    return False
                output_json = keys[("output", key)] = canonical_json(hit.output)
            for evaluator in evaluators:
                if cache.judgment(self._judge_key(_key_identity(evaluator), case, output_json)) is None:
                    self._forget()
                    return False
        return True

    def _preload(self, evaluators: list[Any]) -> None:
        """Look up in bulk every execution key of the run, then the judgment keys of the
        outputs found (a cache whose look-ups are round trips to a server: store/cache.py).
        Fresh outputs' judgments are looked up as the cases finish (:meth:`_run_case`)."""
        cache = self.cache
        cases = list(self.cases)
        cache.preload(executions=[self._exec_key(case) for case in cases])
        judgments: list[str] = []
        for case in cases:
            key = self._exec_key(case)
            hit = self._cached_execution(key)
            if hit is None:
                continue
            output_json = self._keys[("output", key)] = canonical_json(hit.output)  # type: ignore[index]
            judgments += [self._judge_key(_key_identity(e), case, output_json) for e in evaluators]
        cache.preload(judgments=judgments)

    def _cached_execution(self, key: str) -> CachedExecution | None:
        """The cache's execution under ``key``, unless the system says its output is not
        one (an HTTP system's ``{"error": ...}`` stored before it was read as an error)."""
        hit = self.cache.execution(key)
        if hit is not None and self._refuses_cached is not None and self._refuses_cached(
            hit.output
        ):
            return None
        return hit

    def _forget(self) -> None:
        self.cache.remember(False)
        self._keys = None

    # The keys are kept while all_cached's keys are (until run_cached ends): each is a
    # digest, and a case's are asked for several times (the check, the preload, the run).

    def _exec_key(self, case: EngineCase) -> str:
        keys = self._keys
        if keys is None:
            return self.exec_key(case)
        slot = (case.index, case.trial)
        found = keys.get(slot)
        if found is None:
            found = keys[slot] = self.exec_key(case)
        return found

    def _judge_key(self, identity: str, case: EngineCase, output_json: str) -> str:
        keys = self._keys
        metadata = identity in self._reads_metadata
        if keys is None:
            return self.judge_key(identity, case, output_json, metadata=metadata)
        slot = (identity, case.index, case.trial)
        found = keys.get(slot)
        if found is None:
            found = keys[slot] = self.judge_key(identity, case, output_json, metadata=metadata)
        return found

    def start_early(self) -> None:
        """Start the system's first calls before the event loop exists: a run that calls
        a sync function has its first ``concurrency.system`` calls under way while it
        imports asyncio and starts the loop (tens of milliseconds: docs/performance.md).
        Only the first attempts of cases the cache does not hold; :meth:`run` then
        meets each call as if it had made it (``CallableSystem.start_early``). Not with
        an adaptive limit, which decides how many calls may start."""
        start = getattr(self.system, "start_early", None)
        if start is None or self.system_limiter is not None:
            return
        first = self.cases[: self.system_concurrency]
        if self.cache.enabled:
            first = [c for c in first if self._cached_execution(self._exec_key(c)) is None]
        start([(case.id, case.input) for case in first])

    def run_cached(self, after_case: Callable[[], None] | None = None) -> EngineTotals:
        """The run when :meth:`all_cached` said every result is in the cache: the same
        events as :meth:`run`, in case order, without an event loop, a call or a thread;
        ``after_case`` is called after each case.

        Every case's coroutine then ends without suspending (it awaits only a call, an
        evaluation or a queue, and none is needed), so each is driven to its end here."""
        self._started()
        try:
            for case in self.cases:
                step = self._run_case(case)
                try:
                    step.send(None)
                except StopIteration:
                    if after_case is not None:
                        after_case()
                    continue
                step.close()
                raise RuntimeError(f"case {case.id!r} was not in the cache after all")
        finally:
            self._forget()
        return self.totals

    async def run(self) -> EngineTotals:
        import asyncio

        self._judge_queue = asyncio.Queue(maxsize=max(8, 4 * self.judge_concurrency))
        # Unbounded: the system workers wait for room themselves (_queue_evaluation).
        self._eval_queue = asyncio.Queue()
        self._eval_room = asyncio.Event()
        self._started()
        await self.system.start()
        # With only sync slow evaluators, three calls wait for each thread beyond the one
        # it runs: a thread that finishes a call starts the next at once (Workers keeps
        # the limit) instead of idling while the loop records the result and hands it the
        # next, and the results reach the loop in batches (Workers' batch_s). An async
        # evaluator's calls are not Workers', so a mix keeps one task per call allowed:
        # the limit covers both kinds together.
        ahead = 4
        evaluator_calls = 0
        if self._slow:
            if any(getattr(e, "is_async", False) for e in self._slow):
                if not all(getattr(e, "on_run_loop", False)
                           for e in self._slow if getattr(e, "is_async", False)):
                    self._async_host = AsyncHost(name="oloproof-async-evaluator")
                ahead = 1
            # At most concurrency.evaluator calls at once; a thread whose call timed out
            # is replaced (Workers' spare threads), so it cannot starve the calls after it.
            self._evaluator_workers = Workers(
                asyncio.get_running_loop(), self.evaluator_concurrency, 30.0,
                batch_s=_EVAL_BATCH_S if ahead > 1 else None, name="oloproof-evaluator",
            )
            evaluator_calls = self.evaluator_concurrency
            pools = {id(p): p for e in self._slow
                     if (p := getattr(e, "process_pool", None)) is not None}
            if pools:
                for pool in pools.values():
                    pool.warm()  # started while the system's first calls are in flight
                # Custom evaluators in worker processes (concurrency.evaluator_processes):
                # a thread per process waits on its pipe, at most the pool's size at once.
                # The pool times each call out itself once its process is up (a process
                # that starts is not the call's time): this pool's limit is a backstop.
                size = sum(p.size for p in pools.values())
                self._process_workers = Workers(
                    asyncio.get_running_loop(), size, 30.0,
                    batch_s=_EVAL_BATCH_S if ahead > 1 else None,
                    name="oloproof-evaluator-process",
                )
                evaluator_calls += size
        try:
            queue = iter(self.cases)
            judge_workers = [
                asyncio.create_task(self._judge_worker()) for _ in range(self.judge_concurrency)
            ] if self.judges else []
            eval_workers = [
                asyncio.create_task(self._evaluator_worker())
                for _ in range(ahead * evaluator_calls)
            ] if self._slow else []
            # A sync function's calls are handed to its worker threads one ahead of each
            # thread: a thread that finishes a call starts the next at once, instead of
            # waiting for the loop to record the result and hand it the next (about 2 ms
            # for each wave of calls; the threads still run concurrency.system calls at
            # most). Not under an adaptive limit, which decides when a call may start, nor
            # in a sequential run, which hands out no case once its rules are decided.
            calls_ahead = 2 if (
                getattr(self.system, "queues_calls", False) and self.system_limiter is None
                and not getattr(self.cases, "stops_when_decided", False)
            ) else 1
            system_workers = [
                asyncio.create_task(self._system_worker(queue))
                for _ in range(min(calls_ahead * self.system_concurrency, max(1, len(self.cases))))
            ]
            try:
                # Not gather: a stop that cancels this task must not cancel the system's
                # workers before the calls that finished meanwhile are recorded (below).
                done, _ = await asyncio.wait(system_workers, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    task.result()  # a worker's own failure, raised here as gather would
                for _ in eval_workers:
                    await self._eval_queue.put(None)
                for _ in judge_workers:
                    await self._judge_queue.put(None)
                await asyncio.gather(*eval_workers, *judge_workers)
            finally:
                # A stop: start no queued call or check, and record those that finished
                # before the tasks are cancelled, whether their results are still in the
                # threads' hands or already handed over to a task not yet resumed: a sync
                # system's thread may have finished a call and taken the next (calls_ahead),
                # and a run loses only the calls in flight.
                hold = getattr(self.system, "hold", None)
                if hold is not None:
                    hold()
                for evaluators in (self._evaluator_workers, self._process_workers):
                    if evaluators is not None:
                        evaluators.hold()
                        evaluators.flush()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(0)
                workers = (*system_workers, *eval_workers, *judge_workers)
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
        finally:
            for evaluators in (self._evaluator_workers, self._process_workers):
                if evaluators is not None:
                    evaluators.close()
            if self._async_host is not None:
                self._async_host.close()
            await self.system.aclose()
        return self.totals

    @property
    def _system_who(self) -> str:
        name = getattr(self.system, "name", None)
        target = getattr(self.system, "target", None)
        who = f"system {name}" if name else "the system"
        return f"{who} ({target})" if target else who

    def _judge_source(self, judge: JudgeEvaluator) -> SourceFailures:
        """The judge's tally, named by what its calls reach (its URL is known once it has
        started: named again at each call)."""
        source = f"judge {judge.criterion}"
        target = getattr(judge, "target", None)
        tally = self.totals.source(source)
        tally.who = f"{source} ({target})" if target else source
        return tally

    def _watch(self, tally: SourceFailures) -> None:
        """Stop the run (``on_fatal``) once ``max_consecutive_failures`` calls in a row of
        the source failed: every later call would most likely fail too (connection refused,
        DNS, TLS, 5xx, timeouts), and a run of failures is an outage, not evidence."""
        limit = self.max_consecutive_failures
        if limit is None or tally.streak < limit or self._outage is not None:
            return
        lines = (tally.streak_first or "").strip().splitlines()  # not a traceback's tail
        first = _one_line(lines[0] if lines else "(no error given)", 400)
        self._outage = (
            f"{tally.who} failed {tally.streak} calls in a row, each after its retries or by"
            f" timing out (limits.max_consecutive_failures: {limit}); first error: {first}"
        )
        if self.on_fatal is not None:
            self.on_fatal(self._outage)

    def _limit_changed(self, name: str, change: LimitChange, ceiling: int) -> None:
        self.emit(
            ConcurrencyChanged(
                self.run_id, limit_name=name, previous=change.previous, limit=change.limit,
                ceiling=ceiling, reason=change.reason,
            )
        )

    async def _system_worker(self, queue: Iterator[EngineCase]) -> None:
        for case in queue:
            await self._run_case(case)

    async def _run_case(self, case: EngineCase) -> None:
        key = self._exec_key(case)
        cached = self._cached_execution(key)
        totals = self.totals
        if cached is not None:
            totals.exec_hits += 1
            totals.cases_cached += 1
            self._system_tally.cached += 1
            event = CaseExecuted(
                self.run_id, scenario_id=case.id, status=_CASE_OK, from_cache=True,
                latency_ms=cached.latency_ms, attempts=cached.attempts, error=None,
                index=case.index, exec_key=key, output=cached.output, usage=cached.usage,
                trial=self._trial(case),
            )
            known = None if self._keys is None else self._keys.get(("output", key))
            output_json: str | None = known or canonical_json(cached.output)
        else:
            totals.exec_misses += 1
            started = time.monotonic()
            event, output_json, outage = await self._execute(case, key)
            tally = self._system_tally
            tally.add(event.error if output_json is None else None, outage, started)
            self._watch(tally)
        self.emit(event)
        if output_json is None:
            totals.cases_errored += 1
            for criterion in self._criteria:
                self.emit(
                    CaseJudged(
                        self.run_id, scenario_id=case.id, criterion=criterion,
                        status="MISSING",
                        passed=None, score=None, from_cache=False,
                        reason=f"no output: the system call ended in {event.status}",
                        trial=self._trial(case),
                    )
                )
            self._finish_case(case, [(c, "MISSING", None) for c in self._criteria])
            return
        output = event.output
        if self.cache.bulk and cached is None:
            # A fresh output: its judgments looked up with the other cases' of this turn.
            await self.cache.load_judgments(
                self._judge_key(_key_identity(e), case, output_json)
                for e in (*self._fast, *self._slow, *self.judges)
            )
        view = CaseView(case.id, case.input, case.expected, case.metadata)
        state = _CaseState(case, view, output, output_json, 0)
        for evaluator in self._fast:
            jkey = self._judge_key(_key_identity(evaluator), case, output_json)
            outcome = self._cached_judgment(jkey)
            if outcome is None:
                outcome = await self._evaluate_inline(evaluator, view, output)
                self._eval_tallies[evaluator.criterion].add(_error_of(outcome), False)
            else:
                self._eval_tallies[evaluator.criterion].cached += 1
            outcome = enforce_range(outcome, evaluator.value_range)
            self._judged(state, evaluator.criterion, outcome, jkey, outcome.from_cache)
        slow = self._uncached(self._slow, state, output_json, self._slow_tallies)
        judging = self._uncached(self.judges, state, output_json, self._judge_tallies)
        state.pending += len(slow) + len(judging)
        if state.pending == 0:
            self._finish_case(case, state.outcomes)
            return
        for evaluator, jkey in slow:
            await self._queue_evaluation((state, evaluator, jkey))
        for judge, jkey in judging:
            await self._judge_queue.put((state, judge, jkey))

    def _uncached(
        self, evaluators: Sequence[_E], state: _CaseState, output_json: str,
        tallies: Sequence[SourceFailures] = (),
    ) -> list[tuple[_E, str]]:
        """Those of ``evaluators`` (slow inline ones, or judges) whose outcome for the case
        is not in the cache, with their keys, to be queued; a cache hit costs nothing and
        is judged here (and counted in the evaluator's ``tallies``, the judges')."""
        missing: list[tuple[_E, str]] = []
        for i, evaluator in enumerate(evaluators):
            jkey = self._judge_key(_key_identity(evaluator), state.case, output_json)
            cached_outcome = self._cached_judgment(jkey)
            if cached_outcome is None:
                missing.append((evaluator, jkey))
            else:
                if tallies:
                    tallies[i].cached += 1
                outcome = enforce_range(cached_outcome, evaluator.value_range)
                self._judged(state, evaluator.criterion, outcome, jkey, True)
        return missing

    async def _execute(
        self, case: EngineCase, key: str
    ) -> tuple[CaseExecuted, str | None, bool]:
        """Call the system under the retry policy: the event, the output's canonical JSON
        (``None`` when the call failed), and whether it failed as an outage would (its
        retries ran out, or it timed out: :class:`SourceFailures`)."""
        import asyncio

        last_latency: list[float] = [0.0]
        system = self.system
        limiter = self.system_limiter

        async def call(n: int) -> CallResult:
            started = time.perf_counter()
            # The system's own measure when it has one: from when the call really began
            # (a call that waited in a queue, or began before the loop: CallResult).
            reported: float | None = None
            try:
                result = await system.call(case.id, case.input, n)
                reported = result.latency_ms
                return result
            except AttemptFailure as failure:
                reported = failure.latency_ms
                raise
            finally:
                last_latency[0] = (
                    (time.perf_counter() - started) * 1000.0 if reported is None else reported
                )

        async def attempt(n: int) -> CallResult:
            if limiter is None:
                return await call(n)
            # A slot per attempt: the wait for a slot is not the call's latency, and a
            # call waiting out its retry delay holds no slot.
            return await limiter.run(lambda: call(n), retry=n > 1)

        try:
            done = await call_with_retries(attempt, self.retry)
        except AttemptFailure as failure:
            if failure.stops_run and self.on_fatal is not None:
                self.on_fatal(_one_line(failure.message))
            outage = isinstance(failure, RetryableFailure) or failure.kind == CaseStatus.TIMEOUT
            return self._failed(case, key, failure.kind, last_latency[0], failure.attempts,
                                failure.message), None, outage
        except asyncio.CancelledError:
            if _our_cancel():
                raise
            return self._failed(case, key, CaseStatus.ERROR, last_latency[0], 1,
                                "CancelledError (raised inside the system call)"), None, False
        except Exception as exc:  # noqa: BLE001 - a system's failure is the case's, never the run's
            return self._failed(case, key, CaseStatus.ERROR, last_latency[0], 1,
                                describe_exception(exc)), None, False
        result = done.value
        output_json = result.output_json
        if output_json is None:
            try:
                output_json = output_json_of(result.output)
            except (TypeError, ValueError, RecursionError, OverflowError) as exc:
                return self._failed(case, key, CaseStatus.ERROR, last_latency[0], done.attempts,
                                    f"the output is not JSON-serialisable: {exc}"), None, False
        try:
            # The one depth limit (oloproof._json): an output every command can print.
            check_depth(result.output, text=output_json)
        except JsonLimitError as exc:
            return self._failed(case, key, CaseStatus.ERROR, last_latency[0], done.attempts,
                                f"the output is refused: {exc}"), None, False
        return CaseExecuted(
            self.run_id, scenario_id=case.id, status=CaseStatus.OK, from_cache=False,
            latency_ms=last_latency[0], attempts=done.attempts, error=None, index=case.index,
            exec_key=key, output=result.output, usage=result.usage, trial=self._trial(case),
        ), output_json, False

    def _failed(
        self, case: EngineCase, key: str, status: str, latency_ms: float, attempts: int,
        error: str,
    ) -> CaseExecuted:
        return CaseExecuted(
            self.run_id, scenario_id=case.id, status=status, from_cache=False,
            latency_ms=latency_ms, attempts=attempts, error=error, index=case.index,
            exec_key=key, trial=self._trial(case),
        )

    async def _queue_evaluation(self, item: tuple[_CaseState, InlineEvaluator, str]) -> None:
        """Queue a slow evaluation, waiting while ``_EVAL_HIGH`` wait already.

        The system workers then go on again only once the queue is down to
        ``_EVAL_LOW``: executions come in bursts, handed over and committed together,
        rather than one per finished evaluation; and at most ``_EVAL_HIGH`` outputs
        wait in memory for their evaluators."""
        queue = self._eval_queue
        while queue.qsize() >= _EVAL_HIGH:
            self._eval_room.clear()
            await self._eval_room.wait()
        queue.put_nowait(item)

    async def _evaluator_worker(self) -> None:
        while True:
            item = await self._eval_queue.get()
            if item is None:
                return
            if self._eval_queue.qsize() <= _EVAL_LOW:
                self._eval_room.set()
            state, evaluator, jkey = item
            outcome = await self._evaluate_inline(evaluator, state.view, state.output)
            self._eval_tallies[evaluator.criterion].add(_error_of(outcome), False)
            # An evaluator whose calls can no longer be made (a Ray run whose every worker
            # has ended: runner/ray_executor.py) stops the run, as a judge's 401 does.
            fatal = getattr(evaluator, "fatal", None)
            if fatal and self.on_fatal is not None:
                self.on_fatal(_one_line(fatal))
            outcome = enforce_range(outcome, evaluator.value_range)
            self._judged(state, evaluator.criterion, outcome, jkey, False)
            state.pending -= 1
            if state.pending == 0:
                self._finish_case(state.case, state.outcomes)

    async def _evaluate_inline(
        self, evaluator: InlineEvaluator, view: CaseView, output: Any
    ) -> Outcome:
        """The evaluator's outcome; never raises. Run in a worker thread (an ``async def``
        custom evaluator on its own loop), under its ``timeout_s``, when it has one (user
        code, regular expressions); its latency is the call's own time."""
        import asyncio

        if getattr(evaluator, "reads_metadata", False):
            # A custom evaluator (user code, the one kind that sees the whole case) gets
            # its own copy of the case and the output: what it changes in them in place
            # (a label lowercased) reaches no other evaluator, nor one running beside it.
            view, output = _own_copies(view, output)
        timeout_s = getattr(evaluator, "timeout_s", None)
        try:
            if timeout_s is None or self._evaluator_workers is None:
                return evaluator.evaluate(view, output)
            host = self._async_host
            if getattr(evaluator, "on_run_loop", False):
                # Our own coroutine, never user code (a Ray evaluator: runner/ray_executor.py):
                # awaited on this loop, so that every Ray call is made from one thread.
                result = await asyncio.wait_for(
                    evaluator.evaluate_async(view, output),  # type: ignore[attr-defined]
                    float(timeout_s),
                )
            elif host is not None and getattr(evaluator, "is_async", False):
                result = await asyncio.wait_for(
                    host.run(lambda: evaluator.evaluate_async(view, output)),  # type: ignore[attr-defined]
                    float(timeout_s),
                )
            elif self._process_workers is not None and getattr(evaluator, "in_process", False):
                # The pool times the call out at timeout_s (TimeoutError, the same words
                # below); the threads' limit leaves room for its process to start.
                result = await self._process_workers.submit(
                    lambda: evaluator.evaluate(view, output), float(timeout_s) + _START_S
                )
            else:
                # A guarded schema's thread may first wait for its child to start; the
                # child's own limit is timeout_s (runner/build.py _guard_schema).
                thread_timeout_s = getattr(evaluator, "thread_timeout_s", None) or timeout_s
                result = await self._evaluator_workers.submit(
                    lambda: evaluator.evaluate(view, output), float(thread_timeout_s)
                )
            assert isinstance(result, Outcome)
            return result
        except TimeoutError as exc:
            # Timed from the call's start (a call may wait for a thread first): it had run
            # timeout_s when it was given up; or it never started (WorkersHeld).
            held = f": {exc}" if isinstance(exc, WorkersHeld) else ""
            return Outcome(
                JudgmentStatus.ERROR,
                reason=f"the evaluator gave no verdict within timeout_s = {timeout_s:g}s{held}",
                latency_ms=None if held or timeout_s is None else float(timeout_s) * 1000.0,
            )
        except asyncio.CancelledError:
            if _our_cancel():
                raise
            return Outcome(JudgmentStatus.ERROR, reason="CancelledError (raised by the evaluator)")
        except Exception as exc:  # noqa: BLE001 - an evaluator's bug is the case's error
            return Outcome(JudgmentStatus.ERROR, reason=describe_exception(exc))

    def _cached_judgment(self, key: str) -> Outcome | None:
        """The cached outcome for ``key`` (counted as a hit), or ``None`` (a miss)."""
        hit = self.cache.judgment(key)
        if hit is None:
            self.totals.judge_misses += 1
            return None
        self.totals.judge_hits += 1
        return Outcome(
            hit.status, hit.passed, hit.score, hit.reason, hit.usage, hit.attempts,
            hit.latency_ms, from_cache=True,
        )

    async def _judge_worker(self) -> None:
        while True:
            item = await self._judge_queue.get()
            if item is None:
                return
            state, judge, jkey = item  # not in the cache (_run_case looked)
            started = time.monotonic()
            outcome = await self._evaluate_judge(judge, state)
            tally = self._judge_source(judge)
            tally.add(outcome.reason if outcome.status == JudgmentStatus.ERROR else None,
                      outcome.outage, started)
            self._watch(tally)
            fatal = getattr(judge, "fatal", None)
            if fatal and self.on_fatal is not None:
                self.on_fatal(_one_line(fatal))
            outcome = enforce_range(outcome, judge.value_range)
            self._judged(state, judge.criterion, outcome, jkey, outcome.from_cache)
            state.pending -= 1
            if state.pending == 0:
                self._finish_case(state.case, state.outcomes)

    async def _evaluate_judge(self, judge: JudgeEvaluator, state: _CaseState) -> Outcome:
        import asyncio

        try:
            return await judge.evaluate(state.view, state.output)
        except asyncio.CancelledError:
            if _our_cancel():
                raise
            return Outcome(JudgmentStatus.ERROR, reason="CancelledError (inside the judge call)")
        except Exception as exc:  # noqa: BLE001 - one case's judgment, never the run
            return Outcome(JudgmentStatus.ERROR, reason=describe_exception(exc))

    def _judged(
        self, state: _CaseState, criterion: str, outcome: Outcome, key: str, from_cache: bool
    ) -> None:
        self.emit(
            CaseJudged(
                self.run_id, scenario_id=state.case.id, criterion=criterion,
                status=outcome.status, passed=outcome.passed, score=outcome.score,
                from_cache=from_cache, reason=outcome.reason, judge_key=key,
                latency_ms=outcome.latency_ms, attempts=outcome.attempts, usage=outcome.usage,
                trial=self._trial(state.case),
            )
        )
        state.outcomes.append((criterion, outcome.status, outcome.passed))

    def _finish_case(
        self, case: EngineCase, outcomes: list[tuple[str, str, bool | None]]
    ) -> None:
        if self.trials > 1:
            # A case is done when its last trial is; the provisional figures count its
            # first trial only (one draw per case: a Wilson interval over all trials would
            # treat them as independent, which they are not).
            if case.trial == 0:
                self._first_trial[case.index] = outcomes
            left = self._trials_left.get(case.index, self.trials) - 1
            if left:
                self._trials_left[case.index] = left
                return
            self._trials_left.pop(case.index, None)
            outcomes = self._first_trial.pop(case.index, [])
        for criterion, status, passed in outcomes:
            tally = self._tallies.get(criterion)
            if tally is not None:
                tally.add(status, passed, None)
        self.totals.cases_done += 1
        if self._due(self.totals.cases_done):
            self.emit_provisional()

    def emit_provisional(self) -> None:
        self._provisional_at = self.totals.cases_done
        self.emit(self.provisional())

    def last_provisional(self) -> None:
        """The figures after the run's last case (SPEC §6), when the schedule did not give
        them: a sequential run decided early never reaches the suite's last case."""
        if self.totals.cases_done and self._provisional_at != self.totals.cases_done:
            self.emit_provisional()

    def provisional(self) -> ProvisionalMetrics:
        metrics = []
        for criterion in self._binary:
            t = self._tallies[criterion]
            iv = wilson(t.passed, t.observed) if t.observed else None
            est = t.passed / t.observed if t.observed else None
            lo = iv.lower if iv is not None else None
            hi = iv.upper if iv is not None else None
            metrics.append(ProvisionalMetric(criterion, est, lo, hi, t.observed, t.missing))
        return ProvisionalMetrics(
            self.run_id, cases_done=self.totals.cases_done, cases_total=self._case_total,
            metrics=metrics, cases_cached=self.totals.cases_cached,
            cases_errored=self.totals.cases_errored,
        )


def _our_cancel() -> bool:
    """Whether the running task was cancelled by us (a stop, a timeout), not by user code."""
    import asyncio

    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
