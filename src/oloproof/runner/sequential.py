"""A sequential run (``oloproof run --sequential``): its order, and the sink that decides.

:func:`make_sequential` checks that the policy can be decided sequentially and puts the
cases in the run's seeded order (each keeps its place in the suite, ``index``), so that the
system workers take them in that order. :class:`SequentialSink` receives every event; it
holds the outcomes of cases that finished before an earlier case of the order, feeds the
policy's tests (policy/sequential.py ``Monitor``) in the order only, emits ``rule_decided``,
and says when every rule is decided: the case iterator then hands out no more cases, the
calls in flight finish and are stored, and the run is decided from the store
(analysis/sequential.py), which replays the same order and stops at the same case.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from oloproof.errors import ConfigError
from oloproof.events import CaseJudged, Event, RuleDecided
from oloproof.evidence import group_name
from oloproof.policy.sequential import (
    WITHOUT,
    Monitor,
    SequentialSpec,
    refusal,
    sequential_order_key,
)

if TYPE_CHECKING:
    from oloproof.runner.build import Prepared

__all__ = ["SequentialSink", "make_sequential", "sequential_json"]


def make_sequential(
    prepared: Prepared, seed: int | None = None, *, baseline: str | None = None,
    compare_policy: str | None = None, asked: bool = True,
) -> SequentialSpec:
    """Check ``prepared`` can run sequentially, order its cases, and return the spec
    (seed and margin from ``sequential:`` in oloproof.yaml, defaults otherwise; ``seed``
    overrides). ``baseline``: a stored run whose comparison rules (compare.yaml, or
    ``compare_policy``) the run decides too, and stops for (:func:`attach_baseline`).
    ``asked``: the run was asked for with ``--sequential`` (else by oloproof.yaml), which
    says how a refusal tells the user to turn it off."""
    where = prepared.policy_path or "the release policy"
    off = WITHOUT if asked else (
        f"turn sequential decisions off (sequential: false in {prepared.project.display})")
    if not prepared.policy.rules:
        raise ConfigError(
            "a sequential run stops once its rules are decided, and the project has no"
            " release rules (policy: none): run without --sequential",
            accepted="a release policy with at least one rule",
        )
    why = refusal(prepared.policy, prepared.metrics, prepared.trials, off)
    if why is not None:
        raise ConfigError(f"{where}: {why}")
    config = prepared.project.config.sequential
    chosen = seed if seed is not None else (config.seed if config is not None else 0)
    margin = float(config.margin) if config is not None else 0.05
    spec = SequentialSpec(int(chosen), len(prepared.cases), margin)
    scope = {}
    for rule in prepared.policy.rules:
        group = getattr(rule, "group", None)
        if group:
            (key, value), = group.items()
            name = group_name(rule.metric, key, value)
            scope[rule.id] = sum(
                1 for c in prepared.cases
                if group_name(rule.metric, key, (c.metadata or {}).get(key)) == name
            )
    unfailable = Monitor(prepared.policy, prepared.metrics, spec).unfailable(scope, off)
    if unfailable is not None:
        raise _rule_error(prepared, *unfailable)
    if baseline is not None:
        attach_baseline(prepared, spec, baseline, compare_policy)
    elif compare_policy is not None:
        raise ConfigError("--compare-policy names the comparison rules a sequential run decides"
                          " against a stored run: give that run with --baseline RUN")
    prepared.cases.sort(key=lambda c: sequential_order_key(spec.seed, c.id))
    prepared.sequential = spec
    return spec


def _rule_error(prepared: Prepared, result: Any, why: str) -> ConfigError:
    """``why`` a rule cannot be decided sequentially, at the line of its threshold
    (``rules[0].min``) in the release policy, when the policy is a file."""
    index = next(i for i, rule in enumerate(prepared.policy.rules) if rule.id == result.rule)
    error = ConfigError(why, field=f"rules[{index}].{result.direction}")
    if prepared.policy_path is None:
        return error
    from oloproof.project._yaml import with_line  # only on the way to an error

    return with_line(error, prepared.policy_path, prepared.policy_path)


def attach_baseline(
    prepared: Prepared, spec: SequentialSpec, ref: str, policy_arg: str | None
) -> None:
    """Load the stored run ``ref`` and the comparison policy (``policy_arg``, else
    compare.yaml beside oloproof.yaml) onto ``prepared.baseline``: the run then feeds its
    paired tests too, in the same order, and stops once they are decided as well
    (docs/sequential-decisions.md, "Comparisons")."""
    from oloproof.analysis.compare import metric_better, resolve_compare_policy, run_ref
    from oloproof.analysis.sequential import load_baseline
    from oloproof.store.db import open_store
    from oloproof.store.location import locate

    run_ref(ref, "--baseline")
    project = prepared.project
    kinds = {str(m["criterion"]): str(m["kind"]) for m in prepared.metrics}
    policy, path, _note = resolve_compare_policy(
        project.config_path, project.root, policy_arg, kinds)
    if path is None or not policy.rules:
        raise ConfigError(
            "--baseline decides the comparison rules of compare.yaml while the run goes,"
            + (" and there is no compare.yaml beside oloproof.yaml" if path is None else
               f" and {path} declares none")
            + ": write one (docs/compare-a-change.md), or pass --compare-policy FILE",
            accepted="a comparison policy with at least one rule",
        )
    from oloproof.policy.can_fail import PolicySource, check_compare_policy

    # As `compare` refuses it: a policy that cannot block, a margin that cannot fail, a
    # rule that reads "higher is better" on a metric where lower is better.
    types = {e.criterion: e.type for e in project.config.evaluators}
    release = prepared.policy.dump(mode="json")
    check_compare_policy(policy, PolicySource.file(path), {
        str(m["criterion"]): {
            "kind": m["kind"], "range": m.get("range"),
            **metric_better(str(m["criterion"]), str(m["kind"]),
                            types.get(str(m["criterion"])), release),
        }
        for m in prepared.metrics
    })
    clash = [r.id for r in policy.rules if r.id in {q.id for q in prepared.policy.rules}]
    if clash:
        raise ConfigError(f"{path}: comparison rule {clash[0]} has the id of a release rule;"
                          " a sequential run decides both, so their ids must differ")
    conn = open_store(locate(project.config_path), create=False)
    try:
        found = load_baseline(conn, ref, prepared.metrics, policy,
                              {c.id: (c.input, c.expected) for c in prepared.cases})
    finally:
        conn.close()
    suite = {c.id for c in prepared.cases}
    shared = sum(1 for c in found.outcomes.get(policy.rules[0].metric, {}) if c in suite)
    why = Monitor(prepared.policy, prepared.metrics, spec, found).unfailable_comparison(shared)
    if why is not None:
        raise ConfigError(f"{path}: {why}")
    prepared.baseline = found
    prepared.compare_policy_path = path


def sequential_json(prepared: Prepared) -> dict[str, Any] | None:
    """What the store keeps of a sequential run: its spec and its case ids in order."""
    spec = prepared.sequential
    if spec is None:
        return None
    data = {**spec.to_json(), "order": [c.id for c in prepared.cases]}
    if prepared.baseline is not None:
        data["baseline"] = {"run_id": prepared.baseline.run_id,
                            "policy": prepared.baseline.policy.dump(mode="json"),
                            "policy_path": prepared.compare_policy_path}
    return data


class SequentialSink:
    """The events of a sequential run in, ``rule_decided`` events out (see the module)."""

    def __init__(self, prepared: Prepared, run_id: str, emit: Callable[[Event], None]) -> None:
        assert prepared.sequential is not None
        self.spec = prepared.sequential
        self.monitor = Monitor(prepared.policy, prepared.metrics, self.spec, prepared.baseline)
        self.order = [c.id for c in prepared.cases]
        self.metadata = {c.id: c.metadata for c in prepared.cases}
        self.criteria = len(prepared.metrics)
        self.run_id = run_id
        self.emit = emit
        self.waiting: dict[str, dict[str, tuple[str, bool | None, float | None]]] = {}
        self.next = 0

    @property
    def decided(self) -> bool:
        return self.monitor.done

    def handle(self, event: Event) -> None:
        if not isinstance(event, CaseJudged) or event.trial:
            return
        held = self.waiting.setdefault(event.scenario_id, {})
        held[event.criterion] = (event.status, event.passed, event.score)
        self._advance()

    def _advance(self) -> None:
        monitor = self.monitor
        while not monitor.done and self.next < len(self.order):
            case_id = self.order[self.next]
            held = self.waiting.get(case_id)
            if held is None or len(held) < self.criteria:
                return  # an earlier case of the order is still running: the others wait
            del self.waiting[case_id]
            self.next += 1
            for result in monitor.feed(self.metadata.get(case_id), held, case_id):
                counted = result.max_failures is not None
                self.emit(RuleDecided(
                    self.run_id, rule=result.rule, metric=result.metric,
                    state=str(result.state), n=result.position, n_scope=result.n,
                    cases_total=self.spec.cases_total,
                    e_value=None if counted else _finite(result.e_value),
                    e_threshold=None if counted else 2.0 / (1.0 - result.level),
                    method=result.method,
                ))


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 1.7976931348623157e308
