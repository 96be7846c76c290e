"""A matrix of variants (``run --matrix``, ``oloproof.run(..., matrix=True)``).

Every variant of ``matrix:`` in oloproof.yaml is built and checked first (a bad template,
a missing key or prompt file in any variant stops everything before a call, exit 2), then
run as a run of its own, one after another: each run keeps ``concurrency.system`` calls in
flight, so an endpoint never sees more from the matrix than one run sends (one limit per
endpoint across the variants, however many variants share it), and each run's judges keep
``concurrency.judge``. The judge cache is shared: a variant whose output for a case equals
another's is not judged again. Then the matrix is concluded from the stored runs
(analysis/matrix.py) and stored with an ``mx_`` id.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from oloproof._records import dataclass, field
from oloproof.enums import ExitCode

if TYPE_CHECKING:
    from oloproof.analysis.matrix import MatrixComparison
    from oloproof.api._results import RunResult
    from oloproof.api._run import EventCallback, PreparedRun
    from oloproof.runner import StopRequest

__all__ = ["MatrixResult", "VariantResult", "conclude", "load_matrix", "run_matrix"]


@dataclass
class VariantResult:
    """One variant: its name, what it changes of ``system.model``, and its run."""

    name: str
    overrides: dict[str, Any]
    result: RunResult
    baseline: bool = False

    @property
    def run_id(self) -> str:
        return self.result.run_id


@dataclass
class MatrixResult:
    """What a matrix concluded: one run per variant, and the comparisons with the baseline.

    ``comparisons`` hold every other variant against the baseline on every metric, under
    Holm's procedure across all of them (``verdict``: ``better``, ``worse`` or ``not
    separated``). ``exit_code`` is the baseline's gate, or 5 when a variant's run did not
    finish (docs/prompts-and-models.md)."""

    matrix_id: str
    project: str
    baseline: str
    variants: list[VariantResult]
    comparisons: list[MatrixComparison]
    confidence_level: float
    exit_code: int
    ranking: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)

    def variant(self, name: str) -> VariantResult:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"no variant {name!r} (variants: {', '.join(self.names)})")

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.variants]

    def better_than_baseline(self, metric: str | None = None) -> list[str]:
        """The variants shown better than the baseline (on ``metric``, or on any metric)."""
        return list(dict.fromkeys(
            c.variant for c in self.comparisons
            if c.verdict == "better" and (metric is None or c.metric == metric)
        ))

    def to_json(self) -> dict[str, Any]:
        return dict(self.document)


def load_matrix(
    project: str | os.PathLike[str] = ".",
    *,
    policy: str | os.PathLike[str] | None = None,
    group_by: Sequence[str] | str | None = None,
    trials: int | None = None,
    limit: int | None = None,
    cases: Sequence[str] | None = None,
    where: Sequence[str] | str | None = None,
    variants: Sequence[str] | None = None,
    sequential: bool | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
) -> tuple[list[PreparedRun], str]:
    """Every variant loaded, built and checked (nothing stored or called), and the
    baseline's name. ``variants`` runs only those (the baseline is always among them).
    ``sequential`` (else ``sequential:`` in oloproof.yaml): each variant is decided
    sequentially, its cases in the same seeded order (analysis/matrix.py). ``executor="ray"``
    (else ``executor:`` in oloproof.yaml): each variant's calls run on Ray workers that
    built that variant's system, Ray started once for the whole matrix
    (runner/ray_executor.py ``RayShare``)."""
    from oloproof.api._listing import config_file
    from oloproof.api._run import load
    from oloproof.errors import UsageError
    from oloproof.ids import new_matrix_id
    from oloproof.runner.build import load_configuration

    config = config_file(project)
    project_, _, _, _ = load_configuration(config, None if policy is None else str(policy))
    matrix = project_.config.matrix
    if matrix is None:
        raise UsageError(
            f"{project_.display} declares no matrix: add a matrix: block (product: or"
            " variants:) to run --matrix (docs/prompts-and-models.md)"
        )
    names = matrix.names()
    baseline = matrix.baseline_name()
    chosen = names
    if isinstance(variants, str):
        variants = [variants]  # one name, as cases= and where= take one
    if variants:
        unknown = [v for v in variants if v not in names]
        if unknown:
            raise UsageError(
                f"no variant '{unknown[0]}' in the matrix of {project_.display}"
                f" (variants: {', '.join(names)})"
            )
        chosen = [n for n in names if n in variants or n == baseline]
    matrix_id = new_matrix_id()
    loaded: list[PreparedRun] = []
    share = None
    for name in chosen:
        run = load(config, policy=policy, group_by=group_by, trials=trials, limit=limit,
                   cases=cases, where=where, variant=name, sequential=sequential,
                   executor=executor, ray_address=ray_address)
        ray = getattr(run.prepared.system, "executor", None)
        if ray is not None and hasattr(ray, "share"):  # the Ray executor: one start for all
            if share is None:
                from oloproof.runner.ray_executor import RayShare

                share = RayShare()
            ray.share = share
        run.prepared.matrix = {
            "id": matrix_id, "variant": name, "index": names.index(name),
            "baseline": baseline, "variants": len(chosen),
        }
        loaded.append(run)
    return loaded, baseline


def run_matrix(
    loaded: Sequence[PreparedRun],
    baseline: str,
    *,
    use_cache: bool = True,
    sinks: Sequence[EventCallback] = (),
    stop: StopRequest | None = None,
    on_variant: Any = None,
) -> MatrixResult:
    """Run every loaded variant, one after another, then conclude and store the matrix.
    A stop (a signal, a closed output) ends the variant running and skips the rest."""
    from oloproof.api._run import execute
    from oloproof.runner import StopRequest

    stop = stop or StopRequest()
    results: list[tuple[PreparedRun, RunResult]] = []
    share = _ray_share(loaded)
    try:
        for run in loaded:
            if stop.reason is not None:
                break
            if on_variant is not None:
                on_variant(run)
            results.append((run, execute(run, use_cache=use_cache, sinks=sinks, stop=stop)))
            if stop.reason is not None and stop.count == 0:
                # The run stopped itself (a 401 or a dead endpoint of this variant, a store
                # fault): that run is RUN_ERROR/PARTIAL, and the next variant, which may
                # reach another endpoint with another key, still runs. A signal or a closed
                # output (stop.count > 0) stops the matrix.
                stop.reason = None
    finally:
        if share is not None:
            share.close()  # Ray, started once for the matrix, stops with it
    return conclude(loaded, results, baseline)


def _ray_share(loaded: Sequence[PreparedRun]) -> Any:
    """The Ray start the variants share (runner/ray_executor.py ``RayShare``), or None."""
    for run in loaded:
        share = getattr(getattr(run.prepared.system, "executor", None), "share", None)
        if share is not None:
            return share
    return None


def _ran_on(run: PreparedRun) -> dict[str, Any] | None:
    """Where a variant's calls ran, when Ray workers made them (None: in this process, or
    every result came from the cache and Ray was never needed)."""
    executor = getattr(run.prepared.system, "executor", None)
    if executor is None or not getattr(executor, "workers", None):
        return None
    return {"executor": "ray", "ray_job": executor.job, "said": executor.describe(),
            "workers": [list(w) for w in executor.workers]}


def _estimates(result: RunResult) -> dict[str, float | None]:
    return {name: s.estimate for name, s in result.metrics.items()}


def _metric_json(summary: Any) -> dict[str, Any]:
    return {
        "metric": summary.metric, "kind": str(summary.kind), "estimate": summary.estimate,
        "lower": summary.lower, "upper": summary.upper, "observed": summary.observed,
        "missing": summary.missing, "excluded": summary.excluded, "passed": summary.passed,
        "method": summary.method, "range": list(summary.value_range)
        if summary.value_range else None,
    }


def conclude(
    loaded: Sequence[PreparedRun],
    results: Sequence[tuple[PreparedRun, RunResult]],
    baseline: str,
) -> MatrixResult:
    """The matrix from its variants' stored runs: the table, the comparisons under Holm,
    the exit code; stored with its ``mx_`` id."""
    from oloproof.analysis.matrix import conclude_matrix, matrix_exit_code, metric_direction
    from oloproof.events import utc_timestamp
    from oloproof.runner.build import matrix_variant
    from oloproof.store.db import open_store
    from oloproof.store.location import locate
    from oloproof.store.matrices import write_matrix
    from oloproof.store.reader import get_run

    first = loaded[0].prepared
    project = first.project
    assert first.matrix is not None
    matrix_id = str(first.matrix["id"])
    level = float(first.policy.confidence_level)
    kinds = {m["criterion"]: m["kind"] for m in first.metrics}
    types = {e.criterion: e.type for e in project.config.evaluators}
    stored_policy = first.policy.dump(mode="json")
    directions = {
        c: metric_direction(c, k, types.get(c), stored_policy) for c, k in kinds.items()
    }
    by_name = {run.prepared.variant: result for run, result in results}
    variants: list[VariantResult] = []
    for run, result in results:
        name = str(run.prepared.variant)
        overrides = dict(matrix_variant(project, name).overrides())
        if overrides.get("base_url"):
            from oloproof.transport.http import shown_url

            overrides["base_url"] = shown_url(overrides["base_url"])  # no user info, no query
        variants.append(VariantResult(name, overrides, result, baseline=name == baseline))
    conn = open_store(locate(project.config_path))
    try:
        warnings: list[str] = []
        comparisons: list[MatrixComparison] = []
        ranking: dict[str, list[dict[str, Any]]] = {}
        if baseline in by_name:
            comparisons, warnings, ranking = conclude_matrix(
                conn, [(v.name, v.run_id) for v in variants], baseline, level, directions,
                {v.name: _estimates(v.result) for v in variants},
            )
            base_record = get_run(conn, by_name[baseline].run_id)
            others = [get_run(conn, v.run_id) for v in variants if v.name != baseline]
            exit_code = matrix_exit_code(base_record, others)
        else:
            warnings.append(f"the baseline {baseline} did not run: nothing is compared")
            exit_code = int(ExitCode.INCOMPLETE)
        skipped = [r.prepared.variant for r in loaded if r.prepared.variant not in by_name]
        if skipped:
            warnings.append(
                f"the matrix stopped before {len(skipped)} variant(s) ran: "
                + ", ".join(str(s) for s in skipped)
            )
            exit_code = (exit_code if exit_code == int(ExitCode.FAIL)
                         else int(ExitCode.INCOMPLETE))
        document = {
            "matrix_id": matrix_id,
            "project": project.config.project,
            "created_at": utc_timestamp(),
            "confidence_level": level,
            "baseline": baseline,
            "family": {"method": "holm", "size": len(comparisons),
                       "family_wise_level": level},
            "exit_rule": "the baseline's gate; 5 when a variant's run did not finish",
            "ray_starts": getattr(_ray_share(loaded), "starts", None),
            "exit_code": exit_code,
            "metrics": [{"metric": c, "kind": str(k), "better_is": directions[c]}
                        for c, k in kinds.items()],
            "variants": [
                {
                    "name": v.name, "run_id": v.run_id, "baseline": v.baseline,
                    "overrides": v.overrides,
                    "system": getattr(r.prepared.system, "describe", dict)(),
                    "state": f"{v.result.status}/{v.result.completeness}",
                    "gate": str(v.result.gate), "exit_code": v.result.exit_code,
                    "metrics": [_metric_json(s) for s in v.result.metrics.values()],
                    "decisions": [d.to_json() for d in v.result.decisions],
                    "sequential": v.result.sequential,
                    "ran_on": _ran_on(r),
                }
                for v, (r, _) in zip(variants, results, strict=True)
            ],
            "comparisons": [c.to_json() for c in comparisons],
            "ranking": ranking,
            "warnings": warnings,
        }
        write_matrix(conn, document)
    finally:
        conn.close()
    return MatrixResult(
        matrix_id, str(project.config.project), baseline, variants, comparisons, level,
        exit_code, ranking, warnings, document,
    )

