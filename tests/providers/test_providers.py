"""Judge providers against the fake provider on real HTTP, retried as the engine does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from tests.fakes.provider import FakeServer

from oloproof.errors import ConfigError
from oloproof.providers.anthropic import AnthropicProvider
from oloproof.providers.base import (
    JudgeReply,
    make_judge_client,
    resolve_api_key,
)
from oloproof.providers.factory import make_provider, make_provider_from_config
from oloproof.providers.openai import OpenAIProvider
from oloproof.providers.verdict import VerdictError, build_judge_prompt, parse_verdict
from oloproof.transport.retry import (
    Attempted,
    AttemptFailure,
    PermanentFailure,
    RetryableFailure,
    RetryPolicy,
    call_with_retries,
)

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
KEY = "sk-test-SECRET-0123456789"
PATHS = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
    "openai_compatible": "/v1/chat/completions",
}
ALL = list(PATHS)


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def base_url(srv: FakeServer, provider: str) -> str | None:
    if provider == "anthropic":
        return srv.anthropic_base_url
    return srv.openai_base_url


async def judge_many(
    srv: FakeServer,
    provider: str,
    outputs: list[Any],
    *,
    policy: RetryPolicy = FAST,
    api_key: str | None = KEY,
    timeout_s: float = 5.0,
    concurrency: int = 4,
) -> list[Attempted[JudgeReply] | AttemptFailure]:
    """Judge each output as the engine does: one shared client, a semaphore, retries."""
    client = make_judge_client(concurrency)
    judge = make_provider(
        provider, "judge-model-1", api_key, base_url(srv, provider), 0.0, 256, timeout_s, client
    )
    limit = asyncio.Semaphore(concurrency)

    async def one(output: Any) -> Attempted[JudgeReply] | AttemptFailure:
        system_prompt, user_prompt = build_judge_prompt(
            "The answer must be polite.", {"question": "Can I get a refund?"}, None, output
        )
        async with limit:
            try:
                return await call_with_retries(
                    lambda attempt: judge.complete(system_prompt, user_prompt), policy
                )
            except AttemptFailure as failure:
                return failure

    try:
        return list(await asyncio.gather(*(one(o) for o in outputs)))
    finally:
        await client.aclose()


def judge_one(
    srv: FakeServer, provider: str, output: Any = "Yes, within 30 days.", **kwargs: Any
) -> Attempted[JudgeReply] | AttemptFailure:
    return asyncio.run(judge_many(srv, provider, [output], **kwargs))[0]


def ok(result: Attempted[JudgeReply] | AttemptFailure) -> Attempted[JudgeReply]:
    assert isinstance(result, Attempted), f"expected success, got {result!r}"
    return result


# --------------------------------------------------------------------------- #
# Round trips
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("provider", ALL)
def test_round_trip_with_usage(srv: FakeServer, provider: str) -> None:
    results = asyncio.run(
        judge_many(srv, provider, ["Yes, within 30 days.", "FAIL: rude answer", ""])
    )
    replies = [ok(r).value for r in results]
    verdicts = [parse_verdict(r.text) for r in replies]
    assert [v.passed for v in verdicts] == [True, False, False]
    for reply in replies:
        assert reply.raw_model == "judge-model-1"
        assert reply.usage is not None
        assert reply.usage.input_tokens > 50 and reply.usage.output_tokens > 3
    assert srv.total_calls(PATHS[provider]) == 3


def test_anthropic_request_carries_the_wire_format() -> None:
    judge = make_provider("anthropic", "m", KEY, None, 0.0, 300, 5.0, httpx.AsyncClient())
    assert isinstance(judge, AnthropicProvider)
    body = judge.request_body("SYS", "USER")
    assert body == {
        "model": "m",
        "max_tokens": 300,
        "temperature": 0.0,
        "system": "SYS",
        "messages": [{"role": "user", "content": "USER"}],
    }
    assert judge.url == "https://api.anthropic.com/v1/messages"


def test_openai_request_carries_the_wire_format() -> None:
    judge = make_provider("openai", "gpt", KEY, None, 0.5, 100, 5.0, httpx.AsyncClient())
    assert isinstance(judge, OpenAIProvider)
    body = judge.request_body("SYS", "USER")
    assert body == {
        "model": "gpt",
        "temperature": 0.5,
        "max_tokens": 100,
        "messages": [{"role": "system", "content": "SYS"}, {"role": "user", "content": "USER"}],
    }
    assert judge.url == "https://api.openai.com/v1/chat/completions"
    compatible = make_provider(
        "openai_compatible", "m", None, "http://h:8000/v1/", 0, 1, 1, httpx.AsyncClient()
    )
    assert isinstance(compatible, OpenAIProvider) and compatible.name == "openai_compatible"
    assert compatible.url == "http://h:8000/v1/chat/completions"


def test_pass_keyword_rule_of_the_fake(srv: FakeServer) -> None:
    srv.configure("/v1/messages", pass_keyword="refund")
    results = asyncio.run(judge_many(srv, "anthropic", ["a refund is possible", "no way"]))
    assert [parse_verdict(ok(r).value.text).passed for r in results] == [True, False]


def test_judge_without_verdict_is_a_verdict_error(srv: FakeServer) -> None:
    srv.configure("/v1/chat/completions", garbage_always=True)
    reply = ok(judge_one(srv, "openai")).value
    with pytest.raises(VerdictError):
        parse_verdict(reply.text)


# --------------------------------------------------------------------------- #
# Configuration and keys
# --------------------------------------------------------------------------- #


def test_unknown_provider_and_missing_settings_are_config_errors() -> None:
    client = httpx.AsyncClient()
    with pytest.raises(ConfigError, match="unknown provider 'gemini'"):
        make_provider("gemini", "m", KEY, None, 0, 1, 1, client)
    with pytest.raises(ConfigError, match="base_url"):
        make_provider("openai_compatible", "m", KEY, None, 0, 1, 1, client)
    for provider in ("anthropic", "openai"):
        with pytest.raises(ConfigError, match="API key"):
            make_provider(provider, "m", None, None, 0, 1, 1, client)


@pytest.mark.parametrize("key", ["sk-with\nnewline", "sk-with space", "sk-caf\u00e9"])
def test_a_key_that_cannot_be_sent_is_a_config_error_that_does_not_quote_it(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_provider("anthropic", "m", key, None, 0, 1, 1, httpx.AsyncClient())
    assert key not in str(info.value)


def test_resolve_api_key_reads_the_named_or_default_variable() -> None:
    env = {"ANTHROPIC_API_KEY": "a-key", "MY_KEY": "m-key"}
    assert resolve_api_key("anthropic", None, env) == "a-key"
    assert resolve_api_key("openai", "MY_KEY", env) == "m-key"
    assert resolve_api_key("openai_compatible", None, env) is None
    with pytest.raises(ConfigError) as info:
        resolve_api_key("openai", None, env, field="evaluators[2].api_key_env")
    assert "OPENAI_API_KEY" in str(info.value) and "evaluators[2].api_key_env" in str(info.value)


def test_make_provider_from_config(srv: FakeServer) -> None:
    config = SimpleNamespace(
        provider="openai_compatible",
        model="local-model",
        api_key_env="LOCAL_KEY",
        base_url=srv.openai_base_url,
        temperature=0,
        max_tokens=64,
        timeout_s=5,
    )

    async def go() -> JudgeReply:
        async with make_judge_client(2) as client:
            judge = make_provider_from_config(config, client, {"LOCAL_KEY": KEY})
            return await judge.complete(*build_judge_prompt("R", "q", None, "fine"))

    reply = asyncio.run(go())
    assert parse_verdict(reply.text).passed is True


def test_openai_compatible_without_key_sends_no_authorization(srv: FakeServer) -> None:
    failure = judge_one(srv, "openai_compatible", api_key=None)
    assert isinstance(failure, PermanentFailure)
    assert failure.attempts == 1
    assert "HTTP 401" in failure.message


@pytest.mark.parametrize("provider", ALL)
def test_the_key_never_appears_in_errors_reprs_or_logs(
    srv: FakeServer, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = PATHS[provider]
    caplog.set_level(logging.DEBUG)
    # The fake quotes a wrong key back in its 401, as some real APIs do.
    srv.configure(path, expected_api_key="the-right-key")
    failures = [judge_one(srv, provider)]
    for behaviour in (
        {"fail_always": 503},
        {"fail_always": 400},
        {"garbage_always": True, "garbage_kind": "body"},
        {"garbage_always": True, "garbage_kind": "shape"},
        {"timeout_first_n": 10, "timeout_sleep_s": 0.5},
    ):
        srv.reset()  # attempt counts too: each behaviour starts at attempt 1
        srv.configure(path, **behaviour)
        failures.append(judge_one(srv, provider, timeout_s=0.2))
    for failure in failures:
        assert isinstance(failure, AttemptFailure)
        assert KEY not in str(failure) and KEY not in repr(failure)
        assert KEY not in failure.message
    assert "***" in failures[0].message  # the quoted key was masked
    judge = make_provider(provider, "m", KEY, base_url(srv, provider), 0, 1, 1, httpx.AsyncClient())
    assert KEY not in repr(judge) and KEY not in str(judge)
    assert KEY not in caplog.text


# --------------------------------------------------------------------------- #
# Retries
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_429_retry_after_on_each_prompts_first_call(srv: FakeServer, provider: str) -> None:
    path = PATHS[provider]
    srv.configure(path, fail_first_n=1, fail_status=429, retry_after="1")
    outputs = ["answer one", "answer two", "answer three"]
    results = asyncio.run(judge_many(srv, provider, outputs, policy=RetryPolicy()))
    assert all(ok(r).attempts == 2 for r in results)
    by_key = srv.calls_by_key(path)
    assert len(by_key) == 3
    for calls in by_key.values():
        assert [(c.attempt, c.status) for c in calls] == [(1, 429), (2, 200)]
        assert calls[1].t - calls[0].t >= 1.0


@pytest.mark.parametrize("provider", ALL)
def test_503_three_times_then_success(srv: FakeServer, provider: str) -> None:
    srv.configure(PATHS[provider], fail_first_n=3, fail_status=503)
    assert ok(judge_one(srv, provider)).attempts == 4


def test_503_four_times_fails_after_four_attempts(srv: FakeServer) -> None:
    srv.configure("/v1/messages", fail_first_n=4, fail_status=503)
    failure = judge_one(srv, "anthropic")
    assert isinstance(failure, RetryableFailure)
    assert failure.attempts == 4 and "HTTP 503" in failure.message
    assert srv.total_calls("/v1/messages") == 4


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_400_fails_after_one_attempt(srv: FakeServer, provider: str) -> None:
    srv.configure(PATHS[provider], fail_always=400)
    failure = judge_one(srv, provider)
    assert isinstance(failure, PermanentFailure)
    assert failure.attempts == 1
    assert "HTTP 400 from POST http://127.0.0.1:" in failure.message
    assert "scripted failure 400" in failure.message


def test_529_overloaded_is_retried(srv: FakeServer) -> None:
    srv.configure("/v1/messages", fail_first_n=1, fail_status=529)
    assert ok(judge_one(srv, "anthropic")).attempts == 2


def test_dropped_connection_is_retried(srv: FakeServer) -> None:
    srv.configure("/v1/chat/completions", drop_first_n=1)
    assert ok(judge_one(srv, "openai")).attempts == 2


def test_timeout_is_retried(srv: FakeServer) -> None:
    srv.configure("/v1/messages", timeout_first_n=2, timeout_sleep_s=1.5)
    assert ok(judge_one(srv, "anthropic", timeout_s=0.5)).attempts == 3


def test_retry_after_http_date_is_honoured(srv: FakeServer) -> None:
    srv.configure(
        "/v1/chat/completions", fail_first_n=1, fail_status=429, retry_after_date_in_s=2.5
    )
    assert ok(judge_one(srv, "openai")).attempts == 2
    first, second = srv.calls("/v1/chat/completions")
    assert second.t - first.t >= 1.4


def test_retry_after_beyond_max_wait_gives_up(srv: FakeServer) -> None:
    srv.configure("/v1/messages", fail_first_n=1, fail_status=429, retry_after="600")
    failure = judge_one(srv, "anthropic", policy=RetryPolicy())
    assert isinstance(failure, RetryableFailure)
    assert failure.attempts == 1 and "gave up" in failure.message


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_malformed_bodies_are_permanent(srv: FakeServer, provider: str) -> None:
    srv.configure(PATHS[provider], garbage_always=True, garbage_kind="body")
    failure = judge_one(srv, provider)
    assert isinstance(failure, PermanentFailure) and failure.attempts == 1
    assert "not JSON" in failure.message and "502 Bad Gateway" in failure.message

    srv.configure(PATHS[provider], garbage_always=True, garbage_kind="shape")
    failure = judge_one(srv, provider)
    assert isinstance(failure, PermanentFailure) and failure.attempts == 1
    assert "malformed reply" in failure.message


# --------------------------------------------------------------------------- #
# Concurrency
# --------------------------------------------------------------------------- #


def test_peak_in_flight_through_one_client_is_the_semaphore(srv: FakeServer) -> None:
    # The first 8 are held until all 8 are in flight, so the peak is reached
    # however slow the machine; after that, a short delay keeps calls overlapping.
    srv.configure("/v1/messages", hold_until_peak=8, hold_max_s=5, delay_s=0.02)
    outputs = [f"answer {i}" for i in range(50)]
    results = asyncio.run(judge_many(srv, "anthropic", outputs, concurrency=8))
    assert all(ok(r).attempts == 1 for r in results)
    assert srv.total_calls("/v1/messages") == 50
    assert srv.peak_in_flight("/v1/messages") == 8


@pytest.mark.parametrize("header", ["inf", "1e400"])
def test_a_retry_after_past_any_limit_is_said_in_words(header: str) -> None:
    from oloproof.transport.retry import parse_retry_after

    async def attempt(n: int) -> None:
        raise RetryableFailure("HTTP 429", retry_after_s=parse_retry_after(header))

    with pytest.raises(RetryableFailure) as caught:
        asyncio.run(call_with_retries(attempt, FAST))
    message = caught.value.message
    assert "gave up: Retry-After a wait past any limit exceeds max_retry_wait_s 60s" in message
    assert "infs" not in message, message
