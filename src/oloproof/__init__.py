"""Oloproof: is it good enough, and how sure can we be?

The public API (``__all__``; everything else is private by convention):

- for the system under test: decorate it with :func:`system`, raise
  :class:`TransientError` to ask for a retry, report usage through :func:`current_case`;
  a custom evaluator may return a :class:`Verdict` and reads the case as a :class:`CaseView`;
- to drive Oloproof from Python (docs/python-api.md): :func:`run`, :func:`run_async`,
  :func:`read_run`, :func:`list_runs`, :func:`compare`, :func:`plan`, :func:`merge`, and their typed
  results. These, like every public name but the errors, are imported on first use, so
  that ``import oloproof`` (and every ``oloproof`` command) does not pay for them.
"""

from __future__ import annotations

from oloproof.errors import (
    ConfigError,
    OloproofError,
    PatchedCodeWarning,
    StaleCacheWarning,
    TransientError,
    UsageError,
)

# Not typing.TYPE_CHECKING: importing typing alone is a third of `oloproof --help`'s own
# start-up. Type checkers treat any name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof._context import CaseContext, current_case
    from oloproof.api import (
        CaseResult,
        ComparisonPlan,
        ComparisonResult,
        Decision,
        GateNotAllowed,
        Judgment,
        MatrixResult,
        MetricSummary,
        RunInfo,
        RunPlan,
        RunResult,
        Subset,
        VariantResult,
        compare,
        list_runs,
        merge,
        plan,
        read_run,
        run,
        run_async,
    )
    from oloproof.evaluators.base import CaseView, Verdict
    from oloproof.systems.decorator import system

# Names served by oloproof.api, imported on first use.
_API = frozenset({
    "CaseResult", "ComparisonPlan", "ComparisonResult", "Decision", "GateNotAllowed",
    "Judgment", "MatrixResult", "MetricSummary", "RunInfo", "RunPlan", "RunResult", "Subset",
    "VariantResult",
    "compare", "list_runs", "merge", "plan", "read_run", "run", "run_async",
})


# The rest of the public names, each from its own module, also on first use: every
# `oloproof` command imports this package first, and `oloproof --help` needs none of them.
_LAZY = {
    "CaseContext": "oloproof._context",
    "current_case": "oloproof._context",
    "CaseView": "oloproof.evaluators.base",
    "Verdict": "oloproof.evaluators.base",
    "system": "oloproof.systems.decorator",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _API:
        import oloproof.api

        value = getattr(oloproof.api, name)
        globals()[name] = value  # looked up once
        return value
    # The version is pyproject.toml's, read from the installed package's metadata
    # (the one place it is written), and only when asked: importlib.metadata costs
    # start-up time that `oloproof run` should not pay.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("oloproof")
        except PackageNotFoundError:  # imported from a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'oloproof' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "CaseContext",
    "CaseResult",
    "CaseView",
    "ComparisonPlan",
    "ComparisonResult",
    "ConfigError",
    "Decision",
    "GateNotAllowed",
    "Judgment",
    "MatrixResult",
    "MetricSummary",
    "OloproofError",
    "PatchedCodeWarning",
    "RunInfo",
    "RunPlan",
    "RunResult",
    "StaleCacheWarning",
    "Subset",
    "TransientError",
    "UsageError",
    "VariantResult",
    "Verdict",
    "__version__",
    "compare",
    "current_case",
    "list_runs",
    "merge",
    "plan",
    "read_run",
    "run",
    "run_async",
    "system",
]
