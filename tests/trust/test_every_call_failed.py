"""SPEC §5: "a run whose system or judge fails on every call stops early and is incomplete
(exit 5, naming the URL)", whatever the policy says (`policy: none`, `max_missing: 1`,
`warn_on`). Short suites never reached `limits.max_consecutive_failures`, and failures of
the call's own never counted towards it: such runs were decided and exited 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer
from tests.trust._support import cli, no_traceback, project, runs
from tests.trust.test_allow_earned_cli import _dead_url

from oloproof.engine.pipeline import EngineTotals

WARN_ALL = """\
version: 1
block_on: [FAIL]
warn_on: [INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]
max_missing: 1
rules:
  - {id: floor, metric: exact_label, min: 0.6}
"""


def _stopped(root: Path, result_code: int, text: str, starts: str) -> dict[str, object]:
    """The run stored stopped, its reason starting with ``starts``; `gate` agrees."""
    assert result_code == 5, text
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["exit_code"], run["gate"]) == (
        "RUN_ERROR", "PARTIAL", 5, "BLOCK"), run
    assert str(run["stop_reason"]).startswith(starts), run["stop_reason"]
    gate = cli(root, "gate", "latest")
    assert gate.code == 5, gate.text
    assert f"Stopped: {starts}" in gate.out, gate.out
    assert "ALLOW" not in gate.out
    return run


def test_a_dead_endpoint_under_policy_none_is_incomplete(tmp_path: Path) -> None:
    """The attacker's run: 4 cases, `policy: none`, nothing listening: `Gate ALLOW by
    declaration`, exit 0, stored DECIDED/COMPLETE."""
    url = _dead_url()
    system = f"  http:\n    url: {url}\n    version: v1\n    timeout_s: 2\n"
    root = project(tmp_path / "p", "", n=4, system=system)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("dataset:", "policy: none\ndataset:"))
    (root / "release.yaml").unlink()
    result = cli(root, "run", "--json")
    no_traceback(result)
    events = [json.loads(line) for line in result.out.splitlines()]
    final = events[-1]
    assert (final["type"], final["status"], final["completeness"], final["exit_code"]) == (
        "run_finished", "RUN_ERROR", "PARTIAL", 5), final
    _stopped(root, result.code, result.err,
             f"incomplete: system sys (POST {url}) failed on every call (all 4 calls),"
             f" so the run holds no result of it; first error: system sys: POST {url}:"
             " could not connect")
    text = cli(root, "gate", "latest").out
    assert "Gate ALLOW by declaration" not in text and "Gate      BLOCK   exit code 5" in text


@pytest.mark.parametrize("raised", [
    'RuntimeError("backend down")',
    'TransientError("busy", retryable=True)',
], ids=["own-error", "retryable"])
def test_a_callable_failing_every_call_is_incomplete_whatever_warn_on_says(
    tmp_path: Path, raised: str
) -> None:
    """`max_missing: 1` and every undecided state in `warn_on`: it was `Gate WARN exit
    code 0`. 5 cases: fewer than the 8 failures in a row of an outage."""
    app = f"""
        from oloproof import TransientError

        def answer(inp):
            raise {raised}
    """
    root = project(tmp_path / "p", app, n=5, release=WARN_ALL)
    result = cli(root, "run")
    no_traceback(result)
    _stopped(root, result.code, result.text,
             "incomplete: system sys (callable app:answer) failed on every call (all 5"
             " calls), so the run holds no result of it; first error:")
    assert "Gate      BLOCK   exit code 5" in result.out


def test_a_judge_whose_every_reply_is_unreadable_is_incomplete(tmp_path: Path) -> None:
    """Every reply of the judge without a verdict, under a policy that warns on everything
    undecided: it was `Gate WARN exit code 0`."""
    with FakeServer() as srv:
        srv.configure("/v1/chat/completions", garbage_always=True, garbage_kind="verdict")
        evaluators = (
            "  - type: exact_match\n    criterion: exact_label\n    field: label\n"
            "  - type: rubric_judge\n    criterion: helpful\n    provider: openai_compatible\n"
            f"    model: local-judge\n    base_url: {srv.openai_base_url}\n"
            "    rubric_text: Is it helpful?\n    api_key_env: JUDGE_KEY\n"
        )
        release = WARN_ALL + "  - {id: helpful-floor, metric: helpful, min: 0.6}\n"
        app = "def answer(inp):\n    return {'label': 'ok'}\n"
        root = project(tmp_path / "p", app, n=5, release=release, evaluators=evaluators)
        result = run_cli("run", cwd=root, env={"JUDGE_KEY": "k-123456789"})
    no_traceback(result)
    url = f"{srv.openai_base_url}/chat/completions"
    _stopped(root, result.code, result.text,
             f"incomplete: judge helpful (openai_compatible local-judge at POST {url}) failed"
             " on every call (all 5 calls)")


def test_a_check_failing_on_every_case_is_incomplete_whatever_warn_on_says(
    tmp_path: Path,
) -> None:
    """A custom evaluator that raised on every case, under a policy that warns on
    everything undecided: its rule had no observed case and the gate said `WARN exit code
    0`, an outage of the measuring check hidden by warn_on, as a judge's was. Its cached
    results are results: a rerun of the same outputs calls it again only where it failed."""
    evaluators = (
        "  - type: exact_match\n    criterion: exact_label\n    field: label\n"
        "  - type: custom\n    criterion: tests_pass\n    function: checks:passes\n"
    )
    release = WARN_ALL + "  - {id: tests-floor, metric: tests_pass, min: 0.6}\n"
    app = "def answer(inp):\n    return {'label': 'ok'}\n"
    checks = "def passes(output, case):\n    raise RuntimeError('broken checker')\n"
    root = project(tmp_path / "p", app, n=5, release=release, evaluators=evaluators,
                   files={"checks.py": checks})
    result = cli(root, "run")
    no_traceback(result)
    _stopped(root, result.code, result.text,
             "incomplete: evaluator tests_pass failed on every call (all 5 calls), so the"
             " run holds no result of it; first error: RuntimeError: broken checker")
    # Fixed for all but one case: the run is decided (4 of 5 observed under max_missing 1).
    (root / "checks.py").write_text(
        "def passes(output, case):\n"
        "    if case.id == 'q0':\n        raise RuntimeError('still broken here')\n"
        "    return True\n")
    fixed = cli(root, "run")
    assert fixed.code == 0, fixed.text
    assert runs(root)[0]["status"] == "DECIDED"


def test_results_from_the_cache_are_results(tmp_path: Path) -> None:
    """A case that always fails, rerun while the others come from the cache: the rerun's
    only call fails, and the run is decided as the first was (the outcome does not depend
    on the cache). A run wholly from the cache calls nothing, and is decided too."""
    app = """
        def answer(inp):
            if inp["n"] == 3:
                raise ValueError("case 3 breaks it")
            return {"label": "ok"}
    """
    root = project(tmp_path / "p", app, n=12, release=WARN_ALL)
    first, second = cli(root, "run"), cli(root, "run")
    assert first.code == second.code == 0, second.text
    assert "executions 11 hits · 1 misses" in second.out
    assert "Failed calls: the only call of the system failed" in second.out
    (root / "app.py").write_text("def answer(inp):\n    return {'label': 'ok'}\n")
    assert cli(root, "run").code == 0
    assert "executions 12 hits · 0 misses" in cli(root, "run").out
    assert [r["status"] for r in runs(root)] == ["DECIDED"] * 4


def test_the_failed_source_is_named_once_per_source() -> None:
    totals = EngineTotals()
    system = totals.source("system", "system bot (POST http://h/x)")
    judge = totals.source("judge j", "judge j (openai m at POST http://j/v1/chat/completions)")
    for _ in range(3):
        system.add("HTTP 400: no\nsecond line", outage=False)
    assert totals.failed_source() == (
        "system bot (POST http://h/x) failed on every call (all 3 calls), so the run holds"
        " no result of it; first error: HTTP 400: no")
    judge.add(None)
    judge.add("unreadable")
    assert totals.failed_source() is not None and "judge" not in str(totals.failed_source())
    system.cached += 1  # a result from the cache: the system gave one
    assert totals.failed_source() is None
    assert EngineTotals().failed_source() is None  # nothing called
