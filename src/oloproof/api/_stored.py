"""Reading what a project stored: :func:`read_run`, :func:`list_runs`, :func:`compare`,
:func:`plan`. Each opens the project's store, reads, and closes it; only :func:`compare`
writes (the comparison it makes, with a ``cmp_`` id)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from oloproof.analysis.stored import (
    code_edited,
    decide_stored,
    judge_reports,
    labels_edited,
    labels_moved,
    policy_edited,
    policy_moved,
    sequential_reading,
    stored_labels,
    stored_policy,
    suite_edited,
)
from oloproof.api import _args as args
from oloproof.api._listing import PathLike, _read, config_file, list_comparisons, list_runs
from oloproof.api._results import ComparisonResult, RunResult, Subset
from oloproof.enums import Completeness
from oloproof.errors import ConfigError, UsageError
from oloproof.policy.decide import gate, gate_declaration, gate_notes, patched_notes
from oloproof.store.db import open_store, open_store_readonly
from oloproof.store.location import locate
from oloproof.store.reader import get_run, panel_splits

if TYPE_CHECKING:
    from typing import Any

    from oloproof.analysis.plan import ComparisonPlan, RunPlan

__all__ = ["compare", "list_comparisons", "list_runs", "plan", "read_run"]


def _id(value: object, name: str, function: str, accepted: str) -> str:
    """``value`` as an id, or a TypeError naming the argument and what it accepts (as a
    path argument's own TypeError does): ``plan(None)`` raised AttributeError."""
    if not isinstance(value, str):
        raise args.refuse(function, name, accepted, value)
    return value


_RUN = "a run id (run_… or 'latest') or a RunResult"


def _root(project: PathLike) -> str:
    return os.path.dirname(os.path.realpath(config_file(project)))


def read_run(
    run_id: str = "latest", project: PathLike = ".", *, policy: PathLike | None = None,
    group_by: Sequence[str] | str | None = None, labels: PathLike | None = None,
) -> RunResult:
    """A stored run, re-decided from its stored evidence (calling nothing).

    ``policy``: decide it under this release policy instead of the one stored with it
    (what ``oloproof gate RUN_ID --policy FILE`` does). A PARTIAL run is not decided
    (no decisions, exit code 5); a SUBSET run is decided on its cases and never allows.
    ``group_by``: break the metrics down by these metadata keys too (as stored runs keep
    every case's metadata, any key can be grouped afterwards). ``labels``: measure the
    judges against this human-labels file instead of the labels stored with the run."""
    run_id = _id(run_id, "run_id", "read_run", "a run id (run_… or 'latest')")
    args.path(project, "project", "read_run")
    args.optional_path(policy, "policy", "read_run")
    args.optional_path(labels, "labels", "read_run")
    group_by = args.texts(group_by, "group_by", "read_run", "a metadata key")
    root = _root(project)
    conn = open_store_readonly(locate(config_file(project)))
    try:
        record = get_run(conn, run_id)
        if policy is not None:
            from oloproof.project.labels import scales_of_run
            from oloproof.project.loader import load_release_policy

            metrics = {m["criterion"]: m["kind"] for m in record.metrics}
            release = load_release_policy(str(policy), metrics,
                                          judges=scales_of_run(record.metrics))
        else:
            release = stored_policy(record, root)
        _check_stored(conn, record, release, policy, list(group_by or ()))
        sequential = None
        if record.sequential is not None:
            from oloproof.policy.sequential import refusal

            why = refusal(release, record.metrics, record.trials)
            if why is not None:
                raise ConfigError(f"run {record.id} is sequential, and {why}")
            sequential = sequential_reading(conn, record, release)
        chosen: Any
        if labels is not None:
            from oloproof.project.labels import load_labels, scales_of_run

            chosen = load_labels(os.fspath(labels), str(labels), scales_of_run(record.metrics))
        else:
            chosen = stored_labels(conn, record)
        # The record and the labels read once, for every step below (each read is a round
        # trip on a team store).
        try:
            decisions, summaries = decide_stored(
                conn, record, release, chosen, group_by=list(group_by or ())
            )
        except ConfigError as exc:
            raise _in_policy(exc, policy) from None
        reports = judge_reports(conn, record, float(release.confidence_level), chosen)
        panels = panel_splits(conn, record.id)
        flaky = []
        if record.trials > 1:  # only repeated trials can disagree
            from oloproof.analysis.trials import flaky_cases

            flaky = flaky_cases(conn, record)
    finally:
        conn.close()
    partial = record.completeness == Completeness.PARTIAL
    if partial:
        decisions = []
    whole = record.completeness in (Completeness.COMPLETE, Completeness.SEQUENTIAL)
    subset = Subset.from_json(record.subset)
    patched = patched_notes(record.system.get("patched"))  # a test's fake ran: never allows
    label, code = gate(decisions, incomplete=not whole or bool(patched))
    return RunResult(
        run_id=record.id, status=record.status, completeness=record.completeness, gate=label,
        exit_code=int(code), decisions=decisions, metrics=summaries, project_dir=root,
        # Absolute: cases() read after a chdir read another directory's store (none there,
        # or another project's, where the run is not: no case, and no error).
        config_path=os.path.abspath(config_file(project)), cache=record.cache,
        stop_reason=record.stop_reason,
        policy_path=str(policy) if policy is not None else record.policy_path,
        subset=subset, project=record.project,
        rule_ids=[r.id for r in release.rules], judges=reports, panels=panels,
        trials=record.trials, flaky=flaky,
        gate_notes=[*gate_notes(decisions, release, record.id,
                                shard=None if subset is None else subset.shard),
                    *patched,
                    *([] if policy is not None else [
                        *policy_edited(record, release, decisions, root),
                        *policy_moved(record, release, decisions, root, config_file(project))]),
                    *([] if labels is not None else [
                        *labels_edited(record, release, chosen, decisions, root),
                        *labels_moved(record, release, chosen, decisions, root,
                                      config_file(project))]),
                    *suite_edited(record, decisions, root, config_file(project)),
                    *code_edited(record, decisions, root)],
        declaration=gate_declaration(release) if decisions else None,
        sequential=sequential[0] if sequential else None,
        sequential_note=sequential[1] if sequential else None,
    )


def _in_policy(exc: ConfigError, policy: PathLike | None) -> ConfigError:
    """``exc``, found while a stored run was decided under ``--policy FILE``, with that
    file and the line of its field, when it names a field but no file (a rule on groups
    the run does not have: analysis/groups.py)."""
    if policy is None or exc.file is not None or not exc.field:
        return exc
    from oloproof.project._yaml import with_line  # only on the way to an error

    return with_line(exc, policy, str(policy))


def _check_stored(
    conn: Any, record: Any, release: Any, policy: PathLike | None, group_by: list[str]
) -> None:
    """ALLOW is earned (policy/can_fail.py): the policy a stored run is decided under,
    checked against the run's own cases as ``run`` checks it against the suite. The cases
    are left out for a run of part of the suite (a subset or a stopped run never allows)."""
    from oloproof.policy.can_fail import CaseFacts, PolicySource, check_release_policy
    from oloproof.store.reader import load_case_metadata

    if policy is not None:
        source = PolicySource.file(str(policy))
    else:
        source = PolicySource.stored(record.id, record.policy_path)
    facts = None
    if record.completeness == Completeness.COMPLETE:
        metadata = load_case_metadata(conn, record.id)  # a damaged row: StoreUnreadable
        facts = CaseFacts(metadata, record.trials, where=f"run {record.id}")
    check_release_policy(
        release, source, record.metrics, facts,
        # Only a project that says `policy: none` stores a run without a policy file.
        declared_none=policy is None and record.policy_path is None,
        group_by=group_by,
    )


def compare(
    candidate: str | RunResult,
    baseline: str | RunResult,
    *,
    project: PathLike = ".",
    policy: PathLike | None = None,
) -> ComparisonResult:
    """Pair two stored runs by case id, decide the comparison policy (``policy``, else
    compare.yaml beside the project if any), and store the comparison (``cmp_`` id)."""
    cand = candidate.run_id if isinstance(candidate, RunResult) else candidate
    base = baseline.run_id if isinstance(baseline, RunResult) else baseline
    cand = _id(cand, "candidate", "compare", _RUN)
    base = _id(base, "baseline", "compare", _RUN)
    args.path(project, "project", "compare")
    args.optional_path(policy, "policy", "compare")
    # Comparing and planning import the paired statistics and the sample-size search:
    # only here, so that reading a run (`oloproof gate`) does not pay for them.
    from oloproof.analysis.compare import compare_runs, run_ref

    run_ref(cand, "CANDIDATE")
    run_ref(base, "BASELINE")
    config = config_file(project)
    conn = open_store(locate(config), create=False)
    try:
        outcome = compare_runs(
            conn, cand, base, config=config,
            project_dir=os.path.dirname(os.path.realpath(config)),
            policy_arg=None if policy is None else str(policy),
        )
    finally:
        conn.close()
    cmp = outcome.comparison
    return ComparisonResult(
        comparison_id=outcome.comparison_id, candidate_run=cmp.candidate.id,
        baseline_run=cmp.baseline.id, gate=outcome.gate, exit_code=outcome.exit_code,
        decisions=outcome.decisions, metrics=dict(cmp.metrics), warnings=list(cmp.warnings),
        document=outcome.document,
    )


def plan(
    run_or_cmp: str | RunResult | ComparisonResult,
    *,
    project: PathLike = ".",
    policy: PathLike | None = None,
    assurance: float | None = None,
) -> RunPlan | ComparisonPlan:
    """How many more cases would decide each undecided rule (``oloproof plan``).

    ``run_or_cmp``: a run id (``run_…`` or ``latest``), a comparison id (``cmp_…``), or a
    result of :func:`run`, :func:`read_run` or :func:`compare`. ``assurance`` (rules on
    rates, a run's or a comparison's) adds the size that decides with that probability."""
    if isinstance(run_or_cmp, RunResult):
        ref = run_or_cmp.run_id
    elif isinstance(run_or_cmp, ComparisonResult):
        ref = run_or_cmp.comparison_id
    else:
        ref = _id(run_or_cmp, "run_or_cmp", "plan",
                  "a run id (run_… or 'latest'), a comparison id (cmp_…), or a result of"
                  " run(), read_run() or compare()")
    args.path(project, "project", "plan")
    args.optional_path(policy, "policy", "plan")
    assurance = args.probability(assurance, "assurance", "plan")
    if assurance is not None and not 0.0 < assurance < 1.0:
        raise UsageError(f"assurance: expected a probability strictly between 0 and 1, got {assurance!r}")
    policy_path = None if policy is None else str(policy)
    from oloproof.analysis.plan import plan_stored_comparison, plan_stored_run

    conn = _read(project)
    try:
        if ref.startswith("cmp_"):
            return plan_stored_comparison(
                conn, ref, policy_path=policy_path, assurance=assurance
            )
        if ref.startswith("run_") or ref == "latest":
            try:
                return plan_stored_run(conn, ref, policy_path=policy_path,
                                       assurance=assurance, root=_root(project))
            except ConfigError as exc:
                raise _in_policy(exc, policy) from None
    finally:
        conn.close()
    raise UsageError(
        f"'{ref}' is neither a run id (run_…, or 'latest') nor a comparison id (cmp_…)"
    )
