"""Adaptive concurrency: how many calls may be in flight, found by AIMD on rate limits.

``concurrency.system`` and ``concurrency.judge`` are ceilings. With ``adaptive``
(docs/progress-and-concurrency.md, "Adaptive concurrency"), the engine's workers
take a slot of an :class:`AdaptiveLimiter` around each attempt of a call, and the
limiter moves the number of slots:

- it **starts** at ``min(ceiling, 4)``;
- **slow start**: until the first rate limit, each clean window *doubles* the
  limit (4, 8, 16, ...), so a generous account reaches its ceiling in a few
  round trips instead of one step per window;
- **additive increase**: after the first rate limit, each clean window adds 1;
- a **clean window** is ``limit`` successful calls, all started under the current
  limit, with no rate limit, 5xx, timeout or dropped connection among the calls
  finished meanwhile, during which the calls in flight reached the limit at least
  once (a limit that is not used is not tested, so it does not grow);
- **multiplicative decrease**: a rate limit (:mod:`oloproof.transport.ratelimit`:
  a 429, a ``Retry-After``, a remaining count of 0) multiplies the limit by
  ``decrease`` (0.8), rounded down, never below 1; at most once per window: a
  rate limit on a call started *before* the last change is the same overload
  seen late, and is not counted again;
- a **5xx, a timeout or a dropped connection** (and a callable's timeout)
  restarts the clean window: growth pauses, the limit does not shrink;
- **reset headers are honoured**: the call that got a rate limit is tried again
  after exactly the wait it was given (``retry-after-ms``, ``Retry-After``, the
  reset of an exhausted limit), instead of the retry policy's growing backoff,
  still within its attempts and ``max_retry_wait_s``; a rate limit without a wait
  gets the backoff; when a
  limit is exhausted (a remaining count of 0, with its reset), no new call starts
  before the reset (capped at ``max_pause_s``); calls already in flight go on;
- the limit never goes above the ceiling.

:class:`Aimd` is the arithmetic alone, with no clock and no event loop, so its
rules are tested step by step; :class:`AdaptiveLimiter` adds the slots (FIFO
waiters on the running loop) and the pause.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable

from oloproof._records import dataclass
from oloproof.transport.ratelimit import RateSignal, observed
from oloproof.transport.retry import AttemptFailure, RetryableFailure

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    import asyncio
    from typing import TypeVar
    T = TypeVar("T")

__all__ = [
    "CLEAN_WINDOW",
    "RATE_LIMITED",
    "START",
    "AdaptiveLimiter",
    "Aimd",
    "AimdSettings",
    "LimitChange",
    "classify",
]


START = "start"
RATE_LIMITED = "rate_limited"
CLEAN_WINDOW = "clean_window"

# How an attempt ended, for the limiter.
SUCCESS = "success"
ERROR = "error"
LIMITED = "rate_limited"


@dataclass(frozen=True, slots=True)
class AimdSettings:
    """The AIMD parameters (docs/progress-and-concurrency.md says why these)."""

    start: int = 4
    increase: int = 1
    decrease: float = 0.8
    max_pause_s: float = 60.0


@dataclass(frozen=True, slots=True)
class LimitChange:
    """One move of a limit: from ``previous`` (``None`` at the start) to ``limit``."""

    previous: int | None
    limit: int
    reason: str


class Aimd:
    """The limit's arithmetic. Each call is stamped with the epoch it started in
    (:meth:`started`); every change of the limit opens a new epoch."""

    def __init__(self, ceiling: int, settings: AimdSettings | None = None) -> None:
        if ceiling < 1:
            raise ValueError("the ceiling must be at least 1")
        self.settings = settings or AimdSettings()
        self.ceiling = ceiling
        self.limit = max(1, min(ceiling, self.settings.start))
        self.epoch = 0
        self.slow_start = True
        self.clean = 0  # successes of this epoch's calls in the current window
        self.saturated = False  # the calls in flight reached the limit in this window
        self.rate_limits = 0  # every rate-limit signal seen, counted or not
        self.errors = 0

    def started(self, in_flight: int) -> int:
        """A call starts with ``in_flight`` calls (itself included) in flight; its epoch."""
        if in_flight >= self.limit:
            self.saturated = True
        return self.epoch

    def succeeded(self, epoch: int) -> LimitChange | None:
        if epoch != self.epoch or self.limit >= self.ceiling:
            return None
        self.clean += 1
        if self.clean < self.limit or not self.saturated:
            return None
        grown = self.limit * 2 if self.slow_start else self.limit + self.settings.increase
        return self._move(min(self.ceiling, grown), CLEAN_WINDOW)

    def failed(self, epoch: int) -> None:
        """A 5xx, a timeout, a dropped connection: the clean window starts again."""
        self.errors += 1
        self.clean = 0

    def rate_limited(self, epoch: int) -> LimitChange | None:
        self.rate_limits += 1
        self.slow_start = False
        self.clean = 0
        if epoch != self.epoch:
            return None  # started before the last change: that overload is counted
        shrunk = max(1, math.floor(self.limit * self.settings.decrease))
        if shrunk == self.limit:
            self.epoch += 1  # at the floor: later signals of this overload are not new
            self.saturated = False
            return None
        return self._move(shrunk, RATE_LIMITED)

    def _move(self, limit: int, reason: str) -> LimitChange:
        change = LimitChange(self.limit, limit, reason)
        self.limit = limit
        self.epoch += 1
        self.clean = 0
        self.saturated = False
        return change


def classify(failure: BaseException | None, signals: list[RateSignal]) -> tuple[str, float | None]:
    """How an attempt ended, for the limiter, and how long no call should start (the
    reset of an exhausted limit).

    A rate limit when the failure or a reply carried a rate-limit signal; an error
    for any other retryable failure (5xx, timeout, dropped connection) and for a
    timeout; a success otherwise (the other side answered, even a 400). A rate-limited
    :class:`RetryableFailure` is told to wait, before its retry, the longest wait
    the signals gave.
    """
    found = [s for s in signals if s.limited]
    rate = getattr(failure, "rate", None)
    if isinstance(rate, RateSignal) and rate.limited:
        found.append(rate)
    if found:
        waits = [s.wait_s for s in found if s.wait_s is not None]
        if waits and isinstance(failure, RetryableFailure):
            # retry-after-ms before Retry-After (its rounded copy, where both are sent);
            # exactly that wait, as the OpenAI and Anthropic SDKs do: the smaller limit,
            # not a growing backoff, is what slows the calls down.
            failure.retry_after_s = max(waits)
            failure.wait_exactly = True
        resets = [s.quota_reset_s for s in found if s.quota_reset_s is not None]
        return LIMITED, (max(resets) if resets else None)
    if isinstance(failure, RetryableFailure) or (
        isinstance(failure, AttemptFailure) and failure.kind == "TIMEOUT"
    ):
        return ERROR, None
    return SUCCESS, None


class AdaptiveLimiter:
    """Slots for calls in flight, as many as :class:`Aimd` allows at the moment.

    ``name`` is ``system`` or ``judge``; ``on_change(name, change, ceiling)`` is
    called for every move of the limit (and once, at :meth:`announce`, for the
    start). Waiters are served first come, first served. Use it only on one event
    loop, from its own thread.
    """

    def __init__(
        self,
        name: str,
        ceiling: int,
        *,
        settings: AimdSettings | None = None,
        on_change: Callable[[str, LimitChange, int], None] | None = None,
    ) -> None:

        self.name = name
        self.aimd = Aimd(ceiling, settings)
        self.on_change = on_change
        self.in_flight = 0
        self.history: list[LimitChange] = []
        self._waiters: deque[asyncio.Future[int]] = deque()
        self._pause_until = 0.0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def limit(self) -> int:
        return self.aimd.limit

    @property
    def ceiling(self) -> int:
        return self.aimd.ceiling

    def announce(self) -> None:
        """Report the starting limit (reason ``start``)."""
        self._changed(LimitChange(None, self.aimd.limit, START))

    def _changed(self, change: LimitChange | None) -> None:
        if change is None:
            return
        self.history.append(change)
        if self.on_change is not None:
            self.on_change(self.name, change, self.aimd.ceiling)

    # -- slots -----------------------------------------------------------
    def _paused(self, loop: asyncio.AbstractEventLoop) -> bool:
        return loop.time() < self._pause_until

    async def acquire(self, retry: bool = False) -> int:
        """Wait for a slot; the epoch the call starts in. A ``retry`` (an attempt after the
        first) goes to the front of the queue: its case has waited already."""
        import asyncio

        loop = asyncio.get_running_loop()
        if not self._waiters and self.in_flight < self.aimd.limit and not self._paused(loop):
            self.in_flight += 1
            return self.aimd.started(self.in_flight)
        waiter: asyncio.Future[int] = loop.create_future()
        if retry:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # granted as we were cancelled: hand the slot on
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
            raise

    def _release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._paused(loop):
            return  # the timer set by the pause wakes them
        while self._waiters and self.in_flight < self.aimd.limit:
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self.in_flight += 1
            waiter.set_result(self.aimd.started(self.in_flight))

    def _pause(self, wait_s: float) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        until = loop.time() + min(wait_s, self.aimd.settings.max_pause_s)
        if until <= self._pause_until:
            return
        self._pause_until = until
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(until, self._resume)

    def _resume(self) -> None:
        self._timer = None
        self._wake()

    def settle(self, epoch: int, outcome: str, wait_s: float | None = None) -> None:
        """Give the slot back, with how the call went (``success``, ``error``,
        ``rate_limited``)."""
        try:
            if outcome == LIMITED:
                self._changed(self.aimd.rate_limited(epoch))
                if wait_s is not None and wait_s > 0:
                    self._pause(wait_s)
            elif outcome == ERROR:
                self.aimd.failed(epoch)
            elif outcome == SUCCESS:
                self._changed(self.aimd.succeeded(epoch))
        finally:
            self._release()

    async def run(self, call: Callable[[], Awaitable[T]], *, retry: bool = False) -> T:
        """``await call()`` in a slot, and learn from how it ended (``retry``: see
        :meth:`acquire`)."""
        import asyncio

        epoch = await self.acquire(retry)
        try:
            with observed() as signals:
                value = await call()
        except asyncio.CancelledError:
            self._release()  # a stop: nothing learnt
            raise
        except BaseException as failure:
            outcome, wait_s = classify(failure, signals)
            self.settle(epoch, outcome, wait_s)
            raise
        outcome, wait_s = classify(None, signals)
        self.settle(epoch, outcome, wait_s)
        return value
