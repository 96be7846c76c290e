"""``oloproof plan RUN_ID --run`` (SPEC §7): the sizes it prints, their prices, its refusals.

Sizes are checked against a brute-force search over N with scipy's beta.ppf (the
Clopper–Pearson limits) and t.ppf (the approximate MEAN sizes), through the CLI on real runs
and through :func:`oloproof.analysis.plan.plan_run`, the function the CLI calls.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from tests.conftest import run_cli, write_project
from tests.stats import _betting_reference as betting_reference

from oloproof.analysis.plan import plan_run
from oloproof.policy.decide import decide_run
from oloproof.project.config import ReleasePolicy
from oloproof.render.plan import fmt_duration
from oloproof.store.reader import CriterionEvidence

RUN_ID = re.compile(r"Run (run_[0-9A-Z]{26})")
SIZED = re.compile(
    r"^(?P<rule>[\w.-]+): about (?P<more>\d+) more cases would decide it, if the observed"
    r" (?:rate holds|mean and spread hold|mix of scores holds)"
    r" \((?P<total>\d+) in total(?P<approx>; approximate)?\)$",
    re.MULTILINE,
)


# -- brute force ------------------------------------------------------------------------------


def _round_half_even(k: int, n: int, big_n: np.ndarray) -> np.ndarray:
    q, r = np.divmod(k * big_n, n)
    twice = 2 * r
    return q + ((twice > n) | ((twice == n) & (q % 2 == 1))).astype(np.int64)


def brute_binary(
    k: int, n: int, t: float, direction: str, level: float = 0.95, limit: int = 60_000
) -> int | None:
    """The first N > n at which CP of round(k/n N) of N decides the rule (scipy beta.ppf)."""
    half = (1.0 - level) / 2.0
    start = n + 1
    while start <= limit:
        big_n = np.arange(start, min(start + 4000, limit + 1), dtype=np.int64)
        kk = _round_half_even(k, n, big_n)
        with np.errstate(all="ignore"):
            lower = np.where(kk > 0, stats.beta.ppf(half, np.maximum(kk, 1), big_n - kk + 1), 0.0)
            upper = np.where(
                kk < big_n, stats.beta.ppf(1 - half, kk + 1, np.maximum(big_n - kk, 1)), 1.0
            )
        if direction == "min":
            decided = (lower >= t) | (upper < t)
        else:
            decided = (upper <= t) | (lower > t)
        if decided.any():
            return int(big_n[int(np.argmax(decided))])
        start = int(big_n[-1]) + 1
    return None


def brute_mean(
    mean: float, sd: float, n: int, t: float, direction: str, rng: tuple[float, float] | None,
    level: float = 0.95, missing: int = 0,
) -> int:
    """The first total N (``missing`` of them held missing) whose t interval decides, the
    observed mean and sd held fixed and the missing scores put at every vertex of the range
    (j at the top, the rest at the bottom): the worst case, by brute force."""
    seen = np.arange(n + 1, n + 200_000)
    big_n = seen + missing
    q = stats.t.ppf(1 - (1 - level) / 2, big_n - 1)
    lower = np.full(seen.shape, np.inf)
    upper = np.full(seen.shape, -np.inf)
    for j in range(missing + 1):
        extra = [] if rng is None else [rng[1]] * j + [rng[0]] * (missing - j)
        total = seen * mean + sum(extra)
        m = total / big_n
        ss = (seen - 1) * sd * sd + seen * (mean - m) ** 2 + sum((x - m) ** 2 for x in extra)
        half = q * np.sqrt(ss / (big_n - 1)) / np.sqrt(big_n)
        lower = np.minimum(lower, m - half)
        upper = np.maximum(upper, m + half)
    if direction == "min":
        decided = (lower >= t) | (upper < t)
    else:
        decided = (upper <= t) | (lower > t)
    assert decided.any()
    return int(big_n[int(np.argmax(decided))])


# -- the support_bot example ---------------------------------------------------------------


def _case_times(store: Path, run_id: str) -> list[float]:
    conn = sqlite3.connect(store)
    rows = conn.execute(
        "SELECT c.latency_ms, (SELECT total(j.latency_ms) FROM run_judgments j"
        " WHERE j.run_id = c.run_id AND j.case_id = c.case_id) FROM run_cases c"
        " WHERE c.run_id = ?",
        (run_id,),
    ).fetchall()
    conn.close()
    return [(a + b) / 1000.0 for a, b in rows]


def test_support_bot_plan_is_the_spec_output(tmp_path: Path) -> None:
    project = tmp_path / "bot"
    assert run_cli("init", str(project), "--example", "support_bot", cwd=tmp_path).code == 0
    run = run_cli("run", cwd=project)
    assert run.code == 3, run.text
    m = RUN_ID.search(run.out)
    assert m
    run_id = m.group(1)
    # run follows each undecided rule with the plan command that sizes it, on its own line
    assert f"  exact-label-floor: size it with\n    oloproof plan {run_id} --run\n" in run.out

    plan = run_cli("plan", run_id, "--run", cwd=project)
    assert plan.code == 0, plan.text
    lines = plan.out.splitlines()
    assert lines[0] == f"Run {run_id}"
    assert lines[1] == "  observed  18 cases"
    assert lines[2] == ""
    assert lines[3] == (
        "exact-label-floor: about 1614 more cases would decide it, if the observed rate holds"
        " (1632 in total)"
    )
    times = _case_times(project / ".oloproof" / "store.sqlite", run_id)
    expected_time = f"{fmt_duration(1614 * min(times))} – {fmt_duration(1614 * max(times))}"
    if fmt_duration(1614 * min(times)) == fmt_duration(1614 * max(times)):
        expected_time = fmt_duration(1614 * min(times))
    assert lines[4] == f"  time      {expected_time}"
    assert re.fullmatch(r"  time      (<1s|\d+s|\d+m \d+s)( – (<1s|\d+s|\d+m \d+s))?", lines[4])
    assert lines[5] == "  tokens    none reported by this run's providers"
    assert lines[6] == "  assuming  the cases to come resemble the 18 already run"
    assert lines[7] == (
        "            cases run one after another; concurrency divides the time and not the cost"
    )
    # Decided rules: said, and nothing planned.
    assert "valid-format: decided (PASS); nothing to plan" in plan.out
    assert "pii-free: decided (PASS); nothing to plan" in plan.out

    # `latest` works with --run; --json is one document with the same figures.
    as_json = run_cli("plan", "latest", "--run", "--json", cwd=project)
    assert as_json.code == 0, as_json.text
    doc = json.loads(as_json.out)
    assert doc["run_id"] == run_id and doc["observed_cases"] == 18
    rule = doc["rules"][0]
    assert (rule["rule"], rule["plan"], rule["more"], rule["total"]) == (
        "exact-label-floor", "sized", 1614, 1632,
    )
    assert rule["method"].startswith("Clopper-Pearson")
    assert rule["time_s"] == pytest.approx([1614 * min(times), 1614 * max(times)])
    assert rule["tokens"] is None and rule["cost_usd"] is None
    assert [r["plan"] for r in doc["rules"][1:]] == ["decided", "decided"]


# -- other counts and bars, through the CLI ---------------------------------------------------

GRID_APP = """
from oloproof import system

@system(name="grid", version="1")
def answer(case_input):
    i = case_input["i"]
    return {"a": "ok" if i < 15 else "no", "b": "ok" if i < 14 else "no",
            "c": "ok" if i < 11 else "no"}
"""

GRID_EVALUATORS = """
- {type: exact_match, criterion: a, field: a}
- {type: exact_match, criterion: b, field: b}
- {type: exact_match, criterion: c, field: c}
"""

GRID_RELEASE = """\
version: 1
rules:
  - {id: a-floor, metric: a, min: 0.6}
  - {id: a-ceiling, metric: a, max: 0.8}
  - {id: a-decided, metric: a, min: 0.4}
  - {id: b-on-the-bar, metric: b, min: 0.7}
  - {id: c-ceiling, metric: c, max: 0.5}
"""


def test_sizes_printed_equal_brute_force(tmp_path: Path) -> None:
    cases = [{"id": f"q{i:02d}", "input": {"i": i}, "expected": {"a": "ok", "b": "ok", "c": "ok"}}
             for i in range(20)]
    project = write_project(
        tmp_path / "grid", app=GRID_APP, cases=cases, evaluators=GRID_EVALUATORS,
        release=GRID_RELEASE,
    )
    run = run_cli("run", cwd=project)
    assert run.code == 3, run.text
    plan = run_cli("plan", "latest", "--run", cwd=project)
    assert plan.code == 0, plan.text
    sized = {m["rule"]: (int(m["more"]), int(m["total"])) for m in SIZED.finditer(plan.out)}
    expected = {
        "a-floor": brute_binary(15, 20, 0.6, "min"),
        "a-ceiling": brute_binary(15, 20, 0.8, "max"),
        "c-ceiling": brute_binary(11, 20, 0.5, "max"),
    }
    assert set(sized) == set(expected), plan.out
    for rule, total in expected.items():
        assert total is not None
        assert sized[rule] == (total - 20, total), rule
    assert "a-decided: decided (PASS); nothing to plan" in plan.out
    # 14 of 20 is exactly 70%: no size decides it, and brute force agrees.
    assert (
        "b-on-the-bar: the observed rate, 70.0%, sits exactly on the bar (min 70.0%):"
        " no number of cases decides it, if it holds"
    ) in plan.out
    assert brute_binary(14, 20, 0.7, "min", limit=20_000) is None
    assert plan.out.count("  assuming  the cases to come resemble the 20 already run") == 3


def _plan_for(k: int, n: int, t: float, direction: str, level: float) -> dict[str, object]:
    rule = {"id": "r", "metric": "m", direction: t}
    policy = ReleasePolicy.validate(
        {"version": 1, "confidence_level": level, "rules": [rule]}
    )
    evidence = {"m": CriterionEvidence("m", "BINARY", None, passed=k, failed=n - k)}
    decisions, _ = decide_run(evidence, policy)
    return plan_run([], evidence, decisions, policy)[0].to_json()


GRID = [
    (k, n, t, direction, level)
    for (k, n) in [(3, 5), (13, 18), (17, 25), (33, 40), (48, 60), (9, 10)]
    for t in (0.5, 0.7, 0.8, 0.9, 0.95)
    for direction in ("min", "max")
    for level in (0.9, 0.95)
]


def test_plan_function_grid_equals_brute_force() -> None:
    checked = on_bar = 0
    for k, n, t, direction, level in GRID:
        entry = _plan_for(k, n, t, direction, level)
        if entry["plan"] == "decided":
            continue
        if entry.get("reason") == "evidence_cannot_fail":
            # A pass that no outcome of n cases could have failed: not a width to size.
            assert entry["plan"] == "refused" and f"{n} cases in scope" in entry["message"]
            continue
        if Fraction(k, n) == Fraction(t).limit_denominator(1000):
            assert entry["plan"] == "on_the_bar", (k, n, t, direction)
            on_bar += 1
            continue
        expected = brute_binary(k, n, t, direction, level)
        if expected is None:
            assert entry["plan"] == "beyond_limit" or int(entry["total"]) > 60_000  # type: ignore[arg-type]
            continue
        assert entry["plan"] == "sized", (k, n, t, direction, level, entry)
        assert entry["total"] == expected, (k, n, t, direction, level)
        assert entry["more"] == expected - n
        checked += 1
    assert checked >= 40 and on_bar >= 1


# -- MEAN rules, missing cases, observed_count rules, refusals ---------------------------------

MEAN_APP = """
from oloproof import system

ERRORS = [0.0, 1.0, 2.0, 1.5, 0.5, 3.0, 1.0, 2.5, 0.0, 1.0, 2.0, 0.5]

@system(name="days", version="1")
def answer(case_input):
    i = case_input["i"]
    if i == 12:
        raise ValueError("this one fails")
    label = "ok" if i != 3 else "no"
    return {"days": case_input["truth"] + ERRORS[i], "label": label}
"""

MEAN_EVALUATORS = """
- {type: absolute_error, criterion: days_error, field: days, expected_field: truth, range: [0, 30]}
- {type: exact_match, criterion: exact_label, field: label}
"""

MEAN_RELEASE = """\
version: 1
rules:
  - {id: error-budget, metric: days_error, max: 1.5}
  - {id: label-count, metric: exact_label, kind: observed_count, max_failures: 1}
"""

ERRORS = [0.0, 1.0, 2.0, 1.5, 0.5, 3.0, 1.0, 2.5, 0.0, 1.0, 2.0, 0.5]


def test_mean_rule_is_sized_approximately_and_count_rule_not_admitted(tmp_path: Path) -> None:
    cases = [
        {"id": f"d{i:02d}", "input": {"i": i, "truth": 10 + i},
         "expected": {"truth": 10 + i, "label": "ok"}}
        for i in range(13)
    ]
    project = write_project(
        tmp_path / "days", app=MEAN_APP, cases=cases, evaluators=MEAN_EVALUATORS,
        release=MEAN_RELEASE,
    )
    run = run_cli("run", cwd=project)
    assert run.code == 3, run.text
    plan = run_cli("plan", "latest", "--run", cwd=project)
    assert plan.code == 0, plan.text
    sized = {m["rule"]: m for m in SIZED.finditer(plan.out)}
    assert set(sized) == {"error-budget"}, plan.out
    m = sized["error-budget"]
    assert m["approx"] == "; approximate"
    mean = math.fsum(ERRORS) / len(ERRORS)
    # days_error declares [0, 30]: sized by the betting interval that decides it (issue 33),
    # on N cases holding the observed mix of errors, the 13th case (it failed) still
    # missing at its worst; checked against every N, with the numpy reference.
    total = brute_betting(ERRORS, 1.5 / 30.0, "max", missing=1)
    assert (int(m["more"]), int(m["total"])) == (total - 13, total)
    assert "if the observed mix of scores holds" in plan.out
    # The header counts the 12 cases with an output, not the 13 stored.
    assert "\n  observed  12 cases · 1 missing (the call failed)\n" in plan.out, plan.out
    doc = json.loads(run_cli("plan", "latest", "--run", "--json", cwd=project).out)
    assert (doc["observed_cases"], doc["missing_cases"]) == (12, 1)
    assert f"with the mix of its 12 scores (mean {mean:.4g})" in plan.out
    assert "approximate: the betting interval, which decides the rule" in plan.out
    # The run had a missing case: it is held missing, and the plan says what re-running it
    # would change.
    assert "the 1 missing case of this run stays missing and counts against it" in plan.out
    resolved = brute_betting(ERRORS, 1.5 / 30.0, "max", missing=0)
    assert f"if it resembles the rest, {resolved - 13} more would decide it" in plan.out
    # observed_count: 1 failure + 1 missing > 1 allowed, 1 failure <= 1: undecided, not sized.
    assert "label-count: sizing is not admitted for an observed_count rule" in plan.out
    assert "1 missing case could be failures: run them again" in plan.out

    doc = json.loads(run_cli("plan", "latest", "--run", "--json", cwd=project).out)
    entry = doc["rules"][0]
    assert entry["approximate"] is True and entry["total"] == total
    assert entry["observed"]["mean"] == pytest.approx(mean)
    assert doc["rules"][1]["plan"] == "not_admitted"


def brute_betting(errors: list[float], bar: float, direction: str, missing: int) -> int:
    """The first total N > 13 whose projected betting interval (errors on [0, 30] as
    units) decides a rule at ``bar`` (on [0, 1]): the capital at the bar reaches 2/alpha on
    the side that decides."""
    units = np.array(errors) / 30.0
    threshold = math.log(40.0)
    for total in range(14, 20_000):
        above = betting_reference.projected_log_capital(units, total, missing, bar, +1)
        below = betting_reference.projected_log_capital(units, total, missing, bar, -1)
        if above >= threshold or below >= threshold:
            assert direction == "max"
            return total
    raise AssertionError("no size found")


REFUSE_APP = """
from oloproof import system

@system(name="days", version="1")
def answer(case_input):
    return {"days": 3}
"""


def test_mean_rule_without_per_case_values_is_refused_in_the_seed_form(tmp_path: Path) -> None:
    cases = [
        {"id": "only", "input": {}, "expected": {"days": 2}},
        {"id": "no-truth-1", "input": {}, "expected": {}},
        {"id": "no-truth-2", "input": {}, "expected": {}},
    ]
    project = write_project(
        tmp_path / "refuse", app=REFUSE_APP, cases=cases,
        evaluators="- {type: absolute_error, criterion: days_error, field: days}",
        release="version: 1\nrules:\n  - {id: error-budget, metric: days_error, max: 1.5}\n",
    )
    run = run_cli("run", cwd=project)
    assert run.code == 3, run.text
    run_id = RUN_ID.search(run.out).group(1)  # type: ignore[union-attr]
    plan = run_cli("plan", run_id, "--run", cwd=project)
    assert plan.code == 2, plan.text
    assert plan.out.splitlines() == [
        f"Run {run_id}: no sample size can be computed for a rule that did not decide.",
        (
            "  error-budget: sizing a run rule is admitted for binary rates only, and days_error"
            " is a MEAN metric: this run stores 1 observed score for it, and sizing needs the"
            " mean and spread of at least two"
        ),
    ]


USAGE_APP = """
from oloproof import current_case, system

@system(name="priced", version="1")
def answer(case_input):
    current_case().record_usage(input_tokens=100, output_tokens=20, cost_usd=0.002)
    return {"label": "ok" if case_input["i"] < 13 else "no"}
"""


def test_tokens_and_cost_are_priced_from_recorded_usage(tmp_path: Path) -> None:
    cases = [{"id": f"u{i:02d}", "input": {"i": i}, "expected": {"label": "ok"}}
             for i in range(18)]
    project = write_project(
        tmp_path / "priced", app=USAGE_APP, cases=cases,
        release="version: 1\nrules:\n  - {id: exact-label-floor, metric: exact_label, min: 0.7}\n",
    )
    assert run_cli("run", cwd=project).code == 3
    plan = run_cli("plan", "latest", "--run", cwd=project)
    assert plan.code == 0, plan.text
    assert "exact-label-floor: about 1614 more cases would decide it" in plan.out
    assert "  tokens    about 193,680 (161,400 in · 32,280 out)" in plan.out
    assert "  cost      about $3.23" in plan.out
    # A rerun takes everything from the cache; the stored usage is the original calls'.
    assert run_cli("run", cwd=project).code == 3
    again = run_cli("plan", "latest", "--run", cwd=project)
    assert "  tokens    about 193,680 (161,400 in · 32,280 out)" in again.out


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "<1s"), (0.999, "<1s"), (1.0, "1s"), (26.6, "27s"), (190.0, "3m 10s"),
     (3720.0, "1h 2m"), (59.6, "1m 0s"), (90061.0, "25h 1m")],
)
def test_durations(seconds: float, text: str) -> None:
    assert fmt_duration(seconds) == text


def test_plan_usage_errors(tmp_path: Path) -> None:
    project = tmp_path / "bot"
    run_cli("init", str(project), "--example", "support_bot", cwd=tmp_path)
    run = run_cli("run", cwd=project)
    run_id = RUN_ID.search(run.out).group(1)  # type: ignore[union-attr]
    no_flag = run_cli("plan", run_id, cwd=project)
    assert no_flag.code == 2
    assert "add --run" in no_flag.err and "Traceback" not in no_flag.text
    assert "add --run" in run_cli("plan", "latest", cwd=project).err
    unknown = run_cli("plan", "run_01ZZZZZZZZZZZZZZZZZZZZZZZZ", "--run", cwd=project)
    assert unknown.code == 2 and "no run 'run_01ZZZZZZZZZZZZZZZZZZZZZZZZ'" in unknown.err
    unknown_cmp = run_cli("plan", "cmp_01ZZZZZZZZZZZZZZZZZZZZZZZZ", cwd=project)
    assert unknown_cmp.code == 2 and "no comparison 'cmp_01ZZZZZZZZZZZZZZZZZZZZZZZZ'" in unknown_cmp.err
    garbage = run_cli("plan", "banana", "--run", cwd=project)
    assert garbage.code == 2 and "neither a run id" in garbage.err


@pytest.mark.parametrize("icc", [None, 0.0, 0.3, 1.0])
@pytest.mark.parametrize("rate", [0.0, 1e-6, 0.4, 1 - 1e-6, 1.0])
def test_trial_fractions_at_the_ends_of_the_rate_are_the_binomial_limit(
    rate: float, icc: float | None
) -> None:
    """A run (or a shard) whose every trial passed sized more trials with log(1 - 1) and
    ended `plan` in `internal error: ValueError: math domain error`. At a rate of 0 or 1
    every case is at 0 or 1 whatever the correlation: scipy's binomial there; inside, the
    beta-binomial (scipy's betabinom) the docstring names."""
    from oloproof.analysis.plan import _trial_fractions

    k = 5
    values, weights = _trial_fractions(k, rate, icc)
    got = np.array(weights) / sum(weights)
    if icc is None or icc <= 0.0 or rate in (0.0, 1.0):
        want = stats.binom.pmf(range(k + 1), k, rate)
    elif icc >= 1.0:
        values, want = [0.0, 1.0], np.array([1 - rate, rate])
    else:
        a, b = rate * (1 / icc - 1), (1 - rate) * (1 / icc - 1)
        want = stats.betabinom.pmf(range(k + 1), k, a, b)
    assert values == ([0.0, 1.0] if icc is not None and icc >= 1.0 and rate not in (0.0, 1.0)
                      else [j / k for j in range(k + 1)])
    assert np.allclose(got, want, atol=1e-9)
