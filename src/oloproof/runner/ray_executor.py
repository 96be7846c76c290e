"""The Ray executor (``executor: ray``, ``oloproof run --executor ray``; the ``ray`` extra).

The engine hands two things to an executor: "call the system for this case" and "run this
custom evaluator on this output". The local executor is the engine's own path (threads and
an async host in this process). This one sends both to **Ray workers**: W actors, each a
worker process that built the project's system and custom evaluators once, as this process
did, and then answers calls. Everything else stays in this process, the driver:

- the cache, looked up before anything is sent (a rerun with nothing changed starts no Ray
  at all: the engine never starts the system then);
- the concurrency limits (``concurrency.system`` calls in flight, adaptive or not) and the
  retry policy: each *attempt* is one call to a worker, and a retry's wait is the driver's;
- the events, the store and the decision: a worker's result comes back as plain values, and
  the engine emits and stores it exactly as a local result;
- deterministic checks, regular expressions and LLM judges (I/O the driver's loop already
  overlaps, under per-provider limits only the driver can see).

So a Ray run stores the same evidence and decides the same as a local run. What can differ
is where a call failed: a worker process that dies (killed, out of memory, its node lost)
fails the calls it was running, and only those; they are errors of this run (missing,
never cached), and the next run calls them again. When every worker has died the run stops
(RUN_ERROR/PARTIAL). Workers are never restarted under a run: a case that kills its worker
would kill the next one too.

**Where Ray runs.** ``--ray-address`` or ``RAY_ADDRESS`` names a running cluster; the
project directory is then shipped to it as the workers' working directory (Ray's
``runtime_env``; ``.oloproof/``, ``.git/`` and virtual environments left out, and what the
project's ``.gitignore`` ignores). Without an address the run starts a local Ray instance
and stops it at its end; its workers read the project where it is. Either way each worker
checks that the system and the custom evaluators it built have the driver's identities, so
workers that see other code are refused, never used.

**Why a thread of its own.** Ray ties the processes of a local instance to the *thread*
that started them (the kernel's parent-death signal is per thread): started from a thread
that ends, the instance is killed under the run. Ray is started, and stopped, by one
long-lived daemon thread (:class:`_RayHost`), which also keeps the event loop free while
Ray starts (tens of seconds on a busy machine): a signal still stops the run at once.
When the run's process dies, that thread dies with it, and so does the local instance.

**A matrix** (``run --matrix --executor ray``): each variant is a run of its own, with
workers of its own that built that variant's system (``matrix:`` overrides applied; the
identity check holds for the variant). Ray itself is started, or the cluster joined, once
for the whole matrix: the variants' executors share one :class:`RayShare` (the host thread
and the Ray session), each variant's workers are stopped when its run ends, and Ray when
the matrix ends.

Ray is imported here only, when this executor is chosen (bench/imports.py checks that
``--help``, ``runs``, ``gate`` and a local run never import it).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.enums import JudgmentStatus
from oloproof.errors import ConfigError, OloproofError, UsageError
from oloproof.evaluators.base import CaseView, Outcome
from oloproof.systems.base import CallResult
from oloproof.transport.retry import AttemptFailure, PermanentFailure, RetryableFailure
from oloproof.transport.threads import AsyncHost, describe_exception
from oloproof.usage import Usage

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future
    from typing import Any

    from oloproof.evaluators.custom import Custom
    from oloproof.project._project import Project
    from oloproof.systems.base import SystemRunner

__all__ = ["ExecutorError", "RayExecutor", "RayShare", "use_ray"]

#: How long the workers may take to start (Ray, the actors, the project's imports).
START_TIMEOUT_S = 180.0
#: What a project directory shipped to a cluster leaves out.
_EXCLUDES = [".oloproof/", ".git/", ".venv*/", "venv/", "__pycache__/", "*.pyc"]


#: Ray's own setting that keeps its failure signal handler out of a process (read at import).
_NO_FAILURE_HANDLER = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"


def _import_ray_for_the_driver() -> Any:
    """Ray, imported in this process (the driver) without its failure signal handler.

    Ray's core installs absl's failure signal handler in the driver, and it takes SIGTERM
    too: it wrote a crash dump to standard error (``*** SIGTERM received at time=… PC: @ …
    epoll_wait``, twice) before passing the signal on, so a run that SIGTERM stopped as it
    should (stored, exit 5) looked as if it had crashed. Ray reads the setting when it is
    imported; the environment is put back at once, so the processes Ray starts keep theirs.
    """
    import importlib
    import sys

    if "ray" in sys.modules:
        return sys.modules["ray"]
    ours = _NO_FAILURE_HANDLER not in os.environ  # a user's own setting is left as it is
    if ours:
        os.environ[_NO_FAILURE_HANDLER] = "1"
    try:
        return importlib.import_module("ray")
    finally:
        if ours:
            os.environ.pop(_NO_FAILURE_HANDLER, None)


class ExecutorError(OloproofError):
    """The executor could not run the calls (Ray missing, not reachable, workers that could
    not start): the run stops, exit 5."""

    exit_code = 5


def use_ray(
    project: Project, system: SystemRunner, inline: list[Any], *, policy_arg: str | None,
    address: str | None, from_flag: bool = False, variant: str | None = None,
) -> tuple[SystemRunner, list[Any]]:
    """The system and the custom evaluators, wrapped to run on Ray workers; the other
    evaluators as they are. Nothing is started yet (a rerun from the cache starts nothing);
    refused here, before anything is stored, when Ray is not installed (``from_flag``: it
    was asked for by ``--executor ray``, not by oloproof.yaml)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        missing = "needs Ray, which is not installed here: pip install 'oloproof[ray]'"
        if from_flag:
            raise UsageError(f"--executor ray {missing} (or run with --executor local)")
        raise ConfigError(
            f"ray {missing}", file=os.path.basename(project.config_path), field="executor",
            accepted="local, ray",
        )
    from oloproof.evaluators.custom import Custom

    customs = [e for e in inline if isinstance(e, Custom)]
    executor = RayExecutor(
        project, system, customs, policy_arg=policy_arg,
        address=address if address is not None else (os.environ.get("RAY_ADDRESS") or None),
        variant=variant,
    )
    wrapped = [RayCustom(executor, e) if isinstance(e, Custom) else e for e in inline]
    return RaySystem(executor, system), wrapped


class _RayHost:
    """One daemon thread that starts Ray, makes the workers, and stops Ray (see the module's
    notes: Ray's local processes live as long as the thread that started them)."""

    def __init__(self) -> None:
        import queue

        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._serve, name="oloproof-ray", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
                future.set_exception(exc)

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        from concurrent.futures import Future

        future: Future[Any] = Future()
        self._jobs.put((fn, future))
        return future

    def close(self) -> None:
        self._jobs.put(None)


class RayShare:
    """One Ray start for several runs (the variants of a matrix): the host thread that
    started Ray, and whether it did. Closed once, when the last run has ended."""

    def __init__(self) -> None:
        self.host: _RayHost | None = None
        self.initialized = False
        self.starts = 0  # how many times Ray was started or joined (1 for a matrix)

    def close(self) -> None:
        host = self.host
        if host is None:
            return
        self.host = None

        def stop() -> None:
            import ray

            if ray.is_initialized():
                ray.shutdown()

        try:
            host.submit(stop).result(timeout=60.0)
        except Exception:  # noqa: BLE001, S110 - the process's end stops Ray
            pass
        host.close()


class RayExecutor:
    """The Ray workers of one run, and the way calls reach them."""

    def __init__(
        self, project: Project, system: SystemRunner, customs: list[Custom], *,
        policy_arg: str | None, address: str | None, variant: str | None = None,
    ) -> None:
        self.project = project
        self.variant = variant
        #: Set by a matrix (api/_matrix.py): Ray started once for all its variants.
        self.share: RayShare | None = None
        #: The Ray job this run's workers belong to (one per Ray start).
        self.job: str | None = None
        self.identity = system.identity
        self.customs = customs
        self.policy_arg = policy_arg
        self.address = address
        self.workers_wanted = project.config.ray.workers
        concurrency = project.config.concurrency
        # Calls a worker may have at once: the driver's limits are what bound them.
        self.per_worker = concurrency.system + concurrency.evaluator_limit() + 8
        self._host: _RayHost | None = None
        self._actors: list[Any] = []
        self._in_flight: list[int] = []
        self._alive: list[bool] = []
        #: (pid, node id, host name) of each worker, once started.
        self.workers: list[tuple[int, str, str]] = []
        self._started_ray = False
        self._lock = threading.Lock()
        #: Why no call can be made any more (every worker has ended), once an evaluation
        #: met it: read by the engine through :attr:`RayCustom.fatal`, which stops the run.
        self.fatal: str | None = None

    # -- start and stop -----------------------------------------------------------------
    async def start(self) -> None:
        import asyncio

        if self._host is not None:
            return
        share = self.share
        if share is not None and share.host is not None:
            self._host = share.host
        else:
            self._host = _RayHost()
            if share is not None:
                share.host = self._host
        try:
            await asyncio.wait_for(asyncio.wrap_future(self._host.submit(self._start)),
                                   START_TIMEOUT_S)
        except TimeoutError:
            raise ExecutorError(
                f"Ray did not start within {START_TIMEOUT_S:g}s"
                + (f" at {self.address}" if self.address else "")
            ) from None

    def _start(self) -> None:
        import logging

        ray = _import_ray_for_the_driver()

        kwargs: dict[str, Any] = {
            "logging_level": logging.ERROR, "include_dashboard": False,
            "configure_logging": True,
        }
        where = self.address
        share = self.share
        if share is None or not share.initialized:
            self._init_ray(ray, where, kwargs)
            if share is not None:
                share.initialized = True
                share.starts += 1
        self.job = str(ray.get_runtime_context().get_job_id())
        self._make_workers(ray)

    def _init_ray(self, ray: Any, where: str | None, kwargs: dict[str, Any]) -> None:
        if where:
            _probe(where)  # Ray itself would wait for ever for an address nobody answers
        try:
            if where:
                # The project, shipped to the cluster as the workers' working directory
                # (Ray takes it for the whole job, at init).
                ray.init(address=where, runtime_env={
                    "working_dir": str(self.project.root), "excludes": _EXCLUDES,
                }, **kwargs)
            else:
                cpus = max(os.cpu_count() or 1, self.workers_wanted or 1)
                # A local instance of our own, never a cluster RAY_ADDRESS would name.
                ray.init(address="local", num_cpus=cpus, object_store_memory=100 * 2**20,
                         **kwargs)
                self._started_ray = True
        except Exception as exc:  # noqa: BLE001 - Ray's many ways to fail to start
            raise ExecutorError(
                f"Ray could not be {'reached at ' + where if where else 'started'}:"
                f" {type(exc).__name__}: {_first_line(exc)}"
            ) from None

    def _make_workers(self, ray: Any) -> None:
        cpus = ray.cluster_resources().get("CPU", 1)
        count = self.workers_wanted or max(1, int(cpus))
        worker = ray.remote(_Worker).options(
            num_cpus=1, max_concurrency=self.per_worker, max_restarts=0, max_task_retries=0,
            scheduling_strategy="SPREAD",
        )
        args = self.worker_args()
        try:
            self._actors = [worker.remote(*args) for _ in range(count)]
            self.workers = ray.get([a.ready.remote() for a in self._actors],
                                   timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise ExecutorError(
                f"the {count} Ray workers did not all start within {START_TIMEOUT_S:g}s (each"
                f" takes one CPU; the cluster has {cpus:g}):"
                " set ray.workers in oloproof.yaml to at most that"
            ) from None
        except ray.exceptions.RayActorError as exc:
            raise ExecutorError(f"a Ray worker could not start: {_cause(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - Ray refused the workers themselves
            raise ExecutorError(
                f"the Ray workers could not be made: {type(exc).__name__}: {_first_line(exc)}"
            ) from None
        self._in_flight = [0] * count
        self._alive = [True] * count

    def worker_args(self) -> tuple[str, str, str | None, str, dict[str, str], str | None]:
        """What each worker is made with (:class:`_Worker`): the project, the policy, and the
        identities it must find, the system's and each custom evaluator's (by criterion),
        since what it answers is stored and cached under them."""
        return (str(self.project.root), os.path.basename(self.project.config_path),
                self.policy_arg, self.identity, {c.criterion: c.identity for c in self.customs},
                self.variant)

    async def close(self) -> None:
        import asyncio

        host = self._host
        if host is None:
            return
        try:
            await asyncio.wait_for(asyncio.wrap_future(host.submit(self._stop)), 60.0)
        except (TimeoutError, Exception):  # noqa: BLE001, S110 - the process's end stops Ray
            pass
        if self.share is None:
            host.close()  # a matrix's host stops Ray when the matrix ends (RayShare.close)

    def _stop(self) -> None:
        import ray

        for actor in self._actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001, S110 - already gone
                pass
        self._actors = []
        if self.share is None and ray.is_initialized():
            ray.shutdown()

    def describe(self) -> str:
        """One line for the run's report: where the calls ran."""
        nodes = {node for _, node, _ in self.workers}
        pids = ", ".join(str(pid) for pid, _, _ in self.workers)
        where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
        return (f"Ran on {where}: {len(self.workers)} worker"
                f"{'' if len(self.workers) == 1 else 's'} on {len(nodes)}"
                f" node{'' if len(nodes) == 1 else 's'} (pids {pids}).")

    # -- calls ----------------------------------------------------------------------------
    def _pick(self) -> int:
        with self._lock:
            live = [i for i, alive in enumerate(self._alive) if alive]
            if not live:
                raise PermanentFailure(
                    "every Ray worker of the run has ended; no call can be made", stops_run=True
                )
            chosen = min(live, key=lambda i: self._in_flight[i])
            self._in_flight[chosen] += 1
            return chosen

    def _done(self, index: int) -> None:
        with self._lock:
            self._in_flight[index] -= 1

    async def _remote(self, method: str, *args: Any) -> Any:
        import ray

        index = self._pick()
        try:
            return await getattr(self._actors[index], method).remote(*args)
        except ray.exceptions.RayActorError as exc:
            with self._lock:
                self._alive[index] = False
                last = not any(self._alive)
            pid, node, _host = self.workers[index]
            # The last worker gone: the run stops, whether or not another call comes.
            raise PermanentFailure(
                f"the Ray worker running this call ended (pid {pid}, node {node[:12]}):"
                f" {_cause(exc)}" + ("; every Ray worker of the run has ended" if last else ""),
                stops_run=last,
            ) from None
        finally:
            self._done(index)

    async def call(self, case_id: str, case_input: Any, attempt: int) -> CallResult:
        reply = await self._remote("call", case_id, case_input, attempt)
        if reply[0] == "ok":
            _, output, usage, output_json = reply
            return CallResult(output, Usage.from_json(usage), output_json)
        raise _failure(reply)

    async def evaluate(self, criterion: str, case: CaseView, output: Any,
                       timeout_s: float) -> Outcome:
        view = (case.id, case.input, case.expected, case.metadata)
        try:
            reply = await self._remote("evaluate", criterion, view, output, timeout_s)
        except AttemptFailure as failure:
            if failure.stops_run and self.fatal is None:
                # No worker left: the engine stops the run (RayCustom.fatal), as it does when
                # a system call meets this; the evaluations left would all be errors.
                self.fatal = failure.message
            return Outcome(JudgmentStatus.ERROR, reason=failure.message)
        if reply[0] == "timeout":
            raise TimeoutError  # the engine words it as for a local call
        _, status, passed, score, reason, latency_ms = reply
        return Outcome(status, passed=passed, score=score, reason=reason, latency_ms=latency_ms)


class RaySystem:
    """The project's system, its calls made by Ray workers (:class:`RayExecutor`)."""

    def __init__(self, executor: RayExecutor, local: SystemRunner) -> None:
        self.executor = executor
        self.identity = local.identity
        self.kind = local.kind
        self.name = local.name
        self.target = local.target  # what a call reaches, for messages
        self.local = local
        # What the report and ``describe_system`` read of a system, and the files outside
        # its identity the run warns about (runner/build.py, identity_warning): a callable's.
        self.version = getattr(local, "version", None)
        self.outside_identity: list[str] = list(getattr(local, "outside_identity", None) or [])
        self.module_file: str | None = getattr(local, "module_file", None)
        #: The project files the code reached (runner/sources.py), a callable's.
        self.code_files: dict[str, str] = dict(getattr(local, "code_files", None) or {})

    async def start(self) -> None:
        await self.executor.start()

    async def call(self, case_id: str, case_input: Any, attempt: int) -> CallResult:
        return await self.executor.call(case_id, case_input, attempt)

    async def aclose(self) -> None:
        await self.executor.close()

    def describe(self) -> dict[str, Any]:
        """The system's own description (a model system's provider, model, prompt…)."""
        describe = getattr(self.local, "describe", None)
        return dict(describe()) if callable(describe) else {}


class RayCustom:
    """A custom evaluator whose calls Ray workers make: to the engine, an ``async def``
    evaluator, awaited on the run's loop under its ``timeout_s``."""

    is_async = True
    is_judge = False
    reads_metadata = True  # as Custom: the case's metadata is sent to the worker
    #: Awaited on the run's own loop, not on the host loop of ``async def`` user code, so
    #: that every Ray call of the driver is made from one thread, the one that makes the
    #: system's calls (and one thread hop fewer per evaluation). Ray calls from two threads
    #: at once are our suspect for a driver that hung, silent, after Ctrl-C in two CI runs
    #: and never here (docs/scaling.md).
    on_run_loop = True

    def __init__(self, executor: RayExecutor, local: Custom) -> None:
        self.executor = executor
        self.local = local
        self.criterion = local.criterion
        self.metric_kind = local.metric_kind
        self.value_range = local.value_range
        self.identity = local.identity
        # What its verdicts are cached under, and the files its warning names, as the
        # local evaluator's: without them a Ray run keyed custom verdicts on the unsalted
        # identity, and reused verdicts the local run judges again (evaluators/custom.py).
        self.cache_identity = local.cache_identity
        self.outside_identity = local.outside_identity
        self.code_files = local.code_files
        self.module_file = local.module_file
        self.timeout_s = local.timeout_s

    @property
    def fatal(self) -> str | None:
        """Why the run must stop (every Ray worker has ended), read by the engine after each
        evaluation, as a judge's: the evaluations left could only be errors, and a run that
        lost its workers is stopped (RUN_ERROR/PARTIAL), not decided on what is left."""
        return self.executor.fatal

    def evaluate(self, case: CaseView, output: Any) -> Outcome:  # pragma: no cover - async only
        raise RuntimeError("a Ray evaluator is awaited (evaluate_async)")

    async def evaluate_async(self, case: CaseView, output: Any) -> Outcome:
        return await self.executor.evaluate(self.criterion, case, output, self.timeout_s)


def _failure(reply: tuple[Any, ...]) -> AttemptFailure:
    """The failure a worker reported, as the local system would have raised it."""
    _, kind, message, failure_kind, stops_run, retry_after_s, rate, status, body = reply
    failure: AttemptFailure
    if kind == "retryable":
        from oloproof.transport.ratelimit import RateSignal

        signal = None if rate is None else RateSignal(*rate)
        failure = RetryableFailure(message, kind=failure_kind, retry_after_s=retry_after_s,
                                   rate=signal)
    else:
        failure = PermanentFailure(message, kind=failure_kind, stops_run=stops_run)
    failure.status, failure.body = status, body
    return failure


def _probe(address: str) -> None:
    """Refuse an address (``HOST:PORT``, ``ray://HOST:PORT``) that no server answers, within
    10 s; other forms (``auto``) are left to Ray."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise ExecutorError(
            f"Ray could not be reached at {address}: {exc.strerror or exc}"
            " (--ray-address or RAY_ADDRESS; without either, a local Ray instance is started)"
        ) from None


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or getattr(exc, "error_msg", None) or exc
    return _first_line(cause)


def _first_line(exc: object) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# -- the worker side (runs in a Ray worker process) -------------------------------------


class _Worker:
    """A Ray actor: the project's system and custom evaluators, built once in this
    process, then called (made a Ray actor by :meth:`RayExecutor._start`)."""

    def __init__(self, root: str, config_name: str, policy_arg: str | None, identity: str,
                 criteria: dict[str, str], variant: str | None = None) -> None:
        here = Path(root)
        if not (here / config_name).is_file():
            here = Path.cwd()  # the project shipped as the working directory (a cluster)
        config = here / config_name
        from oloproof.project._snapshot import load_config

        kept = load_config(config, policy_arg)
        if kept is not None:
            project = kept[0]
        else:
            from oloproof.project.loader import load_project

            project = load_project(config)
        from oloproof.runner.build import build_system

        self.system = build_system(project, variant)
        if self.system.identity != identity:
            raise ExecutorError(
                f"this worker (pid {os.getpid()}) sees other code for the system than the"
                f" driver: identity {self.system.identity[:19]}…, the driver's {identity[:19]}…"
                " (every node must run the same project)"
            )
        from oloproof.evaluators.custom import Custom

        self.customs: dict[str, Custom] = {}
        file = config.name
        for i, ev in enumerate(project.config.evaluators):
            if ev.type == "custom" and ev.criterion in criteria:
                custom = self.customs[ev.criterion] = Custom(
                    ev, project.root, file=file, field=f"evaluators[{i}].function",
                    default_timeout_s=project.config.limits.evaluator_timeout_s,
                )
                if custom.identity != criteria[ev.criterion]:
                    # Its verdicts would be stored, and cached, under the driver's identity
                    # (checks.py edited while Ray started, a node holding another checkout).
                    raise ExecutorError(
                        f"this worker (pid {os.getpid()}) sees other code for the custom"
                        f" evaluator {ev.criterion} than the driver: identity"
                        f" {custom.identity[:19]}…, the driver's {criteria[ev.criterion][:19]}…"
                        " (every node must run the same project)"
                    )
        missing = sorted(set(criteria) - set(self.customs))
        if missing:
            raise ExecutorError(
                f"this worker (pid {os.getpid()}) finds no custom evaluator"
                f" {', '.join(missing)} in {config}: it sees another oloproof.yaml than the"
                " driver (every node must run the same project)"
            )
        self._started = False
        #: Where ``async def`` custom evaluators run (made at the first such evaluation).
        self._host: AsyncHost | None = None

    def ready(self) -> tuple[int, str, str]:
        import socket

        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id(), socket.gethostname()

    async def call(self, case_id: str, case_input: Any, attempt: int) -> tuple[Any, ...]:
        import asyncio

        if not self._started:  # on the actor's loop: the system's threads report to it
            self._started = True
            await self.system.start()
        try:
            result = await self.system.call(case_id, case_input, attempt)
        except RetryableFailure as f:
            rate = None if f.rate is None else (f.rate.limited, f.rate.wait_s,
                                                f.rate.quota_reset_s)
            return ("failed", "retryable", f.message, f.kind, f.stops_run, f.retry_after_s,
                    rate, f.status, f.body)
        except AttemptFailure as f:
            return ("failed", "permanent", f.message, f.kind, f.stops_run, None, None,
                    f.status, f.body)
        except asyncio.CancelledError:
            raise  # the driver cancelled the call (a stop)
        except Exception as exc:  # noqa: BLE001 - the system's runner raised: the case's error
            return ("failed", "permanent", f"{type(exc).__name__}: {exc}", "ERROR", False,
                    None, None, None, None)
        usage = None if result.usage is None else result.usage.to_json()
        return ("ok", result.output, usage, result.output_json)

    async def evaluate(self, criterion: str, view: tuple[Any, ...], output: Any,
                       timeout_s: float) -> tuple[Any, ...]:
        import asyncio

        custom = self.customs[criterion]
        case = CaseView(*view)
        try:
            if custom.is_async:
                # On a loop of its own, as in a local run (engine/pipeline.py), never this
                # actor's: an ``async def`` that blocks its loop (a time.sleep, a sync client)
                # held this one, so every system call sent to the worker waited for it (the
                # run hung for good on one that never returned) and its timeout_s never fired.
                if self._host is None:
                    self._host = AsyncHost(name="oloproof-async-evaluator")
                host = self._host
                outcome = await asyncio.wait_for(
                    host.run(lambda: custom.evaluate_async(case, output)), timeout_s
                )
            else:
                outcome = await asyncio.wait_for(
                    asyncio.to_thread(custom.evaluate, case, output), timeout_s
                )
        except TimeoutError:
            return ("timeout",)
        except Exception as exc:  # noqa: BLE001 - an evaluator's bug is the case's error
            # Worded as the engine words it for a local run (a CancelledError of the
            # evaluator's own comes back from the host loop as a UserBaseException).
            return ("ok", JudgmentStatus.ERROR, None, None, describe_exception(exc), None)
        return ("ok", str(outcome.status), outcome.passed, outcome.score, outcome.reason,
                outcome.latency_ms)
