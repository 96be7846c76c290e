"""Load oloproof.yaml, release.yaml, compare.yaml and the suite.

Every problem ends in one :class:`~oloproof.errors.ConfigError` naming the
file (as the user gave it), the field path (``evaluators[2].pattern``), the
line where it is known, and what is accepted. When a file has several
problems, the one on the earliest line is reported, except that an unknown key
(often a typo) is reported before a missing one.

Relative paths inside oloproof.yaml (the dataset, ``code_paths``, a rubric
judge's ``rubric_file``) are relative to the directory of oloproof.yaml, not
to the current directory.
"""

from __future__ import annotations

import os.path
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from oloproof.errors import ConfigError
from oloproof.project._errors import describe, to_config_error
from oloproof.project._yaml import LineMap, load_yaml
from oloproof.project.models import (
    EVALUATOR_TYPES,
    ComparePolicy,
    MetricKind,
    Project,
    ProjectConfig,
    ReleasePolicy,
)
from oloproof.project.suite import load_suite

__all__ = [
    "default_compare_policy",
    "default_release_policy",
    "load_compare_policy",
    "load_project",
    "load_release_policy",
    "load_suite",
]

_TAGS = frozenset((*EVALUATOR_TYPES, "interval_threshold", "observed_count"))
_M = TypeVar("_M", bound=BaseModel)


def load_project(config_path: str | Path) -> Project:
    """Load and check oloproof.yaml (the rubric files are read here too).

    The dataset must exist, but the suite itself is read by
    :meth:`Project.load_suite`.
    """
    display = str(config_path)
    path = Path(config_path)
    data, lines = load_yaml(path, display)
    root = Path(os.path.abspath(path)).parent
    config = _validate(
        ProjectConfig, data, lines, display, context={"root": root}, example="project: my-bot"
    )
    return Project(
        root=root, config_path=Path(os.path.abspath(path)), config=config, display=display
    )


def load_release_policy(
    path: str | Path,
    metrics: Mapping[str, MetricKind],
    default: ReleasePolicy | None = None,
) -> ReleasePolicy:
    """Load and check release.yaml against the project's metrics.

    A file that does not exist is an error, unless ``default`` is given: then
    ``default`` is returned (the CLI passes :func:`default_release_policy` when
    the user did not name a policy file and ``release.yaml`` is absent).
    """
    if default is not None and not Path(path).exists():
        return default
    return _load_policy(ReleasePolicy, path, metrics)


def load_compare_policy(
    path: str | Path,
    metrics: Mapping[str, MetricKind],
    default: ComparePolicy | None = None,
) -> ComparePolicy:
    """Load and check compare.yaml; a missing file as in :func:`load_release_policy`."""
    if default is not None and not Path(path).exists():
        return default
    return _load_policy(ComparePolicy, path, metrics)


def default_release_policy() -> ReleasePolicy:
    """No rules; default confidence level and ``block_on``."""
    return ReleasePolicy(version=1)


def default_compare_policy() -> ComparePolicy:
    """No rules; default confidence level and ``block_on``."""
    return ComparePolicy(version=1)


def _load_policy(model: type[_M], path: str | Path, metrics: Mapping[str, MetricKind]) -> _M:
    display = str(path)
    data, lines = load_yaml(Path(path), display)
    return _validate(
        model, data, lines, display, context={"metrics": dict(metrics)}, example="rules: [...]"
    )


def _validate(
    model: type[_M],
    data: Any,
    lines: LineMap,
    display: str,
    *,
    context: dict[str, Any],
    example: str,
) -> _M:
    if data is None:
        raise ConfigError(
            f"the file is empty; expected a mapping such as: version: 1, {example}",
            file=display,
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"expected a mapping of keys (version: 1, {example}) at the top level, "
            f"got {describe(data)}",
            file=display,
            line=lines.exact(()),
        )
    # The version says how to read everything else, so it is checked first.
    if "version" not in data:
        raise ConfigError(
            "required field is missing (add version: 1 at the top)",
            file=display,
            field="version",
            line=lines.exact(()),
            accepted="1",
        )
    version = data["version"]
    if version != 1 or isinstance(version, bool):
        detail = (
            f"unsupported version {describe(version)}; this version of Oloproof reads version 1"
        )
        if isinstance(version, str) and version.strip() == "1":
            detail = "expected the number 1, got the text '1' (write version: 1, without quotes)"
        raise ConfigError(
            detail,
            file=display,
            field="version",
            line=lines.exact(("version",)),
            accepted="1",
        )
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise to_config_error(
            exc, data=data, lines=lines, display=display, model=model, tags=_TAGS
        ) from None
