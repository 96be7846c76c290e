"""A model system's output is what the model answered, not the thinking a reasoning model
wrote into the reply's text (DeepSeek-R1, Qwen3 behind llama.cpp, Ollama or vLLM without a
reasoning parser): ``<think>…</think>`` is set aside, as the judges set it aside.

Earlier versions kept it: a model that thought "is it a refund? no, billing" and answered
"billing" passed a ``contains: refund`` check on every case, and the gate allowed (exit 0)
an answer the model never gave. A scripted provider over real HTTP answers each case; the
CLI runs in a subprocess on a real project.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli
from tests.fakes.chat import ScriptedChat, openai_reply

KEY = {"THINK_KEY": "sk-think-0123456789"}


def _project(root: Path, base_url: str, *, output: str = "text", evaluator: str = "") -> Path:
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "p.md").write_text("Which category? {{ question }}\n")
    (root / "data").mkdir()
    (root / "data" / "s.jsonl").write_text("".join(
        json.dumps({"id": f"c{i:02d}", "input": {"question": f"q {i}"},
                    "expected": {"keywords": ["refund"], "label": "refund"}}) + "\n"
        for i in range(40)))
    evaluator = evaluator or """
          - type: contains
            criterion: says_refund
            field: null
            expected_field: keywords
    """
    (root / "oloproof.yaml").write_text(textwrap.dedent(f"""\
        version: 1
        project: thinking
        dataset: data/s.jsonl
        system:
          name: triage
          model:
            provider: openai_compatible
            model: qwen3
            base_url: {base_url}
            api_key_env: THINK_KEY
            prompt_file: prompts/p.md
            output: {output}
            max_tokens: 512
        evaluators:
    """) + textwrap.indent(textwrap.dedent(evaluator).strip("\n"), "  ") + "\n")
    metric = "says_refund" if not evaluator.strip().startswith("- type: exact") else "correct"
    (root / "release.yaml").write_text(
        f"version: 1\nrules:\n  - id: floor\n    metric: {metric}\n    min: 0.8\n")
    return root


def _case(root: Path) -> dict[str, Any]:
    shown = run_cli("inspect", "latest", "--case", "c01", "--json", cwd=root, env=KEY)
    assert shown.code == 0, shown.err
    return dict(json.loads(shown.out))


def test_thinking_in_the_reply_is_not_the_output(tmp_path: Path) -> None:
    thinking = "<think>\nIs it a refund? The word refund... no: it is billing.\n</think>\n\n"
    with ScriptedChat(lambda body: openai_reply(thinking + "billing")) as chat:
        root = _project(tmp_path, chat.base_url)
        result = run_cli("run", cwd=root, env=KEY)
    # It was "Gate ALLOW exit code 0": says_refund 40/40, read from the thinking.
    assert result.code == 1, result.text
    assert _case(root)["output"] == "billing"


def test_the_closing_tag_alone_ends_thinking_the_chat_template_opened(tmp_path: Path) -> None:
    # DeepSeek-R1's template writes <think> into the prompt: the reply starts inside it.
    with ScriptedChat(lambda body: openai_reply("refund, surely? No.</think>billing")) as chat:
        root = _project(tmp_path, chat.base_url)
        result = run_cli("run", cwd=root, env=KEY)
    assert result.code == 1, result.text
    assert _case(root)["output"] == "billing"


@pytest.mark.parametrize("finish", ["length", "stop"])
def test_thinking_that_never_ends_is_no_answer(tmp_path: Path, finish: str) -> None:
    with ScriptedChat(lambda body: openai_reply("<think>refund, I think, but", finish)) as chat:
        root = _project(tmp_path, chat.base_url)
        result = run_cli("run", cwd=root, env=KEY)
    assert result.code == 5, result.text
    case = _case(root)
    assert case["status"] == "ERROR", case
    assert "thinking that never ended" in case["error"], case["error"]
    if finish == "length":
        assert "raise max_tokens" in case["error"], case["error"]


def test_json_output_after_thinking_is_parsed(tmp_path: Path) -> None:
    reply = '<think>{"label": "refund"}? no.</think>\n```json\n{"label": "billing"}\n```'
    with ScriptedChat(lambda body: openai_reply(reply)) as chat:
        root = _project(tmp_path, chat.base_url, output="json", evaluator="""
          - type: exact_match
            criterion: correct
            field: label
            expected_field: label
        """)
        result = run_cli("run", cwd=root, env=KEY)
    assert result.code == 1, result.text
    assert _case(root)["output"] == {"label": "billing"}


@pytest.mark.parametrize(("provider", "base_url", "renewed"), [
    ("openai_compatible", "http://127.0.0.1:9/v1", True),
    ("openai", "http://127.0.0.1:9/v1", True),  # the OpenAI wire format to another server
    ("openai", None, False),
    ("anthropic", None, False),
])
def test_outputs_cached_with_thinking_kept_are_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str, base_url: str | None,
    renewed: bool,
) -> None:
    """A system whose server may write thinking into the text gets a new identity, so the
    outputs earlier versions cached with the thinking in them are asked for again; the
    providers' own APIs never write it there, and keep their cache."""
    from oloproof._json import digest
    from oloproof.systems.model import ModelSystem

    monkeypatch.setenv("THINK_KEY", "sk-think-0123456789")
    root = _project(tmp_path, "http://127.0.0.1:9/v1")
    config = {"provider": provider, "model": "m", "base_url": base_url,
              "prompt_file": "prompts/p.md", "max_tokens": 16, "api_key_env": "THINK_KEY"}
    system = ModelSystem(name="triage", config=config, root=root)
    before = digest({  # what earlier versions hashed
        "kind": "model", "name": "triage", "version": None, "provider": provider,
        "model": "m", "base_url": base_url,
        "prompt": (root / "prompts" / "p.md").read_text(), "system_prompt": None,
        "output": "text", "temperature": None, "max_tokens": 16,
        "max_completion_tokens": None, "extra_body": {},
    })
    assert (system.identity != before) is renewed
