"""A model system's reply that holds no answer: a refusal, a reply cut at the token limit
before any text, a content filter. Each is an error of its case (missing), never the
output "" (which passes every check for something absent, a PII regex with
``pass_if: no_match``, and was cached).

A scripted provider over real HTTP on 127.0.0.1 answers every call with one reply; the
CLI runs in a subprocess on a real project.
"""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli


class _Scripted(ThreadingHTTPServer):
    """Answers every request with ``reply``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply: dict[str, Any] = {}


class _Handler(BaseHTTPRequestHandler):
    server: _Scripted

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        data = json.dumps(self.server.reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def provider() -> Iterator[_Scripted]:
    server = _Scripted()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _openai(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {"id": "x", "model": "m", "usage": {"prompt_tokens": 9, "completion_tokens": 16},
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": finish_reason}]}


def _anthropic(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {"id": "x", "type": "message", "role": "assistant", "model": "m",
            "content": content, "stop_reason": stop_reason,
            "usage": {"input_tokens": 9, "output_tokens": 16}}


def _project(root: Path, server: _Scripted, provider: str = "openai_compatible",
             output: str = "text") -> Path:
    host, port = server.server_address[:2]
    base = f"http://{host}:{port}" + ("" if provider == "anthropic" else "/v1")
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "p.md").write_text("Answer: {{ question }}\n")
    (root / "data").mkdir()
    (root / "data" / "s.jsonl").write_text("".join(
        json.dumps({"id": f"c{i}", "input": {"question": f"q {i}"}}) + "\n" for i in range(30)))
    (root / "oloproof.yaml").write_text(textwrap.dedent(f"""\
        version: 1
        project: replies
        dataset: data/s.jsonl
        system:
          name: replies
          model:
            provider: {provider}
            model: m
            base_url: {base}
            api_key_env: REPLIES_KEY
            prompt_file: prompts/p.md
            output: {output}
            max_tokens: 16
        evaluators:
          - type: regex
            criterion: pii_free
            field: null
            pattern: '\\b\\d{{3}}-\\d{{2}}-\\d{{4}}\\b'
            pass_if: no_match
    """))
    (root / "release.yaml").write_text(
        "version: 1\nrules:\n  - id: no-pii\n    metric: pii_free\n    min: 0.8\n")
    return root


def _run(root: Path) -> tuple[int, dict[str, Any], str]:
    result = run_cli("run", cwd=root, env={"REPLIES_KEY": "sk-test-0123456789"})
    case = run_cli("inspect", "latest", "--case", "c1", "--json", cwd=root,
                   env={"REPLIES_KEY": "sk-test-0123456789"})
    assert case.code == 0, case.err
    return result.code, json.loads(case.out), result.text


def _assert_missing(
    tmp_path: Path, provider: _Scripted, provider_name: str, reply: dict[str, Any], says: str,
) -> None:
    """The reply makes its case an error (missing, exit 5) that says why, never an output."""
    provider.reply = reply
    code, case, text = _run(_project(tmp_path, provider, provider_name))
    assert code == 5, text
    assert case["status"] == "ERROR", case
    assert says in case["error"], case["error"]
    assert "Gate      ALLOW" not in text


@pytest.mark.parametrize(("provider_name", "reply", "says"), [
    # A reasoning model that spent max_completion_tokens thinking: content "", length.
    ("openai_compatible", _openai({"content": ""}, "length"),
     "stopped at the token limit (finish_reason: length)"),
    # A structured-output refusal: content null, the words in message.refusal.
    ("openai_compatible", _openai({"content": None, "refusal": "I can't help with that."},
                                  "stop"),
     "the model refused instead of answering: \"I can't help with that.\""),
    ("openai_compatible", _openai({"content": None}, "content_filter"),
     "the reply has no text content (finish_reason: content_filter)"),
    ("anthropic", _anthropic([{"type": "thinking", "thinking": "hmm"}], "max_tokens"),
     "stopped at the token limit (stop_reason: max_tokens)"),
    ("anthropic", _anthropic([], "refusal"),
     "the model refused instead of answering (stop_reason: refusal)"),
])
def test_a_reply_with_no_answer_is_missing_never_an_empty_output_that_passes(
    tmp_path: Path, provider: _Scripted, provider_name: str, reply: dict[str, Any], says: str,
) -> None:
    # It was ALLOW (exit 0): pii_free 30/30 observed on the output "".
    _assert_missing(tmp_path, provider, provider_name, reply, says)


def test_an_empty_answer_the_model_ended_itself_is_its_output(
    tmp_path: Path, provider: _Scripted
) -> None:
    provider.reply = _openai({"content": ""}, "stop")
    code, case, _ = _run(_project(tmp_path, provider))
    assert code == 0
    assert case["status"] == "OK" and case["output"] == ""


def test_json_cut_at_the_token_limit_says_so(tmp_path: Path, provider: _Scripted) -> None:
    provider.reply = _openai({"content": '{"label": "ref'}, "length")
    code, case, _ = _run(_project(tmp_path, provider, output="json"))
    assert code == 5
    assert "the reply is not JSON" in case["error"]
    assert "cut at the token limit (finish_reason: length)" in case["error"], case["error"]


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -1000000, "completion_tokens": -5},
    {"prompt_tokens": 10**400, "completion_tokens": 5},
    {"prompt_tokens": True, "completion_tokens": 5},
    {"prompt_tokens": 9, "completion_tokens": 5, "cost_usd": -2.5},
])
def test_absurd_token_counts_are_not_recorded_and_plan_prices_nothing_from_them(
    tmp_path: Path, provider: _Scripted, usage: dict[str, Any]
) -> None:
    provider.reply = {**_openai({"content": "no numbers here"}, "stop"), "usage": usage}
    root = _project(tmp_path, provider)
    (root / "release.yaml").write_text(  # 30 of 30 is not enough for 95%: plan sizes it
        "version: 1\nrules:\n  - id: no-pii\n    metric: pii_free\n    min: 0.95\n")
    code, case, text = _run(root)
    assert code == 3, text
    assert case["usage"] is None, case["usage"]
    plan = run_cli("plan", "latest", "--run", cwd=root)
    # It was "tokens about -32,000,160 (...)" for the first, exit 70 for the second.
    assert plan.code == 0, plan.text
    assert "tokens    none reported by this run's providers" in plan.out, plan.out


def test_record_usage_refuses_what_is_not_a_count() -> None:
    from oloproof._context import CaseContext

    ctx = CaseContext("c1", {})
    ctx.record_usage(input_tokens=3, output_tokens=2, cost_usd=0.5)
    ctx.record_usage(input_tokens=1)
    assert ctx.usage is not None and ctx.usage.to_json() == {
        "input_tokens": 4, "output_tokens": 2, "cost_usd": 0.5}
    for bad in ({"input_tokens": -1}, {"output_tokens": 10**400}, {"output_tokens": 2.5},
                {"cost_usd": float("nan")}, {"cost_usd": -1.0}):
        with pytest.raises(ValueError, match="record_usage: token counts must be"):
            ctx.record_usage(**bad)


@pytest.mark.parametrize(("provider_name", "reply", "says"), [
    # Azure's content filter stopped the answer midway: what it let through is no answer.
    ("openai_compatible", _openai({"content": "Sure. The customer's number is"},
                                  "content_filter"),
     ("the provider stopped the reply before the model ended it (finish_reason:"
      " content_filter)")),
    # Anthropic's classifiers stopped Claude midway (stop_reason: refusal).
    ("anthropic", _anthropic([{"type": "text", "text": "Here is how you"}], "refusal"),
     "the model refused midway (stop_reason: refusal)"),
    # A model given tools (extra_body) that says a line and then asks for a tool.
    ("openai_compatible", _openai({"content": "Let me look that up.", "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        "tool_calls"),
     "the model asked to call a tool instead of answering (finish_reason: tool_calls)"),
    ("anthropic", _anthropic([{"type": "text", "text": "Let me check."},
                              {"type": "tool_use", "id": "t", "name": "f", "input": {}}],
                             "tool_use"),
     "the model asked to call a tool instead of answering (stop_reason: tool_use)"),
])
def test_a_reply_stopped_before_the_model_ended_it_is_missing_not_its_partial_text(
    tmp_path: Path, provider: _Scripted, provider_name: str, reply: dict[str, Any], says: str,
) -> None:
    # It was ALLOW (exit 0): pii_free 30/30 observed on the partial text.
    _assert_missing(tmp_path, provider, provider_name, reply, says)


@pytest.mark.parametrize("finish_reason", ["eos_token", "length"])
def test_other_stops_of_an_answer_keep_its_text(
    tmp_path: Path, provider: _Scripted, finish_reason: str
) -> None:
    # TGI names the end of an answer eos_token; a reply cut at the limit is the system's.
    provider.reply = _openai({"content": "no numbers here"}, finish_reason)
    code, case, _ = _run(_project(tmp_path, provider))
    assert code == 0
    assert case["status"] == "OK" and case["output"] == "no numbers here"
