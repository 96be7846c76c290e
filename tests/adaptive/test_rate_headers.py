"""The one reading of rate-limit headers (transport/ratelimit.py); what the HTTP transport
hands the adaptive limiter over real HTTP is in test_rate_headers_http.py."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import httpx
import pytest

from oloproof.transport.ratelimit import (
    RateSignal,
    exception_rate_signal,
    parse_duration,
    parse_reset,
    rate_signal,
)
from oloproof.transport.retry import parse_retry_after

NOW = 1_800_000_000.0  # a fixed "now" for dates


def _rfc3339(seconds_ahead: float) -> str:
    when = datetime.fromtimestamp(NOW, UTC) + timedelta(seconds=seconds_ahead)
    return when.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.5s", 0.5),
     ("2m", 120.0), ("soon", None), ("", None), ("5", None), ("1s2", None)],
)
def test_openai_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_resets_as_durations_seconds_unix_times_and_rfc3339() -> None:
    assert parse_reset("6m0s", NOW) == 360.0
    assert parse_reset("1.5", NOW) == 1.5
    assert parse_reset(str(NOW + 42), NOW) == pytest.approx(42.0)  # a Unix time
    assert parse_reset(_rfc3339(30), NOW) == pytest.approx(30.0)
    assert parse_reset("2026-01-01T00:00:00+00:00", NOW) == 0.0  # past: no wait
    assert parse_reset("2026-01-01T00:00:00", NOW) is None  # no zone: no moment
    assert parse_reset("nan", NOW) is None
    assert parse_reset(None, NOW) is None


def test_retry_after_ms_wins_over_retry_after() -> None:
    signal = rate_signal(429, {"Retry-After": "1", "retry-after-ms": "250"}, NOW)
    assert signal == RateSignal(True, 0.25, None)


def test_retry_after_seconds_or_http_date_through_the_one_parser() -> None:
    assert rate_signal(429, {"Retry-After": "3"}, NOW) == RateSignal(True, 3.0)
    date = email.utils.formatdate(NOW + 20, usegmt=True)
    assert rate_signal(429, {"retry-after": date}, NOW) == RateSignal(True, pytest.approx(20.0))
    assert parse_retry_after(date, NOW) == pytest.approx(20.0)


def test_a_429_without_headers_is_a_rate_limit_with_no_wait() -> None:
    assert rate_signal(429, {}, NOW) == RateSignal(True, None, None)


def test_5xx_is_a_rate_limit_only_with_retry_after() -> None:
    assert rate_signal(503, {}, NOW) is None
    assert rate_signal(502, {"content-type": "text/html"}, NOW) is None
    assert rate_signal(503, {"Retry-After": "2"}, NOW) == RateSignal(True, 2.0)
    assert rate_signal(529, {"retry-after-ms": "500"}, NOW) == RateSignal(True, 0.5)


def test_openai_exhausted_limits_give_the_latest_reset() -> None:
    headers = {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert rate_signal(429, headers, NOW) == RateSignal(True, 360.0, 360.0)
    # On a 200 too: the next call would be refused.
    assert rate_signal(200, headers, NOW) == RateSignal(True, 360.0, 360.0)
    # Only the exhausted limit's reset counts.
    headers["x-ratelimit-remaining-tokens"] = "1200"
    assert rate_signal(200, headers, NOW) == RateSignal(True, 1.0, 1.0)


def test_remaining_above_zero_is_no_signal() -> None:
    headers = {"x-ratelimit-remaining-requests": "12", "x-ratelimit-reset-requests": "1s",
               "anthropic-ratelimit-tokens-remaining": "9000"}
    assert rate_signal(200, headers, NOW) is None


def test_anthropic_reset_timestamps() -> None:
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": _rfc3339(12),
        "anthropic-ratelimit-output-tokens-remaining": "0",
        "anthropic-ratelimit-output-tokens-reset": _rfc3339(4),
    }
    assert rate_signal(200, headers, NOW) == RateSignal(
        True, pytest.approx(12.0), pytest.approx(12.0)
    )
    # A 429 with Retry-After: the server's word for this call, the reset for everyone.
    headers["retry-after"] = "5"
    assert rate_signal(429, headers, NOW) == RateSignal(True, 5.0, pytest.approx(12.0))


def test_a_429_with_resets_but_nothing_exhausted_waits_for_the_earliest() -> None:
    headers = {"x-ratelimit-reset-requests": "2s", "x-ratelimit-reset-tokens": "30s"}
    assert rate_signal(429, headers, NOW) == RateSignal(True, 2.0, None)


def test_exceptions_that_carry_a_429() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/x")
    response = httpx.Response(429, headers={"retry-after-ms": "300"}, request=request)
    error = httpx.HTTPStatusError("429", request=request, response=response)
    assert exception_rate_signal(error) == RateSignal(True, 0.3)

    class RateLimitError(Exception):  # the shape of the OpenAI and Anthropic SDKs' error
        def __init__(self) -> None:
            super().__init__("rate limited")
            self.status_code = 429
            self.response = SimpleNamespace(headers={"Retry-After": "2"})

    assert exception_rate_signal(RateLimitError()) == RateSignal(True, 2.0)
    bare = Exception("busy")
    bare.status = 429  # type: ignore[attr-defined]
    assert exception_rate_signal(bare) == RateSignal(True, None)
    other = Exception("boom")
    other.status_code = 500  # type: ignore[attr-defined]
    assert exception_rate_signal(other) is None
    assert exception_rate_signal(ValueError("nothing")) is None
