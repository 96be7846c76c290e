"""Concurrency under load, counted where the calls land: the fake provider's own counters
over real HTTP, the run's stored rows, real worker threads (the fourth round of attacks)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.test_http_and_judges import judge_yaml, questions, write_http_project
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer

ANTHROPIC = "/v1/messages"


def test_a_panel_s_calls_stay_within_concurrency_judge(tmp_path: Path) -> None:
    """A panel calls its judges at once: with `judge: 2` and three judges, the provider saw
    6 calls in flight (the engine bounded the judgments, not the calls). concurrency.judge
    bounds the calls of every judge together, as docs/llm-judges.md says."""
    with FakeServer() as srv:
        # Slow answers, and requests held until two are in flight: the bound is used.
        srv.configure(ANTHROPIC, delay_s=0.2, hold_until_peak=2)
        judge = (judge_yaml("helpful", srv)
                 + "  panel:\n    - {}\n    - model: fake-judge-2\n    - model: fake-judge-3\n")
        project = write_http_project(
            tmp_path / "panel", srv, questions(10), judges=[judge], concurrency=(8, 2),
        )
        result = run_cli("run", "--json", cwd=project, env={"JUDGE_KEY": "k-0123456789ab"})
        assert result.code == 0, result.text
        assert srv.peak_in_flight(ANTHROPIC) == 2
        assert srv.total_calls(ANTHROPIC) == 30
    judged = [json.loads(line) for line in result.out.splitlines()]
    helpful = [e for e in judged if e["type"] == "case_judged" and e["criterion"] == "helpful"]
    assert len(helpful) == 10 and {e["status"] for e in helpful} == {"OK"}
