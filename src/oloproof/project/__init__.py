"""Project files: oloproof.yaml, release.yaml, compare.yaml and the suite.

Models (pydantic, frozen, unknown keys refused), their plain mirror, and the loaders that turn
every mistake into one :class:`~oloproof.errors.ConfigError` naming file,
field, line and what is accepted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oloproof.project._project import Project
    from oloproof.project.loader import (
        default_compare_policy,
        default_release_policy,
        load_compare_policy,
        load_project,
        load_release_policy,
        load_suite,
    )
    from oloproof.project.models import (
        EVALUATOR_TYPES,
        STATES,
        AbsoluteErrorEvaluator,
        Case,
        ComparePolicy,
        CompareRule,
        ConcurrencyConfig,
        ContainsEvaluator,
        CustomEvaluator,
        Evaluator,
        ExactMatchEvaluator,
        HttpSystemConfig,
        IntervalRule,
        JsonSchemaEvaluator,
        MetricKind,
        ObservedCountRule,
        ProjectConfig,
        RegexEvaluator,
        ReleasePolicy,
        ReleaseRule,
        RetryConfig,
        RubricJudgeEvaluator,
        State,
        Suite,
        SystemConfig,
    )

# Every name is imported on first use: the models import pydantic, which a run whose
# configuration comes from its snapshot (project/_snapshot.py) never needs.
_LOADER = frozenset({
    "default_compare_policy", "default_release_policy", "load_compare_policy",
    "load_project", "load_release_policy", "load_suite",
})


def __getattr__(name: str) -> object:
    import importlib

    if name == "Project":
        module = "oloproof.project._project"
    elif name in _LOADER:
        module = "oloproof.project.loader"
    elif name in __all__:
        module = "oloproof.project.models"
    else:
        raise AttributeError(f"module 'oloproof.project' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "EVALUATOR_TYPES",
    "STATES",
    "AbsoluteErrorEvaluator",
    "Case",
    "ComparePolicy",
    "CompareRule",
    "ConcurrencyConfig",
    "ContainsEvaluator",
    "CustomEvaluator",
    "Evaluator",
    "ExactMatchEvaluator",
    "HttpSystemConfig",
    "IntervalRule",
    "JsonSchemaEvaluator",
    "MetricKind",
    "ObservedCountRule",
    "Project",
    "ProjectConfig",
    "RegexEvaluator",
    "ReleasePolicy",
    "ReleaseRule",
    "RetryConfig",
    "RubricJudgeEvaluator",
    "State",
    "Suite",
    "SystemConfig",
    "default_compare_policy",
    "default_release_policy",
    "load_compare_policy",
    "load_project",
    "load_release_policy",
    "load_suite",
]
