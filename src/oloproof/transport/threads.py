"""Daemon worker threads with deadlines, for user code that may block.

Sync systems, custom evaluators and regular expressions run here, never on the
event loop: the loop stays free to honour a signal, to commit what finished
and to time calls out. A call not answered within its deadline fails with
:class:`CallTimedOut` on the loop's side; Python cannot stop a thread, so the
call keeps its thread until it returns and its result is dropped. The threads
are daemon threads, so a stuck one never holds the process open at exit (the
CLI also ends with ``os._exit`` when such a thread is left; cli/run.py).

The threads are our own rather than a ``ThreadPoolExecutor``: a finished call
puts its result on a queue, and the loop is woken once for all the results
that finished meanwhile, not once per call. With hundreds of calls in flight
that is most of the cost of a call.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    import threading
    from typing import Any

__all__ = [
    "AsyncHost", "CallTimedOut", "Job", "UserBaseException", "Workers", "WorkersHeld",
    "describe_exception", "innermost",
]

#: How long a closing :class:`AsyncHost` lets its cancelled calls end before it leaves
#: them running (a coroutine that swallows its cancellation never ends).
WIND_DOWN_S = 1.0


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


def innermost(exc: BaseException) -> BaseException:
    """The first error an exception group holds, at any depth; ``exc`` itself when it is
    not a group. The group a TaskGroup raises (anyio's connect, for one) says only that
    something failed in it: ``unhandled errors in a TaskGroup (1 sub-exception)``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class CallTimedOut(TimeoutError):
    """A call given up by its pool: it ran past its timeout (:class:`Workers`).

    Its own class, so that a caller can tell the pool's timeout from a ``TimeoutError``
    the user code raised itself (its client's read timeout, an ``asyncio.wait_for``),
    which is that code's error like any other."""


class WorkersHeld(CallTimedOut):
    """A call that never started: every thread of its pool was held by a call past its
    timeout (see :class:`Workers`), for the whole of this call's own timeout.

    A :class:`TimeoutError`, so every caller that records a timeout records this one
    too; ``held`` is how many threads the hung calls hold, for the message."""

    def __init__(self, held: int) -> None:
        super().__init__(
            f"the call never started: all {held} worker threads are held by earlier calls"
            " still running past their timeout"
        )
        self.held = held


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` for a user's exception (``SystemExit: 0``, ``KeyboardInterrupt``);
    for an exception group, the errors it holds (at most three), never the group's own
    words."""
    if isinstance(exc, UserBaseException):
        return str(exc)
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = exc.exceptions
        more = f" and {len(inner) - 3} more" if len(inner) > 3 else ""
        return "; ".join(describe_exception(e) for e in inner[:3]) + more
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

    At most ``limit`` calls run at once, in as many threads, started as calls
    need them. Calls may be submitted ahead of a free thread: they wait in a
    queue, and a thread that finishes a call takes the next one at once,
    without a turn of the loop in between.

    A call not answered within its timeout, counted from when it *started*
    (not from when it was submitted), fails with :class:`CallTimedOut` (a
    :class:`TimeoutError`). Python cannot stop a thread: the call keeps its
    thread until it returns, and its result is dropped. That thread no longer counts against ``limit``: another
    is started in its place, up to ``spare`` such stuck threads, and the stuck
    one ends once its call returns. Deadlines are checked by one timer, set for
    the earliest time a call could time out: cheaper than a timer per call,
    and calls rarely time out.

    So at most ``limit + spare`` threads ever exist. Once that many calls hang,
    no thread is left to take a call: the pool is *held*. A call that cannot
    start then fails with :class:`WorkersHeld` (a :class:`TimeoutError`) once
    the pool has been held for that call's timeout, however long ago it was
    submitted, and at once if it is submitted later while the pool is still
    held. No call waits without bound for a thread a hung call keeps; a stuck
    call that returns meanwhile frees its thread and the queue goes on.

    With ``batch_s``, results reach the loop in batches: a finished call wakes
    the loop only when fewer than ``limit`` calls wait in the queue (the threads
    will soon need more) or its thread was retired; otherwise it waits for a
    timer that delivers every ``batch_s`` while calls are out. Each wake of the
    loop takes a core from whatever runs there (a child process the user's code
    started, in a benchmark of code execution), so fewer wakes leave more of the
    machine to the calls; the price is a result reaching the loop up to
    ``batch_s`` later. :meth:`hold` and :meth:`flush` hand over what finished
    when a run stops.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        limit: int,
        timeout_s: float,
        *,
        spare: int = 4,
        batch_s: float | None = None,
        name: str = "oloproof-worker",
    ) -> None:

        import queue
        import threading  # a run from the cache makes no call (docs/design-notes.md)

        self._loop = loop
        self._name = name
        self._limit = max(1, limit)
        self._spare = max(0, spare)
        self._timeout_s = timeout_s
        # Every call submitted and not yet delivered, by its future (loop side only).
        self._pending: dict[asyncio.Future[Any], Job] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Counted on the loop: threads taking calls (at most ``limit``), and threads
        # whose call timed out and still runs (at most ``spare``).
        self._live = 0
        self._stuck = 0
        # Since when no thread can take a call (every one held by a stuck call), or None.
        self._held_since: float | None = None
        # Results wait here for the loop; ``_wake`` says a delivery is scheduled.
        self._done: deque[tuple[Job, Any, BaseException | None]] = deque()
        self._wake = False
        self._batch_s = batch_s
        self._tick: asyncio.TimerHandle | None = None
        # Set by hold(): threads start no more calls.
        self._holding = False
        # Calls started before the loop (start_early), not yet adopted, and the results
        # of those that finished before they were adopted.
        self._unadopted: set[Job] = set()
        self._finished_early: dict[Job, tuple[Any, BaseException | None]] = {}
        # Guards a thread's current call against the loop retiring it (rare: a timeout).
        self._lock = threading.Lock()

    def submit(
        self, fn: Callable[[], Any], timeout_s: float | None = None
    ) -> asyncio.Future[Any]:
        """Run ``fn()`` in a worker thread; its result, as a future of the loop.

        The future fails with :class:`CallTimedOut` when the call has not
        returned ``timeout_s`` (the pool's own when ``None``) after it started."""

        future: asyncio.Future[Any] = self._bound.create_future()
        timeout = self._timeout_s if timeout_s is None else timeout_s
        job = Job(future, fn, timeout)
        self._pending[future] = job
        self._jobs.put(job)
        # The earliest it can time out: had it started now, or, while every thread is held
        # by a stuck call, once the pool has been held that long (_expire).
        held = self._held_since
        self._check_at((time.monotonic() if held is None else held) + timeout)
        self._start_threads()
        if self._batch_s is not None and self._tick is None:
            self._tick = self._bound.call_later(self._batch_s, self._on_tick)
        return future

    @property
    def _bound(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        assert loop is not None, "Workers.bind() was not called"
        return loop

    def start_early(self, fn: Callable[[], Any]) -> Job:
        """Start ``fn()`` now, before the loop exists (a pool made with ``loop=None``):
        the run's first calls are under way while the run imports and starts its loop.
        The caller :meth:`adopt` s the job on the loop; its timeout counts from when it
        started, as every call's does."""
        job = Job(None, fn, self._timeout_s)
        self._unadopted.add(job)
        self._jobs.put(job)
        self._start_threads()
        return job

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop that receives the results, for a pool made before it (``loop=None``)."""
        self._loop = loop
        if self._done and not self._wake:
            self._wake = True
            loop.call_soon(self._deliver)

    def adopt(self, job: Job) -> asyncio.Future[Any]:
        """The future of a call :meth:`start_early` started: from here on it is a call
        like those :meth:`submit` makes."""
        future: asyncio.Future[Any] = self._bound.create_future()
        self._unadopted.discard(job)
        finished = self._finished_early.pop(job, None)
        if finished is not None:
            _settle(future, *finished)
            return future
        job.future = future
        self._pending[future] = job
        started = job.started
        self._check_at((time.monotonic() if started is None else started) + job.timeout)
        return future

    def _start_threads(self) -> None:
        # Calls waiting or running that no live thread has taken yet need a thread.
        import threading

        waiting = len(self._pending) + len(self._unadopted) - self._stuck
        while (
            waiting > self._live and self._live < self._limit
            and self._live + self._stuck < self._limit + self._spare
        ):
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._live += 1
            self._threads.append(thread)
        if self._live:
            self._held_since = None
        elif waiting > 0 and self._held_since is None and self._loop is not None:
            # Every thread is held by a stuck call, and calls wait: they are timed from now
            # (_expire), since nothing else would ever start them.
            self._held_since = time.monotonic()
            self._check_at(self._held_since)

    def _work(self) -> None:
        jobs, done, lock = self._jobs, self._done, self._lock
        batched, limit = self._batch_s is not None, self._limit
        me = _Thread()
        while True:
            job = jobs.get()
            if job is None:
                return
            if self._holding:  # the run stops: the call stays pending until it is cancelled
                continue
            with lock:  # taken here, or given up by the loop (_expire), never both
                fn = job.fn
                job.fn = None
                job.thread = me
                me.job = job
                job.started = time.monotonic()
            future = job.future
            # (No future yet: a call started before the loop, not adopted yet.)
            if fn is None or (future is not None and future.cancelled()):
                # The run stopped before the call began, or the loop gave it up.
                done.append((job, None, None))
            else:
                try:
                    done.append((job, fn(), None))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    done.append((job, None, _handed_over(exc)))
            del job, future, fn
            with lock:
                me.job = None
                retired = me.retired
            loop = self._loop
            if loop is not None and not self._wake and (
                retired or not batched or jobs.qsize() < limit
            ):
                self._wake = True
                try:
                    loop.call_soon_threadsafe(self._deliver)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    pass
            if retired:  # its call timed out and another thread took its place
                return

    def _deliver(self) -> None:
        # Clear the flag first: a result appended after this line schedules
        # another delivery, one appended before it is taken by this one.
        self._wake = False
        done, pending = self._done, self._pending
        while done:
            job, value, exc = done.popleft()
            future = job.future
            if future is None:  # started before the loop: kept until it is adopted
                self._finished_early[job] = (value, exc)
                continue
            pending.pop(future, None)
            if job.timed_out:
                self._stuck -= 1
            if future.done():  # cancelled: the call timed out or the run stopped
                continue
            _settle(future, value, exc)
        self._start_threads()

    def _on_tick(self) -> None:
        self._tick = None
        if self._done:
            self._deliver()
        if self._pending and self._batch_s is not None:
            self._tick = self._bound.call_later(self._batch_s, self._on_tick)

    def hold(self) -> None:
        """Start no more calls: those queued stay pending (their callers cancel them)."""
        self._holding = True

    def flush(self) -> bool:
        """Hand the results that finished to their futures now; whether there were any."""
        if not self._done:
            return False
        self._deliver()
        return True

    def _check_at(self, when: float) -> None:
        """Have :meth:`_expire` run at ``when`` at the latest."""
        if self._timer is not None:
            if self._timer_at <= when:
                return
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._bound.call_later(max(0.0, when - time.monotonic()), self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = time.monotonic()
        earliest = None
        held_since = self._held_since
        for future, job in list(self._pending.items()):
            if job.timed_out or future.done():
                continue
            started = job.started
            if started is None:
                # Not started: the earliest it can time out is had it started now; but
                # while no thread can take it, it is timed from when that began.
                deadline = now + job.timeout
                if held_since is not None and held_since + job.timeout > now:
                    deadline = held_since + job.timeout
                elif held_since is not None and self._give_up(future, job):
                    continue
                earliest = deadline if earliest is None else min(earliest, deadline)
                continue
            deadline = started + job.timeout
            if deadline > now:
                earliest = deadline if earliest is None else min(earliest, deadline)
                continue
            with self._lock:
                thread = job.thread
                # Still in the call: retire its thread. Returned meanwhile: the thread
                # goes on taking calls, and only the result is dropped.
                stuck = thread is not None and thread.job is job
                if thread is not None and stuck:
                    thread.retired = True
            if stuck:
                job.timed_out = True
                self._stuck += 1
                self._live -= 1
            future.set_exception(CallTimedOut())
        if earliest is not None:
            self._check_at(earliest)
        self._start_threads()

    def _give_up(self, future: asyncio.Future[Any], job: Job) -> bool:
        """Fail a call no thread has taken (:class:`WorkersHeld`); False if a thread took
        it meanwhile (it is then timed from its start, as any call)."""
        with self._lock:
            if job.fn is None:
                return False
            job.fn = None  # a thread that takes it later skips it
        del self._pending[future]
        future.set_exception(WorkersHeld(self._stuck))
        return True

    def close(self) -> None:
        """Drop calls not yet started and let idle threads end; never waits."""
        import queue

        for handle in (self._timer, self._tick):
            if handle is not None:
                handle.cancel()
        self._timer = self._tick = None
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is None:
                continue
            if job.future is None:  # started before the loop and never adopted
                self._unadopted.discard(job)
            else:
                job.future.cancel()
                self._pending.pop(job.future, None)
        for _ in self._threads:
            self._jobs.put(None)


def _settle(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if exc is None:
        future.set_result(value)
    else:
        future.set_exception(exc)


class Job:
    """One call submitted to :class:`Workers`; ``started`` and ``thread`` are set by the
    thread that takes it, ``timed_out`` by the loop."""

    __slots__ = ("fn", "future", "started", "thread", "timed_out", "timeout")

    def __init__(
        self, future: asyncio.Future[Any] | None, fn: Callable[[], Any], timeout: float
    ) -> None:
        self.future = future
        self.fn: Callable[[], Any] | None = fn
        self.timeout = timeout
        self.started: float | None = None
        self.thread: _Thread | None = None
        self.timed_out = False


class _Thread:
    """A worker thread's state the loop may look at: its current call, and whether it
    was retired (its call timed out; it ends when the call returns)."""

    __slots__ = ("job", "retired")

    def __init__(self) -> None:
        self.job: Job | None = None
        self.retired = False


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
        import threading

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
        """Stop the host loop once its calls have ended; never waits for it.

        Calls still on it are cancelled first, and the loop turns until they have ended
        (at most :data:`WIND_DOWN_S`): a task left pending on a stopped loop is reported
        as "Task was destroyed but it is pending!" when the loop is collected, and its
        coroutine, closed then from another context, fails in its ``finally`` ("was
        created in a different Context"). A call that swallows its cancellation, or
        blocks its loop (a ``time.sleep`` in ``async def``), is left as it is, on a loop
        that keeps running: like a stuck worker thread, its thread is a daemon, and the
        CLI ends without waiting for it."""
        try:
            self._loop.call_soon_threadsafe(self._wind_down)
        except RuntimeError:  # already closed
            pass

    def _wind_down(self) -> None:
        import asyncio

        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        # After the steps the cancellations scheduled, which come first.
        self._loop.call_soon(self._stop_when_done, time.monotonic() + WIND_DOWN_S)

    def _stop_when_done(self, deadline: float) -> None:
        import asyncio

        if not any(not t.done() for t in asyncio.all_tasks(self._loop)):
            self._loop.stop()
        elif time.monotonic() < deadline:
            self._loop.call_later(0.01, self._stop_when_done, deadline)
        # Else a call refuses to end: the loop goes on holding it (see close()).


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

