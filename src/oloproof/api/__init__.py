"""Oloproof from Python: run a project, read what it stored, compare runs, plan.

The functions and result types listed in ``oloproof.__all__`` are the supported API
(docs/python-api.md); ``oloproof`` imports this package only when one of them is first
used, so ``import oloproof`` stays cheap. :func:`load` and :func:`execute` (the two steps
of :func:`run`, which the ``oloproof run`` command drives with its own sinks and signal
handling) are here for the command line and advanced use, outside ``oloproof.__all__``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.analysis.plan import ComparisonPlan, RunPlan
    from oloproof.api._listing import concurrency_history, list_comparisons, list_runs
    from oloproof.api._matrix import MatrixResult, VariantResult
    from oloproof.api._merge import merge
    from oloproof.api._results import (
        CaseResult,
        ComparisonResult,
        GateNotAllowed,
        Judgment,
        RunInfo,
        RunResult,
        Subset,
        TrialResult,
    )
    from oloproof.api._run import EventCallback, PreparedRun, execute, load, run, run_async
    from oloproof.api._stored import compare, plan, read_run
    from oloproof.policy.decide import Decision, MetricSummary

# Every name is imported from its module on first use. Running imports the runner and
# the evaluators; reading, comparing and planning stored runs import the paired
# statistics and the sample-size search; listing runs needs only the store. Each
# command pays for its own (`oloproof runs` for neither of the others).
_HOMES = {
    **dict.fromkeys(
        ("concurrency_history", "list_comparisons", "list_runs"), "oloproof.api._listing"
    ),
    **dict.fromkeys(
        ("CaseResult", "ComparisonResult", "GateNotAllowed", "Judgment", "RunInfo", "RunResult",
         "Subset", "TrialResult"),
        "oloproof.api._results",
    ),
    **dict.fromkeys(
        ("EventCallback", "PreparedRun", "execute", "load", "run", "run_async"), "oloproof.api._run"
    ),
    **dict.fromkeys(("compare", "plan", "read_run"), "oloproof.api._stored"),
    "merge": "oloproof.api._merge",
    **dict.fromkeys(("MatrixResult", "VariantResult"), "oloproof.api._matrix"),
    **dict.fromkeys(("ComparisonPlan", "RunPlan"), "oloproof.analysis.plan"),
    **dict.fromkeys(("Decision", "MetricSummary"), "oloproof.policy.decide"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'oloproof.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


__all__ = [
    "CaseResult",
    "ComparisonPlan",
    "ComparisonResult",
    "Decision",
    "EventCallback",
    "GateNotAllowed",
    "Judgment",
    "MatrixResult",
    "MetricSummary",
    "PreparedRun",
    "RunInfo",
    "RunPlan",
    "RunResult",
    "Subset",
    "TrialResult",
    "VariantResult",
    "compare",
    "concurrency_history",
    "execute",
    "list_comparisons",
    "list_runs",
    "load",
    "merge",
    "plan",
    "read_run",
    "run",
    "run_async",
]
