"""What the HTTP transport hands the adaptive limiter, over real HTTP: a 429's signal on
the failure, an exhausted limit on a 200 reported to the call's scope."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from tests.fakes.provider import FakeServer

from oloproof.transport.http import send_attempt
from oloproof.transport.ratelimit import RateSignal, observed
from oloproof.transport.retry import RetryableFailure


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


async def _send(srv: FakeServer, body: dict[str, object]) -> tuple[object, list[RateSignal]]:
    async with httpx.AsyncClient() as client:
        with observed() as seen:
            try:
                reply: object = await send_attempt(
                    client, "POST", srv.system_url, what="system t", timeout_s=5, json_body=body
                )
            except RetryableFailure as failure:
                reply = failure
    return reply, seen


def test_a_429_at_capacity_carries_its_signal(srv: FakeServer) -> None:
    srv.configure("/system", capacity=1, hold_until_peak=2, hold_max_s=2,
                  capacity_retry_after_ms=250)

    async def both() -> list[tuple[object, list[RateSignal]]]:
        return list(await asyncio.gather(_send(srv, {"text": "a"}), _send(srv, {"text": "b"})))

    results = asyncio.run(both())
    failures = [r for r, _ in results if isinstance(r, RetryableFailure)]
    assert len(failures) == 1
    failure = failures[0]
    assert failure.status == 429
    assert failure.rate == RateSignal(True, 0.25, None)
    assert failure.retry_after_s == 1.0  # the retry policy reads Retry-After, as before
    assert srv.capacity_stats("/system") == {
        "capacity": 1, "in_flight": 0, "peak": 1, "admitted": 1, "rejected": 1,
    }


def test_an_exhausted_limit_on_a_200_is_reported_to_the_calls_scope(srv: FakeServer) -> None:
    srv.configure("/system", reply_headers={
        "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "750ms",
    })
    reply, seen = asyncio.run(_send(srv, {"text": "a"}))
    assert not isinstance(reply, RetryableFailure)
    assert seen == [RateSignal(True, 0.75, 0.75)]
    srv.configure("/system", reply_headers={"x-ratelimit-remaining-requests": "7"})
    _, seen = asyncio.run(_send(srv, {"text": "b"}))
    assert seen == []
