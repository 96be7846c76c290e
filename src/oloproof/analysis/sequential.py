"""Deciding a stored sequential run: the run's order replayed over what the store holds.

The same :class:`~oloproof.policy.sequential.Monitor` that stopped the run is fed the stored
cases in the run's order, from the first, until every rule is decided or the next case in the
order is not stored. Cases stored beyond that point (calls that were in flight when the run
stopped) are kept in the store, shown by ``inspect``, and never enter the decision: so
``gate`` decides a stored sequential run exactly as the run did, whatever finished first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from oloproof._records import dataclass, replace
from oloproof.enums import Completeness, MetricKind, RuleState, RunStatus
from oloproof.evidence import CriterionEvidence, Outcome, classify_outcome, group_name
from oloproof.policy.decide import Decision, MetricSummary, SequentialEvidence, decide_run
from oloproof.policy.sequential import (
    SEQUENTIAL_PAIRED,
    Baseline,
    Monitor,
    PairedTest,
    RuleResult,
    SequentialSpec,
)
from oloproof.stats.sequential import DEFAULT_MARGIN
from oloproof.store.reader import RunRecord, stored_json

if TYPE_CHECKING:
    from oloproof.evidence import LabelledScores, LabelledVerdicts
    from oloproof.project.config import ReleasePolicy
    from oloproof.store.dbapi import Connection

__all__ = [
    "SequentialReading",
    "comparison_decisions",
    "decide_sequential",
    "decide_sequential_comparison",
    "earlier_seeds",
    "load_baseline",
    "paired_decision",
    "read_sequential",
    "stored_baseline",
]


@dataclass
class SequentialReading:
    """A stored sequential run read in its order: the monitor after the prefix it read, the
    prefix's evidence (with groups), each metric's values in order, and how many of the
    stored cases lie beyond the prefix (read by no test)."""

    spec: SequentialSpec
    monitor: Monitor
    evidence: dict[str, CriterionEvidence]
    ordered: dict[str, tuple[list[float], list[float]]]
    stored: int
    beyond: int

    @property
    def fed(self) -> int:
        return self.monitor.position

    @property
    def results(self) -> dict[str, RuleResult]:
        return self.monitor.results

    def to_json(self) -> dict[str, Any]:
        """What ``run``, ``gate`` and ``inspect`` say of the reading (RunResult.sequential)."""
        done = self.monitor.done
        data: dict[str, Any] = {
            "seed": self.spec.seed, "margin": self.spec.margin,
            "cases_total": self.spec.cases_total, "read": self.fed, "stored": self.stored,
            "beyond": self.beyond, "decided": done,
            "decided_after": self.fed if done else None,
        }
        if self.monitor.baseline is not None:
            data["baseline"] = self.monitor.baseline.run_id
        return data

    def report(self) -> dict[str, Any]:
        """What the HTML report says of the reading: the figures, the sentences, and each
        rule's method (the comparison rules' too)."""
        total, fed, seed = self.spec.cases_total, self.fed, self.spec.seed
        if self.monitor.done:
            head = (f"Decided after {fed:,} of {total:,} cases, read one by one in the"
                    f" seeded order stored with the run (seed {seed}).")
        else:
            head = (f"Not every rule was decided: {fed:,} of {total:,} cases were read, one by"
                    f" one in the seeded order stored with the run (seed {seed}).")
        if self.beyond:
            were = "case that" if self.beyond == 1 else f"{self.beyond:,} cases that"
            one = self.beyond == 1
            tail = (f"The {were} finished after the decision (calls already in flight when it"
                    f" was reached) {'is' if one else 'are'} stored and listed below, but the"
                    f" decision did not read {'it' if one else 'them'}.")
        else:
            tail = "Every stored case was read by the decision."
        methods = {rule: r.method for rule, r in self.results.items()}
        methods.update({rule: p.result.method for rule, p in self.monitor.paired.items()})
        baseline = self.monitor.baseline
        return {**self.to_json(), "headline": head, "beyond_text": tail, "methods": methods,
                "baseline": baseline.run_id if baseline is not None else None}

    def describe(self) -> str:
        """One sentence on what the decision read (the report's note)."""
        total = self.spec.cases_total
        against = ("" if self.monitor.baseline is None else
                   f", the comparisons with baseline {self.monitor.baseline.run_id} included,")
        if self.monitor.done:
            head = (f"Sequential run (seed {self.spec.seed}): every rule{against} decided after"
                    f" {self.fed:,} of {total:,} cases, read in the run's seeded order")
        else:
            head = (f"Sequential run (seed {self.spec.seed}): {self.fed:,} of {total:,} cases"
                    " read in the run's seeded order, and not every rule was decided")
        if self.beyond:
            head += (f"; {self.stored:,} stored, {self.beyond:,} of them finished after the"
                     " decision and are not part of it")
        return head + ". Decided from the stored evidence by the same tests."


def _unit(kind: MetricKind, rng: Sequence[float] | None, status: str, passed: bool | None,
          score: float | None) -> tuple[float, float] | None:
    """A case's value on [0, 1] for its metric's confidence sequence as (low, high): a
    missing case at both ends; None when excluded."""
    outcome = classify_outcome(kind, status, passed, score)
    if outcome is Outcome.EXCLUDED:
        return None
    if outcome is Outcome.MISSING:
        return 0.0, 1.0
    if kind == MetricKind.BINARY:
        v = 1.0 if passed else 0.0
        return v, v
    if not rng or score is None:
        return 0.0, 1.0
    lo, hi = float(rng[0]), float(rng[1])
    if not lo <= score <= hi:
        return 0.0, 1.0
    v = (float(score) - lo) / (hi - lo)
    return v, v


def read_sequential(
    conn: Connection, record: RunRecord, policy: ReleasePolicy
) -> SequentialReading:
    """Replay a stored sequential run's order over its stored cases (see the module)."""
    data = record.sequential or {}
    spec = SequentialSpec.from_json(data)
    order = [str(c) for c in data.get("order") or []]
    compared = data.get("baseline")
    baseline = None
    if compared is not None:  # compared with a stored baseline while it ran
        baseline = stored_baseline(conn, record, compared)
    monitor = Monitor(policy, record.metrics, spec, baseline)
    metadata: dict[str, Any] = {}
    for case_id, text in conn.execute(
        "SELECT case_id, metadata_json FROM run_cases WHERE run_id = ?", (record.id,)
    ):
        metadata[str(case_id)] = stored_json(record.id, f"metadata of case {case_id!r}", text)
    judged: dict[str, dict[str, tuple[str, bool | None, float | None]]] = {}
    for case_id, criterion, status, passed, score in conn.execute(
        "SELECT case_id, criterion, status, passed, score FROM run_judgments WHERE run_id = ?",
        (record.id,),
    ):
        judged.setdefault(str(case_id), {})[str(criterion)] = (
            str(status), None if passed is None else bool(passed),
            None if score is None else float(score),
        )
    metrics = {str(m["criterion"]): m for m in record.metrics}
    keys = {c: list(m.get("group_by") or []) for c, m in metrics.items()}
    for rule in policy.rules:  # a rule's group is grouped even if the metric stores no key
        group = getattr(rule, "group", None)
        if group:
            (key, _value), = group.items()
            if key not in keys.setdefault(rule.metric, []):
                keys[rule.metric].append(key)
    evidence: dict[str, CriterionEvidence] = {}
    ordered: dict[str, tuple[list[float], list[float]]] = {}

    def add(name: str, m: Mapping[str, Any], case_id: str,
            judgment: tuple[str, bool | None, float | None]) -> None:
        rng = m.get("range")
        ev = evidence.get(name)
        if ev is None:
            ev = evidence[name] = CriterionEvidence(
                name, MetricKind(m["kind"]), (float(rng[0]), float(rng[1])) if rng else None
            )
            ordered[name] = ([], [])
        ev.add(*judgment, case_id)
        unit = _unit(MetricKind(m["kind"]), rng, *judgment)
        if unit is not None:
            ordered[name][0].append(unit[0])
            ordered[name][1].append(unit[1])

    for criterion, m in metrics.items():  # every metric, in the declared order
        add_empty = CriterionEvidence(
            criterion, MetricKind(m["kind"]),
            (float(m["range"][0]), float(m["range"][1])) if m.get("range") else None,
        )
        evidence[criterion] = add_empty
        ordered[criterion] = ([], [])
    expected = len(metrics)
    for case_id in order:
        if monitor.done:
            break
        judgments = judged.get(case_id)
        if judgments is None or len(judgments) < expected:
            break  # the first case of the order that is not stored ends what can be read
        meta = metadata.get(case_id)
        monitor.feed(meta, judgments, case_id)
        for criterion, m in metrics.items():
            judgment = judgments.get(criterion, ("MISSING", None, None))
            add(criterion, m, case_id, judgment)
            for key in keys.get(criterion, []):
                value = meta.get(key) if isinstance(meta, Mapping) else None
                add(group_name(criterion, key, value), m, case_id, judgment)
    stored = len(judged)
    return SequentialReading(spec, monitor, evidence, ordered, stored, stored - monitor.position)


def decide_sequential(
    conn: Connection, record: RunRecord, policy: ReleasePolicy,
    labelled: Mapping[str, LabelledVerdicts | LabelledScores] | None = None,
) -> tuple[list[Decision], dict[str, MetricSummary], SequentialReading]:
    """Decide a stored sequential run under ``policy``, as the run did."""
    reading = read_sequential(conn, record, policy)
    expanded = _expand(policy, reading.evidence)
    tried = earlier_seeds(conn, record, reading.spec.seed, reading.spec.margin)
    seq = SequentialEvidence(reading.results, reading.ordered, reading.spec.cases_total,
                             reading.fed, reading.spec.margin, tried)
    decisions, summaries = decide_run(reading.evidence, expanded, labelled, seq)
    decisions += comparison_decisions(reading, tried)
    return decisions, summaries, reading


def earlier_seeds(
    conn: Connection, record: RunRecord, seed: int, margin: float = DEFAULT_MARGIN,
) -> list[tuple[str, str]]:
    """The runs stored before ``record`` of the same project, system identity and suite that
    decided it by another analysis, as (run id, what it was), oldest first: a sequential run
    whose seed or margin was not ``seed`` and ``margin`` (each a valid test on its own, and
    the cache makes trying another cheap: picking the one that passes is not), and a fixed
    run of the whole suite that did not allow (its exit code not 0): reading the same cases
    again sequentially after that result was seen is one more try. Such a run's PASS is
    held (policy/decide.py ``hold_other_seeds``)."""
    from oloproof.store.reader import project_scope

    scope, params = project_scope(conn, "r.project")
    rows = conn.execute(
        "SELECT r.id, r.created_at, q.sequential_json, r.status, r.completeness, r.exit_code"
        " FROM runs r LEFT JOIN run_sequential q ON q.run_id = r.id"
        f" WHERE {scope} AND r.system_identity = ? AND r.suite_digest = ? AND r.id <> ?",
        (*params, record.system_identity, record.suite_digest, record.id),
    ).fetchall()
    tried: list[tuple[str, str, str]] = []
    for run_id, created_at, text, status, completeness, exit_code in rows:
        if (str(created_at), str(run_id)) >= (record.created_at, record.id):
            continue  # made after this run: not an analysis tried before it
        if text is None:  # a fixed run: one of the whole suite that did not allow
            if (str(status) == RunStatus.DECIDED and str(completeness) == Completeness.COMPLETE
                    and exit_code is not None and int(exit_code) != 0):
                what = f"a fixed run of the whole suite that did not allow, exit {int(exit_code)}"
                tried.append((str(created_at), str(run_id), what))
            continue
        data = stored_json(str(run_id), "sequential", text)
        if not isinstance(data, Mapping) or not isinstance(data.get("seed"), int):
            continue
        other = int(data["seed"])
        try:
            theirs = float(data.get("margin", DEFAULT_MARGIN))
        except (TypeError, ValueError):
            continue
        if other == seed and math.isclose(theirs, margin, rel_tol=0.0, abs_tol=1e-12):
            continue
        what = f"a sequential run under seed {other}"
        if not math.isclose(theirs, margin, rel_tol=0.0, abs_tol=1e-12):
            what += f" with margin {theirs:g}"
        tried.append((str(created_at), str(run_id), what))
    return [(run_id, what) for _, run_id, what in sorted(tried)]


def comparison_decisions(
    reading: SequentialReading, tried: Sequence[tuple[str, str]] = ()
) -> list[Decision]:
    """The comparison rules a sequential run decided against its baseline while it ran
    (``run --sequential --baseline RUN``), after the decisions of its release rules; none
    for a run without a baseline."""
    monitor = reading.monitor
    if monitor.baseline is None:
        return []
    policy = monitor.baseline.policy
    total = reading.spec.cases_total
    out = []
    for rule in policy.rules:
        pair = monitor.paired[rule.id]
        r = pair.result
        observed = [d for d in pair.diffs if d is not None]
        common: dict[str, Any] = {
            "rule": rule.id, "metric": rule.metric, "kind": rule.kind,
            "threshold": float(rule.margin or 0.0), "direction": None,
            "estimate": math.fsum(observed) / len(observed) if observed else None,
            "confidence_level": r.level,
        }
        against = f"{r.n:,} pairs with baseline {monitor.baseline.run_id}"
        where = (f"after {r.position:,} of {total:,} cases ({against})" if r.state is not None
                 else f"over {reading.fed:,} of {total:,} cases ({against})")
        out.append(paired_decision(common, pair.diffs, pair.test, pair.test.width, where,
                                   policy, tried))
    return out


def load_baseline(
    conn: Connection, ref: str, metrics: Sequence[Mapping[str, Any]], policy: Any,
    suite: Mapping[str, Any] | None = None,
) -> Baseline:
    """The stored run ``ref`` as the baseline of a sequential run whose metrics are
    ``metrics``, under the comparison policy ``policy``: every rule's metric must be one
    both runs hold with the same kind, and a MEAN needs a declared range (the paired test
    bets on bounded differences). ``suite`` (case id to its (input, expected), when the
    run starts): a case the baseline holds with other content is refused, since its pair
    would compare two different questions. A :class:`~oloproof.errors.ConfigError` says
    what is wrong (exit 2)."""
    from oloproof.analysis.compare import _outcomes
    from oloproof.errors import ConfigError
    from oloproof.store.reader import get_run, load_cases

    base = get_run(conn, ref)
    if base.completeness in (Completeness.PARTIAL, Completeness.SUBSET) or (
        base.sequential is not None
    ):
        why = {
            Completeness.PARTIAL: "it is partial: a stopped run is not decided",
            Completeness.SUBSET: ("it ran part of its suite (a subset or a shard): a"
                                  " comparison with one never allows a release"),
        }.get(base.completeness, "it is itself sequential: its cases are the few its own"
              " rules needed, not a baseline to pair against")
        raise ConfigError(f"baseline {base.id} cannot be compared with while running: {why};"
                          " name a run that ran its whole suite")
    mine = {str(m["criterion"]): m for m in metrics}
    theirs = {str(m["criterion"]): m for m in base.metrics}
    kinds: dict[str, str] = {}
    widths: dict[str, float] = {}
    for rule in policy.rules:
        m, b = mine.get(rule.metric), theirs.get(rule.metric)
        if m is None or b is None or m["kind"] != b["kind"]:
            raise ConfigError(
                f"comparison rule {rule.id} is on metric {rule.metric}, which this run and"
                f" baseline {base.id} do not both hold with the same kind (shared: "
                + (", ".join(c for c in mine if c in theirs
                             and theirs[c]["kind"] == mine[c]["kind"]) or "none") + ")"
            )
        if m.get("identity") and b.get("identity") and m["identity"] != b["identity"]:
            raise ConfigError(
                f"comparison rule {rule.id} is on metric {rule.metric}, which this run and"
                f" baseline {base.id} judge by different evaluators (identity"
                f" {str(m['identity'])[:19]}… here, {str(b['identity'])[:19]}… there): the"
                " difference would mix the change of system with the change of evaluator;"
                " name a baseline run that judged it alike"
            )
        kinds[rule.metric] = str(m["kind"])
        if m["kind"] == MetricKind.BINARY:
            widths[rule.metric] = 1.0
        elif m.get("range"):
            lo, hi = m["range"]
            widths[rule.metric] = float(hi) - float(lo)
        else:
            raise ConfigError(
                f"comparison rule {rule.id}: metric {rule.metric} is a MEAN without a declared"
                " range, and the sequential paired test bets on bounded differences; declare"
                " range: [LOW, HIGH] on its evaluator"
            )
    cases = load_cases(conn, base.id)
    if suite is not None:
        differing = [c.case_id for c in cases
                     if c.case_id in suite and suite[c.case_id] != (c.input, c.expected)]
        if differing:
            raise ConfigError(
                f"{len(differing)} case(s) of this suite have another input or expected value"
                f" in baseline {base.id} (first: {differing[0]}): their pairs would compare"
                " different questions; name a baseline run of this suite (`oloproof compare`"
                " pairs such runs afterwards, with a warning)"
            )
    outcomes = _outcomes(cases, kinds) if kinds else {}
    return Baseline(base.id, policy, outcomes, widths)


def stored_baseline(conn: Connection, record: RunRecord, compared: Any) -> Baseline:
    """The baseline a stored sequential run was compared with while it ran, as it stored
    it (its id and the comparison policy); :class:`StoredEvidenceError` (exit 5) when it
    cannot be read or is no longer in the store."""
    from oloproof.analysis.stored import StoredEvidenceError
    from oloproof.errors import OloproofError
    from oloproof.project.config import ComparePolicy

    try:
        policy = ComparePolicy.validate(compared["policy"])
        return load_baseline(conn, str(compared["run_id"]), record.metrics, policy)
    except (OloproofError, KeyError, TypeError, ValueError) as exc:
        raise StoredEvidenceError(
            f"run {record.id} was decided against baseline"
            f" {compared.get('run_id') if isinstance(compared, Mapping) else '?'}, which cannot"
            f" be read again: {exc}"
        ) from None


def _expand(policy: ReleasePolicy, evidence: dict[str, CriterionEvidence]) -> ReleasePolicy:
    """``group: {key: value}`` rules pointed at their group's metric (empty evidence for a
    group the prefix did not meet: INSUFFICIENT_EVIDENCE, never a pass)."""
    rules: list[Any] = []
    changed = False
    for rule in policy.rules:
        group = getattr(rule, "group", None)
        if not group:
            rules.append(rule)
            continue
        (key, value), = group.items()
        name = group_name(rule.metric, key, value)
        if name not in evidence:
            base = evidence[rule.metric]
            evidence[name] = CriterionEvidence(name, base.kind, base.value_range)
        rules.append(replace(rule, metric=name, group=None))
        changed = True
    return replace(policy, rules=rules) if changed else policy


def decide_sequential_comparison(
    conn: Connection, cmp: Any, policy: Any
) -> list[Decision]:
    """The rules of a comparison whose candidate is a sequential run, each decided by a
    sequential paired test (policy/sequential.py ``PairedTest``) on the pairs taken in the
    candidate's order, over the prefix its own decision read (docs/sequential-decisions.md,
    "Comparisons"). The candidate stopped on its own rules: a stopping time of the same
    order, at which these tests are valid too."""
    from oloproof.analysis.compare import _outcomes
    from oloproof.analysis.stored import stored_policy
    from oloproof.policy.decide import INSUFFICIENT, action_for

    candidate = cmp.candidate
    reading = read_sequential(conn, candidate, stored_policy(candidate))
    order = [str(c) for c in (candidate.sequential or {}).get("order") or []][:reading.fed]
    horizon = reading.spec.cases_total
    kinds = {m: pm.kind for m, pm in cmp.metrics.items()}
    cand = _outcomes(cmp.candidate_cases, kinds)
    base = _outcomes(cmp.baseline_cases, kinds)
    ranges = {str(m["criterion"]): m.get("range") for m in candidate.metrics}
    level = float(policy.confidence_level)
    decisions: list[Decision] = []
    for rule in policy.rules:
        pm = cmp.metrics[rule.metric]
        margin = float(rule.margin or 0.0)
        common: dict[str, Any] = {
            "rule": rule.id, "metric": rule.metric, "kind": rule.kind, "threshold": margin,
            "direction": None, "estimate": pm.estimate, "confidence_level": level,
        }
        if pm.kind == MetricKind.BINARY:
            width = 1.0
        elif ranges.get(rule.metric):
            lo, hi = ranges[rule.metric]
            width = float(hi) - float(lo)
        else:
            d = Decision(state=INSUFFICIENT, reason="sequential_needs_range",
                         detail=(f"{rule.metric} is a MEAN without a declared range: a"
                                 " sequential paired test needs bounded differences"),
                         **common)
            d.action = action_for(d.state, policy, d.reason)
            decisions.append(d)
            continue
        test = PairedTest(str(rule.kind), margin, width, level, horizon)
        diffs: list[float | None] = []
        for case_id in order:
            c = cand[rule.metric].get(case_id)
            b = base[rule.metric].get(case_id)
            if c is None or b is None:
                continue  # not in the baseline: no pair
            if Outcome.EXCLUDED in (c.status, b.status):
                continue
            diff: float | None = None
            if c.status == Outcome.OBSERVED and b.status == Outcome.OBSERVED:
                if pm.kind == MetricKind.BINARY:
                    diff = float(bool(c.passed)) - float(bool(b.passed))
                else:
                    diff = float(c.score or 0.0) - float(b.score or 0.0)
            diffs.append(diff)
            if test.add(diff) is not None:
                break
        where = (f"after {len(diffs)} pairs in the candidate's order" if test.state is not None
                 else f"over {len(diffs)} pairs in the candidate's order")
        decisions.append(paired_decision(common, diffs, test, width, where, policy))
    return decisions


def paired_decision(
    common: dict[str, Any], diffs: Sequence[float | None], test: PairedTest, width: float,
    where: str, policy: Any, tried: Sequence[tuple[str, str]] = (),
) -> Decision:
    """A comparison rule decided by its sequential paired test (policy/sequential.py
    ``PairedTest``) from the differences it was fed in order (None: a pair missing in a
    run, taken at its worst), with the betting confidence sequence over them as its
    interval; ``where`` says how far the order was read ("after 44 pairs ..."); ``tried``:
    the runs that decided the same system and suite before by another analysis (a PASS is
    held)."""
    from oloproof.policy.decide import (
        INSUFFICIENT,
        NO_OBSERVED,
        action_for,
        hold_missing,
        hold_other_seeds,
    )
    from oloproof.policy.format import level_text
    from oloproof.stats.betting import betting_bounds

    level = float(common["confidence_level"])
    lows: list[float] = []
    highs: list[float] = []
    for diff in diffs:
        if diff is None:
            lows.append(0.0)
            highs.append(1.0)
        else:
            unit = min(1.0, max(0.0, (diff + width) / (2.0 * width)))
            lows.append(unit)
            highs.append(unit)
    observed = sum(1 for d in diffs if d is not None)
    missing = len(diffs) - observed
    a, z = betting_bounds(lows, highs, level, test.horizon) if lows else (0.0, 1.0)
    common = {**common, "lower": -width + 2 * width * a, "upper": -width + 2 * width * z}
    bar = 2.0 / (1.0 - level)
    e_value = math.exp(min(test.log_e, 700.0))
    method = f"{SEQUENTIAL_PAIRED} at {level_text(level)}"
    if observed == 0:
        state, reason = INSUFFICIENT, NO_OBSERVED
        detail = f"no pair observed in both runs {where}"
    elif test.state is None:
        state, reason = INSUFFICIENT, "sequential_undecided"
        detail = (f"undecided {where}: the largest e-value, {e_value:.3g}, stayed below"
                  f" {bar:g} ({method})")
    else:
        state = RuleState(test.state)
        reason = "sequential_pass" if state == RuleState.PASS else "sequential_fail"
        detail = f"decided {where}: e-value {e_value:.3g} >= {bar:g} ({method})"
    if missing:
        detail += f"; {observed} pairs observed, {missing} missing in a run (at their worst)"
    d = Decision(state=state, reason=reason, detail=detail, **common)
    hold_other_seeds(d, tried)
    d.action = action_for(d.state, policy, d.reason)
    max_missing = getattr(policy, "max_missing", None)
    hold_missing(d, observed, missing, 0.2 if max_missing is None else float(max_missing),
                 "pairs")
    return d
