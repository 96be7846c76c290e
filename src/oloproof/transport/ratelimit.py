"""What a reply says about the other side's rate limit: the one reading of its headers.

:func:`rate_signal` reads a reply's status and headers into a :class:`RateSignal`:
whether a rate limit was hit, and how long the other side asks us to wait. Used by
:mod:`oloproof.transport.http` for every reply, 2xx included, and by the adaptive
limiter (:mod:`oloproof.transport.limiter`), which shrinks the number of calls in
flight on a signal and starts no new call before the wait is over.

What counts as a rate limit:

- status 429;
- any other failing status (5xx) that carries a ``Retry-After`` or ``retry-after-ms``
  header: the server asks us to slow down;
- a ``*-remaining-*`` count of 0 (``x-ratelimit-remaining-requests: 0``,
  ``anthropic-ratelimit-tokens-remaining: 0``), on any reply, 2xx included: the
  next call would be refused.

Two waits are read, for two different things:

- ``quota_reset_s``, when a limit is exhausted (its remaining count is 0): the
  latest reset of the exhausted limits, ``x-ratelimit-reset-requests`` /
  ``-tokens`` (OpenAI durations such as ``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``,
  or plain seconds) and ``anthropic-ratelimit-*-reset`` (RFC 3339 timestamps).
  Every call before it would be refused: the limiter starts none until then.
- ``wait_s``, how long *this* call should wait before it is tried again, first
  found wins: ``retry-after-ms`` (milliseconds, OpenAI); ``Retry-After``
  (delta-seconds or an HTTP date: :func:`parse_retry_after`, the one parser of
  that header, which the retry policy also uses); ``quota_reset_s``; on a 429
  with reset headers but no remaining count at 0, the earliest reset. A
  ``Retry-After`` alone does not say whether the server is full for everyone or
  for a moment (a server at its concurrency answers one 429 and takes the next
  call a millisecond later), so it holds back the call that got it, not the others.

A 5xx without those headers, a timeout and a dropped connection are no rate
limit: the limiter pauses its growth for them but does not shrink.

This module imports nothing of Oloproof's but the ``Retry-After`` parser.
"""

from __future__ import annotations

import contextvars
import math
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime

from oloproof._records import dataclass
from oloproof.transport.retry import parse_retry_after

__all__ = [
    "RateSignal",
    "exception_rate_signal",
    "observed",
    "parse_duration",
    "parse_reset",
    "rate_signal",
    "report",
]


@dataclass(frozen=True, slots=True)
class RateSignal:
    """A rate limit was hit (``limited``); ``wait_s``: how long the other side asks this
    call to wait; ``quota_reset_s``: how long until an exhausted limit is reset."""

    limited: bool
    wait_s: float | None = None
    quota_reset_s: float | None = None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
# A plain number past this is a Unix time, not a number of seconds (some APIs send one).
_EPOCH_FLOOR = 1_000_000_000.0


def parse_duration(value: str) -> float | None:
    """Seconds of an OpenAI-style duration: ``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``."""
    text = value.strip().lower()
    if not text or not _DURATION_WHOLE.fullmatch(text):
        return None
    return sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION.findall(text))


def parse_reset(value: str | None, now: float | None = None) -> float | None:
    """Seconds until a ``*-reset`` header's moment, never negative.

    Accepts a duration (``6m0s``, ``20ms``), plain seconds (``1.5``; a number past
    10^9 is a Unix time), or an RFC 3339 timestamp (``2026-01-01T00:00:30Z``).
    ``None`` for anything else.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    current = time.time() if now is None else now
    duration = parse_duration(text)
    if duration is not None:
        return duration
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            return None
        if number >= _EPOCH_FLOOR:
            return max(0.0, number - current)
        return max(0.0, number)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None  # a local time of unknown zone: no moment at all
    return max(0.0, when.timestamp() - current)


def _retry_after_ms(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        ms = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(ms):
        return None
    return max(0.0, ms / 1000.0)


def _limits(headers: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``{limit: {"remaining": ..., "reset": ...}}`` from OpenAI and Anthropic names."""
    found: dict[str, dict[str, str]] = {}
    for raw_name, value in headers.items():
        name = raw_name.lower()
        if name.startswith("x-ratelimit-"):
            part, _, kind = name[len("x-ratelimit-"):].partition("-")
            if part in ("remaining", "reset"):
                found.setdefault(kind or "requests", {})[part] = value
        elif name.startswith("anthropic-ratelimit-"):
            kind, _, part = name[len("anthropic-ratelimit-"):].rpartition("-")
            if part in ("remaining", "reset") and kind:
                found.setdefault(kind, {})[part] = value
    return found


def _is_zero(value: str | None) -> bool:
    if value is None:
        return False
    try:
        return float(value.strip()) <= 0
    except ValueError:
        return False


def rate_signal(
    status: int, headers: Mapping[str, str], now: float | None = None
) -> RateSignal | None:
    """What ``status`` and ``headers`` say about a rate limit; ``None``: nothing.

    ``headers`` is any mapping of header names to values (names in any case).
    See the module's notes for the rules.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    explicit = _retry_after_ms(lowered.get("retry-after-ms"))
    if explicit is None:
        explicit = parse_retry_after(lowered.get("retry-after"), now)
    limits = _limits(lowered)
    exhausted = [
        reset for kind in limits.values()
        if _is_zero(kind.get("remaining"))
        and (reset := parse_reset(kind.get("reset"), now)) is not None
    ]
    any_exhausted = any(_is_zero(kind.get("remaining")) for kind in limits.values())
    failing = not 200 <= status <= 399
    limited = (
        status == 429
        or (failing and "retry-after" in lowered)
        or (failing and "retry-after-ms" in lowered)
        or any_exhausted
    )
    if not limited:
        return None
    quota = max(exhausted) if exhausted else None
    wait = explicit if explicit is not None else quota
    if wait is None and status == 429:
        resets = [r for kind in limits.values()
                  if (r := parse_reset(kind.get("reset"), now)) is not None]
        if resets:
            wait = min(resets)
    return RateSignal(True, wait, quota)


def _status_of(obj: object, *names: str) -> int | None:
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def exception_rate_signal(exc: BaseException) -> RateSignal | None:
    """The rate limit an exception raised by a Python system reports, if any.

    An exception with ``status_code == 429`` (or ``status == 429``), or whose
    ``response`` has ``status_code == 429``, as the OpenAI and Anthropic SDKs'
    ``RateLimitError`` and httpx's ``HTTPStatusError`` do; the wait is read from
    ``response.headers`` when there are any, by the same rules as a reply's.
    """
    response = getattr(exc, "response", None)
    status = _status_of(exc, "status_code", "status")
    if status is None and response is not None:
        status = _status_of(response, "status_code", "status")
    if status != 429:
        return None
    headers = getattr(response, "headers", None)
    if headers is None or not hasattr(headers, "items"):
        return RateSignal(True, None)
    try:
        pairs = {str(k): str(v) for k, v in headers.items()}
    except Exception:  # noqa: BLE001 - a user's object: its headers are a bonus
        return RateSignal(True, None)
    return rate_signal(429, pairs)


# -- signals seen on replies that did not fail ---------------------------------
#
# A 2xx reply that says a limit is exhausted (a remaining count of 0) is not a
# failure, so no exception carries it up to the limiter. The limiter opens an
# ``observed()`` scope around each call; the transport ``report``s into it. A
# context variable, so the signal reaches the right call's scope however many
# calls are in flight, without changing what systems and providers return.

_SCOPE: contextvars.ContextVar[list[RateSignal] | None] = contextvars.ContextVar(
    "oloproof_rate_signals", default=None
)


def report(signal: RateSignal) -> None:
    """Hand ``signal`` to the call's ``observed()`` scope, if there is one."""
    seen = _SCOPE.get()
    if seen is not None:
        seen.append(signal)


@contextmanager
def observed() -> Iterator[list[RateSignal]]:
    """A scope whose list receives every signal :func:`report`ed inside it."""
    seen: list[RateSignal] = []
    token = _SCOPE.set(seen)
    try:
        yield seen
    finally:
        _SCOPE.reset(token)
