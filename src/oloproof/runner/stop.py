"""Stopping a run: signals, a closed pipe, a store fault, a failure every call repeats.

The run's main task is cancelled through its loop, so a stop is safe from a
signal handler and from a thread. User code never runs on that loop (sync
systems and custom evaluators run in worker threads, ``async def`` systems on
a loop of their own), so the loop always gets control back and the FIRST
signal is honoured at once; a second one exits at once (``on_second``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator

from oloproof.engine.pipeline import EngineCase

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any

SIGNALS: tuple[tuple[signal.Signals, str], ...] = (
    (signal.SIGINT, "interrupted (Ctrl-C)"),
    (signal.SIGTERM, "terminated (SIGTERM)"),
)
# The terminal (or the SSH session) the run was started from went away. Left to its default,
# SIGHUP killed the run where it stood: no stop recorded, the last finished cases not yet
# committed lost, no run_finished event. A hangup that is ignored (``nohup``) stays ignored.
_HANGUP: signal.Signals | None = getattr(signal, "SIGHUP", None)
if _HANGUP is not None:
    SIGNALS += ((_HANGUP, "hung up (SIGHUP: the terminal closed)"),)


class StopRequest:
    """Set by a signal, a closed pipe or a fault; the run then stops starting calls.

    The first request cancels the run's main task, through the loop so that it
    is safe from a signal handler: calls in flight are cancelled, what finished
    is stored, and the run is recorded as RUN_ERROR/PARTIAL. Every further
    request calls ``on_second`` (the CLI exits at once). The handlers are plain
    ``signal.signal`` handlers, not loop callbacks, so a second Ctrl-C works
    even if the loop were blocked.
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

    @contextlib.contextmanager
    def attached(self, task: asyncio.Task[Any]) -> Iterator[None]:
        """:meth:`attach` for the block; meanwhile a signal wakes the task's loop on
        whichever thread the kernel delivers it.

        A signal sent to the process (Ctrl-C, ``kill``) goes to any one of its threads
        that does not block it, not always the main thread. Python runs the handler on
        the main thread only, when it next runs bytecode: a signal that landed on a call's
        thread while the loop waited (every call in flight in threads, in Ray's workers or
        on the network) stopped the run only when something else woke the loop, the next
        call's end: 16 s later when the calls took 20 s. So the C-level handler also
        writes to a socket the loop reads (``signal.set_wakeup_fd``, as asyncio's own
        ``add_signal_handler`` does); the handlers stay plain ``signal.signal`` ones, so a
        second signal still works while the loop is blocked. Only on the main thread,
        which alone may set the wakeup descriptor; elsewhere the block just runs."""
        self.attach(task)
        undo = _wake_on_signals(task.get_loop())
        try:
            yield
        finally:
            undo()

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

    def internal(self, reason: str) -> None:
        """A stop the run asks of itself (a store fault, a 401): never "a second signal"."""
        if self.reason is None:
            self.reason = reason
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
    def signals(self, *, keep_after_stop: bool = False) -> Iterator[None]:
        """Route SIGINT, SIGTERM and SIGHUP to this request while the block runs (main thread only).

        ``keep_after_stop`` (the CLI's process): once a signal has stopped the run, the
        handlers stay when the block ends, so that a second signal, however late, still
        exits at once with 5 (``on_second``). Restored, Python's own handler would raise
        KeyboardInterrupt in whatever runs then (exit 130) or, once the command returned,
        end the process by SIGINT: a double Ctrl-C 40-110 ms apart did so 8 times in 12.
        """
        reasons = dict(SIGNALS)

        def handler(signum: int, _frame: object) -> None:
            self(reasons[signal.Signals(signum)])

        previous: dict[signal.Signals, Any] = {}
        main_thread = True
        try:
            for sig in reasons:
                if sig == _HANGUP and signal.getsignal(sig) == signal.SIG_IGN:
                    continue  # started under nohup: a hangup is not a stop
                previous[sig] = signal.signal(sig, handler)
        except ValueError:
            # Not the main thread (of the main interpreter): only that thread receives
            # signals, and Python lets only it set their handlers; the first one failed.
            main_thread = False
        if not main_thread:
            yield
            return
        # OLOPROOF_DEBUG=1: SIGUSR1 prints where the run waits (docs/progress-and-concurrency.md).
        dump = getattr(signal, "SIGUSR1", None) if os.environ.get("OLOPROOF_DEBUG") == "1" else None
        before_dump = None if dump is None else signal.signal(dump, lambda *_: self.dump_state())
        try:
            yield
        finally:
            if dump is not None:
                signal.signal(dump, signal.SIG_DFL if before_dump is None else before_dump)
            if not (keep_after_stop and self.count):
                for sig, old in previous.items():
                    signal.signal(sig, signal.SIG_DFL if old is None else old)

    def dump_state(self) -> None:
        """Write to standard error where the run waits: each task of its loop (the stack of
        what it awaits) and each thread. For a run that does not end; with
        ``OLOPROOF_DEBUG=1``, SIGUSR1 calls it."""
        import faulthandler

        loop = self._loop
        asyncio = sys.modules.get("asyncio")
        if loop is not None and asyncio is not None and not loop.is_closed():
            tasks = asyncio.all_tasks(loop)
            sys.stderr.write(f"oloproof: {len(tasks)} task(s) on the run's loop"
                             f" (stop requested: {self.reason or 'no'})\n")
            for task in tasks:
                sys.stderr.write(f"  {task.get_name()}:\n")
                for line in _awaiting(task.get_coro()):
                    sys.stderr.write(f"    {line}\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)


def _awaiting(step: Any) -> list[str]:
    """Where a coroutine waits: each coroutine (or generator) it awaits in turn, down to
    what is pending at the bottom (``Task.print_stack`` shows the outermost one only)."""
    lines: list[str] = []
    for _ in range(100):  # a chain deeper than this is not one to read
        frame = getattr(step, "cr_frame", None) or getattr(step, "gi_frame", None)
        if frame is None:
            if step is not None:
                lines.append(f"awaiting {step!r}"[:300])
            break
        code = frame.f_code
        lines.append(f"{code.co_filename}:{frame.f_lineno} in {code.co_name}")
        step = getattr(step, "cr_await", None) or getattr(step, "gi_yieldfrom", None)
    return lines


def _wake_on_signals(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Have every signal wake ``loop`` (see :meth:`StopRequest.attached`); what undoes it."""
    import socket

    try:
        reader, writer = socket.socketpair()
    except OSError:
        return lambda: None
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main thread (of the main interpreter)
        reader.close()
        writer.close()
        return lambda: None

    def drain() -> None:
        with contextlib.suppress(OSError):  # BlockingIOError once it is empty
            while reader.recv(512):
                pass

    loop.add_reader(reader.fileno(), drain)

    def undo() -> None:
        signal.set_wakeup_fd(previous)
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()

    return undo


class UntilStopped(list[EngineCase]):
    """The suite's cases, handed to the engine's workers until a stop is requested.

    Cancelling the run's task is not enough on its own to stop starting calls: on
    Python 3.11, ``asyncio.wait_for`` swallows a cancellation that races with the
    call it waits on finishing, and that worker would go on through the suite.
    """

    def __init__(
        self, cases: list[EngineCase], stop: StopRequest,
        until: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(cases)
        self._stop = stop
        # A sequential run: no more cases once every rule is decided (runner/sequential.py).
        self._until = until

    @property
    def stops_when_decided(self) -> bool:
        """Whether the cases stop once a sequential run's rules are decided: the engine
        then hands out no case ahead of a free call (engine/pipeline.py)."""
        return self._until is not None

    def __iter__(self) -> Iterator[EngineCase]:
        for case in super().__iter__():
            if self._stop.reason is not None:
                return
            if self._until is not None and self._until():
                return
            yield case
