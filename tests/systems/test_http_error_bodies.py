"""An HTTP system answering 200 with ``{"error": ...}``: an error of the case, never an output.

Without ``output_path`` the whole body is the output, and such a body used to be stored and
scored: a no-PII regex and a "does not contain" check passed on the error text, and the gate
allowed. Against the fake system on real HTTP (127.0.0.1), and the real CLI.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import textwrap
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer
from tests.trust._support import serving

from oloproof.systems.base import CallResult
from oloproof.systems.http import HttpSystem
from oloproof.transport.limiter import AdaptiveLimiter
from oloproof.transport.retry import (
    Attempted,
    AttemptFailure,
    PermanentFailure,
    RetryableFailure,
    RetryPolicy,
    call_with_retries,
)

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def call(
    srv: FakeServer, case_input: Any, output_path: str | None = None
) -> Attempted[CallResult] | AttemptFailure:
    system = HttpSystem(name="demo", url=srv.system_url, version="v1",
                        output_path=output_path, timeout_s=5.0)

    async def go() -> Attempted[CallResult] | AttemptFailure:
        await system.start()
        try:
            return await call_with_retries(lambda n: system.call("c1", case_input, n), FAST)
        except AttemptFailure as failure:
            return failure
        finally:
            await system.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(("body", "retried", "said"), [
    ({"error": {"code": 429, "message": "rate limited"}}, True, "read as HTTP 429"),
    ({"error": {"type": "overloaded_error", "message": "busy"}}, True, "read as HTTP 503"),
    ({"error": "no model loaded"}, False, "no model loaded"),
    ({"error": {"message": "ticket 42 not found"}}, False, "ticket 42 not found"),
])
def test_a_body_that_is_only_an_error_is_an_error_of_the_case(
    srv: FakeServer, body: dict[str, Any], retried: bool, said: str
) -> None:
    failure = call(srv, {"respond": body})
    assert isinstance(failure, RetryableFailure if retried else PermanentFailure), failure
    assert failure.attempts == (4 if retried else 1)
    assert srv.total_calls("/system") == failure.attempts
    assert failure.message.startswith("system demo: HTTP 200 from POST http://127.0.0.1:")
    assert "the body is an error" in failure.message and said in failure.message


def test_an_error_beside_null_members_is_an_error_of_the_case(srv: FakeServer) -> None:
    body = {"result": None, "usage": None, "error": {"code": 429, "message": "slow down"}}
    failure = call(srv, {"respond": body})
    assert isinstance(failure, RetryableFailure) and failure.attempts == 4, failure
    srv.reset()
    failure = call(srv, {"respond": body}, output_path="result")  # found, but null
    assert isinstance(failure, RetryableFailure) and failure.attempts == 4, failure
    assert "read as HTTP 429" in failure.message
    srv.reset()
    null = call(srv, {"respond": {"result": None, "error": None}}, output_path="result")
    assert isinstance(null, Attempted) and null.value.output is None  # no error: null it is


def test_a_200_naming_a_rate_limit_is_retried_until_the_answer(srv: FakeServer) -> None:
    srv.configure("/system", error_body_first_n=2)
    result = call(srv, {"text": "Refund please"})
    assert isinstance(result, Attempted), result
    assert result.attempts == 3
    assert result.value.output["label"] == "refund"


@pytest.mark.parametrize("body", [
    {"error": None},                                   # reports no error
    {"error": ""},
    {"error": {}},
    {"error": None, "label": None},
    {"error": "shown", "label": "refund"},             # an output with other keys
    {"result": "ok", "error": {"code": 500}},
    {"result": "", "error": "partial"},                # an empty text is an output
])
def test_an_output_that_is_more_than_an_error_is_kept(
    srv: FakeServer, body: dict[str, Any]
) -> None:
    result = call(srv, {"respond": body})
    assert isinstance(result, Attempted), result
    assert result.value.output == body


def test_output_path_found_is_the_output_and_missing_reads_the_error(srv: FakeServer) -> None:
    body = {"error": {"code": 503, "message": "warming up"}}
    found = call(srv, {"respond": body}, output_path="error.message")
    assert isinstance(found, Attempted) and found.value.output == "warming up"
    srv.reset()
    missing = call(srv, {"respond": body}, output_path="answer")
    assert isinstance(missing, RetryableFailure) and missing.attempts == 4
    assert "read as HTTP 503" in missing.message


def _project(root: Path, srv: FakeServer, cases: list[dict[str, Any]]) -> Path:
    (root / "data").mkdir(parents=True)
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "oloproof.yaml").write_text(textwrap.dedent(f"""\
        version: 1
        project: errbody
        dataset: data/cases.jsonl
        policy: release.yaml
        system:
          name: intake
          http:
            url: {srv.system_url}
            version: v1
            timeout_s: 5
        concurrency:
          system: 4
        evaluators:
          - type: regex
            criterion: no_ssn
            pattern: '\\d{{3}}-\\d{{2}}-\\d{{4}}'
            pass_if: no_match
        """))
    (root / "release.yaml").write_text(textwrap.dedent("""\
        version: 1
        max_missing: 0.5
        rules:
          - id: no-leak
            metric: no_ssn
            max_failures: 0
        """))
    return root


def test_the_gate_does_not_allow_on_error_bodies_and_the_cache_keeps_none(
    srv: FakeServer, tmp_path: Path
) -> None:
    cases = [{"id": f"c{i:02d}", "input": {"text": f"question {i}"}} for i in range(8)]
    cases += [
        {"id": "e1", "input": {"respond": {"error": "upstream model unavailable"}}},
        {"id": "e2", "input": {"respond": {"error": {"message": "invalid tenant"}}}},
    ]
    root = _project(tmp_path / "p", srv, cases)
    result = run_cli("run", cwd=root)
    # The two error bodies are missing cases: they could be leaks, so the rule cannot pass.
    assert result.code != 0, result.text
    assert "ALLOW" not in result.out
    with sqlite3.connect(root / ".oloproof" / "store.sqlite") as conn:
        stored = conn.execute("SELECT count(*) FROM exec_cache").fetchone()[0]
    assert stored == 8  # the cache holds the eight answers, no error body as an output
    shown = run_cli("inspect", "latest", "--case", "e1", cwd=root)
    assert "ERROR" in shown.out and "the body is an error" in shown.out, shown.text
    assert "upstream model unavailable" in shown.out

    again = run_cli("run", cwd=root)
    assert again.code == result.code
    assert srv.total_calls("/system") == 10 + 2  # the errors are called again, not cached


def test_an_error_body_an_earlier_version_cached_is_called_again(
    srv: FakeServer, tmp_path: Path
) -> None:
    """A store written before such a body was read as an error holds it as an output: a
    rerun must call the case again rather than score the cached error text."""
    cases = [{"id": f"c{i:02d}", "input": {"text": f"question {i}"}} for i in range(4)]
    root = _project(tmp_path / "p", srv, cases)
    first = run_cli("run", cwd=root)
    assert first.code == 0, first.text
    assert srv.total_calls("/system") == 4
    store = root / ".oloproof" / "store.sqlite"
    with sqlite3.connect(store) as conn:
        # What an earlier version stored for a 200 {"error": ...} (the whole body).
        (key,) = conn.execute("SELECT key FROM exec_cache ORDER BY key LIMIT 1").fetchone()
        conn.execute("UPDATE exec_cache SET output_json = ? WHERE key = ?",
                     (json.dumps({"error": "upstream model unavailable"}), key))
    srv.configure("/system", error_body_always=True,
                  error_body={"error": {"message": "backend down"}})
    again = run_cli("run", cwd=root)
    # The stale entry is not scored (its no-PII check passes on the error text): the case
    # is called again, and fails as the error it now is; the three answers stay cached.
    assert srv.total_calls("/system") == 5
    assert again.code != 0 and "ALLOW" not in again.out, again.text
    assert "1 missing" in again.out, again.out


def test_a_202_receipt_is_not_an_answer_and_a_201_is(srv: FakeServer) -> None:
    receipt = {"job": "j-17", "status": "queued"}
    failure = call(srv, {"respond": receipt, "status": 202})
    assert isinstance(failure, PermanentFailure) and failure.attempts == 1, failure
    assert "HTTP 202 from POST http://127.0.0.1:" in failure.message
    assert "accepted to be processed later, not answered" in failure.message
    assert '"job": "j-17"' in failure.message
    created = call(srv, {"respond": {"label": "bug"}, "status": 201})
    assert isinstance(created, Attempted) and created.value.output == {"label": "bug"}


class _Redirect(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        where = ("/v2/extract" if self.path == "/relative"
                 else "https://jo:pa55@login.example.com/sso?session=s3ss10n-t0ken&next=%2F")
        self.send_response(302)
        self.send_header("location", where)
        self.send_header("content-length", "0")
        self.end_headers()


def test_a_redirect_is_named_without_its_query_or_user_info() -> None:
    """A Location is shown as a URL called is: a sign-in page's session token and user info
    stay out of the error (stored with the case); a relative one is resolved."""
    with serving(_Redirect) as base:
        for path in ("/sso", "/relative"):
            system = HttpSystem(name="demo", url=base + path, version="v1", timeout_s=5.0)

            async def go(system: HttpSystem = system) -> AttemptFailure:
                await system.start()
                try:
                    await system.call("c1", {"text": "x"}, 1)
                except AttemptFailure as refused:
                    return refused
                finally:
                    await system.aclose()
                raise AssertionError("the redirect was followed")

            failure = asyncio.run(go())
            assert isinstance(failure, PermanentFailure)
            if path == "/sso":
                assert "a redirect to https://login.example.com/sso?…, not followed" in (
                    failure.message), failure.message
                assert "s3ss10n" not in failure.message and "pa55" not in failure.message
            else:
                assert f"a redirect to {base}/v2/extract, not followed" in failure.message


@pytest.mark.parametrize("said", [
    {},  # the fake's own error body: {"error": {"code": 429, ...}}
    {"error_body": {"error": "Too many requests"}},  # a rate limit said in words
])
def test_the_adaptive_limiter_counts_a_200_naming_a_429_as_a_rate_limit(
    srv: FakeServer, said: dict[str, Any],
) -> None:
    srv.configure("/system", error_body_first_n=1, **said)
    system = HttpSystem(name="demo", url=srv.system_url, version="v1", timeout_s=5.0)

    async def go() -> tuple[int, int, int, int]:
        limiter = AdaptiveLimiter("system", 16)
        before = limiter.limit
        await system.start()
        try:
            with pytest.raises(RetryableFailure):
                await limiter.run(lambda: system.call("c1", {"text": "a"}, 1))
            await limiter.run(lambda: system.call("c1", {"text": "a"}, 2), retry=True)
        finally:
            await system.aclose()
        return before, limiter.limit, limiter.aimd.rate_limits, limiter.aimd.errors

    before, after, limited, errors = asyncio.run(go())
    assert (limited, errors) == (1, 0)
    assert after < before


@pytest.mark.parametrize(("body", "status"), [
    ({"error": "Rate limit exceeded"}, 429),
    ({"error": "Too Many Requests"}, 429),
    ({"error": "quota exceeded for tenant acme"}, 429),
    ({"result": None, "error": "throttled, try again"}, 429),
    ({"error": {"message": "Rate limit reached"}}, 429),
    ({"error": "Model is overloaded"}, 503),
])
def test_a_rate_limit_said_in_words_is_retried_as_a_429(
    srv: FakeServer, body: dict[str, Any], status: int
) -> None:
    failure = call(srv, {"respond": body})
    assert isinstance(failure, RetryableFailure), failure
    assert failure.attempts == 4 and srv.total_calls("/system") == 4
    assert failure.status == status and f"read as HTTP {status}" in failure.message


@pytest.mark.parametrize("body", [
    {"answer": "Rate limit exceeded: see our quota page", "error": None},
    {"error": "rate limit", "label": "billing"},        # an output with other keys
    {"result": "Too many requests", "error": ""},
])
def test_an_output_that_mentions_a_rate_limit_is_an_output(
    srv: FakeServer, body: dict[str, Any]
) -> None:
    result = call(srv, {"respond": body})
    assert isinstance(result, Attempted) and result.attempts == 1, result
    assert result.value.output == body


@pytest.mark.parametrize(("body", "status"), [
    ({"error": {"code": 401, "message": "bad token"}}, 401),
    ({"error": {"type": "authentication_error", "message": "invalid x-api-key"}}, 401),
    ({"error": {"code": "404", "message": "no ticket 42"}}, 404),
])
def test_a_200_naming_a_client_error_fails_the_case_and_does_not_stop_the_run(
    srv: FakeServer, body: dict[str, Any], status: int
) -> None:
    """Read as its status (a judge's stops the run), but an endpoint may answer one case
    "not found": the run goes on (docs/http-endpoint.md)."""
    failure = call(srv, {"respond": body})
    assert isinstance(failure, PermanentFailure) and failure.attempts == 1, failure
    assert failure.status == status and not failure.stops_run
    assert f"read as HTTP {status})" in failure.message


@pytest.mark.parametrize("code", ["\u00b2", "9" * 5000])
def test_a_code_that_is_not_a_status_fails_the_case_as_the_error_it_is(
    srv: FakeServer, code: str
) -> None:
    failure = call(srv, {"respond": {"error": {"message": "no such tenant", "code": code}}})
    assert isinstance(failure, PermanentFailure) and failure.attempts == 1, failure
    assert failure.message.startswith("system demo: HTTP 200 from POST http://127.0.0.1:")
    assert "no such tenant" in failure.message


def test_a_rate_limit_whose_body_cannot_be_decoded_is_counted_and_retried(
    srv: FakeServer,
) -> None:
    srv.configure("/system", fail_first_n=1, fail_status=429, retry_after="0",
                  reply_headers={"content-encoding": "gzip"})
    system = HttpSystem(name="demo", url=srv.system_url, version="v1", timeout_s=5.0)

    async def go() -> tuple[str, int, int]:
        limiter = AdaptiveLimiter("system", 16)
        await system.start()
        try:
            with pytest.raises(RetryableFailure) as limited:
                await limiter.run(lambda: system.call("c1", {"text": "a"}, 1))
        finally:
            await system.aclose()
        return limited.value.message, limiter.aimd.rate_limits, limiter.aimd.errors

    message, rate_limits, errors = asyncio.run(go())
    assert (rate_limits, errors) == (1, 0)
    assert "HTTP 429 from POST" in message and "could not be decoded" in message


CAPACITY = {"result": None, "success": False, "messages": [],
            "errors": [{"code": 3040, "message": "Capacity temporarily exceeded, please try again."}]}


@pytest.mark.parametrize(("body", "output_path"), [
    (CAPACITY, "result"),                                             # Cloudflare's envelope
    ({"data": None, "errors": [{"message": "Rate limit exceeded"}]}, None),       # GraphQL's
    ({"data": None, "errors": [{"message": "Rate limit exceeded"}]}, "data.label"),
])
def test_an_errors_list_where_the_output_should_be_is_an_error_of_the_case(
    srv: FakeServer, body: dict[str, Any], output_path: str | None
) -> None:
    failure = call(srv, {"respond": body}, output_path=output_path)
    assert isinstance(failure, RetryableFailure), failure
    assert failure.attempts == 4 and failure.status == 429
    assert "the body is an error (read as HTTP 429, a rate limit)" in failure.message


def test_a_capacity_that_is_not_a_limit_is_not_read_as_one(srv: FakeServer) -> None:
    body = {"error": {"message": "the input exceeds the model's capacity of 8192 tokens"}}
    failure = call(srv, {"respond": body})
    assert isinstance(failure, PermanentFailure) and failure.attempts == 1, failure


@pytest.mark.parametrize("body", [
    {"result": "fine", "success": True, "errors": [], "messages": []},
    {"data": {"label": "bug"}, "errors": [{"message": "a field was deprecated"}]},
])
def test_an_output_beside_an_errors_list_is_the_output(
    srv: FakeServer, body: dict[str, Any]
) -> None:
    result = call(srv, {"respond": body})
    assert isinstance(result, Attempted) and result.value.output == body, result


def test_the_gate_does_not_allow_on_null_results_of_an_errors_envelope(
    srv: FakeServer, tmp_path: Path
) -> None:
    """Cloudflare's envelope with ``output_path: result``: a capacity error's ``null``
    result was the output, scored, and passed the no-PII rule: 10 of 10, Gate ALLOW."""
    cases = [{"id": f"c{i:02d}", "input": {"respond": {
        "result": f"answer {i}", "success": True, "errors": [], "messages": []}}}
        for i in range(8)]
    cases += [{"id": f"e{i}", "input": {"respond": CAPACITY}} for i in range(2)]
    root = _project(tmp_path / "p", srv, cases)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace(
        "    timeout_s: 5\n", "    timeout_s: 5\n    output_path: result\n"))
    result = run_cli("run", cwd=root)
    assert result.code == 3, result.text
    assert "8 observed, 0 failed, 2 missing" in result.out
    with sqlite3.connect(root / ".oloproof" / "store.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM exec_cache").fetchone()[0] == 8
