"""Metrics broken down by a metadata key, and the rules that target their groups.

A metric declared with ``group_by: [lang]`` (in oloproof.yaml, or ``--group-by lang`` on the
command line) gets one more metric per value of ``metadata.lang``, named
``exact_label[lang=fr]``, each with its own exact interval (the same method and level as
the metric itself, over that group's cases). Several keys give one breakdown per key, not
their combinations. A case without the key is in the group ``KEY=null``.

A rule with ``group: {lang: fr}`` is decided on that group's metric; a rule with
``each_group: true`` becomes one rule per group of every key of its metric, with ids such
as ``floor[lang=fr]`` (in a family, the groups share its family-wise error). Everything is
computed from the stored evidence, so ``gate`` and ``read_run`` can group a stored run
afresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from oloproof._records import replace
from oloproof.enums import MetricKind
from oloproof.errors import ConfigError
from oloproof.evidence import CriterionEvidence, group_name
from oloproof.store.reader import RunRecord, load_trial_outcomes, stored_json

if TYPE_CHECKING:
    from oloproof.project.config import ReleasePolicy
    from oloproof.store.dbapi import Connection

__all__ = ["expand_policy", "group_cases", "group_keys", "group_name", "grouped_evidence",
           "with_groups"]


def group_keys(run: RunRecord, extra: Iterable[str] = ()) -> dict[str, list[str]]:
    """Per metric of ``run``, the metadata keys it is grouped by (stored, plus ``extra``)."""
    extra = list(extra)
    out: dict[str, list[str]] = {}
    for m in run.metrics:
        keys = [*(m.get("group_by") or []), *extra]
        if keys:
            out[m["criterion"]] = list(dict.fromkeys(keys))
    return out


def grouped_evidence(
    conn: Connection, run: RunRecord, keys: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, CriterionEvidence]]:
    """Per grouped metric, its groups' evidence by name, in the order of keys then values."""
    if not keys:
        return {}
    kinds = {m["criterion"]: m for m in run.metrics}
    found: dict[str, dict[tuple[str, str], CriterionEvidence]] = {c: {} for c in keys}

    def group(criterion: str, key: str, name: str) -> CriterionEvidence:
        groups = found[criterion]
        ev = groups.get((key, name))
        if ev is None:
            m = kinds[criterion]
            rng = m.get("range")
            ev = groups[(key, name)] = CriterionEvidence(
                name, MetricKind(m["kind"]), (float(rng[0]), float(rng[1])) if rng else None
            )
        return ev

    if run.trials > 1:
        # Over repeated trials a group holds whole cases, each with its trials.
        metadata_of = {
            case_id: stored_json(run.id, f"metadata of case {case_id!r}", text)
            for case_id, text in conn.execute(
                "SELECT case_id, metadata_json FROM run_cases WHERE run_id = ?", (run.id,)
            )
        }
        for criterion, by_case in load_trial_outcomes(conn, run).items():
            for key in keys.get(criterion) or ():
                for case_id, outcomes in by_case.items():
                    metadata = metadata_of.get(case_id)
                    value = metadata.get(key) if isinstance(metadata, dict) else None
                    ev = group(criterion, key, group_name(criterion, key, value))
                    ev.trials = run.trials
                    ev.add_case(case_id, outcomes)
        return _ordered(found, keys)
    rows = conn.execute(
        "SELECT j.case_id, j.criterion, j.status, j.passed, j.score, c.metadata_json"
        " FROM run_judgments j"
        " JOIN run_cases c ON c.run_id = j.run_id AND c.case_id = j.case_id"
        " WHERE j.run_id = ?",
        (run.id,),
    )
    for case_id, criterion, status, passed, score, metadata_json in rows:
        criterion_keys = keys.get(criterion)
        if not criterion_keys:
            continue
        metadata = stored_json(run.id, "metadata of a case", metadata_json)
        for key in criterion_keys:
            value = metadata.get(key) if isinstance(metadata, dict) else None
            group(criterion, key, group_name(criterion, key, value)).add(
                status, None if passed is None else bool(passed), score, case_id
            )
    return _ordered(found, keys)


def group_cases(
    conn: Connection, run: RunRecord, keys: Mapping[str, Sequence[str]],
    criteria: Iterable[str],
) -> dict[str, tuple[str, set[str]]]:
    """Per group metric of ``criteria`` (``helpful[lang=fr]``), its metric and the ids of
    its cases: what a judge is measured on against a person's labels for a rule on that
    group (policy/judges.py)."""
    wanted = {c: keys[c] for c in criteria if keys.get(c)}
    if not wanted:
        return {}
    out: dict[str, tuple[str, set[str]]] = {}
    for case_id, text in conn.execute(
        "SELECT case_id, metadata_json FROM run_cases WHERE run_id = ?", (run.id,)
    ):
        metadata = stored_json(run.id, f"metadata of case {case_id!r}", text)
        for criterion, criterion_keys in wanted.items():
            for key in criterion_keys:
                value = metadata.get(key) if isinstance(metadata, dict) else None
                name = group_name(criterion, key, value)
                out.setdefault(name, (criterion, set()))[1].add(case_id)
    return out


def _ordered(
    found: Mapping[str, Mapping[tuple[str, str], CriterionEvidence]],
    keys: Mapping[str, Sequence[str]],
) -> dict[str, dict[str, CriterionEvidence]]:
    out: dict[str, dict[str, CriterionEvidence]] = {}
    for criterion, criterion_keys in keys.items():
        groups = found[criterion]
        ordered = sorted(groups, key=lambda kn: (criterion_keys.index(kn[0]), kn[1]))
        out[criterion] = {name: groups[(key, name)] for key, name in ordered}
    return out


def expand_policy(
    policy: ReleasePolicy,
    keys: Mapping[str, Sequence[str]],
    groups: Mapping[str, Mapping[str, CriterionEvidence]],
    evidence: dict[str, CriterionEvidence],
) -> ReleasePolicy:
    """The policy with every grouped rule replaced by its per-group rules.

    A group named by a rule but seen in no case gets empty evidence (0 observed: the rule
    is INSUFFICIENT_EVIDENCE, never a pass)."""
    if not any(r.group is not None or r.each_group for r in policy.rules):
        return policy
    rules: list[Any] = []
    for index, rule in enumerate(policy.rules):
        if rule.group is None and not rule.each_group:
            rules.append(rule)
            continue
        metric_keys = keys.get(rule.metric, [])
        if rule.each_group:
            if not metric_keys:
                raise _ungrouped(rule.id, rule.metric, f"rules[{index}].each_group")
            for name in groups.get(rule.metric, {}):
                suffix = name[len(rule.metric):]
                rules.append(replace(rule, id=f"{rule.id}{suffix}", metric=name,
                                     each_group=False))
            continue
        assert rule.group is not None
        (key, value), = rule.group.items()
        if key not in metric_keys:
            raise _ungrouped(rule.id, rule.metric, f"rules[{index}].group", key)
        name = group_name(rule.metric, key, value)
        if name not in evidence:
            base = evidence[rule.metric]
            evidence[name] = CriterionEvidence(
                name, base.kind, base.value_range, trials=base.trials,
                case_trials={} if base.case_trials is not None else None,
            )
        rules.append(replace(rule, metric=name, group=None))
    return replace(policy, rules=rules)


def _ungrouped(rule_id: str, metric: str, field: str, key: str | None = None) -> ConfigError:
    """The rule (at ``field`` of its policy: the caller that knows the file adds its line)
    targets groups its metric does not have."""
    what = f"group_by: [{key}]" if key else "group_by"
    return ConfigError(
        f"rule {rule_id} targets groups of metric {metric}, which has no {what}: declare it"
        f" on the evaluator in oloproof.yaml or pass --group-by {key or 'KEY'}",
        field=field,
    )


def with_groups(
    conn: Connection,
    run: RunRecord,
    policy: ReleasePolicy,
    evidence: Mapping[str, CriterionEvidence],
    extra: Iterable[str] = (),
) -> tuple[dict[str, CriterionEvidence], ReleasePolicy]:
    """The run's evidence with every group's after its metric, and the expanded policy."""
    keys = group_keys(run, extra)
    groups = grouped_evidence(conn, run, keys)
    merged: dict[str, CriterionEvidence] = {}
    for name, ev in evidence.items():
        merged[name] = ev
        merged.update(groups.get(name, {}))
    return merged, expand_policy(policy, keys, groups, merged)
