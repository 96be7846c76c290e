"""A comparison PASSes only on evidence that could have made it FAIL.

- A MEAN metric with a declared range is compared by the betting interval on the paired
  differences (valid at every number of pairs), not by paired t, which passed two pairs.
- A pair dropped because its case went missing in one run is bounded at its worst before a
  rule may PASS: a candidate cannot pass by failing to answer.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

import pytest
from tests.conftest import run_cli

from oloproof.policy.compare import (
    MISSING_PAIRS_COULD_FAIL,
    CaseOutcome,
    PairedMetric,
    _worst_binary,
    decide_comparison,
    pair_metric,
)
from oloproof.project.config import ComparePolicy, CompareRule
from oloproof.stats.paired import paired_betting_difference, paired_proportion_difference

RUN_ID = re.compile(r"Run (run_[0-9A-Z]{26})")


def _observed(passed: bool | None = None, score: float | None = None) -> CaseOutcome:
    return CaseOutcome("OBSERVED", passed, score)


MISSING = CaseOutcome("MISSING")


def _decide(kind: str, metric_kind: str, cand: dict[str, CaseOutcome],
            base: dict[str, CaseOutcome], margin: float | None = None,
            value_range: tuple[float, float] | None = None) -> tuple[str, str]:
    rule = CompareRule(id="r", kind=kind, metric="m", margin=margin)  # type: ignore[arg-type]
    pm = pair_metric("m", metric_kind, list(cand), cand, base, 0.95, value_range)
    (d,) = decide_comparison({"m": pm}, ComparePolicy(rules=[rule]))
    return str(d.state), str(d.reason)


def test_two_pairs_of_bounded_scores_do_not_pass_superiority() -> None:
    # Paired t read [+0.5, +0.5] here and PASSed, exit 0.
    cand = {"a": _observed(score=1.0), "b": _observed(score=1.0)}
    base = {"a": _observed(score=0.5), "b": _observed(score=0.5)}
    state, _ = _decide("superiority", "MEAN", cand, base, value_range=(0.0, 1.0))
    assert state == "INSUFFICIENT_EVIDENCE"


@pytest.mark.parametrize("n", [2, 5, pytest.param(10, marks=pytest.mark.slow),  # measured 1.6 s
                               pytest.param(30, marks=pytest.mark.slow)])  # measured 4.0 s
def test_bounded_superiority_passes_a_null_difference_at_most_alpha_over_two(n: int) -> None:
    """Simulated: candidate and baseline draw from the same distribution on [0, 1] (three
    shapes), so the mean difference is exactly 0; a superiority rule must PASS at most
    2.5% of the time (plus three standard errors). Paired t passed 80% at n = 2."""
    rng = random.Random(20261204 + n)
    shapes = [
        lambda: float(rng.random() < 0.5),
        lambda: rng.random(),
        lambda: rng.choice([0.0, 0.9, 1.0]),
    ]
    sims = 300
    for draw in shapes:
        passes = 0
        for _ in range(sims):
            diffs = [(x, x) for x in (draw() - draw() for _ in range(n))]
            iv = paired_betting_difference(diffs, (0.0, 1.0), 0.95)
            passes += iv is not None and iv.lower > 0.0
        se = (0.025 * 0.975 / sims) ** 0.5
        assert passes / sims <= 0.025 + 3 * se, (n, passes)


def test_the_betting_interval_of_clear_differences_still_decides() -> None:
    # 200 pairs, the candidate 0.3 higher on every case: PASS, as it should.
    cand = {f"c{i}": _observed(score=0.8) for i in range(200)}
    base = {f"c{i}": _observed(score=0.5) for i in range(200)}
    assert _decide("superiority", "MEAN", cand, base, value_range=(0.0, 1.0))[0] == "PASS"
    assert _decide("superiority", "MEAN", base, cand, value_range=(0.0, 1.0))[0] == "FAIL"


def test_the_worst_fill_of_a_binary_table_is_the_lowest_lower_bound() -> None:
    """The fill :func:`hold_missing_pairs` uses (the candidate failing, the baseline passing
    where missing) gives the lowest Newcombe lower bound of every completion, and the fill
    for the candidate the highest upper bound: brute force over small tables."""
    kinds = ["cand_missing_base_pass", "cand_missing_base_fail", "base_missing_cand_pass",
             "base_missing_cand_fail", "both_missing"]
    rng = random.Random(7)
    for _ in range(150):
        cells = [rng.randint(0, 6) for _ in range(4)]
        missing = [rng.choice(kinds) for _ in range(rng.randint(1, 4))]
        pairs = []
        for k in missing:
            co = {"cand_missing_base_pass": MISSING, "cand_missing_base_fail": MISSING,
                  "base_missing_cand_pass": _observed(True),
                  "base_missing_cand_fail": _observed(False), "both_missing": MISSING}[k]
            bo = {"cand_missing_base_pass": _observed(True),
                  "cand_missing_base_fail": _observed(False), "base_missing_cand_pass": MISSING,
                  "base_missing_cand_fail": MISSING, "both_missing": MISSING}[k]
            pairs.append((co, bo))
        lows, highs = [], []
        for fill in itertools.product([True, False], repeat=2 * len(pairs)):
            a, b, c, d = cells
            for i, (co, bo) in enumerate(pairs):
                cp = co.passed if co.status == "OBSERVED" else fill[2 * i]
                bp = bo.passed if bo.status == "OBSERVED" else fill[2 * i + 1]
                if cp and bp:
                    a += 1
                elif cp:
                    b += 1
                elif bp:
                    c += 1
                else:
                    d += 1
            iv = paired_proportion_difference(a, b, c, d, 0.95).interval
            assert iv is not None
            lows.append(iv.lower)
            highs.append(iv.upper)
        pm = PairedMetric("m", "BINARY", sum(cells), len(pairs), 0, "", 0.95,
                          both_pass=cells[0], cand_only=cells[1], base_only=cells[2],
                          both_fail=cells[3])
        pm.missing_pairs = [(b"", co, bo) for co, bo in pairs]
        worst = paired_proportion_difference(*_worst_binary(pm, True), 0.95).interval
        best = paired_proportion_difference(*_worst_binary(pm, False), 0.95).interval
        assert worst is not None and best is not None
        assert worst.lower == pytest.approx(min(lows), abs=1e-12), (cells, missing)
        assert best.upper == pytest.approx(max(highs), abs=1e-12), (cells, missing)


def test_missing_pairs_hold_a_pass_they_could_undo() -> None:
    # 200 cases the baseline passes; the candidate passes 170 and errors on 30 (15%, under
    # max_missing): on the 170 pairs observed, non-inferiority at 5 points PASSed.
    base = {f"c{i:03d}": _observed(True) for i in range(200)}
    cand = {f"c{i:03d}": (MISSING if i < 30 else _observed(True)) for i in range(200)}
    state, reason = _decide("non_inferiority", "BINARY", cand, base, margin=0.05)
    assert (state, reason) == ("INSUFFICIENT_EVIDENCE", MISSING_PAIRS_COULD_FAIL)
    # One missing pair among 400 cannot undo a wide margin: the PASS stands.
    base = {f"c{i:03d}": _observed(True) for i in range(400)}
    cand = {f"c{i:03d}": (MISSING if i == 0 else _observed(True)) for i in range(400)}
    assert _decide("non_inferiority", "BINARY", cand, base, margin=0.05)[0] == "PASS"
    # A bounded MEAN: the same with every score the missing ones could have had.
    base_m = {f"c{i:03d}": _observed(score=0.5) for i in range(300)}
    cand_m = {f"c{i:03d}": (MISSING if i < 45 else _observed(score=0.52)) for i in range(300)}
    state, reason = _decide("non_inferiority", "MEAN", cand_m, base_m, margin=0.05,
                            value_range=(0.0, 1.0))
    assert (state, reason) == ("INSUFFICIENT_EVIDENCE", MISSING_PAIRS_COULD_FAIL)
    # Without a range a missing score is unbounded: any missing pair holds the PASS.
    state, reason = _decide("non_inferiority", "MEAN", cand_m, base_m, margin=0.05)
    assert (state, reason) == ("INSUFFICIENT_EVIDENCE", "missing_pairs_unbounded")


APP = """
from oloproof import system

@system(name="bot", version="VERSION")
def answer(case_input):
    if case_input["i"] in FAIL:
        raise ValueError("no answer")
    return {"label": "ok"}
"""


def test_compare_does_not_allow_a_candidate_that_errors_where_it_would_fail(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    (project / "data").mkdir(parents=True)
    (project / "data" / "cases.jsonl").write_text("".join(
        json.dumps({"id": f"c{i:03d}", "input": {"i": i}, "expected": {"label": "ok"}}) + "\n"
        for i in range(200)))
    for name, version, fail in (("base", "1", []), ("cand", "2", list(range(30)))):
        (project / f"{name}.py").write_text(
            APP.replace("VERSION", version) + f"\nFAIL = {fail!r}\n")
        (project / f"{name}.yaml").write_text(
            f"version: 1\nproject: p\ndataset: data/cases.jsonl\npolicy: none\nsystem:\n"
            f"  name: bot\n  version: '{version}'\n  callable: {name}:answer\n"
            "evaluators:\n  - {type: exact_match, criterion: exact_label, field: label}\n")
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n"
        "  - {id: no-regression, kind: non_inferiority, metric: exact_label, margin: 0.05}\n")
    (project / "oloproof.yaml").write_text((project / "cand.yaml").read_text())
    runs = {}
    for name in ("base", "cand"):
        result = run_cli("run", "--config", f"{name}.yaml", cwd=project)
        m = RUN_ID.search(result.out + result.err)
        assert m, result.text
        runs[name] = m.group(1)
    result = run_cli("compare", runs["cand"], runs["base"], "--json", cwd=project)
    assert result.code != 0, result.text
    doc = json.loads(result.out)
    (decision,) = doc["decisions"]
    assert decision["state"] == "INSUFFICIENT_EVIDENCE", decision
    assert decision["reason"] == MISSING_PAIRS_COULD_FAIL
    assert "30 pairs dropped as missing" in decision["detail"]
    assert "the rule alone: PASS" in decision["detail"]
