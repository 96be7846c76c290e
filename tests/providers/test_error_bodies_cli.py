"""Errors a judge provider sends with HTTP 200, through the real CLI and the fake provider on
real HTTP: a rate limit said in words is retried, and a 400 refusing a parameter stops the run
as the real 400 does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer

ENV = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}
PATH = "/v1/chat/completions"


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _example(tmp_path: Path, srv: FakeServer) -> Path:
    """The judge example (12 cases, two judges), its judges on the OpenAI format."""
    project = tmp_path / "judged"
    assert run_cli("init", str(project), "--example", "judge", cwd=tmp_path).code == 0
    config = project / "oloproof.yaml"
    text = config.read_text().replace("provider: anthropic", "provider: openai")
    config.write_text(text.replace("http://127.0.0.1:8787", srv.openai_base_url))
    return project


def test_a_rate_limit_said_in_words_is_retried_and_the_run_decided(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    clean = run_cli("run", cwd=project, env=ENV)
    assert "DECIDED/COMPLETE" in clean.out, clean.text
    srv.reset()
    srv.configure(PATH, error_body_first_n=1, retry_after="0",
                  error_body={"error": "Rate limit exceeded"})
    (project / ".oloproof").rename(project / "first-store")
    limited = run_cli("run", cwd=project, env=ENV)
    assert "Traceback" not in limited.text
    # Each judgment's first call was limited, its second answered: the same run as before.
    assert "DECIDED/COMPLETE" in limited.out, limited.text
    assert limited.code == clean.code
    assert srv.total_calls(PATH) == 2 * 24


def test_a_200_naming_a_refused_parameter_stops_the_run_with_one_line(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    srv.configure(PATH, error_body_always=True, error_body={"error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model."
                   " Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter",
    }})
    result = run_cli("run", cwd=project, env=ENV)
    assert result.code == 5, result.text
    assert "Traceback" not in result.text
    stopped = next(x for x in result.out.splitlines() if x.startswith("Stopped:"))
    assert "stopped early" in stopped and "refuses the parameter 'max_tokens'" in stopped
    assert ".max_tokens: openai judge (fake-judge-1) refuses" in stopped
    assert "remove it, or write max_completion_tokens instead" in stopped
    assert "(HTTP 200 naming a 400: Unsupported parameter" in stopped
    # Stopped at the first refusals, not after all 24 judgments were refused one by one.
    assert srv.total_calls(PATH) < 24
