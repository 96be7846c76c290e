"""Stopping a run: signals, a closed pipe, a store fault, a failure every call repeats.

The run's main task is cancelled through its loop, so a stop is safe from a
signal handler and from a thread. User code never runs on that loop (sync
systems and custom evaluators run in worker threads, ``async def`` systems on
a loop of their own), so the loop always gets control back and the FIRST
signal is honoured at once; a second one exits at once (``on_second``).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from oloproof.engine.pipeline import EngineCase

if TYPE_CHECKING:
    import asyncio
    from typing import Any

SIGNALS = (
    (signal.SIGINT, "interrupted (Ctrl-C)"),
    (signal.SIGTERM, "terminated (SIGTERM)"),
)


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
        """Route SIGINT and SIGTERM to this request while the block runs (main thread only).

        ``keep_after_stop`` (the CLI's process): once a signal has stopped the run, the
        handlers stay when the block ends, so that a second signal, however late, still
        exits at once with 5 (``on_second``). Restored, Python's own handler would raise
        KeyboardInterrupt in whatever runs then (exit 130) or, once the command returned,
        end the process by SIGINT: a double Ctrl-C 40-110 ms apart did so 8 times in 12.
        """
        reasons = dict(SIGNALS)

        def handler(signum: int, _frame: object) -> None:
            self(reasons[signal.Signals(signum)])

        try:
            previous = {sig: signal.signal(sig, handler) for sig in reasons}
        except ValueError:
            # Not the main thread (of the main interpreter): only that thread receives
            # signals, and Python lets only it set their handlers; the first one failed.
            previous = None
        if previous is None:
            yield
            return
        try:
            yield
        finally:
            if not (keep_after_stop and self.count):
                for sig, old in previous.items():
                    signal.signal(sig, signal.SIG_DFL if old is None else old)


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
