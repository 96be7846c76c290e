"""``oloproof compare`` and ``oloproof plan CMP_ID`` on real runs, real SQLite, real CLI."""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from pathlib import Path

import pytest
from tests.conftest import Result, run_cli, write_project

from oloproof.policy.compare import fmt_difference_interval
from oloproof.policy.rules import comparison_judge
from oloproof.stats.paired import paired_mean_difference, paired_proportion_difference
from oloproof.stats.paired_assurance import paired_binary_assurance_size
from oloproof.stats.sample_size import paired_binary_rule_size, paired_mean_rule_size

RUN_ID = re.compile(r"Run (run_[0-9A-Z]{26})")
CMP_ID = re.compile(r"Comparison (cmp_[0-9A-Z]{26})")


def _run_id(result: Result) -> str:
    m = RUN_ID.search(result.out + result.err)
    assert m, result.text
    return m.group(1)


def _row(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith(f"│ {name} "):
            return line
    raise AssertionError(f"no row for {name} in:\n{text}")


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The compare example as a new user meets it: init, baseline run, candidate run."""
    root = tmp_path_factory.mktemp("cmp")
    project = root / "cmp"
    init = run_cli("init", str(project), "--example", "compare", cwd=root)
    assert init.code == 0, init.text
    baseline = run_cli("run", "--config", "baseline.yaml", cwd=project)
    assert baseline.code == 3, baseline.text
    candidate = run_cli("run", cwd=project)
    assert candidate.code == 0, candidate.text
    return project, _run_id(candidate), _run_id(baseline)


def test_a_level_next_to_one_decides_instead_of_an_internal_error(
    example: tuple[Path, str, str], tmp_path: Path
) -> None:
    """confidence_level: 0.9999999999999999 (accepted: it lies below 1) made Newcombe's
    normal quantile of 1 - alpha/2, the float 1.0, raise StatisticsError: exit 70, 'internal
    error'. At that level no rule of the example is decided: exit 3."""
    project, cand, base = example
    policy = tmp_path / "near-one.yaml"
    policy.write_text((project / "compare.yaml").read_text().replace(
        "confidence_level: 0.95", "confidence_level: 0.9999999999999999"))
    assert "0.9999999999999999" in policy.read_text()
    result = run_cli("compare", cand, base, "--policy", str(policy), cwd=project)
    assert result.code == 3, result.text
    assert "internal error" not in result.text
    assert "INSUFFICIENT_EVIDENCE" in _row(result.out, "label-no-regression")
    row = _row(result.out, "exact_label")
    iv = paired_proportion_difference(13, 4, 0, 1, 0.9999999999999999).interval
    assert iv is not None
    assert fmt_difference_interval(iv.lower, iv.upper, "BINARY") in row


def test_compare_the_example(example: tuple[Path, str, str]) -> None:
    project, cand, base = example
    result = run_cli("compare", cand, base, cwd=project)
    # label-better is undecided and blocks: the gate's exit code, as for runs.
    assert result.code == 3, result.text
    assert "Traceback" not in result.text
    out = result.out
    cmp_id = CMP_ID.search(out).group(1)  # type: ignore[union-attr]
    assert f"candidate  {cand}  support-bot keywords-v2  (18 cases, DECIDED/COMPLETE)" in out
    assert f"baseline   {base}  support-bot keywords-v1  (18 cases, DECIDED/COMPLETE)" in out
    assert "18 case ids in both runs · 0 only in the candidate · 0 only in the baseline" in out
    row = _row(out, "exact_label")
    iv = paired_proportion_difference(13, 4, 0, 1, 0.95).interval
    assert iv is not None
    for cell in ("94.4%", "72.2%", "+22.2 pts", fmt_difference_interval(iv.lower, iv.upper, "BINARY"),
                 "│ 18 ", "│ 13 ", "│ 1 ", "│ 4 ", "│ 0 ", "0 missing · 0 excluded"):
        assert cell in row, (cell, row)
    assert "[-1.6, +45.3] pts" in row
    assert "Newcombe's hybrid score interval for paired proportions at 95%" in out
    ni = _row(out, "label-no-regression")
    assert "PASS" in ni and "ALLOW" in ni and "lower > -10.0 pts" in ni
    sup = _row(out, "label-better")
    assert "INSUFFICIENT_EVIDENCE" in sup and "BLOCK" in sup and "contains 0" in sup
    assert "Gate      BLOCK   exit code 3" in out
    assert f"  label-better: size it with\n    oloproof plan {cmp_id}\n" in out

    # Stored, listed and readable later.
    conn = sqlite3.connect(project / ".oloproof" / "store.sqlite")
    row_db = conn.execute(
        "SELECT candidate_run, baseline_run, gate, exit_code FROM comparisons WHERE id = ?",
        (cmp_id,),
    ).fetchone()
    assert row_db == (cand, base, "BLOCK", 3)
    counts = conn.execute(
        "SELECT both_pass, cand_only, base_only, both_fail FROM comparison_metrics"
        " WHERE cmp_id = ? AND metric = 'exact_label'", (cmp_id,),
    ).fetchone()
    assert counts == (13, 4, 0, 1)
    conn.close()
    shown = run_cli("inspect", cmp_id, cwd=project)
    assert shown.code == 0, shown.text
    assert _row(shown.out, "exact_label") == row
    assert _row(shown.out, "label-better") == sup
    stored = json.loads(run_cli("inspect", cmp_id, "--json", cwd=project).out)
    assert stored["comparison_id"] == cmp_id and stored["gate"] == "BLOCK"


def test_compare_json_interval_is_newcombe_on_the_paired_counts(
    example: tuple[Path, str, str],
) -> None:
    project, cand, base = example
    result = run_cli("compare", cand, base, "--json", cwd=project)
    assert result.code == 3, result.text
    doc = json.loads(result.out)
    assert doc["comparison_id"].startswith("cmp_") and len(doc["comparison_id"]) == 30
    assert doc["candidate"]["run_id"] == cand and doc["baseline"]["run_id"] == base
    by_metric = {m["metric"]: m for m in doc["metrics"]}
    for name, m in by_metric.items():
        counts = (m["both_pass"], m["candidate_only"], m["baseline_only"], m["both_fail"])
        ref = paired_proportion_difference(*counts, level=0.95)
        assert ref.interval is not None
        assert (m["difference"], m["lower"], m["upper"]) == (
            ref.estimate, ref.interval.lower, ref.interval.upper,
        ), name
        assert m["method"] == ref.method and "Newcombe" in m["method"]
    assert by_metric["exact_label"]["both_pass"] == 13
    assert by_metric["exact_label"]["candidate_only"] == 4
    assert [d["state"] for d in doc["decisions"]] == ["PASS", "INSUFFICIENT_EVIDENCE"]
    assert doc["gate"] == "BLOCK" and doc["exit_code"] == 3
    # The same document is what `inspect CMP_ID --json` reads back later.
    later = json.loads(run_cli("inspect", doc["comparison_id"], "--json", cwd=project).out)
    assert later == doc


def test_plan_a_comparison(example: tuple[Path, str, str]) -> None:
    project, cand, base = example
    cmp_id = CMP_ID.search(run_cli("compare", cand, base, cwd=project).out).group(1)  # type: ignore[union-attr]
    plan = run_cli("plan", cmp_id, cwd=project)
    assert plan.code == 0, plan.text
    size = paired_binary_rule_size(
        13, 4, 0, 1, comparison_judge("superiority", 0.0), False, 0.95
    )
    assert size.status == "sized" and size.total is not None and size.more is not None
    lines = plan.out.splitlines()
    assert lines[0] == f"Comparison {cmp_id}"
    assert lines[1] == f"  candidate {cand}"
    assert lines[2] == f"  baseline  {base}"
    assert lines[3] == "  paired    18 cases"
    assert (
        f"label-better: about {size.more} more paired cases would decide it, if the observed"
        f" paired outcomes hold ({size.total} in total)"
    ) in lines
    assert "  tokens    none reported by these runs' providers" in lines
    assert (
        "  assuming  the cases to come resemble the 18 already paired (13 both pass · 1 both fail"
        " · 4 candidate only · 0 baseline only)"
    ) in lines
    assert "label-no-regression: decided (PASS); nothing to plan" in lines
    doc = json.loads(run_cli("plan", cmp_id, "--json", cwd=project).out)
    assert doc["plan_for"] == "comparison" and doc["comparison_id"] == cmp_id
    better = next(r for r in doc["rules"] if r["rule"] == "label-better")
    assert (better["plan"], better["more"], better["total"]) == ("sized", size.more, size.total)
    assert better["observed"] == {
        "both_pass": 13, "candidate_only": 4, "baseline_only": 0, "both_fail": 1,
        "pairs": 18, "dropped_missing": 0,
    }
    assert (doc["paired_cases"], doc["pairs"], doc["dropped_missing"]) == (18, 18, 0)


def test_compare_bad_input(example: tuple[Path, str, str], tmp_path: Path) -> None:
    project, cand, base = example
    unknown = run_cli("compare", "run_01ZZZZZZZZZZZZZZZZZZZZZZZZ", base, cwd=project)
    assert unknown.code == 2 and "no run 'run_01ZZZZZZZZZZZZZZZZZZZZZZZZ'" in unknown.err
    cmp_id = CMP_ID.search(run_cli("compare", cand, base, cwd=project).out).group(1)  # type: ignore[union-attr]
    given_cmp = run_cli("compare", cmp_id, base, cwd=project)
    assert given_cmp.code == 2
    assert "is a comparison id; compare takes two run ids" in given_cmp.err
    cmp_with_run = run_cli("plan", cmp_id, "--run", cwd=project)
    assert cmp_with_run.code == 2 and "drop --run" in cmp_with_run.err
    no_cmp = run_cli("inspect", "cmp_01ZZZZZZZZZZZZZZZZZZZZZZZZ", cwd=project)
    assert no_cmp.code == 2 and "no comparison" in no_cmp.err

    # A non-inferiority rule without its margin: the loader's message, exit 2.
    bad = tmp_path / "no-margin.yaml"
    bad.write_text(
        "version: 1\nrules:\n  - id: nm\n    kind: non_inferiority\n    metric: exact_label\n"
    )
    no_margin = run_cli("compare", cand, base, "--policy", str(bad), cwd=project)
    assert no_margin.code == 2, no_margin.text
    assert "margin" in no_margin.err and "non_inferiority" in no_margin.err
    assert "Traceback" not in no_margin.text
    # A rule on a metric the runs do not share: exit 2, naming the known ones.
    unknown_metric = tmp_path / "unknown-metric.yaml"
    unknown_metric.write_text(
        "version: 1\nrules:\n  - {id: x, kind: superiority, metric: exact_lable}\n"
    )
    um = run_cli("compare", cand, base, "--policy", str(unknown_metric), cwd=project)
    assert um.code == 2 and "exact_label" in um.err and "exact_lable" in um.err



def test_a_comparison_policy_saved_under_another_name_is_refused(
    example: tuple[Path, str, str], tmp_path: Path,
) -> None:
    """compare.yml beside oloproof.yaml was not read: the comparison had no rules and the gate
    allowed (exit 0) a candidate its author's rules block. As release.yml is, it is named and
    refused (exit 2), and nothing is stored."""
    import shutil

    project, cand, base = example
    copy = tmp_path / "cmp"
    shutil.copytree(project, copy)
    (copy / "compare.yaml").rename(copy / "compare.yml")
    db = copy / ".oloproof" / "store.sqlite"

    def comparisons() -> int:
        conn = sqlite3.connect(db)
        try:
            return int(conn.execute("SELECT count(*) FROM comparisons").fetchone()[0])
        finally:
            conn.close()

    before = comparisons()
    result = run_cli("compare", cand, base, cwd=copy)
    assert result.code == 2, result.text
    assert "found compare.yml; Oloproof reads compare.yaml: rename the file" in result.err
    assert "Traceback" not in result.text and result.out == ""
    assert comparisons() == before
    # Named with --policy, it is the policy: the example's rules, exit 3 as with compare.yaml.
    named = run_cli("compare", cand, base, "--policy", "compare.yml", cwd=copy)
    assert named.code == 3, named.text


APP = """
from oloproof import system

@system(name="bot", version="VERSION")
def answer(case_input):
    i = case_input["i"]
    if i in FAIL_CALLS:
        raise ValueError("no answer")
    return {"label": "ok" if i not in WRONG else "no", "score": SCORES[i % len(SCORES)]}
"""

EVALUATORS = """
- {type: exact_match, criterion: exact_label, field: label}
- {type: absolute_error, criterion: score_error, field: score, expected_field: score}
"""


def _config(project: Path, name: str, *, project_name: str, dataset: str, module: str,
            version: str) -> None:
    (project / name).write_text(
        f"version: 1\nproject: {project_name}\ndataset: {dataset}\npolicy: none\nsystem:\n"
        f"  name: bot\n  version: '{version}'\n  callable: {module}:answer\n"
        "evaluators:\n"
        "  - {type: exact_match, criterion: exact_label, field: label}\n"
        "  - {type: absolute_error, criterion: score_error, field: score,"
        " expected_field: score}\n"
    )


def _app(project: Path, module: str, *, version: str, wrong: set[int], fail: set[int],
         scores: list[float]) -> None:
    (project / f"{module}.py").write_text(
        APP.replace("VERSION", version)
        + f"\nWRONG = {sorted(wrong)!r}\nFAIL_CALLS = {sorted(fail)!r}\nSCORES = {scores!r}\n"
    )


def test_different_suites_missing_excluded_and_mean_metrics(tmp_path: Path) -> None:
    project = tmp_path / "mixed"
    project.mkdir()
    (project / "data").mkdir()

    def case(i: int) -> dict[str, object]:
        expected: dict[str, object] = {"label": "ok", "score": 1.0}
        if i == 5:
            expected = {"score": 1.0}  # exact_label excluded for this case
        return {"id": f"c{i:02d}", "input": {"i": i}, "expected": expected}

    # The baseline's suite: c00..c19; the candidate's: c03..c24 (17 shared, 3 + 5 left out).
    (project / "data" / "base.jsonl").write_text(
        "".join(json.dumps(case(i)) + "\n" for i in range(20))
    )
    (project / "data" / "cand.jsonl").write_text(
        "".join(json.dumps(case(i)) + "\n" for i in range(3, 25))
    )
    _app(project, "base_app", version="1", wrong={3, 4, 8}, fail=set(),
         scores=[1.0, 2.0, 0.0, 1.5])
    _app(project, "cand_app", version="2", wrong={8}, fail={12},
         scores=[1.0, 1.5, 1.0, 1.0, 0.5])
    _config(project, "baseline.yaml", project_name="mixed", dataset="data/base.jsonl",
            module="base_app", version="1")
    _config(project, "oloproof.yaml", project_name="mixed", dataset="data/cand.jsonl",
            module="cand_app", version="2")
    base = _run_id(run_cli("run", "--config", "baseline.yaml", cwd=project))
    cand = _run_id(run_cli("run", cwd=project))

    result = run_cli("compare", cand, base, "--json", cwd=project)
    assert result.code == 0, result.text  # no compare.yaml: no rules, nothing blocks
    doc = json.loads(result.out)
    assert doc["pairing"]["shared"] == 17
    assert doc["pairing"]["only_candidate"] == [f"c{i:02d}" for i in range(20, 25)]
    assert doc["pairing"]["only_baseline"] == ["c00", "c01", "c02"]
    warning = "the runs are of different suites: paired on the 17 case ids they share; 8 cases" \
        " were left out (5 only in the candidate, 3 only in the baseline)"
    assert any(w.startswith(warning) for w in doc["warnings"]), doc["warnings"]
    assert warning in result.err
    assert doc["decisions"] == [] and doc["policy_note"].startswith("no compare.yaml")
    metrics = {m["metric"]: m for m in doc["metrics"]}
    label = metrics["exact_label"]
    # c12 failed in the candidate (missing), c05 has no expected label (excluded).
    assert (label["dropped_missing"], label["dropped_excluded"], label["pairs"]) == (1, 1, 15)
    # Shared and observed: c03,c04 fixed by the candidate; c08 wrong in both.
    assert (label["both_pass"], label["candidate_only"], label["baseline_only"],
            label["both_fail"]) == (12, 2, 0, 1)
    ref = paired_proportion_difference(12, 2, 0, 1, 0.95)
    assert ref.interval is not None
    assert (label["lower"], label["upper"]) == (ref.interval.lower, ref.interval.upper)
    # The MEAN metric gets a paired t interval over the same observed pairs.
    score = metrics["score_error"]
    assert (score["dropped_missing"], score["dropped_excluded"], score["pairs"]) == (1, 0, 16)
    ids = [i for i in range(3, 20) if i != 12]
    cand_scores = [abs([1.0, 1.5, 1.0, 1.0, 0.5][i % 5] - 1.0) for i in ids]
    base_scores = [abs([1.0, 2.0, 0.0, 1.5][i % 4] - 1.0) for i in ids]
    pt = paired_mean_difference(cand_scores, base_scores, 0.95)
    assert pt.interval is not None and pt.estimate is not None
    assert score["difference"] == pytest.approx(pt.estimate, abs=1e-12)
    assert score["lower"] == pytest.approx(pt.interval.lower, abs=1e-12)
    assert score["upper"] == pytest.approx(pt.interval.upper, abs=1e-12)
    assert score["method"].startswith("paired Student t")

    text = run_cli("compare", cand, base, cwd=project)
    assert "only in the candidate: c20, c21, c22, c23, c24" in text.out
    assert "paired Student t interval at 95%" in text.out
    assert "1 missing · 1 excluded" in _row(text.out, "exact_label")
    assert "No rules: no compare.yaml beside oloproof.yaml and no --policy given." in text.out

    # A MEAN comparison rule is sized approximately by plan, from the paired differences.
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n"
        "  - {id: score-rule, kind: equivalence, metric: score_error, margin: 0.3}\n"
    )
    cmp_id = CMP_ID.search(run_cli("compare", cand, base, cwd=project).out).group(1)  # type: ignore[union-attr]
    plan = run_cli("plan", cmp_id, cwd=project)
    assert plan.code == 0, plan.text
    size = paired_mean_rule_size(
        pt.estimate, pt.sd, 16, comparison_judge("equivalence", 0.3), False, 0.95
    )
    assert size.status == "sized" and size.approximate
    assert (
        f"score-rule: about {size.more} more paired cases would decide it, if the observed"
        f" paired outcomes hold ({size.total} in total; approximate)"
    ) in plan.out
    assert "approximate: the paired t interval is projected from that mean and spread" in plan.out
    assert "none of the cases to come goes missing (1 pair was dropped" in plan.out

    # --assurance: a MEAN rule is not computable, as for runs; a BINARY rule is sized over
    # the 15 pairs observed in both runs, the pair dropped for a missing case (c12: the
    # candidate failed, the baseline passed) staying dropped at its worst, as compare bounds
    # it: a baseline-only pair. Without it the plan said 34 pairs, 46 for 80%; compare
    # holds every PASS of 34 pairs then (tests/stats/test_stats_paired_assurance.py).
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n"
        "  - {id: score-rule, kind: equivalence, metric: score_error, margin: 0.3}\n"
        "  - {id: label-rule, kind: superiority, metric: exact_label}\n"
    )
    cmp_id = CMP_ID.search(run_cli("compare", cand, base, cwd=project).out).group(1)  # type: ignore[union-attr]
    planned = run_cli("plan", cmp_id, "--assurance", "0.8", "--json", cwd=project)
    assert planned.code == 0, planned.text
    rules = {r["rule"]: r for r in json.loads(planned.out)["rules"]}
    mean = rules["score-rule"]["assurance"]
    assert (mean["status"], mean["total"], mean["probability"]) == ("not_computable", None, None)
    assert mean["reason"] == (
        "an assurance is computed exactly for rates only; the distribution of a MEAN's paired"
        " differences is not known from their mean and spread"
    )
    label = rules["label-rule"]
    assert label["observed"] == {"both_pass": 12, "candidate_only": 2, "baseline_only": 0,
                                 "both_fail": 1, "pairs": 15, "dropped_missing": 1}
    expected = paired_binary_assurance_size(12, 2, 0, 1, comparison_judge("superiority", 0.0),
                                            0.8, fills=[(0, 0, 1, 0)])
    assert expected.status == "sized" and expected.total is not None
    assert (label["assurance"]["total"], label["assurance"]["more"]) == (
        expected.total, expected.total - 15
    ) == (65, 50)
    assert (label["plan"], label["total"]) == ("sized", 49)
    assert (
        "none of the cases to come goes missing (1 pair was dropped because a case was missing"
        " in one run; it stays dropped and counts against the rule at its worst, as compare"
        " bounds it)"
    ) in label["assuming"]
    text = run_cli("plan", cmp_id, "--assurance", "0.8", cwd=project).out
    assert (
        "  assurance 80% of the time: an assurance is computed exactly for rates only; the"
        " distribution of a MEAN's paired differences is not known from their mean and spread"
    ) in text.splitlines()


def test_runs_of_two_projects_are_refused(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "two", app="from oloproof import system\n\n@system(name='s', version='1')\n"
        "def answer(case_input):\n    return {'label': 'ok'}\n",
        cases=[{"id": "a", "input": {}, "expected": {"label": "ok"}}],
    )
    first = _run_id(run_cli("run", cwd=project))
    other = (project / "oloproof.yaml").read_text().replace(
        "project: test-project", "project: another-project"
    )
    (project / "other.yaml").write_text(other)
    second = _run_id(run_cli("run", "--config", "other.yaml", cwd=project))
    refused = run_cli("compare", second, first, cwd=project)
    assert refused.code == 2
    assert "project 'another-project'" in refused.err and "project 'test-project'" in refused.err
    assert "Traceback" not in refused.text


def test_a_partial_run_is_not_decided(example: tuple[Path, str, str]) -> None:
    project, cand, base = example
    store = project / ".oloproof" / "store.sqlite"
    conn = sqlite3.connect(store)
    # Make a copy of the candidate's run that stopped early (as a killed run is recorded).
    conn.execute(
        "INSERT INTO runs SELECT 'run_01PARTIAL0000000000000000', project, created_at,"
        " finished_at, 'RUN_ERROR', 'PARTIAL', 5, 'BLOCK', suite_digest, dataset, cases_total,"
        " system_identity, system_json, metrics_json, policy_json, policy_path, 'stopped', NULL,"
        " cache_json FROM runs WHERE id = ?", (cand,),
    )
    for table in ("run_cases", "run_judgments"):
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        rest = ", ".join(cols[1:])
        conn.execute(
            f"INSERT INTO {table} SELECT 'run_01PARTIAL0000000000000000', {rest} FROM {table}"
            " WHERE run_id = ? AND case_id < 'c'", (cand,),
        )
    conn.commit()
    conn.close()
    result = run_cli("compare", "run_01PARTIAL0000000000000000", base, "--json", cwd=project)
    assert result.code == 5, result.text
    doc = json.loads(result.out)
    assert doc["incomplete"] is True and doc["decisions"] == []
    assert any("RUN_ERROR/PARTIAL" in w for w in doc["warnings"])
    assert doc["pairing"]["shared"] == 7  # account_00..03 and billing_00..02 only
    plan = run_cli("plan", doc["comparison_id"], cwd=project)
    assert plan.code == 5 and "partial" in plan.err
    assert run_cli("plan", "run_01PARTIAL0000000000000000", "--run", cwd=project).code == 5


SUBSET_APP = """
from oloproof import system

@system(name="s", version="{version}")
def answer(case_input):
    wrong = {version} == 2 and case_input["n"] >= 60
    return {{"label": "no" if wrong else "ok"}}
"""


@pytest.mark.parametrize("part", [
    ["--limit", "60"], ["--shard", "1/2"], ["--where", "input.n < 60"], ["--case", "q001"],
])
def test_a_comparison_with_part_of_a_suite_never_allows(tmp_path: Path, part: list[str]) -> None:
    """The finding: a candidate wrong on its last 40 of 100 cases, run with --limit 60 (or a
    shard, or --where): DECIDED/SUBSET, exit 5; compared with a whole baseline it read PASS
    ALLOW, exit 0. A subset's comparison is decided on its pairs, as `gate` decides a
    subset, and never allows: exit 5 unless a rule FAILs; on either side."""
    cases = [{"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
             for i in range(100)]
    project = write_project(tmp_path / "p", app=SUBSET_APP.format(version=1), cases=cases,
                            version="1")
    (project / "compare.yaml").write_text(
        "version: 1\nrules: [{id: label-no-regression, kind: non_inferiority,"
        " metric: exact_label, margin: 0.10}]\n")
    base = _run_id(run_cli("run", cwd=project))
    (project / "app.py").write_text(SUBSET_APP.format(version=2))
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace('version: "1"', 'version: "2"'))
    part_run = run_cli("run", *part, cwd=project)
    assert part_run.code == 5 and "DECIDED/SUBSET" in part_run.out, part_run.text
    cand = _run_id(part_run)
    whole = run_cli("compare", _run_id(run_cli("run", cwd=project)), base, cwd=project)
    assert whole.code == 1, whole.text  # the whole candidate is worse: the rule can tell
    for first, second, side in ((cand, base, "candidate"), (base, cand, "baseline")):
        result = run_cli("compare", first, second, "--json", cwd=project)
        assert "Traceback" not in result.text
        doc = json.loads(result.out)
        [d] = doc["decisions"]  # decided on its pairs, and shown
        # A FAIL on part of the suite is a FAIL (a shard holds some of the wrong cases);
        # anything else blocks as incomplete, a PASS included.
        code = 1 if d["state"] == "FAIL" else 5
        assert code == 5 or (part[0] == "--shard" and side == "candidate"), d
        assert (result.code, doc["gate"], doc["exit_code"]) == (code, "BLOCK", code), d
        assert any(f"the {side} run {cand} is DECIDED/SUBSET: it ran part of its suite" in w
                   and "never allows a release" in w for w in doc["warnings"]), doc["warnings"]
        text = run_cli("inspect", doc["comparison_id"], cwd=project)
        assert f"Gate      BLOCK   exit code {code}" in text.out, text.text


def test_two_pairs_cannot_pass_a_non_inferiority_rule(tmp_path: Path) -> None:
    """The finding: a baseline of cases c00-c39 and a candidate of c38-c77 share 2 ids;
    non_inferiority with margin 0.10 read `[+6.9, +100.0] pts` PASS ALLOW, exit 0, though no
    outcome of 2 pairs could have failed it."""
    app = ("from oloproof import system\n\n@system(name='s', version='{v}')\n"
           "def answer(case_input):\n    return {{'label': '{label}'}}\n")
    cases = [{"id": f"c{i:02d}", "input": {"n": i}, "expected": {"label": "ok"}}
             for i in range(78)]
    project = write_project(tmp_path / "p", app=app.format(v=1, label="no"), cases=cases[:40])
    (project / "compare.yaml").write_text(
        "version: 1\nrules: [{id: label-no-regression, kind: non_inferiority,"
        " metric: exact_label, margin: 0.10}]\n")
    base = _run_id(run_cli("run", cwd=project))
    (project / "app.py").write_text(app.format(v=2, label="ok"))
    (project / "data" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases[38:]))
    cand = _run_id(run_cli("run", cwd=project))
    result = run_cli("compare", cand, base, cwd=project)
    # 38 of the baseline's cases not run by the candidate: never allows (exit 5).
    assert result.code == 5, result.text
    row = " ".join(_row(result.out, "label-no-regression").split())
    assert "INSUFFICIENT_EVIDENCE" in row and "evidence_cannot_fail" in row, row
    assert "Gate      BLOCK   exit code 5" in result.out
    # No plan hint: the interval is not too wide, the runs share too few cases.
    assert "size it with" not in result.out
    assert "too few pairs to fail it, whatever their outcomes" in result.out
    cmp_id = CMP_ID.search(result.out).group(1)  # type: ignore[union-attr]
    plan = run_cli("plan", cmp_id, "--json", cwd=project)
    [entry] = json.loads(plan.out)["rules"]
    assert (entry["plan"], entry["reason"]) == ("refused", "evidence_cannot_fail"), entry


def test_a_criterion_judged_by_another_evaluator_is_not_compared(tmp_path: Path) -> None:
    """The finding: the candidate's configuration keeps the name exact_label but makes it a
    regex that always passes; compare read PASS ALLOW with no warning (merge refuses runs
    whose evaluators differ). A rule on it is refused, naming the rule, the criterion and
    the two identities; without a rule, the metric is not compared, with a warning."""
    app = ("from oloproof import system\n\n@system(name='s', version='{v}')\n"
           "def answer(case_input):\n    return {{'label': '{label}'}}\n")
    project = write_project(tmp_path / "p", app=app.format(v=1, label="ok"),
                            cases=[{"id": f"c{i:02d}", "input": {"n": i},
                                    "expected": {"label": "ok"}} for i in range(60)])
    base = _run_id(run_cli("run", cwd=project))
    (project / "app.py").write_text(app.format(v=2, label="no"))
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace(
        "- type: exact_match\n    criterion: exact_label\n    field: label",
        "- type: regex\n    criterion: exact_label\n    field: label\n    pattern: '.+'",
    ).replace('version: "1"', 'version: "2"'))
    cand = _run_id(run_cli("run", cwd=project))
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n  - {id: label-no-regression, kind: non_inferiority,"
        " metric: exact_label, margin: 0.10}\n")
    refused = run_cli("compare", cand, base, cwd=project)
    assert refused.code == 2, refused.text
    assert "Traceback" not in refused.text
    [message] = [line for line in refused.err.splitlines() if line.strip()]
    assert message.startswith("oloproof compare: error: "), message
    assert ("compare.yaml:3: rules[0].metric: rule label-no-regression: the two runs judged"
            " exact_label by different evaluators (evaluator identity sha256:") in message
    assert f"in the candidate {cand}" in message and f"in the baseline {base}" in message
    # Without rules: not compared, and said so.
    (project / "compare.yaml").unlink()
    bare = run_cli("compare", cand, base, "--json", cwd=project)
    assert bare.code == 0, bare.text
    doc = json.loads(bare.out)
    assert doc["metrics"] == [] and any(
        w.startswith("metric exact_label was judged by different evaluators") and
        w.endswith(": not compared") for w in doc["warnings"]), doc["warnings"]


def test_a_warning_quoting_a_case_id_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """compare --json writes its warnings on standard error; the one about a shared id
    whose input differs quotes the id, which wrote ESC[2J (or OSC 52) to the terminal raw."""
    hostile = "c\x1b[2J\x1b]52;c;SGk=\x07"
    cases = [{"id": hostile if i == 0 else f"c{i}", "input": {"q": f"q{i}"},
              "expected": {"label": "ok"}} for i in range(6)]
    app = """
        from oloproof import system

        @system(name="s", version="1")
        def answer(case_input):
            return {"label": "ok"}
    """
    root = write_project(tmp_path / "p", app=app, cases=cases)
    first = _run_id(run_cli("run", cwd=root))
    cases[0]["input"] = {"q": "changed"}
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    second = _run_id(run_cli("run", cwd=root))
    result = run_cli("compare", second, first, "--json", cwd=root)
    assert result.code == 0, result.text
    assert "has a different input or expected value" in result.err, result.err
    assert "\x1b" not in result.err and "\x07" not in result.err
    assert "c\\x1b[2J" in result.err


_ANSWER_OK = """
    from oloproof import system

    @system(name="s", version="VERSION")
    def answer(case_input):
        return {"label": "ok"}
"""

_NON_INFERIOR = (
    "version: 1\nrules:\n"
    "  - {id: ni, kind: non_inferiority, metric: exact_label, margin: 0.3}\n"
)


def test_the_same_run_as_candidate_and_baseline_is_refused(tmp_path: Path) -> None:
    """'compare latest BASE' after a candidate run that stored nothing names the baseline
    twice; a run paired with itself differs by nothing, so a non-inferiority rule PASSed
    and the gate allowed (exit 0) on no candidate at all, with only a warning."""
    cases = [{"id": f"c{i}", "input": {"q": f"q{i}"}, "expected": {"label": "ok"}}
             for i in range(30)]
    root = write_project(tmp_path / "p", app=_ANSWER_OK.replace("VERSION", "1"), cases=cases)
    (root / "compare.yaml").write_text(_NON_INFERIOR)
    base = _run_id(run_cli("run", cwd=root))
    result = run_cli("compare", "latest", base, cwd=root)
    assert result.code == 2, result.text
    assert f"the candidate and the baseline are the same run {base}" in result.err
    assert "Traceback" not in result.text


def test_shared_ids_with_other_expected_values_never_allow(tmp_path: Path) -> None:
    """A candidate run on a suite whose expected values were rewritten (same ids) to what
    the candidate answers: the pairs compare different questions. The candidate, worse on
    the real suite (the baseline fails 0, it fails 6), PASSed non-inferiority and the gate
    allowed (exit 0); now it is decided on the pairs but BLOCKs, exit 5."""
    cases = [{"id": f"c{i}", "input": {"q": f"q{i}"},
              "expected": {"label": "ok" if i >= 6 else "other"}} for i in range(30)]
    good = """
        from oloproof import system

        @system(name="s", version="good")
        def answer(case_input):
            return {"label": "other" if case_input["q"] in {f"q{i}" for i in range(6)} else "ok"}
    """
    root = write_project(tmp_path / "p", app=good, cases=cases)
    (root / "compare.yaml").write_text(_NON_INFERIOR)
    base = _run_id(run_cli("run", cwd=root))
    (root / "app.py").write_text(textwrap.dedent(_ANSWER_OK.replace("VERSION", "bad")))
    honest = _run_id(run_cli("run", cwd=root))
    assert run_cli("compare", honest, base, cwd=root).code != 0
    for case in cases:
        case["expected"] = {"label": "ok"}
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    rewritten = _run_id(run_cli("run", cwd=root))
    result = run_cli("compare", rewritten, base, "--json", cwd=root)
    doc = json.loads(result.out)
    assert [d["state"] for d in doc["decisions"]] == ["PASS"], doc["decisions"]
    assert result.code == 5, result.text
    assert doc["gate"] == "BLOCK" and doc["exit_code"] == 5
    assert "6 shared case ids have a different input or expected value" in result.err
    assert "never allows a release" in result.err


def test_a_candidate_without_the_baselines_hard_cases_never_allows(tmp_path: Path) -> None:
    """The candidate fails 20 hard cases of 100 that the baseline passes: on the whole suite
    non-inferiority (margin 0.05) FAILs. Run on a suite without those 20, the 80 pairs
    left PASSed and the gate allowed (exit 0) with a warning. Now the comparison is decided
    on the pairs but never allows; a suite that only grew still can."""
    cases = [{"id": f"c{i:03d}", "input": {"q": i}, "expected": {"label": "ok"}}
             for i in range(100)]
    app = """
        from oloproof import system

        @system(name="s", version="VERSION")
        def answer(case_input):
            hard = case_input["q"] < 20 and "VERSION" == "new"
            return {"label": "no" if hard else "ok"}
    """
    root = write_project(tmp_path / "p", app=app.replace("VERSION", "old"), cases=cases)
    (root / "compare.yaml").write_text(_NON_INFERIOR.replace("0.3", "0.05"))
    base = _run_id(run_cli("run", cwd=root))
    (root / "app.py").write_text(textwrap.dedent(app.replace("VERSION", "new")))
    whole = _run_id(run_cli("run", cwd=root))
    assert run_cli("compare", whole, base, cwd=root).code == 1  # FAIL on the whole suite
    data = root / "data" / "cases.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in cases[20:]))
    easy = _run_id(run_cli("run", cwd=root))
    result = run_cli("compare", easy, base, "--json", cwd=root)
    doc = json.loads(result.out)
    assert [d["state"] for d in doc["decisions"]] == ["PASS"], doc["decisions"]
    assert result.code == 5 and doc["gate"] == "BLOCK", result.text
    assert "20 only in the baseline" in result.err and "never allows a release" in result.err
    # A suite that only grew leaves none of the baseline's cases out: it can allow.
    more = [*cases[20:], *({"id": f"n{i}", "input": {"q": 1000 + i}, "expected": {"label": "ok"}}
                           for i in range(5))]
    data.write_text("".join(json.dumps(c) + "\n" for c in more))
    grown = _run_id(run_cli("run", cwd=root))
    assert run_cli("compare", grown, easy, cwd=root).code == 0
