"""``plan CMP_ID --assurance P`` through the CLI, on the compare example: real runs, a real
store, the real command in a subprocess. The sizes are checked against references written
in tests/stats/test_stats_paired_assurance.py: every table decided by the policy's own
functions, and an independent vectorised transcription of Newcombe's method."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project
from tests.stats.test_stats_paired_assurance import _brute, _vector_probability

RUN_ID = re.compile(r"Run (run_[0-9A-Z]{26})")
CMP_ID = re.compile(r"Comparison (cmp_[0-9A-Z]{26})")

POLICY = """version: 1
rules:
  - {id: label-no-regression, kind: non_inferiority, metric: exact_label, margin: 0.10}
  - {id: label-better, kind: superiority, metric: exact_label}
  - {id: label-better-by-15, kind: superiority, metric: exact_label, margin: 0.15}
"""


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("cmpa")
    project = root / "cmp"
    assert run_cli("init", str(project), "--example", "compare", cwd=root).code == 0
    baseline = run_cli("run", "--config", "baseline.yaml", cwd=project)
    candidate = run_cli("run", cwd=project)
    base = RUN_ID.search(baseline.out + baseline.err)
    cand = RUN_ID.search(candidate.out + candidate.err)
    assert base and cand
    (project / "assurance.yaml").write_text(POLICY)
    made = run_cli("compare", cand.group(1), base.group(1), "--policy", "assurance.yaml",
                   cwd=project)
    found = CMP_ID.search(made.out)
    assert found, made.text
    return project, found.group(1)


def test_assurance_json_for_each_rule(compared: tuple[Path, str]) -> None:
    project, cmp_id = compared
    plan = run_cli("plan", cmp_id, "--assurance", "0.8", "--json", cwd=project)
    assert plan.code == 0, plan.text
    doc = json.loads(plan.out)
    assert doc["plan_for"] == "comparison" and doc["assurance"] == 0.8
    rules = {r["rule"]: r for r in doc["rules"]}
    # decided rules get no assurance
    assert rules["label-no-regression"]["plan"] == "decided"
    assert "assurance" not in rules["label-no-regression"]
    # the example's table: 13 both pass, 4 candidate only, 0 baseline only, 1 both fail
    cells = (13, 4, 0, 1)
    better = rules["label-better"]
    assert (better["plan"], better["total"]) == ("sized", 21)
    a = better["assurance"]
    assert (a["target"], a["status"], a["total"], a["more"]) == (0.8, "sized", 25, 7)
    # every table of the pairs to come, added to the 18 pairs compared, decided by the
    # policy's functions: 25 is the first size at which the rule is decided with
    # probability 0.8 (drawing all 25 afresh, as earlier versions did, put it at 29)
    for size in range(19, 25):
        assert _brute(cells, size, "superiority", 0.0, kept=cells) < 0.8, size
    assert a["probability"] == pytest.approx(_brute(cells, 25, "superiority", 0.0, kept=cells),
                                             abs=1e-10)
    assert a["probability"] >= 0.8
    assert a["method"] == (
        "exact multinomial sum over the paired tables, Newcombe hybrid score (paired), 1998"
        " at 0.95"
    )
    assert a["assumption"] == (
        "each pair to come falls in the four cells of the paired table with the observed"
        " shares (72.2% both pass · 22.2% candidate only · 0.0% baseline only · 5.6% both"
        " fail), and the 18 pairs compared keep their cells: only the pairs to come are drawn"
    )
    assert a["reason"] is None
    by15 = rules["label-better-by-15"]["assurance"]
    probabilities = [_vector_probability(cells, size, "superiority", 0.15, kept=cells)
                     for size in range(19, by15["total"] + 1)]
    assert all(p < 0.8 for p in probabilities[:-1])
    assert probabilities[-1] >= 0.8
    assert by15["probability"] == pytest.approx(probabilities[-1], abs=1e-10)
    assert (by15["total"], by15["more"]) == (228, 210)


def test_assurance_text_beside_the_default_figure(compared: tuple[Path, str]) -> None:
    project, cmp_id = compared
    default = run_cli("plan", cmp_id, cwd=project)
    assert default.code == 0 and "assurance" not in default.out
    assert json.loads(run_cli("plan", cmp_id, "--json", cwd=project).out)["assurance"] is None
    plan = run_cli("plan", cmp_id, "--assurance", "0.8", cwd=project)
    assert plan.code == 0, plan.text
    lines = plan.out.splitlines()
    head = lines.index(
        "label-better: about 3 more paired cases would decide it, if the observed paired"
        " outcomes hold (21 in total)"
    )
    block = lines[head:head + 8]
    assert (
        "  assurance 3 more decide it at the observed paired outcomes; 7 more decide it 80%"
        " of the time (25 in total)"
    ) in block
    assert (
        "            assuming each pair to come falls in the four cells of the paired table with"
        " the observed shares (72.2% both pass · 22.2% candidate only · 0.0% baseline only ·"
        " 5.6% both fail), and the 18 pairs compared keep their cells: only the pairs to come"
        " are drawn; exact multinomial sum over the paired tables, Newcombe hybrid score"
        " (paired), 1998 at 0.95"
    ) in block
    assert (
        "  assurance 107 more decide it at the observed paired outcomes; 210 more decide it"
        " 80% of the time (228 in total)"
    ) in lines
    assert "label-no-regression: decided (PASS); nothing to plan" in lines


def test_a_bad_assurance_is_a_usage_error(compared: tuple[Path, str]) -> None:
    project, cmp_id = compared
    for bad in ("1.5", "0", "half"):
        result = run_cli("plan", cmp_id, "--assurance", bad, cwd=project)
        assert result.code == 2 and "--assurance" in result.err, result.text
        assert "Traceback" not in result.err


def _compare_identical_runs(project: Path, cases: int) -> tuple[int, str, str]:
    """Both runs answer every case right; ``cases`` cases: (exit code, cmp id, output)."""
    (project / "data" / "cases.jsonl").write_text("".join(
        json.dumps({"id": f"q{i:03d}", "input": {}, "expected": {"label": "ok"}}) + "\n"
        for i in range(cases)))
    base = RUN_ID.search(run_cli("run", "--config", "baseline.yaml", cwd=project).text)
    cand = RUN_ID.search(run_cli("run", cwd=project).text)
    assert base and cand
    made = run_cli("compare", cand.group(1), base.group(1), cwd=project)
    found = CMP_ID.search(made.out)
    assert found, made.text
    return made.code, found.group(1), made.out


def test_a_size_compare_would_hold_is_not_given(tmp_path: Path) -> None:
    # 2 pairs, both passing in both runs, under a non-inferiority margin of 50 points. The
    # plan said 2 more (4 in total) would decide it, and 4 would 80% of the time; compare
    # holds a PASS on 4 pairs (no outcome of 4 pairs could FAIL the rule). 8 is the first.
    project = write_project(tmp_path / "p", app="def answer(case_input):\n"
                            "    return {'label': 'ok'}\n", cases=[])
    config = (project / "oloproof.yaml").read_text()
    (project / "baseline.yaml").write_text(config.replace('version: "1"', 'version: "0"'))
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n"
        "  - {id: no-worse, kind: non_inferiority, metric: exact_label, margin: 0.5}\n")
    code, cmp_id, _ = _compare_identical_runs(project, 2)
    assert code == 3
    plan = run_cli("plan", cmp_id, "--assurance", "0.8", "--json", cwd=project)
    assert plan.code == 0, plan.text
    [rule] = json.loads(plan.out)["rules"]
    assert (rule["plan"], rule["total"], rule["more"]) == ("sized", 8, 6)
    assert (rule["assurance"]["total"], rule["assurance"]["more"]) == (8, 6)
    code, _, out = _compare_identical_runs(project, 4)
    assert code == 3 and "evidence_cannot_fail" in out, out
    code, _, out = _compare_identical_runs(project, 7)
    assert code == 3 and "evidence_cannot_fail" in out, out
    code, _, out = _compare_identical_runs(project, 8)
    assert code == 0 and "candidate_not_worse" in out, out


def test_a_pass_held_by_a_dropped_pair_is_planned_not_called_decided(tmp_path: Path) -> None:
    # 10 both pass, 5 candidate only, 3 both fail, and one case the candidate failed to
    # answer where the baseline passed. compare holds the PASS (with that pair at its worst,
    # a baseline-only pair, the rule would not pass); plan said "the observed pairs decide
    # it (PASS)". It is now sized with the pair kept dropped at its worst.
    cells = [(True, True)] * 10 + [(True, False)] * 5 + [(False, False)] * 3 + [(None, True)]
    app = ("def cand(case_input):\n"
           "    if case_input['c'] is None:\n"
           "        raise ValueError('no answer')\n"
           "    return {'label': 'ok' if case_input['c'] else 'no'}\n\n"
           "def base(case_input):\n"
           "    return {'label': 'ok' if case_input['b'] else 'no'}\n")
    project = write_project(tmp_path / "p", app=app, cases=[
        {"id": f"q{i:03d}", "input": {"c": c, "b": b}, "expected": {"label": "ok"}}
        for i, (c, b) in enumerate(cells)])
    config = (project / "oloproof.yaml").read_text()
    (project / "oloproof.yaml").write_text(config.replace("app:answer", "app:cand"))
    (project / "baseline.yaml").write_text(config.replace("app:answer", "app:base"))
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n  - {id: better, kind: superiority, metric: exact_label}\n")
    base = RUN_ID.search(run_cli("run", "--config", "baseline.yaml", cwd=project).text)
    cand = RUN_ID.search(run_cli("run", cwd=project).text)
    assert base and cand
    made = run_cli("compare", cand.group(1), base.group(1), "--json", cwd=project)
    assert made.code == 3, made.text
    doc = json.loads(made.out)
    [decision] = doc["decisions"]
    assert (decision["state"], decision["reason"]) == (
        "INSUFFICIENT_EVIDENCE", "missing_pairs_could_fail")
    plan = run_cli("plan", doc["comparison_id"], "--json", cwd=project)
    assert plan.code == 0, plan.text
    [rule] = json.loads(plan.out)["rules"]
    assert (rule["plan"], rule["total"], rule["more"]) == ("sized", 24, 6), rule


def test_a_mean_without_a_range_and_a_dropped_pair_is_not_sized_to_pass(tmp_path: Path) -> None:
    # A MEAN without a declared range cannot bound a dropped pair: compare holds every PASS
    # while one is missing (missing_pairs_unbounded). plan sized it all the same ("about 17
    # more paired cases would decide it (28 in total)", a PASS compare holds at any size).
    app = ("ERRORS = {'cand': [0.0, 1.0] * 6, 'base': [1.0, 0.0] * 6}\n\n"
           "def answer(case_input, side):\n"
           "    if side == 'cand' and case_input['i'] == 11:\n"
           "        raise ValueError('no answer')\n"
           "    return {'days': case_input['truth'] + ERRORS[side][case_input['i']]}\n\n"
           "def cand(case_input):\n    return answer(case_input, 'cand')\n\n"
           "def base(case_input):\n    return answer(case_input, 'base')\n")
    evaluators = ("- {type: absolute_error, criterion: days_error, field: days,"
                  " expected_field: truth}\n")
    project = write_project(tmp_path / "p", app=app, evaluators=evaluators, cases=[
        {"id": f"d{i:02d}", "input": {"i": i, "truth": 10}, "expected": {"truth": 10}}
        for i in range(12)])
    config = (project / "oloproof.yaml").read_text()
    (project / "oloproof.yaml").write_text(config.replace("app:answer", "app:cand"))
    (project / "baseline.yaml").write_text(config.replace("app:answer", "app:base"))
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n"
        "  - {id: same-error, kind: equivalence, metric: days_error, margin: 0.5}\n")
    base = RUN_ID.search(run_cli("run", "--config", "baseline.yaml", cwd=project).text)
    cand = RUN_ID.search(run_cli("run", cwd=project).text)
    assert base and cand
    made = run_cli("compare", cand.group(1), base.group(1), "--json", cwd=project)
    assert made.code == 3, made.text
    doc = json.loads(made.out)
    [metric] = doc["metrics"]
    assert (metric["pairs"], metric["dropped_missing"]) == (11, 1)
    plan = run_cli("plan", doc["comparison_id"], "--json", cwd=project)
    assert plan.code == 0, plan.text
    [rule] = json.loads(plan.out)["rules"]
    assert (rule["plan"], rule["total"]) == ("not_computable", None), rule
    assert rule["reason"] == (
        "1 pair dropped as missing and days_error declares no range: compare holds every PASS"
        " while a pair is missing, so no number of pairs passes it; fix what failed and run"
        " again")
    text = run_cli("plan", doc["comparison_id"], cwd=project)
    assert "same-error: no size can be computed: 1 pair dropped as missing" in text.out, text.out
    assert "Traceback" not in text.text
