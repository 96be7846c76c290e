"""Issue 30, item 3: every network error names what it called, the method and the URL,
for HTTP systems and for judge providers; never a secret (a header, a key, user info or a
query string in the URL). Against real servers on 127.0.0.1, and a port where nothing
listens."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from tests.fakes.provider import FakeServer

from oloproof.providers.base import make_judge_client
from oloproof.providers.factory import make_provider
from oloproof.providers.verdict import build_judge_prompt
from oloproof.systems.http import HttpSystem
from oloproof.transport.http import shown_url
from oloproof.transport.retry import AttemptFailure, RetryPolicy, call_with_retries
from oloproof.transport.threads import describe_exception, innermost

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
KEY = "sk-test-SECRET-0123456789"


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _fail(system: HttpSystem, case_input: Any, policy: RetryPolicy = FAST) -> AttemptFailure:
    async def go() -> AttemptFailure:
        await system.start()
        try:
            await call_with_retries(lambda n: system.call("c1", case_input, n), policy)
        except AttemptFailure as failure:
            return failure
        finally:
            await system.aclose()
        raise AssertionError("the call succeeded")

    return asyncio.run(go())


@pytest.mark.parametrize(("url", "shown"), [
    ("http://127.0.0.1:9/v1/chat/completions", "http://127.0.0.1:9/v1/chat/completions"),
    ("https://user:pa55word@api.example.com/v1?key=s3cret&x=1#frag", "https://api.example.com/v1?…"),
    ("http://[::1]:8080/a/b", "http://[::1]:8080/a/b"),
    ("http://host.example", "http://host.example/"),
    ("http://127.0.0.1:8000/v1/v1/chat/completions", "http://127.0.0.1:8000/v1/v1/chat/completions"),
])
def test_shown_url_keeps_what_locates_the_call_and_drops_what_may_be_secret(
    url: str, shown: str
) -> None:
    assert shown_url(url) == shown


def test_a_refused_connection_names_the_method_and_the_url() -> None:
    port = _dead_port()
    system = HttpSystem(name="demo", url=f"http://127.0.0.1:{port}/extract?token=s3cret",
                        version="v1", headers={"Authorization": "Bearer ${T}"},
                        environ={"T": "hunter2-secret-token"})
    failure = _fail(system, {"question": "x"})
    assert failure.message.startswith(
        f"system demo: POST http://127.0.0.1:{port}/extract?…: could not connect: "), failure.message
    assert "s3cret" not in failure.message and "hunter2" not in failure.message
    assert system.target == f"POST http://127.0.0.1:{port}/extract?…"


def test_an_error_below_httpx_names_the_request_not_a_task_group() -> None:
    """A port past 65535 (a system built in code: the configuration refuses it at load)
    fails in anyio's connect with an OverflowError inside an ExceptionGroup, which httpx
    does not wrap: the call failed as `ExceptionGroup: unhandled errors in a TaskGroup (1
    sub-exception)`, naming neither the request nor the error."""
    system = HttpSystem(name="demo", url="http://127.0.0.1:65536/triage", version="v1")
    failure = _fail(system, {"question": "x"})
    assert failure.message.startswith(
        "system demo: POST http://127.0.0.1:65536/triage: OverflowError: "), failure.message
    assert "port must be 0-65535" in failure.message
    assert "TaskGroup" not in failure.message and "ExceptionGroup" not in failure.message


def test_an_exception_group_is_described_by_the_errors_it_holds() -> None:
    inner = ExceptionGroup("unhandled errors in a TaskGroup", [OverflowError("port")])
    assert describe_exception(ExceptionGroup("outer", [inner])) == "OverflowError: port"
    many = ExceptionGroup("g", [ValueError(str(i)) for i in range(5)])
    assert describe_exception(many) == "ValueError: 0; ValueError: 1; ValueError: 2 and 2 more"
    assert innermost(ValueError("x")).args == ("x",)


def test_a_status_names_the_method_and_the_url_and_never_the_query(srv: FakeServer) -> None:
    srv.configure("/system", fail_always=404)
    system = HttpSystem(name="demo", url=srv.system_url + "?api_key=s3cret", version="v1",
                        method="GET")
    failure = _fail(system, {"question": "what is my password"})
    assert failure.message.startswith(f"system demo: HTTP 404 from GET {srv.system_url}?…: "), (
        failure.message)
    assert "s3cret" not in failure.message and "password" not in failure.message


def test_a_timeout_and_a_bad_body_name_the_call(srv: FakeServer) -> None:
    srv.configure("/system", timeout_first_n=10, timeout_sleep_s=1.0)
    system = HttpSystem(name="demo", url=srv.system_url, version="v1", method="PUT",
                        timeout_s=0.2)
    failure = _fail(system, {"question": "x"}, RetryPolicy(max_attempts=1))
    assert failure.message == f"system demo: PUT {srv.system_url}: timed out after 0.2s"
    srv.configure("/system", garbage_always=True)
    system = HttpSystem(name="demo", url=srv.system_url, version="v1")
    failure = _fail(system, {"question": "x"})
    assert failure.message.startswith(
        f"system demo: HTTP 200 from POST {srv.system_url}: response is not JSON: "), failure.message


def _judge_failure(provider: str, base_url: str, policy: RetryPolicy = FAST) -> AttemptFailure:
    async def go() -> AttemptFailure:
        client = make_judge_client(2)
        judge = make_provider(provider, "judge-model-1", KEY, base_url, 0.0, 256, 5.0, client)
        system_prompt, user_prompt = build_judge_prompt("Be polite.", {"q": 1}, None, "hi")
        try:
            await call_with_retries(lambda n: judge.complete(system_prompt, user_prompt), policy)
        except AttemptFailure as failure:
            return failure
        finally:
            await client.aclose()
        raise AssertionError("the judge answered")

    return asyncio.run(go())


def test_a_judge_base_url_with_v1_twice_is_found_from_the_message(srv: FakeServer) -> None:
    """The doubled ``/v1/v1`` of issue 30: the 404 now says where it went."""
    failure = _judge_failure("openai_compatible", srv.openai_base_url + "/v1")
    url = srv.openai_base_url + "/v1/chat/completions"
    assert "/v1/v1/chat/completions" in url
    assert f"HTTP 404 from POST {url}: " in failure.message, failure.message
    assert KEY not in failure.message


@pytest.mark.parametrize(("provider", "path"), [
    ("anthropic", "/v1/messages"), ("openai", "/chat/completions"),
    ("openai_compatible", "/chat/completions"),
])
def test_a_judge_that_cannot_be_reached_names_the_url(provider: str, path: str) -> None:
    port = _dead_port()
    base = f"http://127.0.0.1:{port}" + ("" if provider == "anthropic" else "/v1")
    failure = _judge_failure(provider, base)
    assert f"POST {base}{path}: could not connect: " in failure.message, failure.message
    assert KEY not in failure.message
