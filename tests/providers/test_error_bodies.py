"""A judge provider answering 200 with an error body, over real HTTP: the failure it names.

Several OpenAI-compatible gateways and proxies answer ``200`` with
``{"error": {"code": 429, "message": "rate limited"}}``. That used to be a *malformed
reply*: not retried, and not counted by the adaptive limiter. It now fails as the status
it names: a rate limit and a server error are retried (after ``Retry-After``), and the
limiter counts the rate limit as it counts a 429.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest
from tests.fakes.provider import FakeServer
from tests.providers.test_providers import FAST, KEY, PATHS, base_url, judge_one
from tests.trust._support import send_body, serving

from oloproof.providers.base import UnsupportedParameter, make_judge_client
from oloproof.providers.factory import make_provider
from oloproof.transport.limiter import AdaptiveLimiter
from oloproof.transport.retry import (
    Attempted,
    AttemptFailure,
    PermanentFailure,
    RetryableFailure,
    call_with_retries,
)


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _provider(srv: FakeServer, provider: str, client: Any) -> Any:
    return make_provider(provider, "judge-model-1", KEY, base_url(srv, provider), 0.0, 256, 5.0,
                         client)


@pytest.mark.parametrize("provider", list(PATHS))
def test_a_200_naming_a_429_is_retried_after_its_retry_after(
    srv: FakeServer, provider: str
) -> None:
    srv.configure(PATHS[provider], error_body_first_n=1, retry_after="1")
    result = judge_one(srv, provider)
    assert isinstance(result, Attempted), result
    assert result.attempts == 2
    first, second = srv.calls(PATHS[provider])
    assert (first.status, second.status) == (200, 200)
    assert second.t - first.t >= 1.0  # the server's own clock: Retry-After was honoured


RETRIED = [
    ({"error": {"code": "429", "message": "slow down"}}, 429),
    ({"error": {"type": "rate_limit_error", "message": "too many requests"}}, 429),
    ({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}, 429),
    ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, 503),
    ({"error": {"code": 502, "message": "upstream connect error"}}, 502),
    ({"error": {"message": "The server had an error", "type": "server_error"}}, 503),
    # vLLM's own error object, with no "error" member.
    ({"object": "error", "message": "engine is dead", "type": "InternalServerError",
      "code": 500}, 500),
]


@pytest.mark.parametrize(("body", "status"), RETRIED)
def test_rate_limit_and_server_error_bodies_are_retried(
    srv: FakeServer, body: dict[str, Any], status: int
) -> None:
    srv.configure(PATHS["openai"], error_body_always=True, error_body=body)
    failure = judge_one(srv, "openai")
    assert isinstance(failure, RetryableFailure), failure
    assert failure.attempts == 4 and srv.total_calls(PATHS["openai"]) == 4
    assert failure.status == status
    assert "malformed" not in failure.message
    assert "HTTP 200 from POST http://127.0.0.1:" in failure.message
    assert f"read as HTTP {status}" in failure.message


PERMANENT = [
    ({"error": {"message": "The model `judge-model-1` does not exist",
                "type": "invalid_request_error", "code": "model_not_found"}}, "does not exist"),
    ({"error": "backend refused the request"}, "backend refused the request"),
    ({"error": {"code": 400, "message": "bad prompt"}}, "bad prompt"),
]


@pytest.mark.parametrize(("body", "said"), PERMANENT)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_other_error_bodies_fail_once_with_the_providers_message(
    srv: FakeServer, provider: str, body: dict[str, Any], said: str
) -> None:
    srv.configure(PATHS[provider], error_body_always=True, error_body=body)
    failure = judge_one(srv, provider)
    assert isinstance(failure, PermanentFailure), failure
    assert failure.attempts == 1 and srv.total_calls(PATHS[provider]) == 1
    assert "malformed" not in failure.message
    assert "the body is an error" in failure.message and said in failure.message


@pytest.mark.parametrize("body", [{"error": None, "id": "x"}, {"error": {}}, {"id": "x"}])
def test_a_body_reporting_no_error_is_still_malformed(
    srv: FakeServer, body: dict[str, Any]
) -> None:
    srv.configure(PATHS["openai"], error_body_always=True, error_body=body)
    failure = judge_one(srv, "openai")
    assert isinstance(failure, PermanentFailure) and failure.attempts == 1
    assert "malformed reply" in failure.message


def test_the_adaptive_limiter_counts_a_200_naming_a_429_as_a_rate_limit(
    srv: FakeServer,
) -> None:
    srv.configure(PATHS["openai"], error_body_first_n=1, retry_after="0")

    async def go() -> tuple[int, int, int, int]:
        client = make_judge_client(8)
        judge = _provider(srv, "openai", client)
        limiter = AdaptiveLimiter("judge", 16)
        before = limiter.limit
        try:
            with pytest.raises(RetryableFailure):
                await limiter.run(lambda: judge.complete("Judge.", "<output>fine</output>"))
            limited = limiter.aimd.rate_limits
            await limiter.run(lambda: judge.complete("Judge.", "<output>fine</output>"))
        finally:
            await client.aclose()
        return before, limiter.limit, limited, limiter.aimd.errors

    before, after, limited, errors = asyncio.run(go())
    assert limited == 1 and errors == 0
    assert after < before  # the limit came down, as for a 429


def _choice_error(content: str, error: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "error",
                              "message": {"role": "assistant", "content": content}}
    if error is not None:
        choice["error"] = error
    return {"id": "gen-1", "model": "judge-model-1", "choices": [choice]}


@pytest.mark.parametrize(("error", "status"), [
    ({"code": 502, "message": "provider returned error"}, 502),
    (None, 503),  # finish_reason "error" alone: a server error
])
def test_an_error_inside_the_choice_is_not_read_as_a_verdict(
    srv: FakeServer, error: Any, status: int
) -> None:
    """OpenRouter answers 200 when an error meets the model mid-reply, with finish_reason
    "error" and the error in the choice: the text written before it (here a whole verdict)
    is not read; the call is retried as the server error it is."""
    body = _choice_error('{"pass": true, "reason": "fine"}', error)
    srv.configure(PATHS["openai"], error_body_always=True, error_body=body)
    failure = judge_one(srv, "openai")
    assert isinstance(failure, RetryableFailure), failure
    assert failure.attempts == 4 and failure.status == status
    assert "the body is an error" in failure.message


# An error given as text, or as an object whose only words are its message: read for a rate
# limit or an overloaded server, as providers write them (OpenRouter's, Hugging Face's, a
# gateway's own words). Each was a permanent failure at the first attempt.
WORDED = [
    ({"error": "Rate limit exceeded"}, 429),
    ({"error": "Too many requests"}, 429),
    ({"error": "You exceeded your current quota, please check your plan"}, 429),
    ({"error": "RESOURCE_EXHAUSTED"}, 429),
    ({"error": {"message": "litellm.RateLimitError: rate limit reached for requests"}}, 429),
    ({"error": "overloaded"}, 503),
    ({"error": "Model is overloaded", "error_type": "overloaded"}, 503),
]


@pytest.mark.parametrize(("body", "status"), WORDED)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_rate_limit_or_overload_said_in_words_is_retried(
    srv: FakeServer, provider: str, body: dict[str, Any], status: int
) -> None:
    srv.configure(PATHS[provider], error_body_always=True, error_body=body)
    failure = judge_one(srv, provider)
    assert isinstance(failure, RetryableFailure), failure
    assert failure.attempts == 4 and srv.total_calls(PATHS[provider]) == 4
    assert failure.status == status and f"read as HTTP {status}" in failure.message


def test_the_adaptive_limiter_counts_a_rate_limit_said_in_words(srv: FakeServer) -> None:
    srv.configure(PATHS["openai"], error_body_first_n=1, retry_after="0",
                  error_body={"error": "Rate limit exceeded"})

    async def go() -> tuple[int, int, int, int]:
        client = make_judge_client(8)
        judge = _provider(srv, "openai", client)
        limiter = AdaptiveLimiter("judge", 16)
        before = limiter.limit
        try:
            with pytest.raises(RetryableFailure):
                await limiter.run(lambda: judge.complete("Judge.", "<output>fine</output>"))
            await limiter.run(lambda: judge.complete("Judge.", "<output>fine</output>"))
        finally:
            await client.aclose()
        return before, limiter.limit, limiter.aimd.rate_limits, limiter.aimd.errors

    before, after, limited, errors = asyncio.run(go())
    assert (limited, errors) == (1, 0)
    assert after < before


def test_a_verdict_that_mentions_a_rate_limit_is_a_verdict(srv: FakeServer) -> None:
    """Only an error member is read for those words: a reply's text is the judge's."""
    srv.configure(PATHS["openai"],
                  judge_text='{"pass": false, "reason": "Rate limit exceeded: quota, overloaded"}')
    result = judge_one(srv, "openai")
    assert isinstance(result, Attempted) and result.attempts == 1, result
    assert "Rate limit exceeded" in result.value.text


# 400-class errors named in a 200, as the real status would be read.
REFUSED = [
    ("openai", {"error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model."
                   " Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter",
    }}, "max_tokens"),
    ("anthropic", {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "temperature may only be set to 1 when thinking is enabled"}}, "temperature"),
    ("openai", {"error": {"code": 400, "message": "Unsupported value: 'temperature' does not"
                          " support 0.0 with this model."}}, "temperature"),
]


@pytest.mark.parametrize(("provider", "body", "parameter"), REFUSED)
def test_a_200_naming_a_400_that_refuses_a_parameter_stops_the_run_as_the_400_does(
    srv: FakeServer, provider: str, body: dict[str, Any], parameter: str
) -> None:
    srv.configure(PATHS[provider], error_body_always=True, error_body=body)
    failure = judge_one(srv, provider)
    assert isinstance(failure, UnsupportedParameter), failure
    assert failure.stops_run and failure.attempts == 1
    assert failure.parameter == parameter
    assert failure.provider_says.startswith("HTTP 200 naming a 400: ")


@pytest.mark.parametrize(("body", "status", "stops"), [
    ({"type": "error", "error": {"type": "authentication_error",
                                 "message": "invalid x-api-key"}}, 401, True),
    ({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                "code": "invalid_api_key"}}, 401, True),
    ({"type": "error", "error": {"type": "permission_error", "message": "no"}}, 403, True),
    ({"error": {"message": "The model `judge-model-1` does not exist",
                "type": "invalid_request_error", "code": "model_not_found"}}, 404, True),
    ({"error": {"code": "404", "message": "no such deployment"}}, 404, True),
    ({"error": {"type": "invalid_request_error", "message": "messages: too long"}}, 400, False),
])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_200_naming_a_client_error_fails_as_that_status(
    srv: FakeServer, provider: str, body: dict[str, Any], status: int, stops: bool
) -> None:
    """A 401, 403 or 404 stops the run (every later call would be answered the same), as the
    real status does; a 400 that refuses nothing fails the judgment, as the real one does."""
    srv.configure(PATHS[provider], error_body_always=True, error_body=body)
    failure = judge_one(srv, provider)
    assert isinstance(failure, PermanentFailure), failure
    assert failure.attempts == 1 and failure.status == status
    assert failure.stops_run is stops
    assert f"read as HTTP {status})" in failure.message


@pytest.mark.parametrize("code", ["\u00b2", "1" * 5000, "\u0664\u0662\u0669", " 4 29 "])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_code_that_is_not_a_status_is_the_providers_error_not_a_crash(
    srv: FakeServer, provider: str, code: str
) -> None:
    """"²" passes str.isdigit() and int() refused it: the judgment's stored reason was
    "ValueError: invalid literal for int() with base 10: '²'", naming neither the provider
    nor its reply (and 5,000 digits passed int()'s limit the same way)."""
    srv.configure(PATHS[provider], error_body_always=True,
                  error_body={"error": {"message": "upstream said no", "code": code}})
    failure = judge_one(srv, provider)
    assert isinstance(failure, PermanentFailure), failure
    assert failure.attempts == 1 and failure.status is None
    assert "the body is an error" in failure.message and "upstream said no" in failure.message


VERDICT = '{"pass": true, "reason": "fine"}'


@pytest.mark.parametrize(("provider", "body"), [
    # A reassembled reply whose stream broke: the error beside a choice that never finished.
    ("openai", {"id": "gen-1", "model": "judge-model-1",
                "error": {"code": "server_error", "message": "Provider disconnected"},
                "choices": [{"index": 0, "finish_reason": None,
                             "message": {"role": "assistant", "content": VERDICT}}]}),
    ("openai", {"error": {"code": 502, "message": "upstream reset"},
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": VERDICT}}]}),
    ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "Over"},
                   "content": [{"type": "text", "text": VERDICT}], "stop_reason": None}),
    ("anthropic", {"error": "Rate limit exceeded", "stop_reason": "end_turn",
                   "content": [{"type": "text", "text": VERDICT}]}),
])
def test_a_reply_beside_an_error_is_not_read_for_a_verdict(
    srv: FakeServer, provider: str, body: dict[str, Any]
) -> None:
    """The verdict used to be read (a pass at the first attempt) whenever the reply held a
    choice or content besides its error."""
    srv.configure(PATHS[provider], error_body_always=True, error_body=body)
    failure = judge_one(srv, provider)
    assert isinstance(failure, RetryableFailure), failure
    assert failure.attempts == 4 and "the body is an error" in failure.message


@pytest.mark.parametrize(("status", "retried", "stops"), [
    (429, True, False), (503, True, False), (401, False, True), (400, False, False),
])
def test_an_error_status_whose_body_cannot_be_decoded_is_still_that_status(
    srv: FakeServer, status: int, retried: bool, stops: bool
) -> None:
    """An error page sent with ``Content-Encoding: gzip`` and a plain body (a proxy's, a
    server's misconfigured error page): the failure was "the body could not be decoded",
    permanent, its status lost: a 429 not retried nor seen by the adaptive limit, a 401 not
    stopping the run. The status is what the failure is; the body is only its excerpt."""
    srv.configure(PATHS["openai"], fail_always=status, retry_after="0",
                  reply_headers={"content-encoding": "gzip"})
    failure = judge_one(srv, "openai")
    assert isinstance(failure, RetryableFailure if retried else PermanentFailure), failure
    assert failure.status == status and failure.stops_run is stops
    assert failure.attempts == (4 if retried else 1)
    assert f"HTTP {status} from POST http://127.0.0.1:" in failure.message
    assert "(a gzip body that could not be decoded)" in failure.message


OUT_OF_CREDIT = {"error": {
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}


class _Status(BaseHTTPRequestHandler):
    """Answers every call with ``status`` and ``body``, counting the calls."""

    status: ClassVar[int] = 429
    body: ClassVar[dict[str, Any]] = OUT_OF_CREDIT
    calls: ClassVar[list[str]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.calls.append(self.path)
        send_body(self, json.dumps(self.body).encode(), self.status)


def _judge_status(status: int, body: dict[str, Any]) -> tuple[AttemptFailure | Attempted[Any], int]:
    handler = type("Status", (_Status,), {"status": status, "body": body, "calls": []})
    with serving(handler) as base:

        async def go() -> AttemptFailure | Attempted[Any]:
            client = make_judge_client(2)
            judge = make_provider("openai", "judge-model-1", KEY, base + "/v1", 0.0, 256, 5.0,
                                  client)
            try:
                return await call_with_retries(
                    lambda n: judge.complete("Judge.", "<output>fine</output>"), FAST)
            except AttemptFailure as failure:
                return failure
            finally:
                await client.aclose()

        return asyncio.run(go()), len(handler.calls)


@pytest.mark.parametrize("status", [429, 200])
def test_an_account_out_of_credit_is_not_retried_and_stops_the_run(status: int) -> None:
    """OpenAI's 429 ``insufficient_quota`` (the credit or the spending limit used up): no wait
    lifts it, and it was retried as a rate limit, 4 attempts a judgment, until 8 judgments in
    a row had failed. It now stops the run at the first."""
    failure, calls = _judge_status(status, OUT_OF_CREDIT)
    assert isinstance(failure, PermanentFailure), failure
    assert failure.stops_run and failure.status == 429 and failure.attempts == 1
    assert calls == 1
    assert "insufficient_quota: the account's credit or spending limit is used up" in (
        failure.message)


def test_a_429_that_is_a_rate_limit_is_still_retried() -> None:
    failure, calls = _judge_status(429, {"error": {
        "message": "Rate limit reached for requests", "type": "requests",
        "code": "rate_limit_exceeded"}})
    assert isinstance(failure, RetryableFailure) and failure.attempts == 4, failure
    assert calls == 4
