"""Issue 10, class 11 (run path) and judges: inputs are stored and keyed as read, a custom
evaluator's helper modules are part of its identity, a judge reply with two "pass" keys
is refused, and a judge's 401 stops the run early."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest
from tests.trust._support import (
    SMALL_RELEASE,
    cases_by_id,
    cli,
    integrity_ok,
    no_traceback,
    project,
    runs,
    send_body,
    serving,
)


def _cache(root: Path) -> dict[str, int]:
    cache = runs(root)[0]
    assert cache["status"] == "DECIDED"
    data = json.loads(cli(root, "inspect", "latest", "--json").out)["run"]["cache"]
    assert isinstance(data, dict)
    return data


def test_a_system_that_mutates_its_input_changes_neither_store_nor_keys(tmp_path: Path) -> None:
    app = """
        def answer(inp):
            inp["n"] = -1
            inp["added"] = True
            return {"label": "ok"}
    """
    root = project(tmp_path / "p", app, n=4, release=SMALL_RELEASE)
    first = cli(root, "run")
    assert first.code == 3, first.text
    cases = cases_by_id(root)
    assert [cases[f"q{i}"]["input"] for i in range(4)] == [{"n": i} for i in range(4)]
    second = cli(root, "run")
    assert second.code == 3, second.text
    cache = _cache(root)
    assert (cache["execution_hits"], cache["execution_misses"]) == (4, 0)
    assert (cache["judgment_hits"], cache["judgment_misses"]) == (4, 0)
    assert len(runs(root)) == 2


def test_a_custom_evaluators_helper_module_is_part_of_its_identity(tmp_path: Path) -> None:
    files = {
        "checks.py": "from helpers.rules import ok\n\ndef check(output):\n    return ok(output)\n",
        "helpers/__init__.py": "",
        "helpers/rules.py": "def ok(output):\n    return output['label'] == 'ok'\n",
    }
    evaluators = (
        "  - type: custom\n    criterion: exact_label\n    function: checks:check\n"
        "    code_paths: [helpers]\n"
    )
    root = project(tmp_path / "p", "def answer(inp):\n    return {'label': 'ok'}\n", n=4,
                   evaluators=evaluators, files=files, release=SMALL_RELEASE)
    assert cli(root, "run").code == 3
    assert cli(root, "run").code == 3
    assert _cache(root)["judgment_hits"] == 4
    (root / "helpers" / "rules.py").write_text("def ok(output):\n    return False\n")
    result = cli(root, "run")
    assert result.code == 1, result.text  # 0 of 4 now: a FAIL of the 80% floor
    # The new helper judged every case afresh: none passes now.
    assert all(
        not c["judgments"]["exact_label"]["passed"] for c in cases_by_id(root).values()
    )
    cache = _cache(root)
    assert (cache["execution_hits"], cache["judgment_hits"], cache["judgment_misses"]) == (4, 0, 4)
    bad = root / "oloproof.yaml"
    bad.write_text(bad.read_text().replace("[helpers]", "[nowhere]"))
    refused = cli(root, "run")
    assert refused.code == 2 and "code_paths[0]" in refused.err and "nowhere" in refused.err


class _Judge(BaseHTTPRequestHandler):
    mode: ClassVar[str] = "duplicate"
    calls: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        type(self).calls.append(self.path)
        if self.mode == "401":
            body = b'{"error": {"message": "invalid api key"}}'
            status = 401
        else:
            text = '{"pass": true, "reason": "fine", "pass": false}'
            body = json.dumps({"model": "m", "choices": [{"message": {"content": text}}]}).encode()
            status = 200
        send_body(self, body, status)


@pytest.fixture
def judge_server() -> Iterator[tuple[str, type[_Judge]]]:
    handler = type("Judge", (_Judge,), {"calls": [], "mode": "duplicate"})
    with serving(handler) as base:
        yield f"{base}/v1", handler


def _judged_project(root: Path, base_url: str, n: int) -> Path:
    evaluators = (
        "  - type: rubric_judge\n    criterion: exact_label\n    provider: openai_compatible\n"
        f"    model: m\n    base_url: {base_url}\n    rubric_text: Is it ok?\n"
    )
    return project(root, "def answer(inp):\n    return {'label': 'ok'}\n", n=n,
                   evaluators=evaluators, release=SMALL_RELEASE)


def test_a_judge_reply_with_two_pass_keys_is_refused(
    tmp_path: Path, judge_server: tuple[str, type[_Judge]]
) -> None:
    url, _ = judge_server
    root = _judged_project(tmp_path / "p", url, 3)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text  # every judgment missing: incomplete evidence
    assert "Failed calls: all 3 calls of the judge exact_label failed" in result.out
    # No reply of the judge could be read: the run holds no result of it, and stops.
    [run] = runs(root)
    assert (run["status"], run["completeness"]) == ("RUN_ERROR", "PARTIAL")
    assert run["stop_reason"].startswith(
        f"incomplete: judge exact_label (openai_compatible m at POST {url}/chat/completions)"
        " failed on every call (all 3 calls)"), run["stop_reason"]
    cases = cases_by_id(root)
    assert len(cases) == 3
    for case in cases.values():
        judgment = case["judgments"]["exact_label"]
        assert judgment["status"] == "ERROR" and "appears twice" in judgment["reason"]
    assert integrity_ok(root)


def test_a_judge_401_stops_the_run_early(
    tmp_path: Path, judge_server: tuple[str, type[_Judge]]
) -> None:
    url, handler = judge_server
    handler.mode = "401"
    root = _judged_project(tmp_path / "p", url, 40)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text
    assert "stopped early" in result.out and "HTTP 401" in result.out
    assert len(handler.calls) < 20
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["exit_code"]) == ("RUN_ERROR", "PARTIAL", 5)
    assert "HTTP 401" in run["stop_reason"]
    assert 1 <= len(cases_by_id(root)) < 40
