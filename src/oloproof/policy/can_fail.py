"""ALLOW is earned: the refusals of rules and policies that could not fail (issue 25).

A rule may pass only on observed evidence that could have made it fail. What can be known
before anything runs is checked here, in one place, for every way a policy reaches a
decision: ``oloproof run`` (and ``oloproof.run``) against the suite it is about to run,
``oloproof gate RUN`` against the stored run's cases (with the policy stored with the
run, or the one given with ``--policy``), and ``oloproof compare`` against the stored runs'
metrics. Each refusal is a :class:`~oloproof.errors.ConfigError` (exit 2) naming the file,
the line, the field, why the rule cannot fail, and what is accepted:

- a policy file with no rules (``policy: none`` in oloproof.yaml is the way to have none);
- a ``block_on`` without ``FAIL``, unless ``FAIL`` is in ``warn_on`` (said on the gate line);
- a rate rule ``min: 0`` or ``max: 1`` (every interval of a rate lies in [0, 1]);
- a MEAN rule at or beyond its metric's declared ``range`` (every score lies in it: a
  score outside is a per-case error, and no interval can leave the range's side the
  threshold is on);
- more generally, a ``min``/``max`` rule that no outcome of the cases in its scope could
  make FAIL: its interval is computed, by the rule's own method and the policy's level,
  for the outcome most against it (every case failing a floor, passing a ceiling; every
  score at the end of the range), and must be able to decide FAIL (``min: 0.1`` on 30
  cases cannot: 0 of 30 still reaches 11.6%);
- an ``observed_count`` budget at least as large as the cases in its scope (the cases of
  its group; times ``trials`` when it counts failed trials);
- a rule on a group value that no case has;
- an ``exact_match``, ``contains`` or ``absolute_error`` evaluator whose expected value no
  case holds (a typo in ``field`` excluded every case);
- a comparison margin at or beyond the width of a MEAN metric's declared range;
- a comparison rule on a criterion the two runs judged by different evaluators;
- a ``superiority`` or ``non_inferiority`` comparison rule on a metric where lower is
  better (an ``absolute_error``, or a MEAN metric or a rate whose release rules are all
  ``max:``):
  both read "higher is better", so their PASS would say the candidate's error grew.

It lives beside the decisions because the last check asks the decision procedure itself
(:func:`oloproof.policy.decide.summarize`, :func:`oloproof.policy.rules.decide_threshold`):
a rule "could fail" exactly when that procedure can answer FAIL.

What only the run can show (every case missing, every case excluded by a custom
evaluator) is decided, not refused: ``no_observed_cases`` and ``max_missing``
(policy/decide.py). Nothing here imports pydantic or PyYAML except to find the line of a
refusal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from oloproof._records import dataclass
from oloproof.enums import MetricKind, RuleState
from oloproof.errors import ConfigError
from oloproof.evidence import CriterionEvidence, group_name
from oloproof.paths import MISSING, lookup
from oloproof.policy.decide import summarize
from oloproof.policy.format import interval_text, level_text, value_text
from oloproof.policy.rules import decide_threshold
from oloproof.project._words import accepted_list, closest, describe
from oloproof.project.policies import IntervalRule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.project._project import Project
    from oloproof.project.policies import ComparePolicy, ReleasePolicy

__all__ = [
    "CaseFacts",
    "PolicySource",
    "check_compare_policy",
    "check_evaluators",
    "check_release_policy",
]

#: The evaluators that compare the output with each case's ``expected`` value.
COMPARING = ("exact_match", "contains", "absolute_error")
#: Aggregates that turn any metric over trials into a rate (one outcome per case).
_RATE_AGGREGATES = ("pass_at_k", "pass_all_k", "flaky_share")


@dataclass(frozen=True)
class PolicySource:
    """Where a policy came from, as messages name it.

    ``display``: the file as the user gave it (``release.yaml``); ``path``: where to read
    it again for the line of a refusal (only then); ``stored_run``: the run the policy
    was stored with, when it was not read from a file."""

    display: str | None
    path: str | None = None
    stored_run: str | None = None

    @classmethod
    def file(cls, display: str, path: str | os.PathLike[str] | None = None) -> PolicySource:
        return cls(display, os.fspath(display if path is None else path))

    @classmethod
    def stored(cls, run_id: str, original: str | None) -> PolicySource:
        shown = f"the policy stored with {run_id}" + (f" ({original})" if original else "")
        return cls(shown, None, run_id)


@dataclass(frozen=True)
class CaseFacts:
    """What the checks need of the cases a policy will be decided on.

    ``metadata``: each case's metadata (None for a case without); ``trials``: calls of the
    system per case; ``where``: the suite or run, for messages."""

    metadata: Sequence[Mapping[str, Any] | None]
    trials: int = 1
    where: str = "the suite"

    @property
    def count(self) -> int:
        return len(self.metadata)


# -- raising, with the line -------------------------------------------------------------


def _line(path: str | None, display: str | None, at: tuple[str | int, ...]) -> int | None:
    """The line of ``at`` in the YAML file at ``path`` (read again, only for a refusal)."""
    if path is None:
        return None
    try:
        from oloproof.project._yaml import load_yaml

        _data, lines = load_yaml(path, display or str(path))
    except Exception:  # noqa: BLE001 - a line is a courtesy; the refusal stands without it
        return None
    return lines.nearest(at)


def _field(at: tuple[str | int, ...]) -> str:
    out = ""
    for part in at:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _refuse(
    source: PolicySource, at: tuple[str | int, ...], detail: str, accepted: str | None = None
) -> ConfigError:
    if source.stored_run is not None:
        detail += " (decide the run under another policy with --policy FILE)"
    return ConfigError(
        detail, file=source.display, field=_field(at) or None,
        line=_line(source.path, source.display, at), accepted=accepted,
    )


# -- release and compare policies --------------------------------------------------------


def _check_blocking(policy: ReleasePolicy | ComparePolicy, source: PolicySource) -> None:
    if "FAIL" in policy.block_on or "FAIL" in policy.warn_on:
        return
    listed = ", ".join(policy.block_on) or "nothing"
    raise _refuse(
        source, ("block_on",),
        f"FAIL is not in block_on (it blocks: {listed}), so a rule that fails would let the"
        " release through without a word. Add FAIL to block_on; to let failures through on"
        " purpose, put FAIL in warn_on (the gate line then says so)",
        accepted="a list holding FAIL, such as [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]",
    )


def _metric_facts(
    metrics: Sequence[Mapping[str, Any]],
) -> dict[str, tuple[MetricKind, tuple[float, float] | None, list[str]]]:
    """Per criterion: kind, declared range, metadata keys it is grouped by."""
    out = {}
    for m in metrics:
        try:
            rng = m.get("range")
            value_range = (float(rng[0]), float(rng[1])) if rng else None
            out[str(m["criterion"])] = (
                MetricKind(m["kind"]), value_range, [str(k) for k in m.get("group_by") or ()]
            )
        except (KeyError, TypeError, ValueError, IndexError):
            continue  # a damaged stored metric: decide_stored says so, with exit 5
    return out


def _number(x: float) -> str:
    """A threshold, margin or range end as written: the shortest decimal that reads back as
    the same float (%g made max: 0.9999999999999999 'max: 1'), an integral one without
    '.0'."""
    text = repr(float(x))
    return text.removesuffix(".0")


def _check_threshold(
    rule: Any, index: int, kind: MetricKind, value_range: tuple[float, float] | None,
    source: PolicySource,
) -> None:
    """A rate ``min: 0`` / ``max: 1``, or a MEAN threshold at or beyond its range."""
    name, bound = ("min", rule.min) if rule.min is not None else ("max", rule.max)
    if bound is None:
        return
    bound = float(bound)
    at = ("rules", index, name)
    rate = kind == MetricKind.BINARY or getattr(rule, "aggregate", None) in _RATE_AGGREGATES
    if rate:
        if name == "min" and bound <= 0:
            raise _refuse(
                source, at,
                f"rule {rule.id}: min: {_number(bound)} on a rate cannot fail: every"
                " interval of a rate lies at or above 0, so the rule would pass whatever the"
                " cases do. Write a floor above 0 (min: 0.8 for 80%), or remove the rule",
                accepted="a number strictly between 0 and 1",
            )
        if name == "max" and bound >= 1:
            raise _refuse(
                source, at,
                f"rule {rule.id}: max: {_number(bound)} on a rate cannot fail: every"
                " interval of a rate lies at or below 1, so the rule would pass whatever the"
                " cases do. Write a ceiling below 1 (max: 0.05 for 5%), or remove the rule",
                accepted="a number strictly between 0 and 1",
            )
        return
    if value_range is None:
        return  # a MEAN metric without a range has no edge to be beyond
    low, high = value_range
    shown = f"[{_number(low)}, {_number(high)}]"
    if name == "max" and bound >= high:
        raise _refuse(
            source, at,
            f"rule {rule.id}: max: {_number(bound)} is at or above the top of {rule.metric}'s"
            f" declared range {shown}: no score can pass it (a score outside the range is a"
            " per-case error), so the rule cannot fail. Write a ceiling inside the range, or"
            " fix the range",
            accepted=f"a number above {_number(low)} and below {_number(high)}",
        )
    if name == "min" and bound <= low:
        raise _refuse(
            source, at,
            f"rule {rule.id}: min: {_number(bound)} is at or below the bottom of"
            f" {rule.metric}'s declared range {shown}: no score can fall under it (a score"
            " outside the range is a per-case error), so the rule cannot fail. Write a floor"
            " inside the range, or fix the range",
            accepted=f"a number above {_number(low)} and below {_number(high)}",
        )


def _worst_case(
    rate: bool, direction: str, scope: int, trials: int, value_range: tuple[float, float] | None,
    per_trial: bool,
) -> CriterionEvidence:
    """The evidence most against a rule: every case of its scope failing a floor (passing
    a ceiling); every score at the end of the range a ceiling (floor) is against."""
    if rate:
        passed = direction == "max"
        if per_trial:
            ev = CriterionEvidence("worst", MetricKind.BINARY, trials=trials)
            for i in range(scope):
                ev.add_case(str(i), [("OK", passed, None)] * trials)
            return ev
        ev = CriterionEvidence("worst", MetricKind.BINARY)
        ev.passed, ev.failed = (scope, 0) if passed else (0, scope)
        return ev
    if value_range is not None:
        score = value_range[1] if direction == "max" else value_range[0]
    else:  # unbounded: any score far beyond the threshold
        score = 1e9 if direction == "max" else -1e9
    ev = CriterionEvidence("worst", MetricKind.MEAN, value_range)
    if per_trial:
        ev.trials = trials
        for i in range(scope):
            ev.add_case(str(i), [("OK", None, score)] * trials)
    else:
        ev.scores = [score] * scope
    return ev


def _rate_cases_needed(direction: str, threshold: float, level: float) -> int | None:
    """The fewest cases whose Clopper-Pearson interval, all failing (``min``) or all
    passing (``max``), lies beyond ``threshold``: for ``min``, 1 - (a/2)^(1/N) < t; for
    ``max``, (a/2)^(1/N) > t. Checked with the interval itself."""
    import math

    half = (1.0 - level) / 2.0
    edge = 1.0 - threshold if direction == "min" else threshold
    if not 0.0 < edge < 1.0:
        return None
    n = max(1, int(math.log(half) / math.log(edge)) - 1)
    for _ in range(6):
        ev = _worst_case(True, direction, n, 1, None, False)
        s = summarize(ev, level)
        if s.lower is not None and s.upper is not None and decide_threshold(
            s.lower, s.upper, threshold, direction  # type: ignore[arg-type]
        ) == RuleState.FAIL:
            return n
        n += 1
    return None


def _check_could_fail(
    rule: Any, index: int, kind: MetricKind, value_range: tuple[float, float] | None,
    scope: int, what: str, cases: CaseFacts, level: float, source: PolicySource,
) -> None:
    """A ``min``/``max`` rule that no outcome of its scope could make FAIL."""
    if getattr(rule, "estimate", "judge") == "corrected":
        return  # decided on human labels (prediction-powered): MANUAL_REVIEW until then
    direction, threshold = ("min", rule.min) if rule.min is not None else ("max", rule.max)
    if threshold is None:
        return
    threshold = float(threshold)
    aggregate = getattr(rule, "aggregate", None)
    rate = kind == MetricKind.BINARY or aggregate in _RATE_AGGREGATES
    per_trial = cases.trials > 1 and aggregate in (None, "mean")
    ev = _worst_case(rate, direction, scope, cases.trials, value_range, per_trial)
    s = summarize(ev, level)
    if s.lower is not None and s.upper is not None and decide_threshold(
        s.lower, s.upper, threshold, direction  # type: ignore[arg-type]
    ) == RuleState.FAIL:
        return
    shown_kind = MetricKind.BINARY if rate else MetricKind.MEAN
    bar = value_text(threshold, shown_kind)
    unit = f"{scope} case{'s' if scope != 1 else ''}"
    if per_trial:
        unit += f" × {cases.trials} trials"
    if s.lower is None or s.upper is None:
        outcome = f"{unit} give no interval at all (a MEAN needs at least 2 scores)"
    else:
        if rate:
            worst = "every case passed" if direction == "max" else "every case failed"
        else:
            end = "top" if direction == "max" else "bottom"
            worst = (f"every score were at the {end} of the range" if value_range is not None
                     else "every score were far beyond it")
        side = "above" if direction == "max" else "below"
        outcome = (f"even if {worst}, the {level_text(level)} interval of {unit},"
                   f" {interval_text(s.lower, s.upper, shown_kind)}, would not lie {side}"
                   f" {bar}")
    needed = ""
    if rate and not per_trial:
        n = _rate_cases_needed(direction, threshold, level)
        if n is not None:
            needed = f"; it takes at least {n} cases"
    fix = "a higher floor" if direction == "min" else "a lower ceiling"
    raise _refuse(
        source, ("rules", index, direction),
        f"rule {rule.id}: {direction}: {_number(threshold)} cannot fail on {what}: {outcome},"
        f" so the rule could only pass or stay undecided{needed}. Add cases, write {fix},"
        " or remove the rule",
    )


def _values(cases: CaseFacts, key: str) -> dict[str, int]:
    """The values of ``metadata[key]`` among the cases, as group names show them, with
    how many cases have each (a case without the key is in the group ``null``)."""
    counts: dict[str, int] = {}
    for metadata in cases.metadata:
        value = metadata.get(key) if isinstance(metadata, Mapping) else None
        shown = _shown(value)
        counts[shown] = counts.get(shown, 0) + 1
    return counts


def _shown(value: object) -> str:
    """A group value as :func:`oloproof.evidence.group_name` spells it."""
    return group_name("", "", value)[2:-1]  # "[=" + shown + "]"


def _check_group(rule: Any, index: int, cases: CaseFacts, source: PolicySource) -> int:
    """A rule's group must be one some case has; returns how many cases it has."""
    ((key, value),) = rule.group.items()
    counts = _values(cases, key)
    wanted = _shown(value)
    if counts.get(wanted):
        return counts[wanted]
    at = ("rules", index, "group", key)
    present = sorted(v for v in counts if v != "null")
    if not present:
        keys = sorted({
            str(k) for m in cases.metadata if isinstance(m, Mapping) for k in m
        })
        hint = closest(key, keys)
        raise _refuse(
            source, at,
            f"rule {rule.id}: no case of {cases.where} has the metadata key '{key}', so the"
            f" group {key} = {describe(value)} holds no case and the rule would be decided on"
            " nothing" + (f"; did you mean '{hint}'?" if hint else ""),
            accepted=(f"a group some case has; metadata keys of {cases.where}:"
                      f" {', '.join(keys)}" if keys else "a group some case has"),
        )
    raise _refuse(
        source, at,
        f"rule {rule.id}: no case of {cases.where} has {key} = {describe(value)}, so the rule"
        " would be decided on no case at all",
        accepted=accepted_list(present, wanted if isinstance(value, str) else None),
    )


def _check_budget(
    rule: Any, index: int, scope: int, what: str, trials: int, source: PolicySource
) -> None:
    """An ``observed_count`` budget that the whole scope failing could not exceed."""
    budget = int(rule.max_failures)
    counts_trials = trials > 1 and getattr(rule, "aggregate", None) is None
    units = scope * trials if counts_trials else scope
    if budget < units:
        return
    if counts_trials:
        size = (f"{scope} cases × {trials} trials = {units} trials in {what}; the rule"
                " counts failed trials")
    else:
        size = f"{units} case{'s' if units != 1 else ''} in {what}"
    raise _refuse(
        source, ("rules", index, "max_failures"),
        f"rule {rule.id}: max_failures: {budget} allows as many failures as there can be"
        f" ({size}), so the rule cannot fail. Allow fewer, or remove the rule",
        accepted=f"a whole number from 0 to {max(units - 1, 0)}",
    )


def check_release_policy(
    policy: ReleasePolicy,
    source: PolicySource,
    metrics: Sequence[Mapping[str, Any]],
    cases: CaseFacts | None = None,
    *,
    declared_none: bool = False,
    group_by: Sequence[str] = (),
) -> None:
    """Refuse a release policy that cannot block, or a rule of it that cannot fail.

    ``metrics``: the run's metrics as it stores them (``criterion``, ``kind``, ``range``,
    ``group_by``); ``cases``: the cases it is decided on (None: the checks that need them
    are left out, for a run of part of the suite); ``declared_none``: the project says
    ``policy: none`` (its empty policy is a declaration, not a mistake); ``group_by``:
    metadata keys every metric is grouped by besides its own."""
    if declared_none:
        return
    if not policy.rules:
        raise _refuse(
            source, ("rules",),
            "the release policy declares no rules: it could not block anything, even a run"
            " whose every case failed. Write policy: none in oloproof.yaml to declare a"
            " project without release rules (the gate then says so), or add a rule",
            accepted="a list of at least one rule",
        )
    _check_blocking(policy, source)
    facts = _metric_facts(metrics)
    bonferroni = _bonferroni_sizes(policy, facts, cases, group_by) if cases is not None else {}
    for index, rule in enumerate(policy.rules):
        known = facts.get(rule.metric)
        if known is None:
            continue  # an unknown metric is refused by the loader, or by decide_stored
        kind, value_range, keys = known
        if isinstance(rule, IntervalRule):
            _check_threshold(rule, index, kind, value_range, source)
        if cases is None:
            continue
        group = getattr(rule, "group", None)
        scope, what = cases.count, cases.where
        if group is not None:
            scope = _check_group(rule, index, cases, source)
            ((key, value),) = group.items()
            what = f"the group {key} = {describe(value)}"
        level = float(policy.confidence_level)
        family = getattr(rule, "family", None)
        if family in bonferroni:
            # Each rule of a Bonferroni family is decided at 1 - alpha/k; under Holm the
            # last step decides at the policy's own level, so a rule could fail there.
            level = 1.0 - (1.0 - level) / bonferroni[family]
        if isinstance(rule, IntervalRule):
            if getattr(rule, "each_group", False):
                for key in dict.fromkeys([*keys, *group_by]):
                    for value, size in _values(cases, key).items():
                        _check_could_fail(rule, index, kind, value_range, size,
                                          f"the {size} cases of the group {key} = {value}",
                                          cases, level, source)
            else:
                _check_could_fail(rule, index, kind, value_range, scope,
                                  f"the {scope} cases of {what}", cases, level, source)
            continue
        if getattr(rule, "each_group", False):
            for key in dict.fromkeys([*keys, *group_by]):
                for value, size in _values(cases, key).items():
                    _check_budget(rule, index, size, f"the group {key} = {value}",
                                  cases.trials, source)
        else:
            _check_budget(rule, index, scope, what, cases.trials, source)


def _bonferroni_sizes(
    policy: ReleasePolicy,
    facts: Mapping[str, tuple[MetricKind, tuple[float, float] | None, list[str]]],
    cases: CaseFacts, group_by: Sequence[str],
) -> dict[str, int]:
    """Per Bonferroni family, how many rules it holds once ``each_group`` is expanded."""
    families = getattr(policy, "families", None) or {}
    sizes: dict[str, int] = {}
    for rule in policy.rules:
        family = getattr(rule, "family", None)
        if family is None or family not in families:
            continue
        if families[family].multiplicity != "bonferroni":
            continue
        count = 1
        if getattr(rule, "each_group", False):
            keys = facts.get(rule.metric, (None, None, []))[2]
            count = sum(len(_values(cases, key)) for key in dict.fromkeys([*keys, *group_by]))
        sizes[family] = sizes.get(family, 0) + count
    return sizes


def _refuse_direction(
    rule: Any, index: int, metric: Mapping[str, Any], source: PolicySource
) -> None:
    """A ``superiority`` or ``non_inferiority`` rule on a metric where lower is better.

    Both read the difference candidate - baseline as "higher is better": on an error its
    PASS would say that the candidate's error grew (or did not shrink by much), and a
    regression would be allowed."""
    name = rule.metric
    why = metric.get("better_why") or "lower is better for it"
    margin = float(rule.margin or 0.0)
    if rule.kind == "superiority":
        reading = (f"its PASS would mean that the candidate's {name} grew"
                   + (f" by more than {_number(margin)}" if margin > 0 else ""))
    else:
        reading = (f"it would PASS however much the candidate's {name} grew, and FAIL only"
                   f" when it shrank by more than {_number(margin)}")
    raise _refuse(
        source, ("rules", index, "kind"),
        f"rule {rule.id}: {rule.kind} reads the difference candidate - baseline as \"higher"
        f" is better\", but lower is better for {name} ({why}): {reading}, so a regression"
        f" would be allowed. Write kind: equivalence on {name} (it passes only when the"
        " difference lies within ±margin, whichever way), or put the rule on a metric where"
        " higher is better",
        accepted=f"kind: equivalence on {name}, or superiority/non_inferiority on a metric"
        " where higher is better",
    )


def check_compare_policy(
    policy: ComparePolicy, source: PolicySource, metrics: Mapping[str, Mapping[str, Any]]
) -> None:
    """Refuse a comparison policy that cannot block, or a rule that cannot fail.

    ``metrics``: the metrics both runs hold (``kind`` and ``range`` of each,
    ``judged_apart``: what differs when the runs judged it by different evaluators, and
    ``better``: ``lower`` for a metric where lower is better, with ``better_why``, as
    :func:`oloproof.analysis.compare.metric_better` says; a rule that reads "higher is
    better" on such a metric is refused)."""
    if not policy.rules:
        raise _refuse(
            source, ("rules",),
            "the comparison policy declares no rules: it could not block anything. Remove"
            " the file to compare without rules (the comparison then decides nothing and"
            " says so), or add a rule",
            accepted="a list of at least one rule",
        )
    _check_blocking(policy, source)
    for index, rule in enumerate(policy.rules):
        m = metrics.get(rule.metric)
        if m is not None and m.get("judged_apart"):
            raise _refuse(
                source, ("rules", index, "metric"),
                f"rule {rule.id}: the two runs judged {rule.metric} by different evaluators"
                f" ({m['judged_apart']}): its difference would mix the change of system with"
                " the change of evaluator, so the rule could pass or fail on the evaluator"
                " alone. Compare runs whose configurations judge it alike (run one of them again"
                " with the other's evaluator: its system's answers come from the cache)",
                accepted="a metric both runs judged with the same evaluator",
            )
        if m is not None and m.get("better") == "lower" and rule.kind != "equivalence":
            _refuse_direction(rule, index, m, source)
        rng = m.get("range") if m is not None else None
        if m is None or m.get("kind") != MetricKind.MEAN or not rng:
            continue  # a rate's margin is refused at 1 or more by the loader
        width = float(rng[1]) - float(rng[0])
        margin = float(rule.margin or 0.0)
        if rule.kind in ("non_inferiority", "equivalence") and margin >= width:
            raise _refuse(
                source, ("rules", index, "margin"),
                f"rule {rule.id}: margin {_number(margin)} is at or beyond the widest"
                f" difference {rule.metric} can show ({_number(width)}, the width of its"
                f" declared range [{_number(float(rng[0]))}, {_number(float(rng[1]))}]), so"
                " the rule cannot fail. Write a smaller margin",
                accepted=f"a number above 0 and below {_number(width)}",
            )


# -- evaluators against the suite --------------------------------------------------------


def check_evaluators(project: Project, expected: Sequence[Mapping[str, Any] | None]) -> None:
    """Refuse an evaluator that compares with an expected value no case holds.

    ``expected``: each case's ``expected`` (None for a case without). A typo in ``field``
    (``lable``) would exclude every case, and a rule on the metric would be decided on
    nothing; a suite without any ``expected`` cannot feed such an evaluator either."""
    import json

    from oloproof.project.config import nothing_to_find

    having = [e for e in expected if isinstance(e, Mapping)]
    for index, ev in enumerate(project.config.evaluators):
        if ev.type not in COMPARING:
            continue
        explicit = getattr(ev, "expected_field", None)
        key = explicit or getattr(ev, "field", None)
        found = [v for v in (lookup(e, key) for e in having) if v is not MISSING]
        at: tuple[str | int, ...] = ("evaluators", index)
        dataset = project.dataset_display
        if found and ev.type == "contains" and all(nothing_to_find(v) for v in found):
            # "", null and [] ask for no text: each such case is excluded when it is judged.
            field = "expected_field" if explicit else "field"
            raise ConfigError(
                f"every case of {dataset} that has expected.{key} holds an empty value"
                f" ({', '.join(sorted({json.dumps(v) for v in found}))}): contains"
                f" ({ev.criterion}) would find the empty text in any output, so every case"
                " is excluded and a rule on the metric decided on nothing. Fill in the"
                " expected texts",
                file=project.display, field=_field((*at, field)),
                line=_line(project.config_path, project.display, (*at, field)),
                accepted="a non-empty text, or a list holding one, in some case's expected",
            )
        if found:
            continue
        if not having:
            raise ConfigError(
                f"{ev.type} ({ev.criterion}) compares each output with the case's expected"
                f" value, and no case of {dataset} has an expected: every case would be"
                " excluded and a rule on the metric decided on nothing. Add \"expected\""
                " to the cases, or use an evaluator that needs none",
                file=project.display, field=_field(at),
                line=_line(project.config_path, project.display, at),
                accepted=f"cases with \"expected\": {{...}} in {dataset}",
            )
        name = "expected_field" if explicit else "field"
        at = (*at, name)
        keys = sorted({str(k) for e in having for k in e})
        first = str(key).split(".")[0] if key else ""
        hint = closest(first, keys) if first else None
        raise ConfigError(
            f"no case of {dataset} has expected.{key}: every case would be excluded from"
            f" {ev.criterion} and a rule on it decided on nothing"
            + (f"; did you mean '{hint}'?" if hint and hint != first else ""),
            file=project.display, field=_field(at),
            line=_line(project.config_path, project.display, at),
            accepted=f"a key of the cases' expected: {', '.join(keys)}",
        )

