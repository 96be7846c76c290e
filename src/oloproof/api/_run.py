"""Running a project from Python: :func:`run`, :func:`run_async`, and the two steps under
them (:func:`load`, :func:`execute`) that the ``oloproof run`` command uses.

Each run has an event loop of its own. :func:`run` called where a loop is already running
(Jupyter, an ``async def`` test) runs the whole thing in a helper thread and waits for it;
:func:`run_async` never blocks the caller's loop. Progress goes to an optional callback
(``on_event``: the same event objects as ``oloproof run --json``) and to the ``oloproof``
logger; nothing is printed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence

from oloproof._records import dataclass
from oloproof.api._args import run_arguments
from oloproof.api._listing import config_file
from oloproof.api._results import RunResult, Subset
from oloproof.enums import Completeness, GateAction, MetricKind, RunStatus
from oloproof.errors import UsageError
from oloproof.events import CaseExecuted, CaseJudged, Event, ProvisionalMetrics, RunFinished
from oloproof.runner import Prepared, StopRequest, identity_warning, prepare
from oloproof.runner import execute as _execute_prepared
from oloproof.systems.loading import ImportState, imports_before, release

__all__ = ["EventCallback", "PreparedRun", "execute", "load", "run", "run_async"]


TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    import logging
    import threading
    from typing import Any, Literal, overload

    from oloproof.analysis.trials import FlakyCase
    from oloproof.api._matrix import MatrixResult
    from oloproof.api._subset import SubsetSpec
    from oloproof.render.progress import Progress


def _logger() -> logging.Logger | None:
    """The ``oloproof`` logger when the process uses logging: one that never imported it
    has configured no handler and no level, so it would send nothing (start-up, issue 16)."""
    module = sys.modules.get("logging")
    return None if module is None else module.getLogger("oloproof")

#: What ``on_event`` receives: an :class:`oloproof.events.Event` (``event.type``,
#: ``event.to_json()`` is the line ``oloproof run --json`` writes).
EventCallback = Callable[[Event], None]


@dataclass
class PreparedRun:
    """A run loaded and checked, nothing called or stored yet (:func:`load`)."""

    prepared: Prepared
    subset: Subset | None

    @property
    def cases_total(self) -> int:
        return len(self.prepared.cases)

    @property
    def binary_metrics(self) -> list[str]:
        return [m["criterion"] for m in self.prepared.metrics if m["kind"] == MetricKind.BINARY]

    @property
    def policy_path(self) -> str | None:
        return self.prepared.policy_path

    @property
    def project_dir(self) -> str:
        return self.prepared.project.root

    @property
    def identity_warning(self) -> str | None:
        """Why this run may reuse stale results, or None (runner.identity_warning)."""
        return identity_warning(self.prepared)

    @property
    def executor_note(self) -> str | None:
        """Where the run's calls ran, once the Ray executor's workers started (a run from
        the cache starts none): its description; None for a run in this process."""
        executor = getattr(self.prepared.system, "executor", None)
        if getattr(executor, "workers", None):
            return str(executor.describe())  # type: ignore[union-attr]
        return None


#: (config file, warning) pairs already warned about in this process: once is enough.
_WARNED: set[tuple[str, str]] = set()


def _warn_stale_cache(loaded: PreparedRun) -> None:
    message = loaded.identity_warning
    if message is None:
        return
    key = (str(loaded.prepared.project.config_path), message)
    if key in _WARNED:
        return
    import warnings

    from oloproof.errors import StaleCacheWarning

    # stacklevel 1: the warning names this module, the same for every caller (run() in
    # a notebook runs in a helper thread, where the caller's frame is not on the stack).
    warnings.warn(message, StaleCacheWarning, stacklevel=1)
    # Counted as given only once it was: raised as an error (`-W error`, pytest's
    # filterwarnings = error), it stopped this run, and must stop the next one too (the
    # next test of the session ran on the cache it warns about, and passed).
    _WARNED.add(key)


def _check_patched(run: PreparedRun) -> None:
    """Whether the code of the system and of the custom evaluators is their files' as the
    run starts (a test may have patched it in this process, after the load too): if not,
    the run goes on with what the patch put there, without the cache, never allowing
    (runner/orchestrate.py), and warns."""
    check = getattr(run.prepared.system, "patched_code", None)
    run.prepared.patched = list(check()) if callable(check) else []
    checks: list[str] = []
    for evaluator in run.prepared.inline:  # a custom evaluator's (its verdicts' cache)
        check = getattr(evaluator, "patched_code", None)
        checks += list(check()) if callable(check) else []
    run.prepared.patched_checks = sorted(set(checks))
    found = sorted({*run.prepared.patched, *checks})
    if not found:
        return
    import warnings

    from oloproof.errors import PatchedCodeWarning

    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    warnings.warn(
        f"{run.prepared.project.display}: the code this run calls is not what the project's"
        f" files define: {shown} replaced in this process (a patch, a mock). This run calls"
        " what replaced it, reads nothing from the cache, stores in it nothing the replaced"
        " code made, and its gate never allows a release (exit 5 unless a rule FAILs)",
        PatchedCodeWarning, stacklevel=1,
    )


def load(
    project: str | os.PathLike[str] = ".",
    *,
    policy: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    sample: bool = False,
    seed: int | None = None,
    cases: Sequence[str] | None = None,
    where: Sequence[str] | str | None = None,
    group_by: Sequence[str] | str | None = None,
    trials: int | None = None,
    shard: str | tuple[int, int] | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    sequential: bool | None = None,
    baseline: str | None = None,
    compare_policy: str | os.PathLike[str] | None = None,
    variant: str | None = None,
) -> PreparedRun:
    """Load and check a project (and choose its subset, or its shard): every configuration
    error is raised here, before anything is stored or called."""
    if isinstance(group_by, str):
        group_by = [group_by]
    if isinstance(cases, str):
        cases = [cases]
    if isinstance(where, str):
        where = [where]
    if sample and seed is None:
        # A random sample is always reproducible: the seed it drew is stored with the run.
        import random

        seed = random.SystemRandom().randrange(2**31)
    spec = None
    if limit is not None or sample or seed is not None or cases or where or shard is not None:
        # The subset options' module, imported where they are handled (docs/design-notes.md).
        from oloproof.api._subset import SubsetSpec

        spec = SubsetSpec(
            limit=limit, sample=sample, seed=seed, case_ids=tuple(cases or ()),
            where=tuple(where or ()),
        )
    if trials is not None and (
        isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= 100
    ):
        raise UsageError(f"trials must be a whole number from 1 to 100, got {trials!r}")
    slice_ = None if spec is None else _shard(shard, spec)
    if executor not in (None, "local", "ray"):
        raise UsageError(f"executor must be 'local' or 'ray', got {executor!r}")
    prepared = prepare(
        config_file(project), None if policy is None else str(policy), list(group_by or ()),
        trials, executor, ray_address, variant,
    )
    subset = None
    if slice_ is not None:
        # A shard keeps every case's place in the suite (its index): the shards' rows are
        # then the whole suite's, and `oloproof merge` joins them as they are.
        from oloproof.api._subset import shard_of

        index, count = slice_
        total = len(prepared.cases)
        prepared.suite = prepared.cases
        prepared.cases = [c for c in prepared.cases if shard_of(c.id, count) == index]
        subset = Subset(suite_cases=total, selected=len(prepared.cases), shard=slice_)
    elif spec is not None and not spec.is_whole:
        total = len(prepared.cases)
        chosen = spec.select(prepared.cases)
        prepared.cases = [prepared.cases[i] for i in chosen]
        for new_index, case in enumerate(prepared.cases):
            case.index = new_index
        subset = Subset(
            suite_cases=total, selected=len(chosen), limit=limit, sample=sample,
            seed=seed, case_ids=spec.case_ids, where=" and ".join(spec.where) or None,
        )
        if subset.selected == total and spec.case_ids == () and not spec.where:
            subset = None  # a limit at or above the suite's size is the whole suite
    prepared.subset = subset.to_json() if subset is not None else None
    if sequential is not None and not isinstance(sequential, bool):
        raise UsageError(f"sequential must be True or False, got {sequential!r}")
    if sequential if sequential is not None else prepared.project.config.sequential is not None:
        if subset is not None:
            why = (" cannot be combined with --shard, --limit, --sample, --case or --where: a"
                   " sequential run chooses how many cases it needs, in an order of its own,"
                   " from the whole suite")
            if sequential is None:  # turned on by oloproof.yaml, not by the command
                shown = prepared.project.display
                raise UsageError(
                    f"{shown}: sequential: this project is decided sequentially, which{why};"
                    f" to run part of the suite, set sequential: false in {shown}"
                    " (docs/sequential-decisions.md)"
                )
            raise UsageError(f"--sequential{why} (docs/sequential-decisions.md)")
        from oloproof.runner.sequential import make_sequential

        make_sequential(prepared, baseline=baseline,
                        compare_policy=None if compare_policy is None else str(compare_policy),
                        asked=sequential is not None)
    elif baseline is not None or compare_policy is not None:
        raise UsageError(
            "--baseline (and --compare-policy) decide comparison rules while a sequential run"
            " goes, to stop it sooner: add --sequential; to compare two finished runs, use"
            " `oloproof compare CANDIDATE BASELINE`"
        )
    return PreparedRun(prepared, subset)


def _shard(shard: str | tuple[int, int] | None, spec: SubsetSpec) -> tuple[int, int] | None:
    """``--shard I/K`` checked: refused with the options that choose cases otherwise."""
    from oloproof.api._subset import parse_shard

    if shard is None:
        return None
    if not spec.is_whole or spec.sample:
        raise UsageError(
            "--shard cannot be combined with --limit, --sample, --case or --where: a shard is"
            " a fixed slice of the whole suite, which `oloproof merge` joins with the others"
        )
    if isinstance(shard, str):
        return parse_shard(shard)
    if (
        not isinstance(shard, tuple) or len(shard) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in shard)
    ):
        raise UsageError(f"shard must be 'I/K' or a pair (I, K) of whole numbers, got {shard!r}")
    return parse_shard(f"{shard[0]}/{shard[1]}")


def execute(
    run: PreparedRun,
    *,
    use_cache: bool = True,
    sinks: Sequence[EventCallback] = (),
    stop: StopRequest | None = None,
) -> RunResult:
    """Run a loaded project in this thread (which must not be running an event loop)."""
    if _loop_running():
        raise UsageError(
            "execute() cannot run on a thread whose event loop is running;"
            " use oloproof.run() (it then runs in a helper thread) or await oloproof.run_async()"
        )
    _check_patched(run)
    all_sinks = list(sinks)
    log = _logger()
    if log is not None and log.isEnabledFor(20):  # logging.INFO
        all_sinks.append(_log_event)
    outcome = _execute_prepared(
        run.prepared, use_cache=use_cache, sinks=all_sinks, stop=stop or StopRequest()
    )
    from oloproof.policy.decide import gate_declaration, gate_notes, patched_notes

    return RunResult(
        run_id=outcome.run_id, status=RunStatus(outcome.status),
        completeness=Completeness(outcome.completeness), gate=GateAction(outcome.gate),
        exit_code=int(outcome.exit_code), decisions=outcome.decisions,
        metrics={s.metric: s for s in outcome.summaries}, project_dir=run.project_dir,
        config_path=str(run.prepared.project.config_path),
        cache=outcome.totals.cache_json(), stop_reason=outcome.stop_reason,
        notice=outcome.notice, policy_path=run.policy_path, subset=run.subset,
        project=run.prepared.project.config.project,
        rule_ids=[r.id for r in run.prepared.policy.rules], judges=list(outcome.judges),
        panels=_panels(run.prepared, outcome.run_id),
        trials=run.prepared.trials, flaky=_flaky(run.prepared, outcome.run_id),
        gate_notes=[*gate_notes(outcome.decisions, run.prepared.policy, outcome.run_id,
                               shard=None if run.subset is None else run.subset.shard),
                    *patched_notes(sorted({*(run.prepared.patched or ()),
                                           *(run.prepared.patched_checks or ())}))],
        declaration=gate_declaration(run.prepared.policy) if outcome.decisions else None,
        sequential=outcome.sequential[0] if outcome.sequential else None,
        sequential_note=outcome.sequential[1] if outcome.sequential else None,
        kept=outcome.kept,
    )


def _flaky(prepared: Prepared, run_id: str) -> list[FlakyCase]:
    """The cases whose trials disagree, read back from the store (none with one trial)."""
    if prepared.trials < 2:
        return []
    from oloproof.analysis.trials import flaky_cases
    from oloproof.store.db import open_store_readonly
    from oloproof.store.location import locate
    from oloproof.store.reader import get_run

    conn = open_store_readonly(locate(prepared.project.config_path))
    try:
        return flaky_cases(conn, get_run(conn, run_id))
    finally:
        conn.close()


def _panels(prepared: Prepared, run_id: str) -> dict[str, tuple[int, int]]:
    """How often each judge panel's judges disagreed, read back from the store."""
    if not prepared.judges:
        return {}  # no judge: the judge module (and httpx) need not be imported
    from oloproof.evaluators.judge import PanelJudge

    if not any(isinstance(j, PanelJudge) for j in prepared.judges):
        return {}
    from oloproof.store.db import open_store_readonly
    from oloproof.store.location import locate
    from oloproof.store.reader import panel_splits

    conn = open_store_readonly(locate(prepared.project.config_path))
    try:
        return panel_splits(conn, run_id)
    finally:
        conn.close()


# The overloads are the type checker's only: typing stays off the run path.
if TYPE_CHECKING:

    @overload
    def run(
        project: str | os.PathLike[str] = ".",
        *,
        policy: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        limit: int | None = None,
        sample: bool = False,
        seed: int | None = None,
        cases: Sequence[str] | None = None,
        where: Sequence[str] | str | None = None,
        group_by: Sequence[str] | str | None = None,
        on_event: EventCallback | None = None,
        trials: int | None = None,
        progress: bool | None = None,
        shard: str | tuple[int, int] | None = None,
        executor: str | None = None,
        ray_address: str | None = None,
        sequential: bool | None = None,
        baseline: str | None = None,
        compare_policy: str | os.PathLike[str] | None = None,
        matrix: Literal[False] = False,
        variants: Sequence[str] | None = None,
    ) -> RunResult: ...

    @overload
    def run(
        project: str | os.PathLike[str] = ".",
        *,
        policy: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        limit: int | None = None,
        sample: bool = False,
        seed: int | None = None,
        cases: Sequence[str] | None = None,
        where: Sequence[str] | str | None = None,
        group_by: Sequence[str] | str | None = None,
        on_event: EventCallback | None = None,
        trials: int | None = None,
        progress: bool | None = None,
        shard: str | tuple[int, int] | None = None,
        executor: str | None = None,
        ray_address: str | None = None,
        sequential: bool | None = None,
        baseline: str | None = None,
        compare_policy: str | os.PathLike[str] | None = None,
        matrix: Literal[True],
        variants: Sequence[str] | None = None,
    ) -> MatrixResult: ...


def run(
    project: str | os.PathLike[str] = ".",
    *,
    policy: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    limit: int | None = None,
    sample: bool = False,
    seed: int | None = None,
    cases: Sequence[str] | None = None,
    where: Sequence[str] | str | None = None,
    group_by: Sequence[str] | str | None = None,
    on_event: EventCallback | None = None,
    trials: int | None = None,
    progress: bool | None = None,
    shard: str | tuple[int, int] | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    sequential: bool | None = None,
    baseline: str | None = None,
    compare_policy: str | os.PathLike[str] | None = None,
    matrix: bool = False,
    variants: Sequence[str] | None = None,
) -> RunResult | MatrixResult:
    """Run a project's suite, store every result, decide its release policy.

    ``project`` is a project directory or its oloproof.yaml; ``policy`` a release policy
    file (default: the project's). ``limit``/``sample``/``seed``/``cases``/``where`` run a
    subset (stored as such: it never allows a release). ``group_by`` breaks every metric
    down by these metadata keys (each group with its own interval). ``on_event`` receives every
    event as it happens. ``trials`` calls the system that many times per case (default:
    ``trials:`` in oloproof.yaml, else 1; docs/repeated-trials.md). ``shard`` (``"2/4"`` or
    ``(2, 4)``) runs shard I of K of the suite, a run that never allows a release on its own:
    ``oloproof merge`` joins the K shards into one run (docs/scaling.md). ``executor="ray"``
    (or ``executor: ray`` in oloproof.yaml) makes the system's calls and the custom
    evaluators on Ray workers, at ``ray_address`` (else ``RAY_ADDRESS``, else a local Ray
    instance). ``sequential=True`` (or ``sequential: true`` in oloproof.yaml; ``False``
    overrides it) decides every rule by an anytime-valid test, case after case in a seeded
    order, and stops calling once every rule is decided (docs/sequential-decisions.md).
    Configuration errors raise :class:`oloproof.ConfigError` before
    anything is stored; whatever happens after, the run is stored as DECIDED or
    RUN_ERROR/PARTIAL, never left RUNNING.

    Called where an event loop is already running (Jupyter), it runs in a helper thread
    and blocks until the run ends; ``await oloproof.run_async(...)`` does not block.

    ``progress``: a progress bar, updated in place. By default (``None``) it is shown in a
    notebook's kernel and nowhere else, and never when the ``CI`` variable is set;
    ``OLOPROOF_PROGRESS=0``/``1`` changes the default; ``True``/``False`` decide
    (render/progress.py, docs/python-api.md).

    ``matrix=True`` runs every variant of ``matrix:`` in oloproof.yaml (``variants``: only
    those, and the baseline) as its own run, then compares each with the baseline under
    Holm: a :class:`~oloproof.api.MatrixResult` with one run result per variant and the
    comparisons (docs/prompts-and-models.md).
    """
    lists = run_arguments("run", locals())  # a wrong type: one TypeError, nothing run
    cases, where, group_by, variants = (
        lists["cases"], lists["where"], lists["group_by"], lists["variants"])
    if matrix and (baseline is not None or compare_policy is not None):
        raise UsageError("matrix=True compares its variants with its own baseline variant:"
                         " baseline= and compare_policy= compare one run with a stored run")
    if matrix:
        if shard is not None or sample:
            raise UsageError("matrix=True runs every variant on the same cases: it cannot be"
                             " combined with shard or sample")
        return _call_matrix(
            project, policy=policy, use_cache=use_cache, limit=limit, cases=cases,
            where=where, group_by=group_by, on_event=on_event, trials=trials,
            variants=variants, sequential=sequential, executor=executor,
            ray_address=ray_address,
        )
    if variants:
        raise UsageError("variants chooses variants of a matrix: pass matrix=True too")
    from oloproof.render.progress import progress_mode

    mode = progress_mode(progress)
    bar = None
    if mode is not None:
        from oloproof.render.progress import Progress

        bar = Progress(mode)
    args = _Args(project, policy, use_cache, limit, sample, seed, cases, where, group_by, on_event,
                 trials, bar, shard=shard, executor=executor, ray_address=ray_address,
                 sequential=sequential, baseline=baseline, compare_policy=compare_policy)
    if bar is None and not _loop_running():
        return args.call(StopRequest())
    stop = StopRequest()
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(args.call(stop))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box.append(exc)

    # The run goes on in a helper thread: where a loop runs already (a notebook), and
    # whenever a progress bar is shown, which this thread (the notebook cell's) redraws.
    import threading  # only for a run in a helper thread (docs/design-notes.md)

    thread = threading.Thread(target=target, name="oloproof-run", daemon=True)
    thread.start()
    try:
        with _ctrl_c_stops(stop):
            _wait(thread, bar)
    except KeyboardInterrupt:
        # Ctrl-C in a notebook: stop the run and let it store its end; the result says
        # RUN_ERROR/PARTIAL, "interrupted", as a signal would in a script.
        stop("interrupted (KeyboardInterrupt)")
        thread.join()
    if bar is not None:
        _last_frame(bar, box)
    return _unbox(box)


def _call_matrix(
    project: str | os.PathLike[str], *, policy: str | os.PathLike[str] | None,
    use_cache: bool, limit: int | None, cases: Sequence[str] | None,
    where: Sequence[str] | str | None, group_by: Sequence[str] | str | None,
    on_event: EventCallback | None, trials: int | None, variants: Sequence[str] | None,
    sequential: bool | None = None, executor: str | None = None,
    ray_address: str | None = None,
) -> MatrixResult:
    """``run(matrix=True)``: in this thread, or in a helper thread where a loop runs."""
    from oloproof.api._matrix import load_matrix, run_matrix

    if isinstance(group_by, str):
        group_by = [group_by]
    if isinstance(where, str):
        where = [where]

    def call(stop: StopRequest) -> MatrixResult:
        before = imports_before()
        try:
            loaded, baseline = load_matrix(
                project, policy=policy, group_by=group_by, trials=trials, limit=limit,
                cases=cases, where=where, variants=variants, sequential=sequential,
                executor=executor, ray_address=ray_address,
            )
            sinks = [_guarded(on_event, stop)] if on_event is not None else []
            return run_matrix(loaded, baseline, use_cache=use_cache, sinks=sinks, stop=stop)
        finally:
            _release(project, before)

    stop = StopRequest()
    if not _loop_running():
        return call(stop)
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(call(stop))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box.append(exc)

    import threading

    thread = threading.Thread(target=target, name="oloproof-matrix", daemon=True)
    thread.start()
    try:
        with _ctrl_c_stops(stop):
            thread.join()
    except KeyboardInterrupt:
        stop("interrupted (KeyboardInterrupt)")
        thread.join()
    value = box[0]
    if isinstance(value, BaseException):
        raise value
    return value  # type: ignore[no-any-return]


@contextlib.contextmanager
def _ctrl_c_stops(stop: StopRequest) -> Iterator[None]:
    """While :func:`run` waits for its helper thread on the main thread, under a SIGINT
    handler other than Python's own (``asyncio.run``'s: ``oloproof.run()`` in an ``async
    def`` main), Ctrl-C stops the run, then goes to that handler. ``asyncio.run``'s
    handler only cancels its task, which the wait does not see: the run went on to its
    end (all 60 cases, DECIDED) and the cancellation came after. Under Python's own
    handler, the ``KeyboardInterrupt`` it raises stops the run (:func:`run`)."""
    import threading

    before: Any = None
    if threading.current_thread() is threading.main_thread():
        before = signal.getsignal(signal.SIGINT)
    if not callable(before) or before is signal.default_int_handler:
        yield
        return

    def interrupted(signum: int, frame: Any) -> None:
        stop("interrupted (Ctrl-C)")
        before(signum, frame)

    signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _wait(thread: threading.Thread, bar: Progress | None) -> None:
    if bar is None:
        thread.join()
        return
    while thread.is_alive():
        thread.join(0.25)
        if thread.is_alive():
            _quietly(bar.refresh)


def _last_frame(bar: Progress, box: list[Any]) -> None:
    value = box[0] if box else None
    if not isinstance(value, RunResult):
        if bar.total:  # the run had started: say the bar ends here
            _quietly(lambda: bar.refresh(f"stopped: {type(value).__name__}"))
        return  # otherwise nothing ran (a configuration error): the exception says it all
    end = (f"Run {value.run_id} [{value.status}/{value.completeness}]:"
           f" gate {value.gate} (exit {value.exit_code})")
    _quietly(lambda: bar.refresh(end))


def _quietly(draw: Callable[[], None]) -> None:
    """A progress bar that cannot be drawn never stops a run."""
    try:
        draw()
    except Exception:
        import logging

        logging.getLogger("oloproof").debug("the progress bar could not be drawn",
                                            exc_info=True)


async def run_async(
    project: str | os.PathLike[str] = ".",
    *,
    policy: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    limit: int | None = None,
    sample: bool = False,
    seed: int | None = None,
    cases: Sequence[str] | None = None,
    where: Sequence[str] | str | None = None,
    group_by: Sequence[str] | str | None = None,
    on_event: EventCallback | None = None,
    trials: int | None = None,
    shard: str | tuple[int, int] | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    sequential: bool | None = None,
    baseline: str | None = None,
    compare_policy: str | os.PathLike[str] | None = None,
) -> RunResult:
    """:func:`run`, awaitable: the run goes on in a thread of its own while the caller's
    loop stays free. ``on_event`` is called on the caller's loop. Cancelling the await
    stops the run (stored as RUN_ERROR/PARTIAL) and re-raises ``CancelledError`` once
    its end is stored."""
    lists = run_arguments("run_async", locals())  # a wrong type: one TypeError, nothing run
    cases, where, group_by = lists["cases"], lists["where"], lists["group_by"]
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    stop = StopRequest()
    callback = None
    if on_event is not None:
        user = on_event

        def callback(event: Event) -> None:
            try:
                loop.call_soon_threadsafe(user, event)
            except RuntimeError:  # the caller's loop is closed
                pass

    args = _Args(project, policy, use_cache, limit, sample, seed, cases, where, group_by, callback,
                 trials, shard=shard, executor=executor, ray_address=ray_address,
                 sequential=sequential, baseline=baseline, compare_policy=compare_policy)

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    def target() -> None:
        try:
            result = args.call(stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's loop
            outcome: tuple[Any, BaseException | None] = (None, exc)
        else:
            outcome = (result, None)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass

    import threading

    threading.Thread(target=target, name="oloproof-run", daemon=True).start()
    interrupts, undo = _stop_on_ctrl_c(loop, stop, future)
    try:
        result: RunResult = await asyncio.shield(future)
        if interrupts:  # stopped by Ctrl-C, its end stored: the caller is interrupted too
            # Once every run the Ctrl-C stopped has stored its end: the KeyboardInterrupt
            # ends the loop, and with it the process, and a run still storing was RUNNING.
            await asyncio.wait(interrupts[0])
            raise KeyboardInterrupt
        return result
    except asyncio.CancelledError:
        stop.internal("cancelled by the caller (run_async)")
        # A second cancellation (a timeout around a task that is cancelled as well, a
        # task group shutting down) must not raise before the run's end is stored: the
        # caller would find it RUNNING, and a process that ends then kills the run's
        # daemon thread with it, leaving it RUNNING for good.
        while not future.done():
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                continue
            except BaseException:  # noqa: BLE001 - the cancellation is what we raise
                break
        raise
    finally:
        undo()


def _stop_on_ctrl_c(
    loop: asyncio.AbstractEventLoop, stop: StopRequest, end: asyncio.Future[Any]
) -> tuple[list[list[asyncio.Future[Any]]], Callable[[], None]]:
    """While :func:`run_async` waits on the main thread with Python's own SIGINT handler
    in place (``loop.run_until_complete``, an IPython kernel; not ``asyncio.run``, whose
    handler cancels the await), the first Ctrl-C stops the run as ``oloproof run``'s does:
    what finished is stored, the run is RUN_ERROR/PARTIAL, "interrupted (Ctrl-C)", then
    ``KeyboardInterrupt`` is raised. Python's handler raised it in the loop at once and
    left the run going on in its thread: to its end in a notebook, or cut off with the
    process and left RUNNING. A second Ctrl-C raises at once. Every run awaited on the
    loop meanwhile (``asyncio.gather``) is stopped alike. Returns the Ctrl-Cs seen (each
    the ends, ``end``, of the runs it stopped) and what undoes it."""
    import threading

    seen: list[list[asyncio.Future[Any]]] = []
    waiting = _CTRL_C.get(loop)
    if waiting is None:
        if (threading.current_thread() is not threading.main_thread()
                or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
            return seen, lambda: None
        waiting = []

        def interrupted() -> None:
            ends = [end_ for _, _, end_ in waiting]
            for stop_, seen_, _ in waiting:
                seen_.append(ends)
                stop_("interrupted (Ctrl-C)")
            if any(len(seen_) > 1 for _, seen_, _ in waiting):
                raise KeyboardInterrupt  # a second Ctrl-C: at once

        try:
            # The loop's own handler: a signal that lands on another thread still wakes it.
            loop.add_signal_handler(signal.SIGINT, interrupted)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals on this loop
            return seen, lambda: None
        _CTRL_C[loop] = waiting
    entry = (stop, seen, end)
    waiting.append(entry)

    def undo() -> None:
        waiting.remove(entry)
        if not waiting and _CTRL_C.get(loop) is waiting:
            del _CTRL_C[loop]
            if not loop.is_closed():
                loop.remove_signal_handler(signal.SIGINT)  # Python's own handler again

    return seen, undo


#: The runs awaited on each loop whose Ctrl-C they handle (:func:`_stop_on_ctrl_c`).
_CTRL_C: dict[asyncio.AbstractEventLoop,
              list[tuple[StopRequest, list[list[asyncio.Future[Any]]], asyncio.Future[Any]]]] = {}


@dataclass
class _Args:
    project: str | os.PathLike[str]
    policy: str | os.PathLike[str] | None
    use_cache: bool
    limit: int | None
    sample: bool
    seed: int | None
    cases: Sequence[str] | None
    where: Sequence[str] | str | None
    group_by: Sequence[str] | str | None
    on_event: EventCallback | None
    trials: int | None = None
    progress: Progress | None = None
    shard: str | tuple[int, int] | None = None
    executor: str | None = None
    ray_address: str | None = None
    sequential: bool | None = None
    baseline: str | None = None
    compare_policy: str | os.PathLike[str] | None = None

    def call(self, stop: StopRequest) -> RunResult:
        before = imports_before()
        try:
            return self._call(stop)
        finally:
            _release(self.project, before)

    def _call(self, stop: StopRequest) -> RunResult:
        loaded = load(
            self.project, policy=self.policy, limit=self.limit, sample=self.sample,
            seed=self.seed, cases=self.cases, where=self.where, group_by=self.group_by,
            trials=self.trials, shard=self.shard, executor=self.executor,
            ray_address=self.ray_address, sequential=self.sequential,
            baseline=self.baseline, compare_policy=self.compare_policy,
        )
        _warn_stale_cache(loaded)
        sinks: list[EventCallback] = []
        if self.progress is not None:
            self.progress.expect(loaded.binary_metrics)
            sinks.append(self.progress)
        if self.on_event is not None:
            sinks.append(_guarded(self.on_event, stop))
        return execute(loaded, use_cache=self.use_cache, sinks=sinks, stop=stop)


def _release(project: str | os.PathLike[str], before: ImportState) -> None:
    """After a run from Python: what loading the project put in this process goes (its
    folder on ``sys.path``, its modules), what it took comes back (loading.release)."""
    with contextlib.suppress(OSError, UsageError):
        release(os.path.dirname(os.path.abspath(config_file(project))), before)


def _guarded(callback: EventCallback, stop: StopRequest) -> EventCallback:
    """The user's callback; one that raises stops the run (stored RUN_ERROR/PARTIAL)."""
    failed = False

    def sink(event: Event) -> None:
        nonlocal failed
        if failed:
            return
        try:
            callback(event)
        except Exception as exc:
            failed = True
            import logging

            logging.getLogger("oloproof").exception(
                "the on_event callback raised; stopping the run")
            stop.internal(f"the on_event callback raised {type(exc).__name__}: {exc}")

    return sink


def _unbox(box: list[Any]) -> RunResult:
    value = box[0]
    if isinstance(value, BaseException):
        raise value
    assert isinstance(value, RunResult)
    return value


def _loop_running() -> bool:
    from oloproof._loop import running_loop

    return running_loop() is not None


def _log_event(event: Event) -> None:
    """Events to the ``oloproof`` logger: the run's start, progress and end at INFO,
    every case at DEBUG."""
    import logging

    log = logging.getLogger("oloproof")
    if isinstance(event, CaseExecuted | CaseJudged):
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s", event.type, event.to_json())
    elif isinstance(event, ProvisionalMetrics):
        log.info("run %s: %d of %d cases done", event.run_id, event.cases_done,
                 event.cases_total)
    elif isinstance(event, RunFinished):
        log.info("run %s finished: %s/%s, exit code %d", event.run_id, event.status,
                 event.completeness, event.exit_code)
    else:
        log.info("run %s: %s %s", event.run_id, event.type, event.public())
