"""Project files: oloproof.yaml, release.yaml, compare.yaml and the suite.

The configuration's records (project/config.py: what every other module uses), the pydantic
models that validate into them (project/models.py), and the loaders that turn every mistake
into one :class:`~oloproof.errors.ConfigError` naming file, field, line and what is accepted.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from oloproof.enums import MetricKind
    from oloproof.project._project import Project
    from oloproof.project.config import (
        EVALUATOR_TYPES,
        STATES,
        AbsoluteErrorEvaluator,
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
        ObservedCountRule,
        ProjectConfig,
        RegexEvaluator,
        ReleasePolicy,
        ReleaseRule,
        RetryConfig,
        RubricJudgeEvaluator,
        SystemConfig,
    )
    from oloproof.project.loader import (
        default_compare_policy,
        default_release_policy,
        load_compare_policy,
        load_project,
        load_release_policy,
        load_suite,
    )
    from oloproof.project.models import State
    from oloproof.project.suite import Case, Suite

# Every name is imported on first use: the loader imports pydantic, which a run whose
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
    elif name in ("Case", "Suite"):
        module = "oloproof.project.suite"
    elif name == "State":  # a Literal: made where pydantic needs it, with typing
        module = "oloproof.project.models"
    elif name == "MetricKind":
        module = "oloproof.enums"
    elif name in __all__:
        module = "oloproof.project.config"
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
