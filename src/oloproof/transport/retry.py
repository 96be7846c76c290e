"""The one retry policy shared by callables, HTTP systems and judge providers.

This module sits below systems, providers and evaluators (they all raise or
apply it) and imports nothing of Oloproof's.

SPEC §3: up to four attempts in all; growing, jittered delays (base 0.5 s,
doubling, capped); never sooner than a ``Retry-After`` asks; a ``Retry-After``
beyond ``max_retry_wait_s`` gives up. What is retryable is decided by the
caller, which raises :class:`RetryableFailure` (retry) or
:class:`PermanentFailure` (stop now).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from oloproof._records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    import random
    from typing import Generic, TypeVar

    from oloproof.transport.ratelimit import RateSignal
else:  # typing stays off the run path: docs/design-notes.md, "Imports: one rule"
    from oloproof._generic import Generic, TypeVar

T = TypeVar("T")


class AttemptFailure(Exception):
    """A failed attempt; ``attempts`` is filled in when the policy gives up."""

    def __init__(
        self, message: str, *, kind: str = "ERROR", stops_run: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        # ERROR or TIMEOUT: how the case is recorded if this is the last attempt.
        self.kind = kind
        self.attempts = 1
        # True for a failure that every later call would repeat (HTTP 401, 403,
        # 404): the engine stops the run at once instead of burning the suite.
        self.stops_run = stops_run
        # For an HTTP status failure: the status and the (masked) body, so a caller can
        # read what the other side said (a provider naming a parameter it refuses).
        self.status: int | None = None
        self.body: str | None = None
        # What the failure says about a rate limit (transport/ratelimit.py): read by
        # the adaptive limiter, never by the retry policy.
        self.rate: RateSignal | None = None
        # The failed call's own time, when the system measured it (CallResult.latency_ms).
        self.latency_ms: float | None = None


class RetryableFailure(AttemptFailure):
    """A failure worth another attempt (429, 5xx, timeout, dropped connection)."""

    def __init__(
        self, message: str, *, kind: str = "ERROR", retry_after_s: float | None = None,
        rate: RateSignal | None = None,
    ) -> None:
        super().__init__(message, kind=kind)
        self.retry_after_s = retry_after_s
        self.rate = rate
        # Set by the adaptive limiter on a rate limit that named its wait: the retry
        # comes after exactly that wait, not after the growing backoff (the limiter's
        # smaller limit is what slows the calls down then).
        self.wait_exactly = False


class PermanentFailure(AttemptFailure):
    """A failure that another attempt would not fix (other 4xx, bad output)."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_wait_s: float = 60.0

    def delay_before(
        self, attempt: int, retry_after_s: float | None, rng: random.Random | None = None,
        *, exactly: bool = False,
    ) -> float | None:
        """Seconds to wait before attempt number ``attempt`` (2, 3, ...).

        ``None`` means give up: no attempts left, or the server asked for a
        wait beyond ``max_retry_wait_s``. The jitter is "equal jitter": half
        the doubled delay is fixed, half is drawn uniformly, so delays grow
        but concurrent retries spread out.
        """
        if attempt > self.max_attempts:
            return None
        if retry_after_s is not None and retry_after_s > self.max_retry_wait_s:
            return None
        if exactly and retry_after_s is not None:
            return retry_after_s
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 2))
        if rng is not None:
            uniform = rng.uniform
        else:
            import random  # a retry's jitter (a run without a retry never draws one)

            uniform = random.uniform
        draw = uniform(0.0, ceiling / 2)
        delay = ceiling / 2 + draw
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        return delay


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds asked by a ``Retry-After`` header: delta-seconds or an HTTP date (in UTC,
    whatever the local zone, when the date names none)."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        import email.utils  # only for a date in Retry-After

        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        # An HTTP date is UTC (RFC 9110 5.6.7), also in the forms that name no zone: the
        # asctime form and "-0000" (email.utils.formatdate's default). Read as local time,
        # a 3 s wait was 5 hours on a machine in New York (the case given up at once).
        from datetime import UTC

        when = when.replace(tzinfo=UTC)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


@dataclass
class Attempted(Generic[T]):
    value: T
    attempts: int


async def call_with_retries(
    attempt_fn: Callable[[int], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> Attempted[T]:
    """Call ``attempt_fn(attempt_number)`` until it succeeds or the policy gives up
    (waiting with ``sleep``, ``asyncio.sleep`` by default).

    Raises the last :class:`AttemptFailure` with ``attempts`` set.
    """
    if sleep is None:
        import asyncio

        sleep = asyncio.sleep
    attempt = 1
    while True:
        try:
            value = await attempt_fn(attempt)
            return Attempted(value, attempt)
        except RetryableFailure as failure:
            delay = policy.delay_before(
                attempt + 1, failure.retry_after_s, exactly=failure.wait_exactly
            )
            if delay is None:
                failure.attempts = attempt
                if (
                    failure.retry_after_s is not None
                    and failure.retry_after_s > policy.max_retry_wait_s
                    and attempt < policy.max_attempts
                ):
                    asked = (f"{failure.retry_after_s:.0f}s" if failure.retry_after_s < 1e15
                             else "a wait past any limit")
                    failure.message += (
                        f" (gave up: Retry-After {asked} exceeds"
                        f" max_retry_wait_s {policy.max_retry_wait_s:.0f}s)"
                    )
                raise
            await sleep(delay)
            attempt += 1
        except AttemptFailure as failure:
            failure.attempts = attempt
            raise
