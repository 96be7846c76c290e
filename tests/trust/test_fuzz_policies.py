"""Issue 25: generated policies and data. ALLOW must be earned whatever the rules say.

Each example is a whole project generated from a seed: a suite (3 to 40 cases, languages in
the metadata, some cases without ``expected`` or without ``days``), a system whose cases
answer right, wrong, without the field, out of the range, or raise (in runs long enough to
stop the run as an outage, or not), sometimes repeated trials; and a release policy of
rules drawn at and beyond the edges (rates ``min: 0`` … ``max: 1``, MEAN thresholds inside,
at and beyond the declared range, budgets from 0 to more than the suite, groups that exist
and groups that do not, ``each_group``, aggregates over trials, families), random
``block_on`` / ``warn_on`` sets and ``max_missing``, sometimes no rules at all or an
evaluator whose field is a typo.

Whatever was generated, the outcome must be one of: refused (a configuration error, exit 2,
nothing stored), or a stored run whose exit code is the contract's (0, 1, 3, 4, 5) and, when
it is 0:

- every rule that does not warn rests on at least one observed case (or trial) of its own
  scope, counted here from the stored cases, independently of the decision code;
- every rule that PASSes could have failed: the same rule, decided by the product's own
  procedure on the outcome most against it over its whole scope (every case failing a floor,
  passing a ceiling, scoring at the end of the range), is a FAIL; for a plain rate the
  interval of that outcome is also recomputed here with scipy.

How it is bounded: 520 projects in-process through :func:`oloproof.run` (a subprocess each
would cost about half a second of interpreter start alone), in 13 chunks of 40 so that
pytest-xdist can spread them, and 30 of them again through the real CLI in subprocesses (each
run, then its stored run read back). Suites are small (5 to 60 cases, up to 3 trials) and the
system answers at once. Measured on the 2-core test machine while others ran their suites
(load average 17): 137 s wall for the file with one worker, 37 s of CPU in all, about a third
of it the 30 CLI runs. Of the 520: 194 refused at load, 92 exit 0 (83 of them with a PASS),
124 exit 1, 63 exit 3, 47 exit 5; each chunk must reach every kind of outcome. Seeds are
fixed: a failure names its seed and the generated files, and reproduces.
"""

from __future__ import annotations

import json
import random
import sqlite3
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import beta
from tests.conftest import run_cli

import oloproof
from oloproof.enums import GateAction, MetricKind, RuleState
from oloproof.evidence import CriterionEvidence
from oloproof.policy.decide import decide_run
from oloproof.project.config import ReleasePolicy

pytestmark = pytest.mark.slow

CHUNKS = 13
PER_CHUNK = 40
CLI_PROJECTS = 30
RANGE = (0.0, 10.0)

APP = '''
from oloproof import system

@system(name="fuzz", version="1")
def answer(inp):
    how = inp["how"]
    if how == "raise":
        raise RuntimeError("the model is down")
    if how == "nofield":
        return {"other": 1}
    return {"label": "ok" if how == "right" else "no", "days": inp["days"]}
'''

EVALUATORS = """\
  - type: exact_match
    criterion: exact_label
    field: {field}
    group_by: [lang]
  - type: absolute_error
    criterion: days_error
    field: days
    range: [0, 10]
    group_by: [lang]
"""

STATES = ["FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW"]
# Thresholds: mostly where a rule can go either way, often at and beyond the edges.
FLOORS = [0.3, 0.5, 0.6, 0.7, 0.8, 0.9]
CEILINGS = [0.05, 0.1, 0.2, 0.3, 0.5]
RATE_EDGES = [0, 0.001, 0.02, 0.98, 0.999, 1]
MEAN_FLOORS = [0.5, 1, 2]
MEAN_CEILINGS = [2, 4, 6, 8]
MEAN_EDGES = [-1, 0, 9.99, 10, 12]


@dataclass
class Generated:
    seed: int
    cases: list[dict[str, Any]]
    config: str
    release: str
    trials: int
    rules: list[dict[str, Any]] = field(default_factory=list)

    def write(self, root: Path) -> Path:
        root.mkdir(parents=True)
        (root / "app.py").write_text(APP)
        (root / "data").mkdir()
        (root / "data" / "cases.jsonl").write_text(
            "".join(json.dumps(c) + "\n" for c in self.cases))
        (root / "oloproof.yaml").write_text(self.config)
        (root / "release.yaml").write_text(self.release)
        return root

    def shown(self) -> str:
        return (f"seed {self.seed}, trials {self.trials}\n--- oloproof.yaml\n{self.config}"
                f"--- release.yaml\n{self.release}--- cases\n"
                + "\n".join(json.dumps(c) for c in self.cases))


def _bound(rng: random.Random, rate: bool) -> tuple[str, float]:
    # A floor on a pass rate, a ceiling on an error, mostly; the other way round sometimes.
    side = ("min" if rate else "max") if rng.random() < 0.8 else ("max" if rate else "min")
    if rng.random() < 0.2:
        return side, rng.choice(RATE_EDGES if rate else MEAN_EDGES)
    if rate:
        return side, rng.choice(FLOORS if side == "min" else CEILINGS)
    return side, rng.choice(MEAN_FLOORS if side == "min" else MEAN_CEILINGS)


def generate(seed: int) -> Generated:
    rng = random.Random(seed)
    n = rng.choice([5, 8, 12, 20, 30, 40, 40, 60])
    langs = rng.sample(["en", "fr", "de"], rng.randint(1, 3))
    weights = {"right": 2 + 6 * rng.random(), "wrong": rng.random(),
               "raise": rng.random() ** 3, "nofield": rng.random() ** 4}
    if rng.random() < 0.1:
        weights = {"raise": 1.0}  # an outage
    cases = []
    without_expected = rng.random() < 0.03
    for i in range(n):
        how = rng.choices(list(weights), list(weights.values()))[0]
        days = rng.randint(0, 10)
        # The answer's days: near the expected ones, at times out of the range's reach.
        answered = days + rng.choice([0, 0, 0, 1, -1, 2]) if rng.random() < 0.95 else 25
        case: dict[str, Any] = {"id": f"c{i:02d}",
                                "input": {"n": i, "how": how, "days": answered}}
        if not without_expected:
            expected: dict[str, Any] = {"label": "ok"}
            if rng.random() < 0.9:
                expected["days"] = days
            case["expected"] = expected
        if rng.random() < 0.95:
            case["metadata"] = {"lang": rng.choice(langs)}
        cases.append(case)
    trials = rng.choice([1, 1, 1, 1, 2, 3])
    typo = rng.random() < 0.03
    config = textwrap.dedent(f"""\
        version: 1
        project: fuzz
        dataset: data/cases.jsonl
        system:
          name: fuzz
          version: "1"
          callable: app:answer
        concurrency:
          system: {rng.choice([1, 2, 4])}
          judge: 1
        trials: {trials}
        evaluators:
        """) + EVALUATORS.format(field="lable" if typo else "label")

    rules: list[dict[str, Any]] = []
    families: dict[str, str] = {}
    count = 0 if rng.random() < 0.03 else rng.choice([1, 1, 1, 2, 2, 3])
    for index in range(count):
        rule: dict[str, Any] = {"id": f"r{index}"}
        shape = rng.random()
        if shape < 0.45:
            rule["metric"] = "exact_label"
            side, bound = _bound(rng, True)
            rule[side] = bound
        elif shape < 0.7:
            rule["metric"] = "days_error"
            side, bound = _bound(rng, False)
            rule[side] = bound
        else:
            rule["metric"] = "exact_label"
            rule["kind"] = "observed_count"
            if rng.random() < 0.85:
                rule["max_failures"] = rng.choice([0, 1, 2, n // 4, n // 2])
            else:
                rule["max_failures"] = rng.choice([n - 1, n, n + 3, n * trials - 1,
                                                   n * trials, 1000])
        where = rng.random()
        if where < 0.15:
            rule["group"] = {"lang": rng.choice(langs) if rng.random() < 0.9 else "xx"}
        elif where < 0.25:
            rule["each_group"] = True
        if trials > 1 and rule["metric"] == "exact_label" and rng.random() < 0.4:
            rule["aggregate"] = rng.choice(["pass_at_k", "pass_all_k", "flaky_share"])
        if "kind" not in rule and rng.random() < 0.25:
            name = rng.choice(["f1", "f2"])
            families[name] = rng.choice(["holm", "bonferroni", "none"])
            rule["family"] = name
        rules.append(rule)
    block_on = [s for s in STATES if rng.random() < (0.95 if s == "FAIL" else 0.7)]
    warn_on = [s for s in STATES if s not in block_on and rng.random() < 0.6]
    lines = ["version: 1", f"confidence_level: {rng.choice([0.9, 0.95, 0.95, 0.99])}"]
    if rng.random() < 0.7:
        lines.append(f"block_on: {json.dumps(block_on)}")
        lines.append(f"warn_on: {json.dumps(warn_on)}")
    if rng.random() < 0.5:
        lines.append(f"max_missing: {rng.choice([0, 0.1, 0.2, 0.5, 1])}")
    if families:
        lines.append("families:")
        lines += [f"  {name}: {{multiplicity: {how}}}" for name, how in families.items()]
    lines.append("rules:" + ("" if rules else " []"))
    lines += [f"  - {json.dumps(rule)}" for rule in rules]
    return Generated(seed, cases, config, "\n".join(lines) + "\n", trials, rules)


# -- what is checked, counted from the stored cases --------------------------------------


def _outcomes(case: oloproof.api.CaseResult, criterion: str) -> list[tuple[str, Any, Any]]:
    """Every trial's (status, passed, score) for one criterion, trial 0 first."""
    out = []
    for judgments in [case.judgments, *(t.judgments for t in case.trials)]:
        j = judgments.get(criterion)
        out.append(("MISSING", None, None) if j is None else (j.status, j.passed, j.score))
    return out


def _observed(status: str, passed: Any, score: Any, kind: MetricKind) -> bool:
    if status != "OK":
        return False
    return passed is not None if kind == MetricKind.BINARY else score is not None


def _scope(cases: list[Any], decision_metric: str) -> tuple[str, str | None, list[Any]]:
    """(criterion, aggregate, cases of the decision's group) for a decision's metric name:
    ``exact_label``, ``exact_label[lang=fr]``, ``exact_label[pass@3]``,
    ``exact_label[lang=fr][pass^3]``."""
    criterion, _, rest = decision_metric.partition("[")
    aggregate = None
    group = None
    for part in rest.rstrip("]").split("]["):
        if not part:
            continue
        if part.startswith("pass@"):
            aggregate = "pass_at_k"
        elif part.startswith("pass^"):
            aggregate = "pass_all_k"
        elif part == "flaky":
            aggregate = "flaky_share"
        else:
            group = part.split("=", 1)[1]
    inside = [c for c in cases
              if group is None
              or (c.metadata or {}).get("lang", None) == (None if group == "null" else group)]
    return criterion, aggregate, inside


def _observed_units(cases: list[Any], decision_metric: str, trials: int) -> int:
    """How many observed cases (or trials) a decision's scope holds, from the stored cases."""
    criterion, aggregate, inside = _scope(cases, decision_metric)
    kind = MetricKind.BINARY if criterion == "exact_label" else MetricKind.MEAN
    count = 0
    for case in inside:
        outcomes = _outcomes(case, criterion)
        seen = [o for o in outcomes if _observed(*o, kind)]
        if aggregate is None and kind == MetricKind.BINARY:
            count += len(seen)
        elif aggregate is None:  # a MEAN over trials: a case counts when every trial does
            count += 1 if trials == 1 and seen else int(bool(seen) and len(seen) == len(outcomes))
        else:
            passes = [o[1] for o in seen]
            whole = len(seen) == len(outcomes)
            if aggregate == "pass_at_k":
                count += any(passes) or (whole and bool(seen))
            elif aggregate == "pass_all_k":
                count += (False in passes) or (whole and bool(seen))
            else:
                count += (True in passes and False in passes) or (whole and bool(seen))
    return count


def _could_fail(decision: Any, policy: ReleasePolicy, cases: list[Any], trials: int) -> bool:
    """The same rule, decided by the product on the outcome most against it over its whole
    scope (every case of its group, whatever was missing or observed): FAIL?

    At the level the rule could be decided at: its own under Bonferroni; the policy's under
    Holm (the last step of the procedure decides at the policy's level) or alone."""
    criterion, aggregate, inside = _scope(cases, decision.metric)
    family = next((r.get("family") for r in policy.dump()["rules"]
                   if r["id"] == decision.rule.split("[")[0]), None)
    level = float(policy.confidence_level)
    if family is not None and policy.families[family].multiplicity == "bonferroni":
        level = float(decision.confidence_level)
    scope = len(inside)
    rate = criterion == "exact_label"
    direction, threshold = decision.direction, decision.threshold
    if decision.kind == "observed_count":
        return bool(scope * (trials if aggregate is None else 1) > decision.threshold)
    worst = CriterionEvidence("w", MetricKind.BINARY if rate else MetricKind.MEAN,
                              None if rate else RANGE)
    if rate:
        passed = direction == "max"
        if trials > 1 and aggregate is None:
            worst.trials = trials
            for i in range(scope):
                worst.add_case(str(i), [("OK", passed, None)] * trials)
        else:
            worst.passed, worst.failed = (scope, 0) if passed else (0, scope)
        if trials == 1 or aggregate is not None:
            # The plain rate's interval, recomputed with scipy (Clopper-Pearson).
            alpha = 1 - level
            if passed:
                lower = beta.ppf(alpha / 2, scope, 1) if scope else 0.0
                independent = lower > threshold
            else:
                upper = beta.ppf(1 - alpha / 2, 1, scope) if scope else 1.0
                independent = upper < threshold
    else:
        score = RANGE[1] if direction == "max" else RANGE[0]
        if trials > 1:
            worst.trials = trials
            for i in range(scope):
                worst.add_case(str(i), [("OK", None, score)] * trials)
        else:
            worst.scores = [score] * scope
    rule = {"id": "w", "metric": "w", direction: threshold}
    one = ReleasePolicy.validate({
        "version": 1, "confidence_level": level, "max_missing": 1,
        "rules": [rule],
    })
    [again], _ = decide_run({"w": worst}, one)
    product = again.state == RuleState.FAIL
    if rate and (trials == 1 or aggregate is not None):
        assert product == bool(independent), (decision, scope, product, independent)
    return product


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    allowed_with_pass: int = 0


def check(gen: Generated, result: oloproof.RunResult, tally: Tally) -> None:
    what = gen.shown()
    assert result.exit_code in (0, 1, 3, 4, 5), what
    tally.outcomes[f"exit {result.exit_code}"] += 1
    if result.exit_code != 0:
        return
    assert result.completeness == "COMPLETE" and result.status == "DECIDED", what
    cases = list(result.cases())
    policy = _policy(gen)
    for d in result.decisions:
        assert d.action != GateAction.BLOCK, (d, what)
        assert not d.incomplete, (d, what)
        if d.action != GateAction.WARN:
            assert _observed_units(cases, d.metric, gen.trials) >= 1, (
                "ALLOW on no observed case", d, what)
        if d.state == RuleState.PASS:
            assert _could_fail(d, policy, cases, gen.trials), ("a PASS that could not fail", d, what)
    if any(d.state == RuleState.PASS for d in result.decisions):
        tally.allowed_with_pass += 1


def _policy(gen: Generated) -> ReleasePolicy:
    import yaml

    return ReleasePolicy.validate(yaml.safe_load(gen.release))


def run_one(gen: Generated, root: Path, tally: Tally) -> None:
    gen.write(root)
    try:
        result = oloproof.run(root)
    except oloproof.ConfigError:
        tally.outcomes["refused"] += 1
        store = root / ".oloproof" / "store.sqlite"
        if store.exists():
            conn = sqlite3.connect(store)
            try:
                assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,), gen.shown()
            finally:
                conn.close()
        return
    check(gen, result, tally)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_policies_in_process(tmp_path: Path, chunk: int) -> None:
    tally = Tally()
    for i in range(PER_CHUNK):
        seed = 25_000 + chunk * PER_CHUNK + i
        run_one(generate(seed), tmp_path / f"p{seed}", tally)
    # The generator must reach every kind of outcome, or the checks above prove little.
    assert tally.outcomes["refused"] >= 4, tally
    # (Bounded MEAN rules decided by the betting interval, issue 33, allow less often at
    # the generator's 8-40 cases than Student t did: 2 to 3 of 40 projects per chunk.)
    assert tally.outcomes["exit 0"] >= 2 and tally.allowed_with_pass >= 2, tally
    assert sum(tally.outcomes[f"exit {c}"] for c in (1, 3, 5)) >= 4, tally


def test_generated_policies_through_the_cli(tmp_path: Path) -> None:
    """30 of the generated projects through the real CLI: the exit code is the stored
    run's, exit 2 stores nothing, and an exit 0 passes the same checks."""
    tally = Tally()
    for seed in range(25_000, 25_000 + CHUNKS * PER_CHUNK, CHUNKS * PER_CHUNK // CLI_PROJECTS):
        gen = generate(seed)
        root = gen.write(tmp_path / f"p{seed}")
        done = run_cli("run", cwd=root)
        assert "Traceback" not in done.text, (done.text, gen.shown())
        if done.code == 2:
            tally.outcomes["refused"] += 1
            assert not (root / ".oloproof" / "store.sqlite").exists() or _no_runs(root), gen.shown()
            continue
        result = oloproof.read_run("latest", root)
        assert result.exit_code == done.code, (done.text, gen.shown())
        check(gen, result, tally)
    assert tally.outcomes["refused"] >= 2 and tally.outcomes["exit 0"] >= 2, tally


def _no_runs(root: Path) -> bool:
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        return bool(conn.execute("SELECT count(*) FROM runs").fetchone() == (0,))
    finally:
        conn.close()
