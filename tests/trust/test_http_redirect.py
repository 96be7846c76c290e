"""An HTTP system that answers with a redirect is not followed (credentials would go where
it points), and the case's error says so and where it pointed, with the header's secret
masked, instead of ``HTTP 302 from POST ...: (empty body)``. Real CLI, real server."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from tests.trust._support import cases_by_id, cli, no_traceback, project, serving


class _Moved(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        token = self.headers.get("x-token", "")
        self.send_response(302)
        self.send_header("location", f"http://elsewhere.invalid/v2/extract?token={token}")
        self.send_header("content-length", "0")
        self.end_headers()


@pytest.fixture
def moved() -> Iterator[str]:
    with serving(_Moved) as base:
        yield f"{base}/extract"


def test_a_redirect_is_named_with_where_it_points_and_not_followed(
    tmp_path: Path, moved: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIRECT_TEST_TOKEN", "Sk-redirect-secret-42")
    system = (f"  http:\n    url: {moved}\n    version: v1\n"
              "    headers:\n      x-token: ${REDIRECT_TEST_TOKEN}\n")
    root = project(tmp_path / "p", "", n=8, system=system)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text  # every call failed
    for case in cases_by_id(root).values():
        error = str(case["error"])
        assert "HTTP 302" in error and "a redirect to http://elsewhere.invalid/v2/extract" in error
        assert "not followed" in error, error
        assert "Sk-redirect-secret-42" not in error, error
    assert "Sk-redirect-secret-42" not in result.text
