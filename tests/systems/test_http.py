"""HttpSystem against the fake system on real HTTP (127.0.0.1), retried as the engine does."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from tests.fakes.provider import FakeServer

from oloproof.errors import ConfigError
from oloproof.systems.base import CallResult
from oloproof.systems.http import HttpSystem
from oloproof.systems.identity import digest
from oloproof.transport.retry import (
    Attempted,
    AttemptFailure,
    PermanentFailure,
    RetryableFailure,
    RetryPolicy,
    call_with_retries,
)

# Where the exact delay does not matter, retry fast.
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def make_system(srv: FakeServer, **overrides: Any) -> HttpSystem:
    fields: dict[str, Any] = {
        "name": "demo",
        "url": srv.system_url,
        "version": "v1",
        "output_path": "answer",
        "usage_path": "usage",
        "timeout_s": 5.0,
        "concurrency": 8,
    }
    fields.update(overrides)
    return HttpSystem(**fields)


async def run_cases(
    system: HttpSystem,
    cases: dict[str, Any],
    policy: RetryPolicy = FAST,
    concurrency: int = 8,
) -> dict[str, Attempted[CallResult] | AttemptFailure]:
    """Run cases as the engine does: a semaphore, one retry loop per case."""
    limit = asyncio.Semaphore(concurrency)
    await system.start()

    async def one(case_id: str, case_input: Any) -> Attempted[CallResult] | AttemptFailure:
        async with limit:
            try:
                return await call_with_retries(
                    lambda attempt: system.call(case_id, case_input, attempt), policy
                )
            except AttemptFailure as failure:
                return failure

    try:
        results = await asyncio.gather(*(one(cid, inp) for cid, inp in cases.items()))
    finally:
        await system.aclose()
    return dict(zip(cases, results, strict=True))


def run_one(
    system: HttpSystem, case_input: Any, policy: RetryPolicy = FAST
) -> Attempted[CallResult] | AttemptFailure:
    return asyncio.run(run_cases(system, {"c1": case_input}, policy))["c1"]


def ok(result: Attempted[CallResult] | AttemptFailure) -> Attempted[CallResult]:
    assert isinstance(result, Attempted), f"expected success, got {result!r}"
    return result


# --------------------------------------------------------------------------- #
# Round trips
# --------------------------------------------------------------------------- #


def test_post_round_trip_reads_output_and_usage(srv: FakeServer) -> None:
    result = ok(run_one(make_system(srv), {"question": "Can I get a refund?"}))
    assert result.attempts == 1
    assert result.value.output == "You asked: Can I get a refund?"
    assert result.value.usage is not None
    assert (result.value.usage.input_tokens, result.value.usage.output_tokens) == (5, 7)
    assert [c.method for c in srv.calls("/system")] == ["POST"]


def test_whole_body_without_output_path_and_no_usage_without_usage_path(srv: FakeServer) -> None:
    system = make_system(srv, output_path=None, usage_path=None)
    result = ok(run_one(system, {"respond": {"result": {"label": "refund"}, "n": 1}}))
    assert result.value.output == {"result": {"label": "refund"}, "n": 1}
    assert result.value.usage is None


def test_dotted_output_path_follows_objects_and_array_indexes(srv: FakeServer) -> None:
    system = make_system(srv, output_path="result.items.1.label", usage_path="meta.usage")
    body = {
        "result": {"items": [{"label": "a"}, {"label": "b"}]},
        "meta": {"usage": {"prompt_tokens": 11, "completion_tokens": 3}},
    }
    result = ok(run_one(system, {"respond": body}))
    assert result.value.output == "b"
    assert result.value.usage is not None
    assert (result.value.usage.input_tokens, result.value.usage.output_tokens) == (11, 3)


def test_put_sends_the_input_as_json_body(srv: FakeServer) -> None:
    system = make_system(srv, method="PUT", output_path=None)
    result = ok(run_one(system, {"question": "hello", "n": [1, 2]}))
    assert result.value.output["method"] == "PUT"
    assert result.value.output["input"] == {"question": "hello", "n": [1, 2]}


def test_get_sends_the_input_as_query_parameters(srv: FakeServer) -> None:
    system = make_system(srv, method="get", output_path=None)
    result = ok(run_one(system, {"question": "hi there", "n": 3, "flag": True}))
    assert result.value.output["method"] == "GET"
    assert result.value.output["input"] == {"question": "hi there", "n": "3", "flag": "true"}


def test_get_keeps_the_query_the_url_already_has(srv: FakeServer) -> None:
    system = make_system(srv, method="GET", output_path="input", url=srv.system_url + "?v=2")
    result = ok(run_one(system, {"question": "hi", "none": None}))
    assert result.value.output == {"v": "2", "question": "hi", "none": ""}


@pytest.mark.parametrize("case_input", [{"q": {"nested": 1}}, {"q": [1, 2]}, ["a"], "text"])
def test_get_refuses_input_that_is_not_an_object_of_scalars(
    srv: FakeServer, case_input: Any
) -> None:
    failure = run_one(make_system(srv, method="GET"), case_input)
    assert isinstance(failure, PermanentFailure)
    assert failure.attempts == 1
    assert "query parameters" in failure.message
    assert srv.total_calls("/system") == 0


# --------------------------------------------------------------------------- #
# Configuration, headers and identity
# --------------------------------------------------------------------------- #


def test_header_templates_are_resolved_from_the_environment(srv: FakeServer) -> None:
    srv.configure("/system", require_headers={"Authorization": "Bearer s3cret-token-42"})
    system = make_system(
        srv,
        headers={"Authorization": "Bearer ${INTAKE_TOKEN}"},
        environ={"INTAKE_TOKEN": "s3cret-token-42"},
    )
    assert ok(run_one(system, {"question": "x"})).attempts == 1

    wrong = make_system(
        srv, headers={"Authorization": "Bearer ${INTAKE_TOKEN}"}, environ={"INTAKE_TOKEN": "other"}
    )
    failure = run_one(wrong, {"question": "x"})
    assert isinstance(failure, PermanentFailure)
    assert "HTTP 401" in failure.message


def test_missing_header_variable_is_a_config_error_before_any_call(srv: FakeServer) -> None:
    with pytest.raises(ConfigError) as info:
        make_system(
            srv,
            headers={"Accept": "application/json", "Authorization": "Bearer ${INTAKE_TOKEN}"},
            environ={"OTHER": "x"},
        )
    message = str(info.value)
    assert "system.http.headers.Authorization" in message
    assert "INTAKE_TOKEN" in message
    assert srv.total_calls("/system") == 0


@pytest.mark.parametrize("value", ["line\nbreak", "caf\u00e9"])
def test_header_values_that_cannot_be_sent_are_config_errors(srv: FakeServer, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_system(srv, headers={"X-Token": "${TOKEN}"}, environ={"TOKEN": value})
    assert "system.http.headers.X-Token" in str(info.value) and "TOKEN" in str(info.value)
    assert value not in str(info.value)


def test_from_config_reads_duck_typed_config(srv: FakeServer) -> None:
    http = SimpleNamespace(
        url=srv.system_url,
        method="POST",
        version="rules-v1",
        output_path="label",
        usage_path=None,
        timeout_s=5,
        headers={"X-Team": "${TEAM}"},
    )
    config = SimpleNamespace(name="support-bot", version=None, http=http)
    system = HttpSystem.from_config(config, concurrency=4, environ={"TEAM": "qa"})
    assert system.version == "rules-v1" and system.concurrency == 4
    assert ok(run_one(system, {"question": "Refund please"})).value.output == "refund"


def test_from_config_with_the_project_model(srv: FakeServer) -> None:
    from oloproof.project.config import SystemConfig

    config = SystemConfig.validate(
        {
            "name": "support-bot",
            "timeout_s": 7,
            "http": {"url": srv.system_url, "version": "v1", "headers": {"X-Key": "${K}"}},
        }
    )
    system = HttpSystem.from_config(config, environ={"K": "k"})
    assert system.timeout_s == 7.0 and system.method == "POST"
    assert ok(run_one(system, {"question": "x"})).value.output["answer"] == "You asked: x"
    with pytest.raises(ConfigError) as info:
        HttpSystem.from_config(config, environ={}, file="oloproof.yaml")
    assert str(info.value).startswith("oloproof.yaml: system.http.headers.X-Key: ")


@pytest.mark.parametrize(
    ("field", "value"),
    [("method", "DELETE"), ("url", "ftp://example.com/x"), ("url", "not a url"), ("timeout_s", 0)],
)
def test_bad_config_is_a_config_error(srv: FakeServer, field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"system.http.{field}"):
        make_system(srv, **{field: value})


def test_identity_covers_the_templates_never_the_values(srv: FakeServer) -> None:
    headers = {"Authorization": "Bearer ${INTAKE_TOKEN}"}
    one = make_system(srv, headers=headers, environ={"INTAKE_TOKEN": "aaa"})
    two = make_system(
        srv, headers=headers, environ={"INTAKE_TOKEN": "bbb"}, timeout_s=99, concurrency=1
    )
    assert one.identity == two.identity
    assert one.identity == digest(
        {
            "kind": "http",
            "name": "demo",
            "version": "v1",
            "url": srv.system_url,
            "method": "POST",
            "output_path": "answer",
            "usage_path": "usage",
            "headers": headers,
        }
    )
    env = {"INTAKE_TOKEN": "aaa", "T2": "aaa"}
    changed = [
        make_system(srv, headers=headers, environ=env, version="v2"),
        make_system(srv, headers=headers, environ=env, url=srv.system_url + "?x=1"),
        make_system(srv, headers=headers, environ=env, method="PUT"),
        make_system(srv, headers=headers, environ=env, output_path="label"),
        make_system(srv, headers=headers, environ=env, name="other"),
        make_system(srv, headers={"Authorization": "Bearer ${T2}"}, environ=env),
    ]
    identities = {one.identity} | {s.identity for s in changed}
    assert len(identities) == 1 + len(changed)


def test_repr_shows_no_resolved_header_value(srv: FakeServer) -> None:
    system = make_system(
        srv, headers={"Authorization": "Bearer ${TOKEN}"}, environ={"TOKEN": "tok-SECRET-9"}
    )
    assert "tok-SECRET-9" not in repr(system)
    assert "Authorization" in repr(system)


# --------------------------------------------------------------------------- #
# Retries, classified as SPEC §3 asks
# --------------------------------------------------------------------------- #


def test_429_with_retry_after_on_each_cases_first_call(srv: FakeServer) -> None:
    srv.configure("/system", fail_first_n=1, fail_status=429, retry_after="1")
    cases = {f"c{i}": {"question": f"question {i}"} for i in range(5)}
    results = asyncio.run(run_cases(make_system(srv), cases, RetryPolicy()))
    for case_id, result in results.items():
        assert ok(result).attempts == 2, case_id
        assert ok(result).value.output == f"You asked: question {case_id[1:]}"
    by_key = srv.calls_by_key("/system")
    assert len(by_key) == 5
    for calls in by_key.values():
        assert [(c.attempt, c.status) for c in calls] == [(1, 429), (2, 200)]
        # By the server's own clock: never sooner than Retry-After asked.
        assert calls[1].t - calls[0].t >= 1.0


def test_503_three_times_then_200_succeeds_on_the_fourth_attempt(srv: FakeServer) -> None:
    srv.configure("/system", fail_first_n=3, fail_status=503)
    result = ok(run_one(make_system(srv), {"question": "x"}))
    assert result.attempts == 4
    assert [c.status for c in srv.calls("/system")] == [503, 503, 503, 200]


def test_503_four_times_gives_up_after_four_attempts(srv: FakeServer) -> None:
    srv.configure("/system", fail_first_n=4, fail_status=503)
    failure = run_one(make_system(srv), {"question": "x"})
    assert isinstance(failure, RetryableFailure)
    assert failure.attempts == 4
    assert "HTTP 503" in failure.message
    assert failure.kind == "ERROR"
    assert srv.total_calls("/system") == 4


def test_500_always_gives_up_after_four_attempts(srv: FakeServer) -> None:
    srv.configure("/system", fail_always=500)
    failure = run_one(make_system(srv), {"question": "x"})
    assert isinstance(failure, RetryableFailure) and failure.attempts == 4


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_fail_after_one_attempt(srv: FakeServer, status: int) -> None:
    failure = run_one(
        make_system(srv), {"respond": {"error": "bad field 'question'"}, "status": status}
    )
    assert isinstance(failure, PermanentFailure)
    assert failure.attempts == 1
    assert f"HTTP {status} from POST {srv.system_url}: " in failure.message
    assert "bad field 'question'" in failure.message
    assert srv.total_calls("/system") == 1


def test_dropped_connection_is_retried(srv: FakeServer) -> None:
    srv.configure("/system", drop_first_n=2)
    result = ok(run_one(make_system(srv), {"question": "x"}))
    assert result.attempts == 3
    assert [c.status for c in srv.calls("/system")] == ["drop", "drop", 200]


def test_timeout_is_retried(srv: FakeServer) -> None:
    srv.configure("/system", timeout_first_n=1, timeout_sleep_s=1.5)
    result = ok(run_one(make_system(srv, timeout_s=0.5), {"question": "x"}))
    assert result.attempts == 2


def test_timeout_every_time_is_recorded_as_timeout(srv: FakeServer) -> None:
    srv.configure("/system", timeout_first_n=10, timeout_sleep_s=1.0)
    failure = run_one(make_system(srv, timeout_s=0.2), {"question": "x"})
    assert isinstance(failure, RetryableFailure)
    assert failure.kind == "TIMEOUT"
    assert failure.attempts == 4
    assert "timed out after 0.2s" in failure.message


def test_slow_answer_is_a_timeout_even_when_bytes_keep_coming(srv: FakeServer) -> None:
    # The head at once, then one byte every 50 ms (a few seconds in all): each
    # read returns within any read timeout, only an overall limit stops it.
    srv.configure("/system", trickle_s=0.05)
    failure = run_one(
        make_system(srv, timeout_s=0.2), {"question": "x"}, RetryPolicy(max_attempts=1)
    )
    assert isinstance(failure, RetryableFailure) and failure.kind == "TIMEOUT"


def test_refused_connection_is_retried_then_fails() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port any more.
    system = HttpSystem(name="demo", url=f"http://127.0.0.1:{port}/system", version="v1")
    failure = run_one(system, {"question": "x"})
    assert isinstance(failure, RetryableFailure)
    assert failure.attempts == 4
    assert "could not connect" in failure.message


def test_retry_after_http_date_is_honoured(srv: FakeServer) -> None:
    # The date is whole seconds: 2.5 s ahead is at least 1.5 s ahead.
    srv.configure("/system", fail_first_n=1, fail_status=503, retry_after_date_in_s=2.5)
    result = ok(run_one(make_system(srv), {"question": "x"}))
    assert result.attempts == 2
    first, second = srv.calls("/system")
    assert second.t - first.t >= 1.4


def test_retry_after_beyond_max_retry_wait_gives_up(srv: FakeServer) -> None:
    srv.configure("/system", fail_first_n=1, fail_status=429, retry_after="120")
    failure = run_one(make_system(srv), {"question": "x"}, RetryPolicy())
    assert isinstance(failure, RetryableFailure)
    assert failure.attempts == 1
    assert "HTTP 429" in failure.message and "gave up" in failure.message
    assert srv.total_calls("/system") == 1


# --------------------------------------------------------------------------- #
# Bad bodies and secrets
# --------------------------------------------------------------------------- #


def test_non_json_response_is_a_permanent_failure_with_a_readable_excerpt(
    srv: FakeServer,
) -> None:
    srv.configure("/system", garbage_always=True)
    failure = run_one(make_system(srv), {"question": "x"})
    assert isinstance(failure, PermanentFailure)
    assert failure.attempts == 1
    assert "HTTP 200" in failure.message and "not JSON" in failure.message
    assert "502 Bad Gateway" in failure.message


def test_long_bodies_are_cut_to_an_excerpt(srv: FakeServer) -> None:
    failure = run_one(make_system(srv), {"respond_raw": "word " * 500, "status": 200})
    assert isinstance(failure, PermanentFailure)
    assert failure.message.endswith("…")
    assert len(failure.message) < 320


def test_missing_output_path_is_a_permanent_failure(srv: FakeServer) -> None:
    failure = run_one(make_system(srv, output_path="result.label"), {"respond": {"result": {}}})
    assert isinstance(failure, PermanentFailure)
    assert failure.attempts == 1
    assert "'result.label' not found" in failure.message
    assert '{"result": {}}' in failure.message


def test_secret_header_values_never_appear_in_errors(srv: FakeServer) -> None:
    secret = "tok-SECRET-abc123"
    environ = {"TOKEN": secret}
    headers = {"Authorization": "Bearer ${TOKEN}"}
    inputs = [
        {"respond": {"detail": f"invalid token {secret}"}, "status": 400},
        {"respond": {"detail": f"upstream rejected {secret}"}, "status": 503},
        {"respond_raw": f"<p>{secret}</p>", "status": 200},
    ]
    for case_input in inputs:
        failure = run_one(make_system(srv, headers=headers, environ=environ), case_input)
        assert isinstance(failure, AttemptFailure)
        assert secret not in failure.message
        assert secret not in str(failure) and secret not in repr(failure)
        assert "***" in failure.message


# --------------------------------------------------------------------------- #
# Concurrency
# --------------------------------------------------------------------------- #


def test_peak_in_flight_is_exactly_the_concurrency(srv: FakeServer) -> None:
    # The first 8 are held until all 8 are in flight, so the peak is reached
    # however slow the machine; after that, a short delay keeps calls overlapping.
    srv.configure("/system", hold_until_peak=8, hold_max_s=5, delay_s=0.02)
    cases = {f"c{i:02d}": {"question": f"q{i}"} for i in range(50)}
    results = asyncio.run(run_cases(make_system(srv, concurrency=8), cases, concurrency=8))
    assert all(ok(r).attempts == 1 for r in results.values())
    assert srv.total_calls("/system") == 50
    assert srv.peak_in_flight("/system") == 8
    assert srv.in_flight("/system") == 0
