"""Comparing two stored runs, paired by case id: the computation behind ``compare``.

:func:`compare_runs` reads the two runs, pairs every metric they share
(:mod:`oloproof.policy.compare`), decides the comparison policy, stores the comparison with a
``cmp_`` id and returns it as a :class:`ComparisonOutcome`; ``oloproof plan CMP_ID`` pairs the
same runs again through :func:`build_comparison`. Nothing here prints.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oloproof._records import dataclass, field
from oloproof.enums import CaseStatus, Completeness, GateAction, MetricKind
from oloproof.errors import ConfigError, UsageError
from oloproof.events import utc_timestamp
from oloproof.evidence import Outcome, classify_outcome
from oloproof.policy.compare import (
    MISSING,
    OBSERVED,
    CaseOutcome,
    PairedMetric,
    Pairing,
    decide_comparison,
    pair_metric,
    pair_runs,
)
from oloproof.policy.decide import Decision, gate, gate_declaration, gate_notes
from oloproof.project.config import ComparePolicy
from oloproof.store.comparisons import new_comparison_id, write_comparison
from oloproof.store.reader import CaseRow, RunRecord, get_run, load_cases

if TYPE_CHECKING:
    from oloproof.store.dbapi import Connection

__all__ = [
    "Comparison",
    "ComparisonOutcome",
    "build_comparison",
    "compare_runs",
    "comparison_document",
    "evaluator_types",
    "kind_names",
    "metric_better",
    "resolve_compare_policy",
    "run_ref",
    "shared_metrics",
]


def run_ref(ref: str, role: str) -> str:
    """``ref`` if it can name a run (``run_…`` or ``latest``), else a usage error."""
    if ref.startswith("cmp_"):
        raise UsageError(
            f"'{ref}' is a comparison id; compare takes two run ids, CANDIDATE then BASELINE"
            f" (to see a stored comparison: oloproof inspect {ref})"
        )
    if ref != "latest" and not ref.startswith("run_"):
        raise UsageError(
            f"'{ref}' is not a run id ({role}: run ids look like run_01J…, or 'latest';"
            " `oloproof runs` lists them)"
        )
    return ref


@dataclass
class Comparison:
    """Two runs paired by case id, with each shared metric's paired difference."""

    candidate: RunRecord
    baseline: RunRecord
    candidate_cases: list[CaseRow]
    baseline_cases: list[CaseRow]
    pairing: Pairing
    metrics: dict[str, PairedMetric]
    warnings: list[str] = field(default_factory=list)

    @property
    def incomplete(self) -> bool:
        """A run of the two stopped (PARTIAL): the comparison is not decided at all."""
        return Completeness.PARTIAL in (
            self.candidate.completeness, self.baseline.completeness
        )

    @property
    def whole(self) -> bool:
        """Both runs ran their whole suite (or decided it sequentially). A comparison with
        a subset or a shard (``--limit``, ``--case``, ``--where``, ``--shard``) is decided
        on the pairs it has and never allows a release, as ``gate`` treats such a run; so is
        one with a run of patched code (a test's fake: systems/loading.py patched_code)."""
        return all(
            run.completeness in (Completeness.COMPLETE, Completeness.SEQUENTIAL)
            and not run.system.get("patched")
            for run in (self.candidate, self.baseline)
        )


def judged_apart(candidate: RunRecord, baseline: RunRecord) -> dict[str, str]:
    """The criteria both runs hold with the same kind but judged by different evaluators
    (their stored identities differ: another type, field, pattern, judge or prompt), each
    with what the message says of it. Their paired difference would mix the change of
    system with the change of evaluator, so they are not compared, and a comparison rule
    on one is refused (docs/compare-a-change.md), as ``merge`` refuses such runs."""
    base = {m["criterion"]: m for m in baseline.metrics}
    out: dict[str, str] = {}
    for m in candidate.metrics:
        b = base.get(m["criterion"])
        if b is None or b["kind"] != m["kind"]:
            continue
        mine, theirs = m.get("identity"), b.get("identity")
        if mine and theirs and mine != theirs:
            out[str(m["criterion"])] = (
                f"evaluator identity {str(mine)[:19]}… in the candidate {candidate.id},"
                f" {str(theirs)[:19]}… in the baseline {baseline.id}"
            )
    return out


def shared_metrics(candidate: RunRecord, baseline: RunRecord) -> tuple[dict[str, str], list[str]]:
    """The metrics both runs hold with the same kind and judged alike, in the candidate's
    order, and warnings."""
    base = {m["criterion"]: m["kind"] for m in baseline.metrics}
    cand = {m["criterion"]: m["kind"] for m in candidate.metrics}
    apart = judged_apart(candidate, baseline)
    shared: dict[str, str] = {}
    warnings: list[str] = []
    for name, kind in cand.items():
        if name not in base:
            warnings.append(f"metric {name} is in the candidate run only: not compared")
        elif base[name] != kind:
            warnings.append(
                f"metric {name} is {kind} in the candidate and {base[name]} in the baseline:"
                " not compared"
            )
        elif name in apart:
            warnings.append(
                f"metric {name} was judged by different evaluators ({apart[name]}): not"
                " compared"
            )
        else:
            shared[name] = kind
    for name in base:
        if name not in cand:
            warnings.append(f"metric {name} is in the baseline run only: not compared")
    return shared, warnings


def _outcomes(cases: list[CaseRow], metrics: dict[str, str]) -> dict[str, dict[str, CaseOutcome]]:
    """Per metric, per case id: observed (with pass or score), missing or excluded."""
    out: dict[str, dict[str, CaseOutcome]] = {m: {} for m in metrics}
    for case in cases:
        for metric, kind in metrics.items():
            j = case.judgments.get(metric)
            if j is None or case.status != CaseStatus.OK:
                outcome = CaseOutcome(MISSING)
            else:
                sort = classify_outcome(kind, j.status, j.passed, j.score)
                if sort is Outcome.OBSERVED and kind == MetricKind.BINARY:
                    outcome = CaseOutcome(OBSERVED, j.passed)
                elif sort is Outcome.OBSERVED and j.score is not None:
                    outcome = CaseOutcome(OBSERVED, score=float(j.score))
                else:
                    outcome = CaseOutcome(sort)
            out[metric][case.case_id] = outcome
    return out


def build_comparison(
    conn: Connection, candidate_ref: str, baseline_ref: str, level: float
) -> Comparison:
    """Read two runs and pair every metric they share; refuse runs of two projects."""
    candidate = get_run(conn, run_ref(candidate_ref, "CANDIDATE"))
    baseline = get_run(conn, run_ref(baseline_ref, "BASELINE"))
    if candidate.project != baseline.project:
        raise UsageError(
            f"{candidate.id} is a run of project '{candidate.project}' and {baseline.id} of"
            f" project '{baseline.project}': a comparison pairs two runs of one project"
        )
    if candidate.id == baseline.id:
        # 'compare latest BASE' after a candidate run that stored nothing names the
        # baseline twice: a run paired with itself shows no difference, so a
        # non-inferiority or equivalence rule would pass on no candidate at all.
        raise UsageError(
            f"the candidate and the baseline are the same run {candidate.id}: a comparison"
            " pairs two runs (run the candidate, then compare its run id with the"
            " baseline's; `oloproof runs` lists them)"
        )
    cand_cases = load_cases(conn, candidate.id)
    base_cases = load_cases(conn, baseline.id)
    pairing = pair_runs(
        [c.case_id for c in cand_cases],
        [c.case_id for c in base_cases],
        {c.case_id: (c.input, c.expected) for c in cand_cases},
        {c.case_id: (c.input, c.expected) for c in base_cases},
    )
    metrics, warnings = shared_metrics(candidate, baseline)
    cand_out = _outcomes(cand_cases, metrics)
    base_out = _outcomes(base_cases, metrics)
    declared = _declared(candidate, baseline, metrics)
    paired = {
        m: pair_metric(m, kind, pairing.shared, cand_out[m], base_out[m], level,
                       _range_of(declared[m]))
        for m, kind in metrics.items()
    }
    for run in (candidate, baseline):
        if run.trials > 1:
            # A paired comparison of trial 0 is an honest one (one draw per case each); it
            # does not yet use the other trials (docs/repeated-trials.md).
            warnings.append(
                f"{run.id} made {run.trials} trials per case: the comparison pairs trial 0"
                " of each case only"
            )
    left_out = len(pairing.only_candidate) + len(pairing.only_baseline)
    if candidate.suite_digest != baseline.suite_digest:
        warnings.insert(
            0,
            f"the runs are of different suites: paired on the {len(pairing.shared)} case ids"
            f" they share; {left_out} cases were left out ({len(pairing.only_candidate)} only"
            f" in the candidate, {len(pairing.only_baseline)} only in the baseline)"
            + ("; a candidate that did not run some of the baseline's cases never allows a"
               " release (exit 5 unless a rule FAILs): run it on the baseline's suite"
               if pairing.only_baseline else ""),
        )
    elif left_out:
        warnings.insert(
            0,
            f"{left_out} cases are stored in only one of the runs and were left out"
            " (a partial run stores only the cases it finished, a subset or a shard"
            " only its part of the suite)",
        )
    if pairing.differing_inputs:
        n = len(pairing.differing_inputs)
        warnings.append(
            f"{n} shared case id{'s' if n != 1 else ''} ha{'ve' if n != 1 else 's'} a different"
            f" input or expected value in the two runs (first: {pairing.differing_inputs[0]});"
            " they are paired by id all the same, but such pairs compare different"
            " questions, so the comparison never allows a release (exit 5 unless a rule"
            " FAILs): run the baseline on the candidate's suite (its unchanged cases come"
            " from the cache) and compare that run"
        )
    if candidate.system_identity == baseline.system_identity:
        warnings.append(
            "the two runs have the same system identity: they ran the same system and code"
        )
    for name in ("candidate", "baseline"):
        run = candidate if name == "candidate" else baseline
        patched = run.system.get("patched")
        if isinstance(patched, list) and patched:
            warnings.append(
                f"the {name} run {run.id} ran patched code ({', '.join(map(str, patched[:5]))}"
                " replaced in the process that ran it): its outputs are not the project's"
                " code's, so the comparison never allows a release (exit 5 unless a rule"
                " FAILs)"
            )
        if run.completeness == Completeness.SEQUENTIAL and name == "candidate":
            warnings.append(
                f"the candidate run {run.id} is sequential: its rules are decided by"
                " sequential paired tests on the pairs in its order, over the cases its own"
                " decision read (docs/sequential-decisions.md)"
            )
        elif run.completeness == Completeness.SEQUENTIAL:
            warnings.append(
                f"the baseline run {run.id} is sequential: it stored only the cases it needed"
                " to decide its own rules, so the comparison pairs the cases both runs"
                " stored, and its fixed-n interval is no longer exact over a set of cases"
                " a sequential test chose (docs/sequential-decisions.md)"
            )
        elif run.completeness == Completeness.SUBSET:
            warnings.append(
                f"the {name} run {run.id} is {run.state}: it ran part of its suite, so the"
                " comparison is decided on the pairs it has and never allows a release"
                " (exit 5 unless a rule FAILs), as a subset's own gate"
            )
        elif run.completeness != Completeness.COMPLETE:
            warnings.append(
                f"the {name} run {run.id} is {run.state}: a partial run is not decided, and"
                " neither is a comparison with one"
            )
    return Comparison(candidate, baseline, cand_cases, base_cases, pairing, paired, warnings)


def evaluator_types(config: str | os.PathLike[str]) -> dict[str, str]:
    """Criterion -> evaluator type, as the project file declares them: which way is better
    for an ``absolute_error`` metric (the stored runs do not keep the type). ``{}`` when
    the file cannot be read: a comparison reads stored runs and needs no valid project
    file, and the direction then comes from the release rules alone."""
    try:
        from oloproof.project._yaml import load_yaml  # PyYAML: only to read the types

        data, _lines = load_yaml(config, str(config))
    except Exception:  # noqa: BLE001 - a courtesy to the check; its own command says why
        return {}
    evaluators = data.get("evaluators") if isinstance(data, dict) else None
    out: dict[str, str] = {}
    for ev in evaluators if isinstance(evaluators, list) else ():
        if isinstance(ev, dict) and isinstance(ev.get("criterion"), str):
            out[ev["criterion"]] = str(ev.get("type"))
    return out


def metric_better(
    criterion: str, kind: str, evaluator_type: str | None, release: dict[str, Any] | None
) -> dict[str, str]:
    """Which way is better for a metric, as the comparison policy check takes it
    (``better``: ``higher`` or ``lower``; ``better_why`` for ``lower``): the matrix's
    :func:`oloproof.analysis.matrix.metric_direction`, on the evaluator's type and the
    release policy (as stored: ``policy.dump(mode="json")``); and lower for a rate whose
    release rules are all ``max:`` ceilings (a regex that passes when a forbidden phrase
    appears, ``max: 0.05``). A ``flaky_share`` ceiling says nothing of which way a pass
    goes, and is not counted; a failure budget (``max_failures``) says a pass is better."""
    from oloproof.analysis.matrix import metric_direction

    better = metric_direction(criterion, kind, evaluator_type, release)
    if better != "lower":
        return {"better": better}
    if kind == MetricKind.BINARY:
        why = "every release rule on its pass rate is a max: ceiling: fewer passes are better"
    elif evaluator_type == "absolute_error":
        why = "its evaluator is an absolute_error: the distance from the expected value"
    else:
        why = "every release rule on it is a max: ceiling"
    return {"better": "lower", "better_why": why}


def _declared(
    candidate: RunRecord, baseline: RunRecord, metrics: dict[str, str],
    apart: dict[str, str] | None = None, types: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each shared metric's kind, and its declared range where both runs declare the same;
    ``judged_apart``: what differs in how the two runs judged it, for those in ``apart``;
    which way is better (:func:`metric_better`, on ``types`` and the candidate's release
    policy)."""
    ranges = [{m.get("criterion"): m.get("range") for m in run.metrics}
              for run in (candidate, baseline)]
    out: dict[str, dict[str, Any]] = {}
    for name, kind in metrics.items():
        same = ranges[0].get(name) == ranges[1].get(name)
        out[name] = {"kind": kind, "range": ranges[0].get(name) if same else None,
                     "judged_apart": (apart or {}).get(name),
                     **metric_better(name, kind, (types or {}).get(name), candidate.policy)}
    return out


def _range_of(declared: Mapping[str, Any]) -> tuple[float, float] | None:
    """A MEAN metric's range when both runs declare the same one (the betting interval then
    decides its comparison), else None."""
    rng = declared.get("range")
    if declared.get("kind") != MetricKind.MEAN or not isinstance(rng, (list, tuple)):
        return None
    if len(rng) != 2:
        return None
    return float(rng[0]), float(rng[1])


def kind_names(metrics: dict[str, str]) -> dict[str, MetricKind]:
    """The metric kinds in the form the project loaders take."""
    return {
        k: (MetricKind.BINARY if v == MetricKind.BINARY else MetricKind.MEAN)
        for k, v in metrics.items()
    }


def resolve_compare_policy(
    config: str | Path, project_dir: str | Path, policy_arg: str | None, metrics: dict[str, str]
) -> tuple[ComparePolicy, str | None, str | None]:
    """The policy, its path, and (when there is none) why there are no rules."""
    from oloproof.project.loader import (  # pydantic: only to validate
        compare_policy_near_hint,
        load_compare_policy,
    )

    kinds = kind_names(metrics)
    if policy_arg is not None:
        return load_compare_policy(policy_arg, kinds), policy_arg, None
    default = Path(project_dir, "compare.yaml")
    # Named in errors as the user can open it, beside oloproof.yaml as they named it.
    shown = os.path.normpath(os.path.join(os.path.dirname(str(config)), "compare.yaml"))
    if os.path.lexists(default):  # a symlink loop is there, and says so when it is read
        return load_compare_policy(default, kinds, display=shown), str(default), None
    near = compare_policy_near_hint(default)
    if near:
        # Its rules would be silently left out, and a comparison without rules allows.
        raise ConfigError(
            f"no comparison policy: {shown} is not found{near}; without it the comparison"
            " would have no rules and could block nothing. Rename the file, or name it with"
            " --policy FILE",
            file=shown,
        )
    return (
        ComparePolicy(),
        None,
        f"no compare.yaml beside {Path(config).name} and no --policy given",
    )


def _run_json(run: RunRecord, cases: list[CaseRow]) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "state": run.state,
        "system": run.system,
        "system_identity": run.system_identity,
        "suite_digest": run.suite_digest,
        "cases_total": run.cases_total,
        "cases_stored": len(cases),
        "created_at": run.created_at,
    }


def comparison_document(
    cmp: Comparison,
    *,
    cmp_id: str,
    created_at: str,
    policy: ComparePolicy,
    policy_path: str | None,
    policy_note: str | None,
    decisions: list[Decision],
    gate_label: str,
    exit_code: int,
) -> dict[str, Any]:
    return {
        "comparison_id": cmp_id,
        "created_at": created_at,
        "project": cmp.candidate.project,
        "candidate": _run_json(cmp.candidate, cmp.candidate_cases),
        "baseline": _run_json(cmp.baseline, cmp.baseline_cases),
        "pairing": {
            "shared": len(cmp.pairing.shared),
            "only_candidate": cmp.pairing.only_candidate,
            "only_baseline": cmp.pairing.only_baseline,
            "differing_inputs": cmp.pairing.differing_inputs,
        },
        "confidence_level": float(policy.confidence_level),
        "policy_path": policy_path,
        "policy_note": policy_note,
        "incomplete": cmp.incomplete,
        "metrics": [m.to_json() for m in cmp.metrics.values()],
        "decisions": [d.to_json() for d in decisions],
        "gate": gate_label,
        "exit_code": exit_code,
        "warnings": cmp.warnings,
        "gate_notes": gate_notes(decisions, policy),
        "declaration": gate_declaration(policy) if decisions else None,
    }


@dataclass
class ComparisonOutcome:
    """A comparison made and stored: the pairing, the decisions, the gate and the document
    that ``compare --json`` prints and the store keeps."""

    comparison: Comparison
    comparison_id: str
    decisions: list[Decision]
    gate: GateAction
    exit_code: int
    document: dict[str, Any]


def compare_runs(
    conn: Connection,
    candidate_ref: str,
    baseline_ref: str,
    *,
    config: str | Path,
    project_dir: str | Path,
    policy_arg: str | None,
) -> ComparisonOutcome:
    """Pair two stored runs, decide them under the comparison policy, store the result."""
    run_ref(candidate_ref, "CANDIDATE")
    run_ref(baseline_ref, "BASELINE")
    # The runs come first: a policy can only be checked against the metrics they share.
    candidate = get_run(conn, candidate_ref)
    baseline = get_run(conn, baseline_ref)
    metrics, _ = shared_metrics(candidate, baseline)
    # A rule on a criterion the two runs judged apart is read, so that it can be refused
    # by name rather than as an unknown metric.
    apart = judged_apart(candidate, baseline)
    cand_kinds = {str(m["criterion"]): str(m["kind"]) for m in candidate.metrics}
    readable = {**metrics, **{name: cand_kinds[name] for name in apart}}
    policy, policy_path, note = resolve_compare_policy(config, project_dir, policy_arg, readable)
    if policy_path is not None:
        from oloproof.policy.can_fail import PolicySource, check_compare_policy

        check_compare_policy(
            policy, PolicySource.file(policy_path),
            _declared(candidate, baseline, readable, apart, evaluator_types(config)),
        )
    level = float(policy.confidence_level)
    cmp = build_comparison(conn, candidate.id, baseline.id, level)
    if cmp.incomplete:
        decisions = []
    elif candidate.sequential is not None:
        # Sequential paired tests in the candidate's order (docs/sequential-decisions.md).
        from oloproof.analysis.sequential import decide_sequential_comparison

        decisions = decide_sequential_comparison(conn, cmp, policy)
    else:
        decisions = decide_comparison(cmp.metrics, policy)
    # A shared id whose input or expected value differs pairs two different questions
    # (the candidate's suite rewritten to what it answers passes any rule): decided on the
    # pairs, so the figures show, but never ALLOW, as run --baseline refuses such a baseline.
    apart_cases = bool(decisions) and bool(cmp.pairing.differing_inputs)
    # A candidate run on a suite without some of the baseline's cases (the hard ones
    # dropped) is compared on what is left: decided, but never ALLOW, as a subset is not.
    # Cases only the candidate has (a suite that grew) leave nothing out of the baseline.
    dropped = bool(decisions) and bool(cmp.pairing.only_baseline) and (
        cmp.candidate.suite_digest != cmp.baseline.suite_digest)
    gate_label, code = gate(decisions, incomplete=not cmp.whole or apart_cases or dropped)
    cmp_id = new_comparison_id()
    created_at = utc_timestamp()
    doc = comparison_document(
        cmp, cmp_id=cmp_id, created_at=created_at, policy=policy, policy_path=policy_path,
        policy_note=note, decisions=decisions, gate_label=gate_label, exit_code=code,
    )
    write_comparison(
        conn, cmp_id=cmp_id, project=candidate.project, candidate_run=candidate.id,
        baseline_run=baseline.id, confidence_level=level,
        policy=policy.dump(mode="json"), policy_path=policy_path, gate=gate_label,
        exit_code=code, metrics=list(cmp.metrics.values()),
        decisions=doc["decisions"], document=doc, created_at=created_at,
    )
    return ComparisonOutcome(cmp, cmp_id, decisions, gate_label, int(code), doc)


