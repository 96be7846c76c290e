"""A Python function as the system under test.

Nothing a user's function does can stop the run or hang it:

- sync functions run in daemon worker threads (:class:`~oloproof.transport.threads.Workers`,
  one pool per run, sized to the concurrency);
- ``async def`` functions run on an event loop of their own in a daemon thread
  (:class:`~oloproof.transport.threads.AsyncHost`), so one that blocks its loop
  (``time.sleep`` inside ``async def``) cannot block the run's;
- every exception, ``BaseException`` included (``SystemExit``, ``KeyboardInterrupt``,
  ``GeneratorExit``, a ``CancelledError`` of its own), is one failed call: the case
  is an error, missing for every criterion;
- ``timeout_s`` bounds each call; a call past it is a TIMEOUT and its thread is
  abandoned (another takes its place, up to Workers' spare threads); a call that cannot
  start because every thread is held by such a call is a TIMEOUT too, once the threads
  have been held for ``timeout_s``;
- the function receives a fresh copy of the case input, so one that mutates it
  changes neither what is stored nor the cache keys;
- its output is taken as it is when the function returns, in the thread (or on the loop)
  that ran it: made JSON there, and everything after (the store, the evaluators and
  judges, the judgment keys) sees only the copy decoded from that JSON. A function that
  returns an object it keeps changing (one shared between calls), or one that claims to
  hold other values than it encodes to, cannot pass with an output nobody stored.

One call is one attempt: the engine wraps it in the retry policy.

With ``concurrency.adaptive`` for the system (``rate_limits=True``), an exception
that carries HTTP status 429 (``status_code``, as the OpenAI and Anthropic SDKs'
``RateLimitError``; see :func:`oloproof.transport.ratelimit.exception_rate_signal`)
is a rate limit: the call is retried, and the adaptive limit shrinks. Without
adaptive it is an error like any other, as it always was.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
from types import FunctionType

from oloproof._context import CaseContext, reset_current_case, set_current_case
from oloproof._json import canonical_json, digest, digest_bytes, output_snapshot
from oloproof.errors import ConfigError, TransientError
from oloproof.systems.base import CallResult
from oloproof.systems.loading import (
    code_files,
    code_paths_digest,
    defining_files,
    file_digests,
    import_callable,
    imports_outside_identity,
    module_source,
    patched_code,
    reached_modules,
    source_file,
)
from oloproof.transport.retry import AttemptFailure, PermanentFailure, RetryableFailure
from oloproof.transport.threads import (
    AsyncHost,
    CallTimedOut,
    UserBaseException,
    Workers,
    WorkersHeld,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from oloproof.project.config import SystemConfig
    from oloproof.transport.threads import Job


# ``inspect.CO_COROUTINE``, the code flag of an ``async def`` (the same on every Python since
# 3.5; tests/systems/test_coroutine_check.py compares it with inspect's on each we test).
_CO_COROUTINE = 0x80


def is_coroutine_function(fn: object) -> bool:
    """``inspect.iscoroutinefunction(fn)``, without importing :mod:`inspect` for a plain
    function, the usual system: importing it (with ``ast``, ``dis`` and ``tokenize``) was
    9-14 ms before a fresh run's first call (docs/performance.md). For a plain function
    inspect answers from the code's flags, or from a mark set by
    ``inspect.markcoroutinefunction`` (Python 3.12 and later); a function with a mark, and
    anything that is not a plain function (a method, a ``functools.partial``, an object
    with ``__call__``), is asked of inspect itself."""
    if type(fn) is FunctionType and not hasattr(fn, "_is_coroutine_marker"):
        return bool(fn.__code__.co_flags & _CO_COROUTINE)
    import inspect

    return inspect.iscoroutinefunction(fn)


def _retryable_in(group: ExceptionGroup[Exception]) -> TransientError | None:
    """The first error of ``group`` when every error in it (at any depth) is a
    ``TransientError(retryable=True)``; ``None`` otherwise."""
    asked, rest = group.split(lambda exc: isinstance(exc, TransientError) and exc.retryable)
    if asked is None or rest is not None:
        return None
    first: Exception = asked
    while isinstance(first, ExceptionGroup) and first.exceptions:
        first = first.exceptions[0]
    return first if isinstance(first, TransientError) else None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UserBaseException):
        return str(exc)
    import traceback

    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(frames[-3:-1]).strip().splitlines()[-2:] if len(frames) > 2 else []
    text = f"{type(exc).__name__}: {exc}"
    if tail:
        text += "\n" + "\n".join(tail)
    return text


def _context(case_id: str, case_input: Any, attempt: int) -> CaseContext:
    """The context of one call, with a copy of the input of its own: a function that
    mutates its input must not change what is stored or the keys the case's judgments
    are cached under."""
    return CaseContext(case_id=case_id, input=json.loads(canonical_json(case_input)),
                       attempt=attempt)


class _NotJson(Exception):
    """The output could not be made JSON when the function returned (:func:`_taken`)."""


def _taken(output: Any) -> tuple[Any, str]:
    """The output as the function returned it: a decoded copy and its canonical JSON
    (:func:`oloproof._json.output_snapshot`), made by whatever ran the call."""
    try:
        return output_snapshot(output)
    except (TypeError, ValueError, RecursionError, OverflowError) as exc:
        raise _NotJson(f"the output is not JSON-serialisable: {exc}") from None


def _since(began: list[float]) -> float | None:
    """Milliseconds since the call began, if it was noted (a sync call's worker thread)."""
    return (time.perf_counter() - began[0]) * 1000.0 if began else None


class CallableSystem:
    kind = "callable"

    def __init__(
        self, config: SystemConfig, root: str, *, concurrency: int, file: str = "oloproof.yaml",
        rate_limits: bool = False,
    ) -> None:
        self.name: str = config.name
        self.timeout_s: float = float(config.timeout_s)
        assert config.callable is not None, "a callable system names its callable"
        #: What a call reaches, for messages.
        self.target = f"callable {config.callable}"
        # Read before the import: a module that read them when it was imported in this
        # process, and not as they are now, is imported afresh (import_callable).
        code_paths = code_paths_digest(
            root, list(config.code_paths or []), file=file, field="system.code_paths"
        )
        self.fn, module = import_callable(
            config.callable, root, file=file, field="system.callable", code_paths=code_paths
        )
        declared = getattr(self.fn, "__oloproof_system__", None) or {}
        self.version: str = str(config.version or declared.get("version") or "")
        if not self.version:
            raise ConfigError(
                "a callable system needs a version",
                file=file, field="system.version",
                accepted="system.version in oloproof.yaml or @system(name=..., version=...)",
            )
        self.concurrency = concurrency
        # concurrency.adaptive: an exception with status 429 is a rate limit (retried).
        self.rate_limits = rate_limits
        identity: dict[str, Any] = {
            "kind": "callable",
            "name": self.name,
            "version": self.version,
            "declared": declared,
            "callable": config.callable,
            "module_source": digest_bytes(module_source(module)),
            "code_paths": code_paths,
        }
        # A function defined in another module than the one named (``from impl import
        # answer``): that module's bytes too. Only then, so that every other system keeps
        # the identity (and the cache) it had.
        defining = defining_files(self.fn, module, root)
        if defining:
            identity["defined_in"] = file_digests(defining)
        self.identity = digest(identity)
        #: Project files the module uses outside its identity (an edit to them keeps the
        #: cache): the run warns about them once (loading.imports_outside_identity).
        self.outside_identity: list[str] = imports_outside_identity(
            module, root, list(config.code_paths or []), defining
        )
        #: Every project file the code reached, by path: what ``gate`` hashes again.
        self.code_files: dict[str, str] = code_files(
            root, module, defining, code_paths, self.outside_identity
        )
        self.module_file: str = os.path.basename(source_file(module) or config.callable)
        #: The module and the project modules it reaches: what :meth:`patched_code` checks.
        self._modules = reached_modules(module, root)
        self._is_async: bool | None = None
        self._workers: Workers | None = None
        self._host: AsyncHost | None = None
        # Calls started before the loop (start_early), by case: the job, the case's
        # context, and when the call began (perf_counter, once its thread took it).
        self._early: dict[str, list[tuple[Job, CaseContext, list[float]]]] = {}

    def patched_code(self) -> list[str]:
        """What of the system's code is not what its files define (a test's patch of the
        project's code, in this process: loading.patched_code), as ``module.name``; empty
        when it is its files'."""
        return patched_code(self._modules)

    @property
    def queues_calls(self) -> bool:
        """Whether calls may be handed over ahead of a free thread (a sync function): they
        wait in the workers' queue, and each call's latency counts from its start."""
        return not self.is_async

    def start_early(self, calls: Iterable[tuple[str, Any]]) -> None:
        """Make the first attempts of these calls now, before the run's event loop exists:
        the first calls are under way while the run imports asyncio and starts its loop
        (engine/pipeline.py, ``Engine.start_early``). A sync function only; each call is
        then awaited by :meth:`call` as if it had started there."""
        if self.is_async or self._workers is not None:
            return
        workers = self._workers = Workers(
            None, self.concurrency, self.timeout_s, name="oloproof-system"
        )
        for case_id, case_input in calls:
            ctx = _context(case_id, case_input, 1)
            began: list[float] = []
            job = workers.start_early(self._timed(ctx, began))
            self._early.setdefault(case_id, []).append((job, ctx, began))

    def _timed(self, ctx: CaseContext, began: list[float]) -> Callable[[], Any]:
        """The sync call of ``ctx``, in a copy of the current context, noting in ``began``
        when a worker thread took it."""
        context = contextvars.copy_context()

        def call() -> tuple[Any, str]:
            began.append(time.perf_counter())
            return _taken(context.run(self._call_sync, ctx))

        return call

    async def start(self) -> None:
        import asyncio

        if self.is_async:
            self._host = AsyncHost()
        elif self._workers is not None:  # made by start_early
            self._workers.bind(asyncio.get_running_loop())
        else:
            # A thread whose call timed out is replaced (Workers' spare threads).
            self._workers = Workers(
                asyncio.get_running_loop(), self.concurrency, self.timeout_s,
                name="oloproof-system",
            )

    def hold(self) -> None:
        """A stop: start no call that waits for a thread, and hand the results of those that
        finished to their callers now (Workers.hold, flush)."""
        if self._workers is not None:
            self._workers.hold()
            self._workers.flush()

    async def aclose(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        if self._host is not None:
            self._host.close()
            self._host = None

    async def call(self, case_id: str, case_input: Any, attempt: int) -> CallResult:
        waiting = self._early.get(case_id) if attempt == 1 else None
        if waiting:  # started before the loop (start_early)
            job, ctx, began = waiting.pop(0)
            if not waiting:
                del self._early[case_id]
        else:
            job, ctx, began = None, _context(case_id, case_input, attempt), []
        try:
            result = await self._call(ctx, job, began)
        except AttemptFailure as failure:
            failure.latency_ms = _since(began)
            raise
        result.latency_ms = _since(began)
        return result

    async def _call(self, ctx: CaseContext, job: Job | None, began: list[float]) -> CallResult:
        """One attempt; ``began`` is filled with a sync call's start by its worker thread."""
        import asyncio

        # Each path gives the output as taken when the function returned (_taken).
        limit: asyncio.Timeout | None = None
        try:
            if job is not None:
                assert self._workers is not None, "CallableSystem.start() was not awaited"
                output, output_json = await self._workers.adopt(job)
            elif self.is_async:
                assert self._host is not None, "CallableSystem.start() was not awaited"
                async with asyncio.timeout(self.timeout_s) as limit:
                    output, output_json = await self._host.run(lambda: self._call_async(ctx))
            else:
                assert self._workers is not None, "CallableSystem.start() was not awaited"
                # The workers enforce timeout_s (CallTimedOut), counted from the start.
                output, output_json = await self._workers.submit(self._timed(ctx, began))
        except WorkersHeld as exc:  # never started: the threads are all held by hung calls
            raise PermanentFailure(
                f"no answer within timeout_s = {self.timeout_s:g}s: {exc}", kind="TIMEOUT"
            ) from None
        except TransientError as exc:
            if exc.retryable:
                raise RetryableFailure(_describe(exc)) from None
            raise PermanentFailure(_describe(exc)) from None
        except TimeoutError as exc:
            if isinstance(exc, CallTimedOut) or (limit is not None and limit.expired()):
                raise PermanentFailure(
                    f"no answer within timeout_s = {self.timeout_s:g}s", kind="TIMEOUT"
                ) from None
            # The system's own (its client's read timeout, an asyncio.wait_for of its
            # own): its error, as any other, not our limit running out.
            raise self._failure(exc) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # our own stop
            raise PermanentFailure("CancelledError (raised by the system)") from None
        except _NotJson as exc:
            raise PermanentFailure(str(exc)) from None
        except ExceptionGroup as group:
            # An async system's TaskGroup wraps what its tasks raised: a retry is asked for
            # when every error in it asks for one.
            transient = _retryable_in(group)
            if transient is not None:
                raise RetryableFailure(_describe(transient)) from None
            raise self._failure(group) from None
        except Exception as exc:  # noqa: BLE001 - no system error ever stops the run
            raise self._failure(exc) from None
        return CallResult(output, ctx.usage, output_json)

    def _failure(self, exc: Exception) -> AttemptFailure:
        """The failed attempt an exception the system raised stands for: a rate limit
        (retried) with ``concurrency.adaptive`` when it reports a 429, else its error."""
        rate = None
        if self.rate_limits:  # concurrency.adaptive: its module only for the option
            from oloproof.transport.ratelimit import exception_rate_signal

            rate = exception_rate_signal(exc)
        if rate is not None:
            return RetryableFailure(_describe(exc), retry_after_s=rate.wait_s, rate=rate)
        return PermanentFailure(_describe(exc))


    @property
    def is_async(self) -> bool:
        """Whether the callable is an ``async def`` (asked when it is first called)."""
        if self._is_async is None:
            self._is_async = is_coroutine_function(self.fn)
        return self._is_async

    def _call_sync(self, ctx: CaseContext) -> Any:
        token = set_current_case(ctx)
        try:
            return self.fn(ctx.input)
        finally:
            reset_current_case(token)

    async def _call_async(self, ctx: CaseContext) -> tuple[Any, str]:
        token = set_current_case(ctx)
        try:
            output = await self.fn(ctx.input)
        finally:
            reset_current_case(token)
        return _taken(output)
