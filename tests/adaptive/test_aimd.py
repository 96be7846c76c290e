"""The AIMD arithmetic of adaptive concurrency, step by step (no clock, no loop), and the
limiter's slots on a real event loop."""

from __future__ import annotations

import asyncio

import pytest

from oloproof.transport.limiter import (
    CLEAN_WINDOW,
    RATE_LIMITED,
    START,
    AdaptiveLimiter,
    Aimd,
    AimdSettings,
    LimitChange,
    classify,
)
from oloproof.transport.ratelimit import RateSignal, report
from oloproof.transport.retry import PermanentFailure, RetryableFailure, RetryPolicy


def window(aimd: Aimd, successes: int | None = None) -> LimitChange | None:
    """``successes`` calls (default: the limit) started together and all succeeded."""
    n = aimd.limit if successes is None else successes
    epochs = [aimd.started(i + 1) for i in range(n)]
    change = None
    for epoch in epochs:
        change = aimd.succeeded(epoch) or change
    return change


def test_starts_at_four_or_at_a_lower_ceiling() -> None:
    assert Aimd(32).limit == 4
    assert Aimd(2).limit == 2
    assert Aimd(1).limit == 1
    assert Aimd(32, AimdSettings(start=10)).limit == 10
    with pytest.raises(ValueError):
        Aimd(0)


def test_slow_start_doubles_each_clean_window_up_to_the_ceiling() -> None:
    aimd = Aimd(20)
    limits = [aimd.limit]
    for _ in range(3):
        change = window(aimd)
        assert change is not None and change.reason == CLEAN_WINDOW
        limits.append(aimd.limit)
    assert limits == [4, 8, 16, 20]
    assert aimd.limit == 20
    assert window(aimd) is None  # at the ceiling: nothing to grow
    assert aimd.limit == 20


def test_a_window_is_limit_successes_of_calls_started_under_the_limit() -> None:
    aimd = Aimd(32)
    old = aimd.started(4)
    assert window(aimd) is not None  # 4 -> 8, a new epoch
    assert aimd.limit == 8
    # A success of a call started under the old limit says nothing about the new one.
    for _ in range(20):
        assert aimd.succeeded(old) is None
    assert aimd.clean == 0
    assert window(aimd, 7) is None
    change = aimd.succeeded(aimd.started(8))
    assert change == LimitChange(8, 16, CLEAN_WINDOW)


def test_an_unused_limit_does_not_grow() -> None:
    aimd = Aimd(32)
    # Four successes, but never more than two in flight: the limit of 4 was not tested.
    for _ in range(2):
        first, second = aimd.started(1), aimd.started(2)
        assert aimd.succeeded(first) is None and aimd.succeeded(second) is None
    assert aimd.limit == 4
    assert aimd.succeeded(aimd.started(4)) == LimitChange(4, 8, CLEAN_WINDOW)


def test_a_rate_limit_multiplies_by_the_decrease_then_growth_is_additive() -> None:
    aimd = Aimd(64)
    window(aimd)
    window(aimd)
    assert aimd.limit == 16  # slow start
    epoch = aimd.started(16)
    assert aimd.rate_limited(epoch) == LimitChange(16, 12, RATE_LIMITED)  # floor(16 * 0.8)
    assert not aimd.slow_start
    assert window(aimd) == LimitChange(12, 13, CLEAN_WINDOW)
    assert window(aimd) == LimitChange(13, 14, CLEAN_WINDOW)


def test_one_overload_counts_once() -> None:
    aimd = Aimd(64)
    window(aimd)
    window(aimd)
    burst = [aimd.started(i + 1) for i in range(16)]  # 16 calls of one epoch
    changes = [aimd.rate_limited(epoch) for epoch in burst]
    assert [c for c in changes if c is not None] == [LimitChange(16, 12, RATE_LIMITED)]
    assert aimd.limit == 12
    assert aimd.rate_limits == 16
    # A call started under the new limit that is refused too: a second decrease.
    assert aimd.rate_limited(aimd.started(12)) == LimitChange(12, 9, RATE_LIMITED)


def test_never_below_one() -> None:
    aimd = Aimd(4)
    for _ in range(10):
        aimd.rate_limited(aimd.started(aimd.limit))
    assert aimd.limit == 1
    # At the floor, the same overload still counts once: no change, a new epoch.
    epoch = aimd.started(1)
    assert aimd.rate_limited(epoch) is None
    assert aimd.limit == 1
    assert window(aimd) == LimitChange(1, 2, CLEAN_WINDOW)


def test_errors_pause_growth_without_shrinking() -> None:
    aimd = Aimd(32)
    epochs = [aimd.started(i + 1) for i in range(4)]
    for epoch in epochs[:3]:
        assert aimd.succeeded(epoch) is None
    aimd.failed(epochs[3])  # a 503: the window starts again
    assert (aimd.limit, aimd.clean) == (4, 0)
    assert window(aimd, 3) is None
    assert aimd.limit == 4
    assert window(aimd, 1) == LimitChange(4, 8, CLEAN_WINDOW)
    assert aimd.errors == 1


def test_never_above_the_ceiling_whatever_happens() -> None:
    aimd = Aimd(10)
    seen = []
    for step in range(200):
        epoch = aimd.started(aimd.limit)
        if step % 97 == 96:
            aimd.rate_limited(epoch)
        elif step % 13 == 12:
            aimd.failed(epoch)
        else:
            aimd.succeeded(epoch)
        seen.append(aimd.limit)
    assert max(seen) == 10 and min(seen) >= 1
    assert aimd.rate_limits == 2 and aimd.limit < 10


def test_classify() -> None:
    limited = RetryableFailure("429", retry_after_s=1.0, rate=RateSignal(True, 0.05))
    assert classify(limited, []) == ("rate_limited", None)
    # retry-after-ms (0.05 s) wins over its rounded Retry-After copy (1 s) for the retry.
    assert limited.retry_after_s == 0.05 and limited.wait_exactly
    quota = RetryableFailure("429", rate=RateSignal(True, 2.0, 2.0))
    assert classify(quota, []) == ("rate_limited", 2.0)
    assert quota.retry_after_s == 2.0
    no_wait = RetryableFailure("429", rate=RateSignal(True, None))
    assert classify(no_wait, []) == ("rate_limited", None)
    assert not no_wait.wait_exactly  # no wait named: the growing backoff
    assert classify(RetryableFailure("503"), []) == ("error", None)
    assert classify(PermanentFailure("slow", kind="TIMEOUT"), []) == ("error", None)
    assert classify(PermanentFailure("HTTP 400"), []) == ("success", None)
    assert classify(None, []) == ("success", None)
    # A 2xx that said a limit is exhausted.
    assert classify(None, [RateSignal(True, 0.5, 0.5)]) == ("rate_limited", 0.5)


# -- the slots, on a real loop --------------------------------------------------------------


def test_never_more_in_flight_than_the_limit_and_changes_are_reported() -> None:
    changes: list[tuple[str, LimitChange, int]] = []

    async def main() -> tuple[int, list[int]]:
        limiter = AdaptiveLimiter("system", 6, on_change=lambda *c: changes.append(c))
        limiter.announce()
        peak = 0
        limits_seen: list[int] = []

        async def call() -> None:
            nonlocal peak
            peak = max(peak, limiter.in_flight)
            assert limiter.in_flight <= limiter.limit
            limits_seen.append(limiter.limit)
            await asyncio.sleep(0.001)

        await asyncio.gather(*(limiter.run(call) for _ in range(60)))
        assert limiter.in_flight == 0
        return peak, limits_seen

    peak, limits_seen = asyncio.run(main())
    assert peak == 6  # grew from 4 to the ceiling, never past it
    assert changes[0] == ("system", LimitChange(None, 4, START), 6)
    assert [c.limit for _, c, _ in changes] == [4, 6]
    assert max(limits_seen) == 6


async def refused_once(limiter: AdaptiveLimiter) -> None:
    """One call through ``limiter`` that gets a 429, raised to the caller."""

    async def refused() -> None:
        raise RetryableFailure("HTTP 429", rate=RateSignal(True, None))

    with pytest.raises(RetryableFailure):
        await limiter.run(refused)


def test_a_rate_limited_call_shrinks_the_limit_and_is_raised() -> None:
    async def main() -> AdaptiveLimiter:
        limiter = AdaptiveLimiter("judge", 8)
        await refused_once(limiter)
        return limiter

    limiter = asyncio.run(main())
    assert (limiter.limit, limiter.in_flight) == (3, 0)  # floor(4 * 0.8)
    assert limiter.history == [LimitChange(4, 3, RATE_LIMITED)]


def test_a_limit_exhausted_on_a_2xx_holds_new_calls_until_its_reset() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        limiter = AdaptiveLimiter("system", 8)

        async def exhausted() -> str:
            report(RateSignal(True, 0.3, 0.3))  # as transport.http does for remaining: 0
            return "ok"

        assert await limiter.run(exhausted) == "ok"
        assert limiter.limit == 3
        started = loop.time()
        await limiter.run(lambda: asyncio.sleep(0))
        return started, loop.time()

    started, ended = asyncio.run(main())
    assert ended - started >= 0.25


def test_retries_go_first_and_a_cancelled_waiter_leaks_no_slot() -> None:
    async def main() -> list[str]:
        limiter = AdaptiveLimiter("system", 1)
        order: list[str] = []
        gate = asyncio.Event()

        async def hold() -> None:
            await gate.wait()

        holder = asyncio.create_task(limiter.run(hold))
        await asyncio.sleep(0)
        assert limiter.in_flight == 1

        async def named(name: str) -> None:
            order.append(name)

        first = asyncio.create_task(limiter.run(lambda: named("first")))
        doomed = asyncio.create_task(limiter.run(lambda: named("doomed")))
        retry = asyncio.create_task(limiter.run(lambda: named("retry"), retry=True))
        await asyncio.sleep(0)
        doomed.cancel()
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(holder, first, retry)
        assert doomed.cancelled()
        assert limiter.in_flight == 0
        return order

    assert asyncio.run(main()) == ["retry", "first"]


def test_a_named_wait_is_waited_exactly_only_when_the_limiter_says_so() -> None:
    policy = RetryPolicy()
    assert policy.delay_before(2, 0.05, exactly=True) == 0.05
    backoff = policy.delay_before(2, 0.05)  # without adaptive: the growing backoff
    assert backoff is not None and 0.25 <= backoff <= 0.5
    assert policy.delay_before(5, 0.05, exactly=True) is None  # still four attempts
    assert policy.delay_before(2, 61.0, exactly=True) is None  # still max_retry_wait_s
    assert policy.delay_before(2, None, exactly=True) is not None  # no wait: backoff


class Calls:
    """Calls through a limiter that each hold their slot until released by number."""

    def __init__(self, limiter: AdaptiveLimiter) -> None:
        self.limiter = limiter
        self.gates: dict[int, asyncio.Event] = {}
        self.started: list[int] = []
        self.tasks: list[asyncio.Task[None]] = []

    def start(self, *numbers: int, retry: bool = False) -> None:
        for i in numbers:
            self.gates[i] = asyncio.Event()
            self.tasks.append(asyncio.create_task(
                self.limiter.run(lambda i=i: self._held(i), retry=retry)
            ))

    async def _held(self, i: int) -> None:
        self.started.append(i)
        await self.gates[i].wait()

    async def answer(self, i: int) -> None:
        self.gates[i].set()
        await asyncio.sleep(0.01)

    async def finish(self) -> None:
        for gate in self.gates.values():
            gate.set()
        await asyncio.gather(*self.tasks)
        assert (self.limiter.in_flight, self.limiter.retrying) == (0, 0)


def test_a_retry_is_never_the_probe() -> None:
    """While a retry is in flight nobody takes the top slot: calls reach the other side
    in another order than they got their slots, so the retry could be the one refused."""

    async def main() -> None:
        limiter = AdaptiveLimiter("judge", 4)
        assert limiter.limit == 4
        calls = Calls(limiter)
        calls.start(0, 1)
        calls.start(2, retry=True)
        await asyncio.sleep(0)
        assert (limiter.in_flight, limiter.retrying, calls.started) == (3, 1, [0, 1, 2])
        calls.start(3)
        await asyncio.sleep(0)
        assert calls.started == [0, 1, 2]  # the fourth slot is free, and stays free
        await calls.answer(2)  # the retry is answered: the probe may go
        assert (calls.started, limiter.retrying) == ([0, 1, 2, 3], 0)
        calls.start(4)
        await asyncio.sleep(0)
        assert calls.started == [0, 1, 2, 3, 4] and limiter.in_flight == 4
        await calls.finish()

    asyncio.run(main())


def test_a_waiting_retry_holds_the_calls_behind_it() -> None:
    """A retry waits for a slot below the top; the calls behind it wait with it, or each
    freed slot would go to a new call and the retry would starve."""

    async def main() -> None:
        limiter = AdaptiveLimiter("judge", 4)
        calls = Calls(limiter)
        calls.start(0, 1, 2)
        await asyncio.sleep(0)
        calls.start(3, retry=True)
        calls.start(4)
        await asyncio.sleep(0)
        assert calls.started == [0, 1, 2] and limiter.in_flight == 3  # a slot is free; unused
        await calls.answer(0)
        assert calls.started == [0, 1, 2, 3]  # the retry, in the third slot; 4 still waits
        await calls.answer(3)
        assert calls.started == [0, 1, 2, 3, 4]
        await calls.finish()

    asyncio.run(main())


def test_after_a_cut_a_retry_keeps_the_top_slot_free_too() -> None:
    """Right after a rate limit cut the limit, the level is no more tested than a grown
    one: on a starved client, a cut from a level that only looked clean lands above the
    capacity still (issue 30: a retry refused at 5 was refused again at 4, capacity 3)."""

    async def main() -> None:
        limiter = AdaptiveLimiter("judge", 8)
        await refused_once(limiter)
        assert (limiter.limit, limiter.aimd.probing) == (3, False)
        gate = asyncio.Event()
        tasks = [asyncio.create_task(limiter.run(gate.wait, retry=True)) for _ in range(2)]
        tasks.append(asyncio.create_task(limiter.run(gate.wait)))
        await asyncio.sleep(0)
        assert (limiter.in_flight, limiter.retrying) == (2, 2)  # the top slot stays free
        gate.set()
        await asyncio.gather(*tasks)
        assert (limiter.in_flight, limiter.retrying) == (0, 0)

    asyncio.run(main())


def test_probing_follows_the_moves_of_the_limit() -> None:
    aimd = Aimd(ceiling=8)
    assert aimd.probing  # the start is untested
    aimd.rate_limited(aimd.started(4))
    assert (aimd.limit, aimd.probing) == (3, False)
    for _ in range(3):
        aimd.succeeded(aimd.started(3))
    assert (aimd.limit, aimd.probing) == (4, True)  # grown: the new top slot is a test
    floor = Aimd(ceiling=1)
    floor.rate_limited(floor.started(1))
    assert (floor.limit, floor.probing) == (1, True)  # the floor itself was refused


def test_a_window_that_ends_while_a_retry_is_owed_waits_for_it() -> None:
    aimd = Aimd(ceiling=16)
    epochs = [aimd.started(4) for _ in range(4)]
    assert [aimd.succeeded(e, hold=True) for e in epochs] == [None] * 4  # complete, held
    assert aimd.limit == 4
    change = aimd.succeeded(aimd.started(4))  # the first success after the retry
    assert change is not None and (change.limit, change.reason) == (8, CLEAN_WINDOW)


def test_the_limit_does_not_grow_under_a_retry_in_flight() -> None:
    """Growing while a retry is in flight gives the others the top slot it keeps free, and
    the retry can be refused again at the level it was refused at (issue 30: with two busy
    loops beside the stalled-client test, some calls were refused twice)."""

    async def main() -> None:
        limiter = AdaptiveLimiter("judge", 16)
        calls = Calls(limiter)
        calls.start(0, 1, 2, 3)  # the limit (4) reached: this window tests it
        await asyncio.sleep(0)
        await calls.answer(0)
        calls.start(4, retry=True)  # refused earlier; waits for a slot below the top
        await calls.answer(1)
        assert (limiter.in_flight, limiter.retrying) == (3, 1)
        await calls.answer(2)
        await calls.answer(3)  # four successes: the window is complete...
        assert limiter.limit == 4  # ...and held while the retry is in flight
        await calls.answer(4)  # answered: the window grows the limit at once
        assert limiter.limit == 8
        await calls.finish()

    asyncio.run(main())
