"""The fake provider itself: scripting over HTTP, statistics, load, and the process mode."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.fakes.provider import FakeServer

from oloproof.providers.verdict import build_judge_prompt

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def test_attempts_are_counted_per_key_and_logged(srv: FakeServer) -> None:
    srv.configure("/system", fail_first_n=1, fail_status=500)
    with httpx.Client(base_url=srv.url) as client:
        codes = [client.post("/system", json={"question": q}).status_code for q in "aba"]
        stats = client.get("/_stats").json()
    assert codes == [500, 500, 200]
    assert stats["paths"]["/system"] == {"in_flight": 0, "peak_in_flight": 1, "total": 3}
    calls = stats["calls"]
    assert [(c["attempt"], c["status"]) for c in calls] == [(1, 500), (1, 500), (2, 200)]
    assert calls[0]["key"] == calls[2]["key"] != calls[1]["key"]
    assert calls[0]["t"] <= calls[1]["t"] <= calls[2]["t"]


def test_control_endpoint_configures_and_resets(srv: FakeServer) -> None:
    with httpx.Client(base_url=srv.url) as client:
        answer = client.post(
            "/_control",
            json={
                "action": "configure",
                "path": None,
                "behaviour": {"fail_always": 503, "retry_after": "7"},
            },
        )
        assert answer.json() == {"ok": True}
        failed = client.post("/system", json={"question": "x"})
        assert failed.status_code == 503 and failed.headers["retry-after"] == "7"
        assert client.post("/_control", json={"action": "nope"}).status_code == 400
        bad_field = {"action": "configure", "behaviour": {"nope": 1}}
        assert client.post("/_control", json=bad_field).status_code == 400
        assert client.post("/_control", json={"action": "reset"}).status_code == 200
        assert client.post("/system", json={"question": "x"}).status_code == 200
        assert client.get("/_stats").json()["paths"]["/system"]["total"] == 1
        assert client.get("/nowhere").status_code == 404


def test_judge_endpoints_check_auth_and_format(srv: FakeServer) -> None:
    with httpx.Client(base_url=srv.url) as client:
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        assert client.post("/v1/messages", json=body).status_code == 401
        no_version = client.post("/v1/messages", json=body, headers={"x-api-key": "k"})
        assert no_version.status_code == 400
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        assert client.post("/v1/messages", json={"model": "m"}, headers=headers).status_code == 400
        assert client.post("/v1/chat/completions", json=body).status_code == 401
        bearer = {"authorization": "Bearer k"}
        reply = client.post("/v1/chat/completions", json=body, headers=bearer).json()
        # No <output> section: the fake fails it, and says why.
        assert '"pass": false' in reply["choices"][0]["message"]["content"]


def test_two_hundred_concurrent_connections(srv: FakeServer) -> None:
    # Every request waits until all 220 are in flight at once.
    srv.configure("/system", hold_until_peak=220, hold_max_s=15)

    async def go() -> list[int]:
        limits = httpx.Limits(max_connections=220, max_keepalive_connections=220)
        async with httpx.AsyncClient(limits=limits, timeout=20) as client:
            answers = await asyncio.gather(
                *(client.post(srv.system_url, json={"question": f"q{i}"}) for i in range(220))
            )
            return [a.status_code for a in answers]

    assert asyncio.run(go()) == [200] * 220
    assert srv.total_calls("/system") == 220
    assert srv.peak_in_flight("/system") == 220


def test_keep_alive_connections_are_reused(srv: FakeServer) -> None:
    with httpx.Client(base_url=srv.url) as client:
        first = client.post("/system", json={"question": "a"})
        second = client.post("/system", json={"question": "b"})
    assert first.http_version == second.http_version == "HTTP/1.1"
    assert "close" not in first.headers.get("connection", "")


def test_runs_as_a_process_and_prints_its_url_first() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(SRC)]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.provider", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url, timeout=5) as client:
            control = {"action": "configure", "path": "/system", "behaviour": {"fail_first_n": 1}}
            client.post("/_control", json=control)
            assert client.post("/system", json={"q": 1}).status_code == 503
            assert client.post("/system", json={"q": 1}).status_code == 200
            assert client.get("/_stats").json()["paths"]["/system"]["total"] == 2
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_shipped_offline_provider_answers_a_judge_and_a_system() -> None:
    """The provider in the wheel (the judge example's): real answers, no fault machinery."""
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.Popen(
        [sys.executable, "-m", "oloproof.testing.fake_provider", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url, timeout=5) as client:
            system = client.post("/system", json={"question": "Refund please"})
            assert system.status_code == 200
            assert system.json()["label"] == "refund"
            judged = client.post(
                "/v1/messages",
                headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
                json={
                    "model": "m",
                    "max_tokens": 10,
                    "messages": [{"role": "user", "content": build_judge_prompt(
                        "R", "q", None, "FAIL here")[1]}],
                },
            )
            assert judged.status_code == 200
            assert '"pass": false' in judged.json()["content"][0]["text"]
            assert client.post("/_control", json={"action": "reset"}).status_code == 404
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
