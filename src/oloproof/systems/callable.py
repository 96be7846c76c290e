"""A Python function as the system under test.

Sync functions run in worker threads (one pool per run, sized to the
concurrency); ``async def`` functions are awaited on the run's loop. One call
is one attempt: the engine wraps it in the retry policy.

The worker threads are our own (:class:`_Workers`) rather than a
``ThreadPoolExecutor``: a finished call puts its result on a queue, and the
loop is woken once for all the results that finished meanwhile, not once per
call. With hundreds of calls in flight that is most of the cost of a call.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import queue
import threading
import traceback
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oloproof._context import CaseContext, reset_current_case, set_current_case
from oloproof.engine.retry import PermanentFailure, RetryableFailure
from oloproof.errors import ConfigError, TransientError
from oloproof.systems.base import CallResult
from oloproof.systems.identity import canonical_json, digest, digest_bytes
from oloproof.systems.loading import import_callable, module_source

_Job = tuple["asyncio.Future[Any]", Callable[[], Any]]


def _code_paths_digest(root: Path, code_paths: list[str], file: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for i, entry in enumerate(code_paths):
        path = (root / entry).resolve()
        if not path.exists():
            raise ConfigError(
                f"'{entry}' does not exist (looked for {path})",
                file=file, field=f"system.code_paths[{i}]",
                accepted="files or directories relative to the project directory",
            )
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for p in found:
            if "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            try:
                rel = p.relative_to(root.resolve()).as_posix()
            except ValueError:
                rel = p.as_posix()
            files[rel] = digest_bytes(p.read_bytes())
    return files


def _describe(exc: BaseException) -> str:
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(frames[-3:-1]).strip().splitlines()[-2:] if len(frames) > 2 else []
    text = f"{type(exc).__name__}: {exc}"
    if tail:
        text += "\n" + "\n".join(tail)
    return text


class _Workers:
    """Threads that run sync calls and hand the results back to the loop in batches.

    At most ``max_threads`` threads, started as calls need them. A call not
    answered within ``timeout_s`` fails with :class:`TimeoutError`; it keeps
    its thread until it returns, and its result is dropped. Deadlines are
    kept in a dict and checked by one timer, set for the earliest: cheaper
    than a timer per call, and calls rarely time out.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, max_threads: int, timeout_s: float
    ) -> None:
        self._loop = loop
        self._max = max_threads
        self._timeout_s = timeout_s
        self._deadlines: dict[asyncio.Future[Any], float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Calls submitted and not yet delivered (counted on the loop only): a
        # thread is started while they outnumber the threads.
        self._busy = 0
        # Results wait here for the loop; ``_wake`` says a delivery is scheduled.
        self._done: deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = deque()
        self._wake = False

    def submit(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        """Run ``fn()`` in a worker thread; its result, as a future of the loop."""
        future: asyncio.Future[Any] = self._loop.create_future()
        self._jobs.put((future, fn))
        deadline = self._loop.time() + self._timeout_s
        self._deadlines[future] = deadline
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._expire)
        self._busy += 1
        if self._busy > len(self._threads) and len(self._threads) < self._max:
            thread = threading.Thread(
                target=self._work, name=f"oloproof-system-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return future

    def _work(self) -> None:
        jobs, done = self._jobs, self._done
        while True:
            job = jobs.get()
            if job is None:
                return
            future, fn = job
            if future.cancelled():  # the run stopped before the call began
                done.append((future, None, None))
            else:
                try:
                    done.append((future, fn(), None))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    done.append((future, None, exc))
            del fn, job, future
            if not self._wake:
                self._wake = True
                try:
                    self._loop.call_soon_threadsafe(self._deliver)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    pass

    def _deliver(self) -> None:
        # Clear the flag first: a result appended after this line schedules
        # another delivery, one appended before it is taken by this one.
        self._wake = False
        done, deadlines = self._done, self._deadlines
        while done:
            future, value, exc = done.popleft()
            self._busy -= 1
            deadlines.pop(future, None)
            if future.done():  # cancelled: the call timed out or the run stopped
                continue
            if exc is None:
                future.set_result(value)
            else:
                future.set_exception(exc)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        deadlines = self._deadlines
        for future in [f for f, deadline in deadlines.items() if deadline <= now or f.done()]:
            del deadlines[future]
            if not future.done():
                future.set_exception(TimeoutError())
        if deadlines:
            self._timer = self._loop.call_at(min(deadlines.values()), self._expire)

    def close(self) -> None:
        """Drop calls not yet started and let idle threads end; never waits."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._deadlines.clear()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[0].cancel()
                self._busy -= 1
        for _ in self._threads:
            self._jobs.put(None)


class CallableSystem:
    kind = "callable"

    def __init__(
        self, config: Any, root: Path, *, concurrency: int, file: str = "oloproof.yaml"
    ) -> None:
        self.name: str = config.name
        self.timeout_s: float = float(config.timeout_s)
        self.fn, module = import_callable(
            config.callable, root, file=file, field="system.callable"
        )
        declared = getattr(self.fn, "__oloproof_system__", None) or {}
        self.version: str = str(config.version or declared.get("version") or "")
        if not self.version:
            raise ConfigError(
                "a callable system needs a version",
                file=file, field="system.version",
                accepted="system.version in oloproof.yaml or @system(name=..., version=...)",
            )
        self.is_async = inspect.iscoroutinefunction(self.fn)
        self.concurrency = concurrency
        self.identity = digest(
            {
                "kind": "callable",
                "name": self.name,
                "version": self.version,
                "declared": declared,
                "callable": config.callable,
                "module_source": digest_bytes(module_source(module)),
                "code_paths": _code_paths_digest(root, list(config.code_paths or []), file),
            }
        )
        self._workers: _Workers | None = None

    async def start(self) -> None:
        if not self.is_async:
            # Threads that outlive a timeout keep their slot, so leave some room.
            self._workers = _Workers(
                asyncio.get_running_loop(), self.concurrency + 4, self.timeout_s
            )

    async def aclose(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None

    async def call(self, case_id: str, case_input: Any, attempt: int) -> CallResult:
        ctx = CaseContext(case_id=case_id, input=case_input, attempt=attempt)
        try:
            if self.is_async:
                async with asyncio.timeout(self.timeout_s):
                    output = await self._call_async(ctx)
            else:
                assert self._workers is not None, "CallableSystem.start() was not awaited"
                context = contextvars.copy_context()
                # The workers enforce timeout_s (TimeoutError).
                output = await self._workers.submit(lambda: context.run(self._call_sync, ctx))
        except TimeoutError:
            raise PermanentFailure(
                f"no answer within timeout_s = {self.timeout_s:g}s", kind="TIMEOUT"
            ) from None
        except TransientError as exc:
            if exc.retryable:
                raise RetryableFailure(_describe(exc)) from None
            raise PermanentFailure(_describe(exc)) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - no system error ever stops the run
            raise PermanentFailure(_describe(exc)) from None
        try:
            # The check that the output is JSON also makes the text its judgments are keyed on.
            output_json = canonical_json(output)
        except (TypeError, ValueError, RecursionError) as exc:
            raise PermanentFailure(f"the output is not JSON-serialisable: {exc}") from None
        return CallResult(output, ctx.usage, output_json)

    def _call_sync(self, ctx: CaseContext) -> Any:
        token = set_current_case(ctx)
        try:
            return self.fn(ctx.input)
        finally:
            reset_current_case(token)

    async def _call_async(self, ctx: CaseContext) -> Any:
        token = set_current_case(ctx)
        try:
            return await self.fn(ctx.input)
        finally:
            reset_current_case(token)
