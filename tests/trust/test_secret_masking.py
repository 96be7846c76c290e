"""Issue 29: a secret quoted back JSON-escaped (``\\/``, ``\\u00xx``) is masked too, and a
judge's API key shorter than 8 characters is masked in its reasons where it stands alone
(transport/http.py mask, mask_quoted). Real runs against real HTTP servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

import pytest
from tests.conftest import run_cli
from tests.trust._support import no_traceback, project, send_body, serving

TOKEN = "sk-live/9f3Kx/Q7pL2"  # a slash: JSON may write it \/


def _everything(root: Path) -> bytes:
    """Every byte the project's store directory holds (the store, its log, snapshots)."""
    return b"".join(p.read_bytes() for p in sorted((root / ".oloproof").rglob("*")) if p.is_file())


class _Echo(BaseHTTPRequestHandler):
    """A careless endpoint: quotes the Authorization header back in a 400, escaping
    every slash (``\\/``, as PHP's json_encode does) and the first letter as ``\\u``."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        got = self.headers.get("authorization", "")
        escaped = got.replace("/", "\\/")
        escaped_u = f"\\u{ord(escaped[0]):04x}" + escaped[1:]
        # And percent-encoded, as a server quoting it in a URL would (%2F, %2B, %20).
        encoded = quote(got, safe="")
        body = ('{"error": "token ' + escaped + ' refused; again: ' + escaped_u
                + '", "retry": "https://example.invalid/auth?token=' + encoded + '"}').encode()
        send_body(self, body, 400)


@pytest.fixture
def echo_server() -> Iterator[str]:
    with serving(_Echo) as base:
        yield f"{base}/system"


def test_a_secret_quoted_back_json_escaped_is_masked(tmp_path: Path, echo_server: str) -> None:
    system = (
        "  http:\n"
        f"    url: {echo_server}\n"
        "    version: v1\n"
        "    headers: {Authorization: \"${SECRET_TOKEN}\"}\n"
    )
    root = project(tmp_path / "p", "", n=3, system=system, extra="policy: none\n")
    result = run_cli("run", cwd=root, env={"SECRET_TOKEN": TOKEN})
    no_traceback(result)
    # Every call failed: incomplete (SPEC §5), the stop reason quoting the first error, masked.
    assert result.code == 5, result.text
    assert "Stopped: incomplete: system sys" in result.out and "***" in result.out
    shown = run_cli("inspect", "latest", "--json", cwd=root)
    errors = [c["error"] for c in json.loads(shown.out)["cases"]]
    assert len(errors) == 3 and all("HTTP 400" in e for e in errors), errors
    assert all(e.count("***") == 3 for e in errors), errors
    forms = [TOKEN, TOKEN.replace("/", "\\/"), "Q7pL2", "9f3Kx", quote(TOKEN, safe="")]
    for form in forms:
        for text in (result.out, result.err, shown.out, *errors):
            assert form not in text, (form, text)
        assert form.encode() not in _everything(root), form


class _Judge(BaseHTTPRequestHandler):
    """An OpenAI-compatible judge whose reason quotes the API key it was sent: alone, and
    inside a longer word."""

    calls: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        key = self.headers.get("authorization", "").removeprefix("Bearer ")
        reason = f"checked with key {key}, as asked ({key}). Not {key}suffix, nor pre{key}."
        text = json.dumps({"pass": True, "reason": reason})
        body = json.dumps({"model": "m", "choices": [{"message": {"content": text}}]}).encode()
        send_body(self, body)


@pytest.fixture
def judge_server() -> Iterator[str]:
    with serving(_Judge) as base:
        yield f"{base}/v1"


@pytest.mark.parametrize(
    ("key", "masked"),
    [
        ("Zq7k", True),  # 4 characters: masked where it stands alone
        ("Zq7k2w", True),  # 6: likewise (it was left in every reason)
        ("Zq7k2wX9p", True),  # 9: masked everywhere, inside words too
        ("Zq7", False),  # 3: cannot be told from ordinary text; reasons left as they are
    ],
)
def test_a_short_judge_key_is_masked_in_reasons_where_it_stands_alone(
    tmp_path: Path, judge_server: str, key: str, masked: bool
) -> None:
    evaluators = (
        "  - type: rubric_judge\n    criterion: helpful\n    provider: openai_compatible\n"
        f"    model: m\n    base_url: {judge_server}\n    rubric_text: Is it ok?\n"
        "    api_key_env: JUDGE_KEY\n"
    )
    root = project(tmp_path / "p", "def answer(inp):\n    return {'label': 'ok'}\n", n=2,
                   evaluators=evaluators, extra="policy: none\n")
    result = run_cli("run", cwd=root, env={"JUDGE_KEY": key})
    no_traceback(result)
    assert result.code == 0, result.text
    shown = json.loads(run_cli("inspect", "latest", "--json", cwd=root).out)
    for case in shown["cases"]:
        reason = case["judgments"]["helpful"]["reason"]
        if not masked:
            assert reason == f"checked with key {key}, as asked ({key}). Not {key}suffix, nor pre{key}."
        elif len(key) >= 8:
            assert key not in reason and reason.count("***") == 4, reason
        else:
            # Alone it is masked; inside a longer word it is the word's, and stays.
            assert reason == f"checked with key ***, as asked (***). Not {key}suffix, nor pre{key}.", reason
