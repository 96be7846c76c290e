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
  gets the backoff;
- **a retry is never the probe**: the top slot of a limit above 1 is where the limit
  is tested (a limit one above the capacity gets refused there). An attempt after the
  first waits until it can start with the top slot free, and while it is in flight no
  call takes the top slot; otherwise a call refused once could be refused again and
  again while the limit cycles around the capacity, and lose its four attempts to the
  limiter's own probing (on a loaded machine, it did). This holds right after a cut
  too (until issue 30 it did not): a client starved of CPU counts calls in flight that
  the server has not seen yet, so its limit can grow past the capacity on windows that
  only looked clean (3 to 7 against a capacity of 3, with two busy loops beside the
  stalled-client test), and a cut from there lands above the capacity still, where a
  retry refused at 5 was refused again at 4. A retry at the head of the queue holds
  the calls behind it, so it cannot be starved;
- **no growth while a retry is owed**: a clean window that completes while a retry is
  in flight or waiting for its slot grows the limit only at the first success after
  the retry is answered. Growing under a retry in flight gave the other calls the top
  slot back, and the retry could be refused again: with two busy loops beside the
  stalled-client test, 1 or 2 calls of 200 were refused twice in two runs of three;
- when a
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
from typing import TYPE_CHECKING

from oloproof._records import dataclass
from oloproof.transport.ratelimit import RateSignal, observed
from oloproof.transport.retry import AttemptFailure, RetryableFailure

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
        # The limit is untested: it has just grown (or is the start, or a level that was
        # itself refused); False right after a rate limit cut it below a refused level.
        self.probing = True
        self.clean = 0  # successes of this epoch's calls in the current window
        self.saturated = False  # the calls in flight reached the limit in this window
        self.rate_limits = 0  # every rate-limit signal seen, counted or not
        self.errors = 0

    def started(self, in_flight: int) -> int:
        """A call starts with ``in_flight`` calls (itself included) in flight; its epoch."""
        if in_flight >= self.limit:
            self.saturated = True
        return self.epoch

    def succeeded(self, epoch: int, *, hold: bool = False) -> LimitChange | None:
        """A success; the limit grows when it completes a clean window, unless ``hold``
        (a refused call is still owed its retry): then the window stays complete, and the
        first success without ``hold`` grows it."""
        if epoch != self.epoch or self.limit >= self.ceiling:
            return None
        self.clean += 1
        if self.clean < self.limit or not self.saturated or hold:
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
            self.probing = True  # this very level was refused
            return None
        return self._move(shrunk, RATE_LIMITED)

    def _move(self, limit: int, reason: str) -> LimitChange:
        change = LimitChange(self.limit, limit, reason)
        self.probing = limit > self.limit
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
        # (future, retry): first come, first served, retries at the front.
        self._waiters: deque[tuple[asyncio.Future[int], bool]] = deque()
        self.retrying = 0  # retries in flight: while there are any, nobody probes
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

    def _room(self, retry: bool) -> int:
        """How many calls may be in flight once this one starts: the limit, or, for a
        retry or while one is in flight, the limit less its top slot (never below 1).

        The order calls reach the other side is not the order they got their slots (a
        new connection is slower than a kept one), so it is not enough that the retry
        took a low slot: nobody may take the top one until the retry is answered.
        """
        limit = self.aimd.limit
        # At every level, a level just cut to included: a cut from a level the client only
        # believed tested (on a starved machine its count of calls in flight runs ahead
        # of what the server sees) can land above the capacity still.
        if (retry or self.retrying) and limit > 1:
            return limit - 1
        return limit

    def _owed(self, settling_retry: bool) -> bool:
        """Whether a call refused before is still to be answered: a retry in flight (other
        than the one settling) or waiting for its slot. The limit does not grow then:
        growing would give the others back the top slot the retry keeps free, and the
        retry could be refused again at the level it was refused at."""
        in_flight = self.retrying - (1 if settling_retry else 0)
        return in_flight > 0 or any(retry for _, retry in self._waiters)

    def _grant(self, retry: bool) -> int:
        self.in_flight += 1
        if retry:
            self.retrying += 1
        return self.aimd.started(self.in_flight)

    async def acquire(self, retry: bool = False) -> int:
        """Wait for a slot; the epoch the call starts in. A ``retry`` (an attempt after the
        first) goes to the front of the queue, its case has waited already, and is
        never the probe (:meth:`_room`); it must be given back with ``retry`` too."""
        import asyncio

        loop = asyncio.get_running_loop()
        if not self._waiters and self.in_flight < self._room(retry) and not self._paused(loop):
            return self._grant(retry)
        waiter: asyncio.Future[int] = loop.create_future()
        if retry:
            self._waiters.appendleft((waiter, True))
        else:
            self._waiters.append((waiter, False))
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(retry)  # granted as we were cancelled: hand the slot on
            else:
                self._forget(waiter)
            raise

    def _forget(self, waiter: asyncio.Future[int]) -> None:
        for item in self._waiters:
            if item[0] is waiter:
                self._waiters.remove(item)
                # The head may have been a retry holding the calls behind it.
                self._wake()
                return

    def _release(self, retry: bool) -> None:
        self.in_flight -= 1
        if retry:
            self.retrying -= 1
        self._wake()

    def _wake(self) -> None:
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._paused(loop):
            return  # the timer set by the pause wakes them
        while self._waiters:
            waiter, retry = self._waiters[0]
            if waiter.done():
                self._waiters.popleft()
                continue
            if self.in_flight >= self._room(retry):
                return  # the head waits, and so do the calls behind it
            self._waiters.popleft()
            waiter.set_result(self._grant(retry))

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

    def settle(
        self, epoch: int, outcome: str, wait_s: float | None = None, *, retry: bool = False
    ) -> None:
        """Give the slot back, with how the call went (``success``, ``error``,
        ``rate_limited``); ``retry`` as it was acquired."""
        try:
            if outcome == LIMITED:
                self._changed(self.aimd.rate_limited(epoch))
                if wait_s is not None and wait_s > 0:
                    self._pause(wait_s)
            elif outcome == ERROR:
                self.aimd.failed(epoch)
            elif outcome == SUCCESS:
                self._changed(self.aimd.succeeded(epoch, hold=self._owed(retry)))
        finally:
            self._release(retry)

    async def run(self, call: Callable[[], Awaitable[T]], *, retry: bool = False) -> T:
        """``await call()`` in a slot, and learn from how it ended (``retry``: see
        :meth:`acquire`)."""
        import asyncio

        epoch = await self.acquire(retry)
        try:
            with observed() as signals:
                value = await call()
        except asyncio.CancelledError:
            self._release(retry)  # a stop: nothing learnt
            raise
        except BaseException as failure:
            outcome, wait_s = classify(failure, signals)
            self.settle(epoch, outcome, wait_s, retry=retry)
            raise
        outcome, wait_s = classify(None, signals)
        self.settle(epoch, outcome, wait_s, retry=retry)
        return value
