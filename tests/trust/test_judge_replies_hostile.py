"""Judge replies that look like verdicts and are not, through the real CLI against a real
judge server on 127.0.0.1 (both wire formats): a reply the provider cut at its output
limit is never read as a verdict, is not cached, and the gate never allows on it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tests.trust._support import (
    SMALL_RELEASE,
    cases_by_id,
    cli,
    no_traceback,
    project,
    runs,
    send_body,
    serving,
)

# 18 cases of which every one passes clear a floor of 80% (SMALL_RELEASE) at 95%.
# A judge that passes, thinks again, and is cut before its second verdict closes.
CUT_TEXT = (
    '{"pass": true, "reason": "first impression"}\n'
    "Looking again, the answer does not address the question, so my verdict is"
    ' {"pass": fal'
)


class _Judge(BaseHTTPRequestHandler):
    """Answers both wire formats with ``text``; ``cut`` sets the provider's stop reason."""

    text: ClassVar[str] = '{"pass": true, "reason": "fine"}'
    cut: ClassVar[bool] = False
    stop: ClassVar[str | None] = None  # another stop reason, sent as written
    calls: ClassVar[list[str]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        request = json.loads(self.rfile.read(length))
        self.calls.append(self.path)
        if self.path.endswith("/v1/messages"):
            reply: dict[str, Any] = {
                "content": [{"type": "text", "text": self.text}], "model": request["model"],
                "stop_reason": self.stop or ("max_tokens" if self.cut else "end_turn"),
                "usage": {"input_tokens": 9, "output_tokens": 32},
            }
        else:
            reply = {
                "choices": [{"message": {"role": "assistant", "content": self.text},
                             "finish_reason": self.stop or ("length" if self.cut else "stop")}],
                "model": request["model"],
                "usage": {"prompt_tokens": 9, "completion_tokens": 32},
            }
        send_body(self, json.dumps(reply).encode())


@pytest.fixture
def judge() -> Iterator[tuple[str, type[_Judge]]]:
    handler = type("Judge", (_Judge,), {"calls": []})
    with serving(handler) as base:
        yield base, handler


def _project(root: Path, url: str, provider: str, n: int = 18) -> Path:
    base_url = url + ("/v1" if provider == "openai_compatible" else "")
    evaluators = (
        f"  - type: rubric_judge\n    criterion: exact_label\n    provider: {provider}\n"
        f"    model: m\n    base_url: {base_url}\n    rubric_text: Is it ok?\n"
        "    api_key_env: JUDGE_KEY\n    max_tokens: 32\n"
    )
    return project(root, "def answer(inp):\n    return {'label': 'ok'}\n", n=n,
                   evaluators=evaluators, release=SMALL_RELEASE)


@pytest.mark.parametrize("provider", ["openai_compatible", "anthropic"])
def test_a_reply_cut_at_the_output_limit_is_no_verdict(
    tmp_path: Path, judge: tuple[str, type[_Judge]], provider: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, handler = judge
    monkeypatch.setenv("JUDGE_KEY", "judge-key-for-tests")
    handler.text, handler.cut = CUT_TEXT, True
    root = _project(tmp_path / "p", url, provider)
    result = cli(root, "run")
    no_traceback(result)
    # It used to read the first object as a pass, and allow (exit 0).
    assert result.code == 5, result.text
    stop = "max_tokens" if provider == "anthropic" else "length"
    for case in cases_by_id(root).values():
        judgment = case["judgments"]["exact_label"]
        assert judgment["status"] == "ERROR", judgment
        assert judgment["passed"] is None
        assert "cut the reply short" in judgment["reason"]
        assert f'"{stop}"' in judgment["reason"] and "raise the output limit" in judgment["reason"]

    # Not cached: an honest reply in the next run is asked for again, and read.
    handler.text, handler.cut = '{"pass": true, "reason": "fine"}', False
    calls = len(handler.calls)
    again = cli(root, "run")
    assert again.code == 0, again.text
    assert len(handler.calls) == calls + 18
    assert runs(root)[0]["status"] == "DECIDED"


@pytest.mark.parametrize(("provider", "stop", "said"), [
    ("openai_compatible", "abort", "the body is an error (read as HTTP 503, a server error)"),
    ("anthropic", "pause_turn", 'cut the reply short (stop reason "pause_turn")'),
    ("anthropic", "model_context_window_exceeded",
     'cut the reply short (stop reason "model_context_window_exceeded")'),
])
def test_a_reply_the_server_aborted_or_paused_is_no_verdict(
    tmp_path: Path, judge: tuple[str, type[_Judge]], monkeypatch: pytest.MonkeyPatch,
    provider: str, stop: str, said: str,
) -> None:
    """vLLM's and SGLang's ``finish_reason: "abort"``, Anthropic's ``pause_turn`` and
    ``model_context_window_exceeded``: the model did not end the reply (a second verdict
    may have been on its way), and the verdict it held so far was read: a pass on all 18
    cases, ALLOW, exit 0. An abort is a server error (retried); the other two are cut."""
    url, handler = judge
    monkeypatch.setenv("JUDGE_KEY", "judge-key-for-tests")
    handler.text, handler.stop = '{"pass": true, "reason": "fine so far"}', stop
    root = _project(tmp_path / "p", url, provider)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text
    judged = [c["judgments"].get("exact_label") for c in cases_by_id(root).values()]
    assert all(j is None or j["passed"] is None for j in judged), judged
    assert any(j is not None and said in j["reason"] for j in judged), judged


def test_a_whole_verdict_that_ended_on_its_own_is_read(
    tmp_path: Path, judge: tuple[str, type[_Judge]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = judge
    monkeypatch.setenv("JUDGE_KEY", "judge-key-for-tests")
    handler.text = '{"pass": false, "reason": "no"}'
    root = _project(tmp_path / "p", url, "openai_compatible")
    result = cli(root, "run")
    assert result.code == 1, result.text
    assert all(c["judgments"]["exact_label"]["passed"] is False
               for c in cases_by_id(root).values())


def test_a_number_too_long_to_read_is_a_judge_error_that_says_so(
    tmp_path: Path, judge: tuple[str, type[_Judge]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = judge
    monkeypatch.setenv("JUDGE_KEY", "judge-key-for-tests")
    handler.text = '{"pass": false, "reason": "no", "confidence": ' + "9" * 5000 + "}"
    root = _project(tmp_path / "p", url, "openai_compatible")
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text
    for case in cases_by_id(root).values():
        reason = case["judgments"]["exact_label"]["reason"]
        # It was Python's own "ValueError: Exceeds the limit (4300 digits) for integer
        # string conversion ... use sys.set_int_max_str_digits()".
        assert reason.startswith(
            "judge answer not understood: judge reply holds a number too long to read"
        ), reason
        assert "set_int_max_str_digits" not in reason


@pytest.mark.parametrize(
    "text",
    [
        # A draft verdict, then the final one with an unescaped quote in its reason.
        '{"pass": true, "reason": "draft"}\nFinal: {"pass": false, "reason": "it says "no""}',
        # The final verdict never closed, though the provider says the reply ended.
        '{"pass": true, "reason": "draft"} On reflection: {"pass": false',
        # The final verdict written as a Python dict, or a JavaScript object.
        "{\"pass\": true, \"reason\": \"draft\"}\nFinal: {'pass': False, 'reason': 'no'}",
        '{"pass": true, "reason": "draft"}\nFinal: {pass: false, reason: "no"}',
    ],
)
def test_a_verdict_that_cannot_be_read_beside_one_that_can_is_no_verdict(
    tmp_path: Path, judge: tuple[str, type[_Judge]], monkeypatch: pytest.MonkeyPatch,
    text: str,
) -> None:
    url, handler = judge
    monkeypatch.setenv("JUDGE_KEY", "judge-key-for-tests")
    handler.text = text
    root = _project(tmp_path / "p", url, "openai_compatible")
    result = cli(root, "run")
    no_traceback(result)
    # The draft used to be read as the verdict: a pass, and the gate allowed (exit 0).
    assert result.code == 5, result.text
    for case in cases_by_id(root).values():
        judgment = case["judgments"]["exact_label"]
        assert judgment["status"] == "ERROR" and judgment["passed"] is None
        assert 'judge reply holds a "pass" outside any object that can be read' in (
            judgment["reason"])


# A reasoning model served without a reasoning parser (llama.cpp, Ollama, vLLM serving
# DeepSeek-R1 or Qwen3) writes its thinking into the reply's text, drafts included.
THINKING_THEN_PROSE = (
    '<think>I would answer {"pass": true, "reason": "on topic"}, but wait: it does not'
    " answer the question.</think>\nThe output fails the rubric."
)
# DeepSeek-R1's chat template writes the opening tag itself: only the closing one comes back.
THINKING_THEN_FAIL = (
    'First thought: {"pass": true, "reason": "looks fine"}. Checking again, no.\n</think>\n\n'
    '{"pass": false, "reason": "does not answer"}'
)


@pytest.mark.parametrize("provider", ["openai_compatible", "anthropic"])
def test_a_draft_verdict_in_the_judges_thinking_is_not_its_verdict(
    tmp_path: Path, judge: tuple[str, type[_Judge]], monkeypatch: pytest.MonkeyPatch,
    provider: str,
) -> None:
    url, handler = judge
    monkeypatch.setenv("JUDGE_KEY", "judge-key-for-tests")
    handler.text = THINKING_THEN_PROSE
    root = _project(tmp_path / "p", url, provider)
    result = cli(root, "run")
    no_traceback(result)
    # The draft inside <think> was read as a pass on every case, and the gate allowed
    # (exit 0) a judge that had answered "fails" every time.
    assert result.code == 5, result.text
    for case in cases_by_id(root).values():
        judgment = case["judgments"]["exact_label"]
        assert judgment["status"] == "ERROR" and judgment["passed"] is None, judgment
        assert "holds no JSON object after its thinking" in judgment["reason"]

    # Thinking with a draft pass, then the final verdict: the verdict is the final one
    # (it used to be an error of two disagreeing objects, or, with the draft alone, a pass).
    handler.text = THINKING_THEN_FAIL
    again = cli(root, "run")
    no_traceback(again)
    assert again.code == 1, again.text
    assert all(c["judgments"]["exact_label"]["passed"] is False
               for c in cases_by_id(root).values())


def test_thinking_that_never_ends_is_no_verdict(
    tmp_path: Path, judge: tuple[str, type[_Judge]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = judge
    monkeypatch.setenv("JUDGE_KEY", "judge-key-for-tests")
    handler.text = '<think>So far {"pass": true, "reason": "fine"}, unless'
    root = _project(tmp_path / "p", url, "openai_compatible")
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text
    for case in cases_by_id(root).values():
        judgment = case["judgments"]["exact_label"]
        assert judgment["passed"] is None
        assert "thinking that never ended" in judgment["reason"], judgment
