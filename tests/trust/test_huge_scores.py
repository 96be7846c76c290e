"""Scores near the largest float (1e308), from the system under test: `run` and `gate` ended
with `internal error: OverflowError: intermediate overflow in fsum` (exit 70) while the
stored run read RUN_ERROR/PARTIAL exit 5. A mean is computed without overflow; an interval
beyond the largest float cannot be computed, and the rule is INSUFFICIENT_EVIDENCE, saying
why; an infinity never enters the evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.trust._support import cases_by_id, cli, no_traceback, project

RULE = "version: 1\nrules:\n  - {id: r, metric: days_error, max: 1.5}\n"


def _days(days: str, rng: str = "") -> tuple[str, str]:
    app = f"def answer(inp):\n    return {{'days': {days}}}\n"
    evaluators = ("  - type: absolute_error\n    criterion: days_error\n    field: days\n"
                  f"    expected_field: label\n{rng}")
    return app, evaluators


def _decision(root: Path) -> dict[str, object]:
    gate = cli(root, "gate", "latest", "--json")
    no_traceback(gate)
    [decision] = json.loads(gate.out)["decisions"]
    assert isinstance(decision, dict)
    return decision


@pytest.mark.parametrize(("rng", "trials"), [
    ("", 1), ("    range: [0, 1e308]\n", 1), ("", 2), ("    range: [0, 1e308]\n", 2),
], ids=["t", "betting", "t-trials", "betting-trials"])
def test_huge_absolute_errors_fail_the_rule(tmp_path: Path, rng: str, trials: int) -> None:
    app, evaluators = _days("1e308", rng)
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": 1}} for i in range(8)]
    root = project(tmp_path / "p", app, cases=cases, evaluators=evaluators, release=RULE,
                   extra=f"trials: {trials}\n")
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 1, result.text
    assert "internal error" not in result.text
    decision = _decision(root)
    assert (decision["state"], decision["reason"]) == ("FAIL", "lower_bound_above_max")
    assert "e+30" in str(decision["detail"]), decision["detail"]  # 1.000e+308, not 309 digits


def test_an_interval_beyond_the_largest_float_is_insufficient_evidence(tmp_path: Path) -> None:
    """Two scores of a custom MEAN evaluator, -1.7e308 and 1.7e308: the t interval's half
    width is about 1.5e309. Never ALLOW: undecided, saying why; `plan` says why too."""
    app = "def answer(inp):\n    return {'days': 1}\n"
    evaluators = ("  - type: custom\n    criterion: days_error\n    function: ev:score\n"
                  "    kind: mean\n")
    files = {"ev.py": "def score(output, case):\n"
                      "    return 1.7e308 if case.input['n'] % 2 else -1.7e308\n"}
    root = project(tmp_path / "p", app, n=2, evaluators=evaluators, release=RULE, files=files)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 3, result.text
    decision = _decision(root)
    assert (decision["state"], decision["reason"]) == ("INSUFFICIENT_EVIDENCE", "interval_overflow")
    assert "beyond the largest float" in str(decision["detail"])
    plan = cli(root, "plan", "latest", "--run")
    no_traceback(plan)
    assert "the spread of its scores lies beyond the largest float" in plan.text, plan.text


def test_an_absolute_error_beyond_the_largest_float_is_that_cases_error(tmp_path: Path) -> None:
    """|1.7e308 - (-1.7e308)| is infinite: that case's error, never an infinite score."""
    app, evaluators = _days("1.7e308 if inp['n'] else 1.0")
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": -1.7e308 if i else 2}}
             for i in range(6)]
    root = project(tmp_path / "p", app, cases=cases, evaluators=evaluators,
                   release=RULE.replace("rules:", "max_missing: 1\nrules:"))
    result = cli(root, "run")
    no_traceback(result)
    stored = cases_by_id(root)
    assert stored["q0"]["judgments"]["days_error"]["score"] == 1.0
    judgment = stored["q1"]["judgments"]["days_error"]
    assert (judgment["status"], judgment["score"]) == ("ERROR", None)
    assert "beyond the largest float" in judgment["reason"], judgment


def test_a_comparison_of_huge_scores_is_undecided_not_a_crash(tmp_path: Path) -> None:
    """Paired differences of 3.3e308 (1.7e308 against -1.6e308): `compare` raised
    ValueError (an infinite difference), then OverflowError (the means)."""
    app = ("import os\n\ndef answer(inp):\n"
           "    return {'days': float(os.environ.get('DAYS', '1.7e308')) * (1 - inp['n'] / 100)}\n")
    evaluators = ("  - type: custom\n    criterion: days_error\n    function: ev:score\n"
                  "    kind: mean\n")
    files = {"ev.py": "def score(output, case):\n    return output['days']\n"}
    root = project(tmp_path / "p", app, n=6, evaluators=evaluators, release=RULE, files=files,
                   concurrency=1)
    (root / "app.py").write_text(app.replace("'1.7e308'", "'-1.6e308'"))
    cli(root, "run")
    (root / "oloproof.yaml").write_text(
        (root / "oloproof.yaml").read_text().replace('version: "1"', 'version: "2"'))
    (root / "app.py").write_text(app)
    cli(root, "run")
    ids = [r["id"] for r in json.loads(cli(root, "runs", "--json").out)]
    (root / "cmp.yaml").write_text(
        "version: 1\nrules:\n  - {id: c, kind: equivalence, metric: days_error,"
        " margin: 0.1}\n")
    result = cli(root, "compare", ids[0], ids[1], "--policy", "cmp.yaml", "--json")
    no_traceback(result)
    assert result.code == 3, result.text
    [decision] = json.loads(result.out)["decisions"]
    assert (decision["state"], decision["reason"]) == ("INSUFFICIENT_EVIDENCE", "interval_overflow")
