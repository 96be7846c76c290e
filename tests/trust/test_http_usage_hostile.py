"""What an HTTP system reports at ``usage_path`` is read only when it can be what was
spent: a boolean, negative, NaN or infinite figure leaves the case without usage (as an
unreadable usage object always did), instead of a plan priced at ``$nan`` or at minus
24 million tokens. Real CLI, real server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tests.trust._support import cases_by_id, cli, no_traceback, project, send_body, serving

# 12 cases that all pass leave a floor of 90% undecided, so `plan` prices more cases.
RELEASE = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.9\n"


class _Service(BaseHTTPRequestHandler):
    usage: ClassVar[Any] = None

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        send_body(self, json.dumps({"label": "ok", "usage": self.usage}).encode())


@pytest.fixture
def service() -> Iterator[tuple[str, type[_Service]]]:
    handler = type("Service", (_Service,), {})
    with serving(handler) as base:
        yield f"{base}/extract", handler


def _project(root: Path, url: str) -> Path:
    system = f"  http:\n    url: {url}\n    version: v1\n    usage_path: usage\n"
    return project(root, "", n=12, system=system, release=RELEASE)


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 10, "completion_tokens": 2, "cost_usd": "nan"},
        {"input_tokens": 10, "output_tokens": 2, "cost_usd": "inf"},
        {"prompt_tokens": -1000000, "completion_tokens": -7, "cost_usd": -3},
        {"input_tokens": True, "output_tokens": 2},
    ],
)
def test_usage_that_cannot_be_what_was_spent_is_no_usage(
    tmp_path: Path, service: tuple[str, type[_Service]], usage: dict[str, Any]
) -> None:
    url, handler = service
    handler.usage = usage
    root = _project(tmp_path / "p", url)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 3, result.text  # undecided: the plan has something to price
    for case in cases_by_id(root).values():
        assert case["status"] == "OK" and case["usage"] is None, case
    plan = cli(root, "plan", "latest", "--run")
    assert plan.code == 0, plan.text
    assert "nan" not in plan.out and "about -" not in plan.out, plan.out
    assert "none reported by this run's providers" in plan.out
    per_case = json.loads(cli(root, "plan", "latest", "--run", "--json").out)["per_case"]
    assert per_case["input_tokens_mean"] is None and per_case["cost_usd_mean"] is None


def test_usage_that_reads_is_kept(tmp_path: Path, service: tuple[str, type[_Service]]) -> None:
    url, handler = service
    handler.usage = {"prompt_tokens": 10, "completion_tokens": 2, "cost_usd": 0.001}
    root = _project(tmp_path / "p", url)
    assert cli(root, "run").code == 3
    for case in cases_by_id(root).values():
        assert case["usage"] == {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.001}
