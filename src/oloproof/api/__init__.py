"""Oloproof from Python: run a project, read what it stored, compare runs, plan.

The functions and result types listed in ``oloproof.__all__`` are the supported API
(docs/python-api.md); ``oloproof`` imports this package only when one of them is first
used, so ``import oloproof`` stays cheap. :func:`load` and :func:`execute` (the two steps
of :func:`run`, which the ``oloproof run`` command drives with its own sinks and signal
handling) are here for the command line and advanced use, outside ``oloproof.__all__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from oloproof.policy.decide import Decision, MetricSummary

if TYPE_CHECKING:
    from oloproof.analysis.plan import ComparisonPlan, RunPlan
    from oloproof.api._stored import compare, list_comparisons, list_runs, plan, read_run

# Reading, comparing and planning stored runs import the paired statistics and the
# sample-size search (about 0.1 s): only when one of them is used, so that
# `oloproof run` does not pay for them.
_STORED = frozenset({"compare", "list_comparisons", "list_runs", "plan", "read_run"})
_PLANS = frozenset({"ComparisonPlan", "RunPlan"})


def __getattr__(name: str) -> Any:
    if name in _STORED:
        from oloproof.api import _stored

        return getattr(_stored, name)
    if name in _PLANS:
        from oloproof.analysis import plan as _plan

        return getattr(_plan, name)
    raise AttributeError(f"module 'oloproof.api' has no attribute {name!r}")

__all__ = [
    "CaseResult",
    "ComparisonPlan",
    "ComparisonResult",
    "Decision",
    "EventCallback",
    "GateNotAllowed",
    "Judgment",
    "MetricSummary",
    "PreparedRun",
    "RunInfo",
    "RunPlan",
    "RunResult",
    "Subset",
    "TrialResult",
    "compare",
    "execute",
    "list_comparisons",
    "list_runs",
    "load",
    "plan",
    "read_run",
    "run",
    "run_async",
]
