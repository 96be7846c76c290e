"""Daemon worker threads with deadlines, for user code that may block.

Sync systems, custom evaluators and regular expressions run here, never on the
event loop: the loop stays free to honour a signal, to commit what finished
and to time calls out. A call not answered within its deadline fails with
:class:`TimeoutError` on the loop's side; Python cannot stop a thread, so the
call keeps its thread until it returns and its result is dropped. The threads
are daemon threads, so a stuck one never holds the process open at exit (the
CLI also ends with ``os._exit`` when such a thread is left; cli/run.py).

The threads are our own rather than a ``ThreadPoolExecutor``: a finished call
puts its result on a queue, and the loop is woken once for all the results
that finished meanwhile, not once per call. With hundreds of calls in flight
that is most of the cost of a call.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    import asyncio
    from typing import Any
    _Job = tuple["asyncio.Future[Any]", Callable[[], Any]]

__all__ = ["AsyncHost", "UserBaseException", "Workers", "describe_exception"]


class UserBaseException(Exception):
    """A ``BaseException`` that user code raised (``SystemExit``, ``KeyboardInterrupt``,
    ``GeneratorExit``, a ``CancelledError`` of its own, ``StopIteration``...).

    Handed to the loop in its place: asyncio treats ``SystemExit`` and
    ``KeyboardInterrupt`` as "stop the whole loop", ``CancelledError`` as "this
    task was cancelled" and refuses ``StopIteration`` on a future, none of
    which is what user code meant. Wrapped, it is one failed call.
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(describe_exception(original))
        self.original = original


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` for a user's exception (``SystemExit: 0``, ``KeyboardInterrupt``)."""
    if isinstance(exc, UserBaseException):
        return str(exc)
    text = str(exc)
    name = type(exc).__name__
    if isinstance(exc, SystemExit) and not text:
        text = "None"
    return f"{name}: {text}" if text else name


def _handed_over(exc: BaseException) -> BaseException:
    """What the loop may safely receive in place of ``exc``."""
    if isinstance(exc, Exception) and not isinstance(exc, (StopIteration, StopAsyncIteration)):
        return exc
    return UserBaseException(exc)


class Workers:
    """Threads that run sync calls and hand the results back to the loop in batches.

    At most ``max_threads`` threads, started as calls need them. A call not
    answered within ``timeout_s`` fails with :class:`TimeoutError`; it keeps
    its thread until it returns, and its result is dropped. Deadlines are
    kept in a dict and checked by one timer, set for the earliest: cheaper
    than a timer per call, and calls rarely time out.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        max_threads: int,
        timeout_s: float,
        *,
        name: str = "oloproof-worker",
    ) -> None:

        import queue

        self._loop = loop
        self._name = name
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

    def submit(
        self, fn: Callable[[], Any], timeout_s: float | None = None
    ) -> asyncio.Future[Any]:
        """Run ``fn()`` in a worker thread; its result, as a future of the loop.

        The future fails with :class:`TimeoutError` after ``timeout_s`` (the
        pool's own when ``None``)."""

        future: asyncio.Future[Any] = self._loop.create_future()
        self._jobs.put((future, fn))
        deadline = self._loop.time() + (self._timeout_s if timeout_s is None else timeout_s)
        self._deadlines[future] = deadline
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._expire)
        elif deadline < self._timer.when():
            self._timer.cancel()
            self._timer = self._loop.call_at(deadline, self._expire)
        self._busy += 1
        if self._busy > len(self._threads) and len(self._threads) < self._max:
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
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
                    done.append((future, None, _handed_over(exc)))
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
        import queue

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


class AsyncHost:
    """An event loop of its own, in a daemon thread, for ``async def`` user code.

    User coroutines run there, never on the run's loop: one that blocks (a
    ``time.sleep`` inside ``async def``) blocks only this loop, so the run's
    loop still times calls out, commits what finished and honours the first
    SIGTERM at once. A ``CancelledError`` the user code raises on its own (an
    inner task it awaited was cancelled) is not our stop: it comes back as a
    :class:`UserBaseException`, as does any other ``BaseException``. A
    cancellation we asked for (a timeout, a stop) still propagates as one.
    """

    def __init__(self, name: str = "oloproof-async-system") -> None:
        import asyncio

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import asyncio

        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    async def run(self, factory: Callable[[], Any]) -> Any:
        """Await ``factory()`` (a coroutine) on the host loop, from the caller's loop."""
        import asyncio

        future = asyncio.run_coroutine_threadsafe(_guarded(factory), self._loop)
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop the host loop when it next gets control; never waits for it."""
        try:
            self._loop.call_soon_threadsafe(self._loop.stop)
        except RuntimeError:  # already closed
            pass


async def _guarded(factory: Callable[[], Any]) -> Any:
    import asyncio

    task = asyncio.current_task()
    try:
        return await factory()
    except asyncio.CancelledError as exc:
        if task is not None and task.cancelling():
            raise  # ours: a timeout or a stop asked for it
        raise UserBaseException(exc) from None
    except BaseException as exc:
        if isinstance(exc, GeneratorExit) and _current_task() is not task:
            # Not user code: this coroutine itself is being closed (its loop stopped with
            # the call pending and it is garbage-collected). Turning that into an error
            # would make Python report "coroutine ignored GeneratorExit".
            raise
        raise _handed_over(exc) from None


def _current_task() -> asyncio.Task[Any] | None:
    import asyncio

    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop on this thread
        return None

