"""Load oloproof.yaml, release.yaml, compare.yaml and the suite.

Every problem ends in one :class:`~oloproof.errors.ConfigError` naming the
file (as the user gave it), the field path (``evaluators[2].pattern``), the
line where it is known, and what is accepted. When a file has several
problems, the one on the earliest line is reported, except that an unknown key
(often a typo) is reported before a missing one.

Relative paths inside oloproof.yaml (the dataset, ``code_paths``, a rubric
judge's ``rubric_file``, ``policy``) are relative to the directory of
oloproof.yaml, not to the current directory.

Which release policy a run uses is decided in one place,
:func:`resolve_release_policy`: ``--policy`` if given, else ``policy:`` in
oloproof.yaml (a path, or ``none`` for a project without release rules),
else release.yaml beside oloproof.yaml. A project that has none of these is a
usage error: a missing policy must never read as "no rules, ALLOW".
"""

from __future__ import annotations

import os.path
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from oloproof._fs import absent, missing
from oloproof.errors import ConfigError
from oloproof.project._errors import as_written, to_config_error
from oloproof.project._project import (
    DEFAULT_POLICY_FILE,
    NO_RULES_NOTE,
    Project,
    ResolvedPolicy,
    beside,
)
from oloproof.project._words import describe
from oloproof.project._yaml import LineMap, load_yaml, suspect_note
from oloproof.project.config import (
    EVALUATOR_TYPES,
    NO_POLICY,
    ComparePolicy,
    ProjectConfig,
    ReleasePolicy,
)
from oloproof.project.models import model_of, validate
from oloproof.project.suite import load_suite

if TYPE_CHECKING:
    from oloproof.enums import MetricKind
    from oloproof.project.config import ConfigRecord

__all__ = [
    "DEFAULT_POLICY_FILE",
    "NO_RULES_NOTE",
    "ResolvedPolicy",
    "default_compare_policy",
    "default_release_policy",
    "load_compare_policy",
    "load_project",
    "load_release_policy",
    "load_suite",
    "resolve_release_policy",
]

_TAGS = frozenset((*EVALUATOR_TYPES, "interval_threshold", "observed_count"))
_M = TypeVar("_M", bound="ConfigRecord")


def load_project(config_path: str | os.PathLike[str]) -> Project:
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
        root=str(root), config_path=os.path.abspath(path), config=config, display=display
    )


# Names a user plausibly saved the policy under; found, they are named in the
# error so that the fix is a rename.
_NEAR_NAMES = (
    "release.yml",
    "Release.yaml",
    "Release.yml",
    "RELEASE.yaml",
    "release.YAML",
    "releases.yaml",
    "releases.yml",
    "release-policy.yaml",
    "release_policy.yaml",
    "policy.yaml",
    "policy.yml",
    "release.yaml.txt",
    "release.json",
)


def resolve_release_policy(project: Project, policy_arg: str | None) -> ResolvedPolicy:
    """The release policy for ``project``: the one lookup every command uses.

    In order: ``policy_arg`` (``--policy``, relative to the current directory);
    ``policy:`` in oloproof.yaml (``none``, or a path relative to the project
    directory); ``release.yaml`` beside oloproof.yaml. Nothing found is a
    :class:`ConfigError` (exit 2) naming the file looked for, the ways to name
    one, and a near name when one exists (``release.yml``).
    """
    metrics = project.config.metrics()
    judges = project.config.judge_scales()
    if policy_arg is not None:
        return ResolvedPolicy(load_release_policy(policy_arg, metrics, judges=judges), policy_arg)
    # A policy found beside oloproof.yaml is named in errors as the user can open it
    # (relative to where the command runs, as oloproof.yaml is), never by its absolute path.
    declared = project.config.policy
    if declared is not None:
        if project.config.declares_no_policy:
            return ResolvedPolicy(default_release_policy(), None, declared_none=True)
        path = Path(project.root, declared)
        shown = beside(project, declared)
        if absent(path):
            raise ConfigError(
                f"release policy {missing(path)}: {shown}"
                f"{_near_hint(path)} (paths are relative to the project directory; "
                f"write policy: {NO_POLICY} for a project without release rules)",
                file=project.display,
                field="policy",
            )
        return ResolvedPolicy(
            load_release_policy(path, metrics, judges=judges, display=shown), shown
        )
    path = Path(project.root, DEFAULT_POLICY_FILE)
    shown = beside(project, DEFAULT_POLICY_FILE)
    if os.path.lexists(path):  # a symlink loop is there, and says so when it is read
        return ResolvedPolicy(
            load_release_policy(path, metrics, judges=judges, display=shown), shown
        )
    raise ConfigError(
        f"no release policy: {shown} is not found{_near_hint(path)}. Oloproof looks for "
        f"--policy FILE, then policy: FILE in {project.display}, then {DEFAULT_POLICY_FILE} "
        f"beside it. Create {DEFAULT_POLICY_FILE}, or write policy: {NO_POLICY} in "
        f"{project.display} if the project has no release rules",
        file=shown,
    )


# The same for compare.yaml: a comparison policy under another name was not read, and the
# comparison had no rules (exit 0 whatever the candidate did).
_COMPARE_NEAR_NAMES = (
    "compare.yml",
    "Compare.yaml",
    "Compare.yml",
    "COMPARE.yaml",
    "compare.YAML",
    "comparison.yaml",
    "comparison.yml",
    "compare-policy.yaml",
    "compare_policy.yaml",
    "compare.yaml.txt",
    "compare.json",
)


def compare_policy_near_hint(path: Path) -> str:
    """`` (found compare.yml; Oloproof reads compare.yaml: rename the file)`` when ``path``
    (compare.yaml beside oloproof.yaml) is absent and a near name is there; else ``""``."""
    return _near_hint(path, _COMPARE_NEAR_NAMES)


def _near_hint(path: Path, names: tuple[str, ...] = _NEAR_NAMES) -> str:
    try:
        present = {p.name for p in path.parent.iterdir()}
    except OSError:
        return ""
    wanted = path.name
    near = [n for n in names if n in present and n != wanted]
    if not near and path.suffix in (".yaml", ".yml"):
        other = path.with_suffix(".yml" if path.suffix == ".yaml" else ".yaml").name
        near = [other] if other in present else []
    if not near:
        return ""
    return f" (found {near[0]}; Oloproof reads {wanted}: rename the file)"


def load_release_policy(
    path: str | Path,
    metrics: Mapping[str, MetricKind],
    default: ReleasePolicy | None = None,
    *,
    judges: Sequence[str] | Mapping[str, tuple[int, int] | None] | None = None,
    display: str | None = None,
) -> ReleasePolicy:
    """Load and check release.yaml against the project's metrics.

    A file that does not exist is an error, unless ``default`` is given: then
    ``default`` is returned (the CLI passes :func:`default_release_policy` when
    the user did not name a policy file and ``release.yaml`` is absent).
    ``display`` names the file in errors (default: ``path`` as given).
    """
    if default is not None and not os.path.lexists(path):  # a symlink loop is not "absent"
        return default
    return _load_policy(ReleasePolicy, path, metrics, judges, display)


def load_compare_policy(
    path: str | Path,
    metrics: Mapping[str, MetricKind],
    default: ComparePolicy | None = None,
    *,
    display: str | None = None,
) -> ComparePolicy:
    """Load and check compare.yaml; a missing file and ``display`` as in
    :func:`load_release_policy`."""
    if default is not None and not os.path.lexists(path):  # a symlink loop is not "absent"
        return default
    return _load_policy(ComparePolicy, path, metrics, display=display)


def default_release_policy() -> ReleasePolicy:
    """No rules; default confidence level and ``block_on``."""
    return ReleasePolicy()


def default_compare_policy() -> ComparePolicy:
    """No rules; default confidence level and ``block_on``."""
    return ComparePolicy()


def _load_policy(
    model: type[_M], path: str | Path, metrics: Mapping[str, MetricKind],
    judges: Sequence[str] | Mapping[str, tuple[int, int] | None] | None = None,
    display: str | None = None,
) -> _M:
    display = str(path) if display is None else display
    data, lines = load_yaml(Path(path), display)
    context: dict[str, Any] = {"metrics": dict(metrics)}
    if judges is not None:
        context["judges"] = list(judges)
    if isinstance(judges, Mapping):  # with their scales: a scored judge's is checked
        context["scales"] = {c: scale for c, scale in judges.items() if scale is not None}
    return _validate(model, data, lines, display, context=context, example="rules: [...]")


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
            f"got {describe(data)}{suspect_note(data) if isinstance(data, str) else ''}",
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
    schema = model_of(model)
    data = as_written(schema, data, lines)
    try:
        return validate(model, data, context)
    except ValidationError as exc:
        raise to_config_error(
            exc, data=data, lines=lines, display=display, model=schema, tags=_TAGS
        ) from None
