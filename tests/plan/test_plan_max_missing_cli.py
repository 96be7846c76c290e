"""``plan`` on a rule held as incomplete: more of its cases (pairs) missing than the policy's
``max_missing`` lets through. The gate (``run``/``compare``) blocks such a rule whatever its
interval says (exit 5), so a plan must not size it below the cases at which the share comes
within the bar, nor call a PASS so held "decided". Each size is checked against what ``run``
and ``compare`` themselves decide at it, and one case (pair) short of it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project

from oloproof.analysis.plan import _fewest_more
from oloproof.enums import RuleState
from oloproof.policy.decide import Decision, hold_missing
from oloproof.stats.sample_size import apportion

RUN_ID = re.compile(r"Run (run_[0-9A-Z]{26})")

#: ``ok`` True/False answers right/wrong; None raises (the case is missing).
RUN_APP = ("def answer(case_input):\n"
           "    if case_input['ok'] is None:\n"
           "        raise ValueError('down')\n"
           "    return {'label': 'ok' if case_input['ok'] else 'no'}\n")

PAIR_APP = ("def cand(case_input):\n"
            "    if case_input['c'] is None:\n"
            "        raise ValueError('no answer')\n"
            "    return {'label': 'ok' if case_input['c'] else 'no'}\n\n"
            "def base(case_input):\n"
            "    if case_input['b'] is None:\n"
            "        raise ValueError('no answer')\n"
            "    return {'label': 'ok' if case_input['b'] else 'no'}\n")


def _run(root: Path, passed: int, missing: int, bar: float) -> tuple[Path, int]:
    outcomes = [True] * passed + [None] * missing
    project = write_project(
        root, app=RUN_APP,
        cases=[{"id": f"q{i:03d}", "input": {"ok": ok}, "expected": {"label": "ok"}}
               for i, ok in enumerate(outcomes)],
        release=f"version: 1\nrules:\n  - {{id: floor, metric: exact_label, min: {bar}}}\n")
    return project, run_cli("run", cwd=project).code


@pytest.mark.parametrize(
    ("passed", "missing", "bar", "state", "total"),
    [
        # 10 right, 4 missing (28.6%), min 0.5: INSUFFICIENT; sized at 17 in all (13 right,
        # 4 missing), where 4 of 17 is 23.5% and the gate exits 5. The first total with the
        # 4 within 20% is 20, and it decides the rule.
        (10, 4, 0.5, "INSUFFICIENT_EVIDENCE", 20),
        # 20 right, 6 missing (23.1%), min 0.3: PASS on its interval, held as incomplete
        # (exit 5); plan said "decided (PASS); nothing to plan".
        (20, 6, 0.3, "PASS", 30),
    ],
)
def test_a_run_rule_over_max_missing_is_sized_where_the_gate_takes_it(
    tmp_path: Path, passed: int, missing: int, bar: float, state: str, total: int
) -> None:
    project, code = _run(tmp_path / "now", passed, missing, bar)
    assert code == 5
    plan = run_cli("plan", "latest", "--run", "--json", cwd=project)
    assert plan.code == 0, plan.text
    [rule] = json.loads(plan.out)["rules"]
    assert (rule["state"], rule["plan"], rule["total"], rule["state_at_total"]) == (
        state, "sized", total, "PASS"), rule
    held = rule["incomplete"]
    assert (held["missing"], held["of"], held["unit"], held["max_missing"], held["more"]) == (
        missing, passed + missing, "cases", 0.2, total - passed - missing)
    text = run_cli("plan", "latest", "--run", cwd=project)
    assert "the gate holds it as incomplete now" in text.out, text.out
    if state == "PASS":  # every outcome of the 6 missing cases passes it (was "only if them")
        assert "re-running the 6 missing cases: decides it now whatever they give (PASS)" in (
            text.out), text.out
    # What run decides: at the planned total (the observed rate, all right, holding) it
    # passes; one case short, the missing share is over max_missing and it exits 5.
    assert _run(tmp_path / "at", total - missing, missing, bar)[1] == 0
    assert _run(tmp_path / "short", total - 1 - missing, missing, bar)[1] == 5


def _compare(root: Path, cells: tuple[int, int, int, int], dropped: int) -> tuple[Path, int, str]:
    """A comparison of the paired table ``cells`` (both pass, candidate only, baseline only,
    both fail) and ``dropped`` cases the baseline failed to answer where the candidate was
    right (at their worst for the candidate: both pass)."""
    a, b, c, d = cells
    pairs = ([(True, True)] * a + [(True, False)] * b + [(False, True)] * c
             + [(False, False)] * d + [(True, None)] * dropped)
    project = write_project(root, app=PAIR_APP, cases=[
        {"id": f"q{i:03d}", "input": {"c": x, "b": y}, "expected": {"label": "ok"}}
        for i, (x, y) in enumerate(pairs)])
    config = (project / "oloproof.yaml").read_text()
    (project / "oloproof.yaml").write_text(config.replace("app:answer", "app:cand"))
    (project / "baseline.yaml").write_text(config.replace("app:answer", "app:base"))
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n  - {id: better, kind: superiority, metric: exact_label}\n")
    base = RUN_ID.search(run_cli("run", "--config", "baseline.yaml", cwd=project).text)
    cand = RUN_ID.search(run_cli("run", cwd=project).text)
    assert base and cand
    made = run_cli("compare", cand.group(1), base.group(1), "--json", cwd=project)
    return project, made.code, json.loads(made.out)["comparison_id"]


@pytest.mark.parametrize(
    ("cells", "dropped", "state", "total"),
    [
        # 3/5/1/1 and 4 pairs dropped (28.6%): INSUFFICIENT; sized at 11 pairs, where 4 of
        # 15 is 26.7% and compare exits 5. 16 pairs bring it to 20%, and decide it.
        ((3, 5, 1, 1), 4, "INSUFFICIENT_EVIDENCE", 16),
        # 15 candidate-only pairs and 5 dropped (25%): PASS on its interval, held as
        # incomplete; plan said "decided (PASS); nothing to plan".
        ((0, 15, 0, 0), 5, "PASS", 20),
    ],
)
def test_a_comparison_rule_over_max_missing_is_sized_where_compare_takes_it(
    tmp_path: Path, cells: tuple[int, int, int, int], dropped: int, state: str, total: int
) -> None:
    project, code, cmp_id = _compare(tmp_path / "now", cells, dropped)
    assert code == 5
    for args in ((), ("--assurance", "0.8")):
        plan = run_cli("plan", cmp_id, "--json", *args, cwd=project)
        assert plan.code == 0, plan.text
        [rule] = json.loads(plan.out)["rules"]
        assert (rule["state"], rule["plan"], rule["total"], rule["state_at_total"]) == (
            state, "sized", total, "PASS"), rule
        assert rule["incomplete"]["more"] == total - sum(cells)
        if args:
            assert rule["assurance"]["total"] >= total, rule["assurance"]
    text = run_cli("plan", cmp_id, cwd=project)
    assert "compare holds it as incomplete now" in text.out, text.out
    # What compare decides on the observed table scaled to the planned pairs, the dropped
    # pairs still dropped: it passes; one pair short, it is held as incomplete.
    assert _compare(tmp_path / "at", apportion(cells, total), dropped)[1] == 0
    assert _compare(tmp_path / "short", apportion(cells, total - 1), dropped)[1] == 5


def _held(observed: int, missing: int, max_missing: float) -> bool:
    d = Decision(rule="r", metric="m", kind="interval_threshold",
                 state=RuleState.INSUFFICIENT_EVIDENCE, reason="", detail="")
    hold_missing(d, observed, missing, max_missing)
    return d.incomplete


def test_the_fewest_more_cases_are_those_hold_missing_lets_through() -> None:
    # Against the decision's own rule, every count brute-forced: the fewest more cases (of
    # ``per`` observed units each, none missing) at which hold_missing no longer marks the
    # rule incomplete; None where no number does (max_missing 0).
    for max_missing in (0.0, 0.05, 0.1, 0.2, 1 / 3, 0.5, 0.99, 1.0):
        for observed in range(25):
            for missing in range(12):
                for per in (1, 3):
                    found = _fewest_more(observed, missing, max_missing, per)
                    brute = next((x for x in range(2000)
                                  if not _held(observed + x * per, missing, max_missing)), None)
                    assert found == brute, (max_missing, observed, missing, per)


def test_the_paired_header_counts_the_pairs_the_rules_count(tmp_path: Path) -> None:
    # 13 cases in both runs, 3 of them unanswered by the baseline: the header said "paired
    # 13 cases" above a rule that "resemble[s] the 10 already paired".
    project, _, cmp_id = _compare(tmp_path / "p", (6, 3, 0, 1), 3)
    text = run_cli("plan", cmp_id, cwd=project)
    assert text.code == 0, text.text
    lines = text.out.splitlines()
    assert lines[3] == "  paired    10 cases (13 in both runs; 3 dropped: a case was missing in one run)"
    assert "the cases to come resemble the 10 already paired" in text.out
    doc = json.loads(run_cli("plan", cmp_id, "--json", cwd=project).out)
    assert (doc["paired_cases"], doc["pairs"], doc["dropped_missing"], doc["dropped_excluded"]) == (
        13, 10, 3, 0)
    [rule] = doc["rules"]
    assert (rule["observed"]["pairs"], rule["observed"]["dropped_missing"]) == (10, 3)


TRIALS_APP = ("def answer(case_input):\n"
              "    if case_input['n'] < 3:\n"
              "        raise ValueError('down')\n"
              "    return {'label': 'ok' if case_input['n'] % 5 else 'no'}\n")


def _trials_run(root: Path, cases: int) -> tuple[Path, int]:
    project = write_project(
        root, app=TRIALS_APP,
        cases=[{"id": f"q{i:02d}", "input": {"n": i}, "expected": {"label": "ok"}}
               for i in range(cases)],
        release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n")
    return project, run_cli("run", "--trials", "3", cwd=project).code


def test_over_trials_the_missing_are_counted_as_trials_and_cases(tmp_path: Path) -> None:
    # 12 cases x 3 trials, 3 cases failing every trial: 9 of 36 trials missing (25%). The
    # plan said "the 9 missing cases of this run stay missing": they are 3 cases, 9 trials.
    project, code = _trials_run(tmp_path / "now", 12)
    assert code == 5
    text = run_cli("plan", "latest", "--run", cwd=project)
    assert text.code == 0, text.text
    assert ("the 3 cases with a missing trial (9 trials) of this run stay missing" in text.out
            ), text.out
    assert "9 missing cases" not in text.out
    [rule] = json.loads(run_cli("plan", "latest", "--run", "--json", cwd=project).out)["rules"]
    held = rule["incomplete"]
    assert (held["missing"], held["of"], held["unit"], held["more"]) == (9, 36, "trials", 3)
    assert rule["plan"] == "sized" and rule["total"] >= 15, rule
    # What run decides: 3 more cases (45 trials, 9 missing: 20%) are no longer incomplete
    # (still undecided, exit 3); 2 more (42 trials: 21.4%) are (exit 5).
    assert _trials_run(tmp_path / "at", 15)[1] == 3
    assert _trials_run(tmp_path / "short", 14)[1] == 5


def test_with_max_missing_zero_no_size_is_given(tmp_path: Path) -> None:
    # 9 right and 1 missing under max_missing: 0: every size keeps the missing case, so the
    # gate holds the rule at every size; only re-running the missing case can do.
    project = write_project(
        tmp_path / "p", app=RUN_APP,
        cases=[{"id": f"q{i}", "input": {"ok": True if i else None},
                "expected": {"label": "ok"}} for i in range(10)],
        release="version: 1\nmax_missing: 0\nrules:\n  - {id: floor, metric: exact_label,"
                " min: 0.5}\n")
    assert run_cli("run", cwd=project).code == 5
    planned = run_cli("plan", "latest", "--run", "--json", cwd=project)
    [rule] = json.loads(planned.out)["rules"]
    assert (rule["plan"], rule["total"], rule["incomplete"]["more"]) == (
        "not_admitted", None, None), rule
    assert "no number of cases brings the share within it" in rule["message"]


TRIAL_PAIR_APP = (
    "from oloproof import current_case\n\n"
    "def cand(case_input):\n"
    "    current_case().record_usage(input_tokens=100, output_tokens=20, cost_usd=0.002)\n"
    "    return {'label': 'ok' if case_input['n'] % 5 else 'no'}\n\n"
    "def base(case_input):\n"
    "    current_case().record_usage(input_tokens=50, output_tokens=10, cost_usd=0.001)\n"
    "    return {'label': 'ok' if case_input['n'] % 3 else 'no'}\n")


def test_a_comparison_of_runs_over_trials_is_priced_for_every_trial(tmp_path: Path) -> None:
    # Two runs of 3 trials per case: compare pairs trial 0, but each case to come is run 3
    # times by each side. The plan priced a case at trial 0's figures, a third of its cost:
    # $0.003 and 180 tokens a case where the runs spend $0.009 and 540.
    project = write_project(tmp_path / "p", app=TRIAL_PAIR_APP, cases=[
        {"id": f"q{i:02d}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(30)])
    config = (project / "oloproof.yaml").read_text()
    (project / "oloproof.yaml").write_text(config.replace("app:answer", "app:cand"))
    (project / "baseline.yaml").write_text(config.replace("app:answer", "app:base"))
    (project / "compare.yaml").write_text(
        "version: 1\nrules:\n  - {id: better, kind: superiority, metric: exact_label}\n")
    base = RUN_ID.search(run_cli("run", "--config", "baseline.yaml", "--trials", "3",
                                 cwd=project).text)
    cand = RUN_ID.search(run_cli("run", "--trials", "3", cwd=project).text)
    assert base and cand
    made = run_cli("compare", cand.group(1), base.group(1), "--json", cwd=project)
    assert made.code == 3, made.text
    planned = run_cli("plan", json.loads(made.out)["comparison_id"], "--json", cwd=project)
    assert planned.code == 0, planned.text
    doc = json.loads(planned.out)
    [rule] = doc["rules"]
    assert rule["plan"] == "sized" and rule["more"] > 0, rule
    assert rule["cost_usd"] == pytest.approx(rule["more"] * 3 * (0.002 + 0.001))
    assert rule["tokens"] == {"input": pytest.approx(rule["more"] * 3 * 150),
                              "output": pytest.approx(rule["more"] * 3 * 30)}
    assert any("runs 3 trials in the candidate and 3 in the baseline" in line
               for line in rule["assuming"]), rule["assuming"]
    assert (doc.get("candidate_trials"), doc.get("baseline_trials")) == (3, 3)
