"""The configuration as the engine, runner, policy and CLI use it: plain frozen records.

One runtime type for the configuration (ARCHITECTURE.md, "One dialect"): pydantic validates
oloproof.yaml, release.yaml and compare.yaml (project/models.py) and converts what it
validated into the records of this module (:func:`oloproof.project.models.to_record`); the
snapshot of an unchanged project (project/_snapshot.py) stores these records and reads them
back as these same classes. Nothing outside project/models.py, project/loader.py and
project/_errors.py ever sees a pydantic model.

Each record has the fields of the model of the same name, in the same order, with the same
defaults (tests/project/test_config_records.py holds the two equal), and what a consumer
asks of it besides (``metric_kind``, ``compiled``, ``evaluator_limit``, ``metrics()``...),
defined once, here. Two more things per record, never written by a user:

- ``fields_set``: the fields the file set (pydantic's ``model_fields_set``), for the few
  defaults that depend on whether a key was written (a judge's ``temperature``);
- :meth:`ConfigRecord.dump`, what pydantic's ``model_dump`` gave (aliases, excluded fields,
  ``mode="json"``, ``exclude_unset``): identities and the stored policy are digests of it,
  so it must stay byte for byte what it was.

This module imports neither pydantic nor PyYAML: a run read from its snapshot never does.
"""

from __future__ import annotations

import functools
import os
import re

from oloproof._json import DEFAULT_MAX_JSON_DEPTH
from oloproof._records import dataclass
from oloproof._records import field as _field
from oloproof.enums import MetricKind
from oloproof.project.policies import (
    DEFAULT_JUDGE_FLOOR,
    DEFAULT_MAX_MISSING,
    POLICY_RECORDS,
    STATES,
    ComparePolicy,
    CompareRule,
    ConfigRecord,
    IntervalRule,
    JudgeValidation,
    ObservedCountRule,
    ReleasePolicy,
    ReleaseRule,
    RuleFamily,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Literal


__all__ = [
    "DEFAULT_JUDGE_FLOOR",
    "DEFAULT_MAX_MISSING",
    "EVALUATOR_TYPES",
    "MAX_EVALUATOR_CONCURRENCY",
    "MAX_SCALE_SPAN",
    "NO_POLICY",
    "RECORDS",
    "STATES",
    "AbsoluteErrorEvaluator",
    "AdaptiveConfig",
    "ComparePolicy",
    "CompareRule",
    "ConcurrencyConfig",
    "ConfigRecord",
    "ContainsEvaluator",
    "CustomEvaluator",
    "Evaluator",
    "ExactMatchEvaluator",
    "HttpSystemConfig",
    "IntervalRule",
    "JsonSchemaEvaluator",
    "JudgeValidation",
    "LimitsConfig",
    "MatrixConfig",
    "MatrixVariant",
    "ModelSystemConfig",
    "ObservedCountRule",
    "PanelMember",
    "ProjectConfig",
    "RayConfig",
    "RegexEvaluator",
    "ReleasePolicy",
    "ReleaseRule",
    "RetryConfig",
    "RubricJudgeEvaluator",
    "RuleFamily",
    "SequentialConfig",
    "SystemConfig",
    "regex_flags",
]

#: Upper bound on ``concurrency.evaluator`` (and on its default, the CPU count).
MAX_EVALUATOR_CONCURRENCY = 256
#: The value of ``policy:`` in oloproof.yaml that declares no release rules.
NO_POLICY = "none"
#: The widest scale a scored judge may have, in points above its low (``[0, 100]``).
MAX_SCALE_SPAN = 100
#: ``limits.max_consecutive_failures`` by default: with the default 8 calls in flight,
#: a dead endpoint stops the run after its first wave of calls (docs/refusals.md).
DEFAULT_MAX_CONSECUTIVE_FAILURES = 8

EVALUATOR_TYPES = (
    "exact_match",
    "contains",
    "regex",
    "json_schema",
    "absolute_error",
    "rubric_judge",
    "custom",
)

_RE_FLAGS: dict[str, re.RegexFlag] = {
    "IGNORECASE": re.IGNORECASE,
    "MULTILINE": re.MULTILINE,
    "DOTALL": re.DOTALL,
}


def regex_flags(names: Any) -> int:
    """A regex evaluator's ``flags`` as a value for :func:`re.compile` (the one place
    they are read; the validation compiles with it too)."""
    value = 0
    for name in names:
        value |= int(_RE_FLAGS[name])
    return value


@functools.lru_cache(maxsize=256)
def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# -- the system under test --------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class HttpSystemConfig(ConfigRecord):
    """A system reached over HTTP; the case's input is sent as the JSON body."""

    url: str
    method: Literal["POST", "PUT", "GET"] = "POST"
    version: str
    output_path: str | None = None
    usage_path: str | None = None
    timeout_s: float = 30
    headers: dict[str, str] = _field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ModelSystemConfig(ConfigRecord):
    """A model behind a provider's API as the system (``system.model``,
    docs/prompts-and-models.md)."""

    provider: Literal["anthropic", "openai", "openai_compatible"]
    model: str
    base_url: str | None = None
    prompt_file: str
    system_prompt_file: str | None = None
    output: Literal["text", "json"] = "text"
    temperature: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    extra_body: dict[str, Any] = _field(default_factory=dict)
    api_key_env: str | None = None
    timeout_s: float = 60


@dataclass(frozen=True, kw_only=True)
class MatrixVariant(ConfigRecord):
    """One variant of a matrix: a name and what it changes of ``system.model``."""

    name: str
    provider: Literal["anthropic", "openai", "openai_compatible"] | None = None
    model: str | None = None
    base_url: str | None = None
    prompt_file: str | None = None
    system_prompt_file: str | None = None
    output: Literal["text", "json"] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    extra_body: dict[str, Any] | None = None
    api_key_env: str | None = None
    timeout_s: float | None = None

    def overrides(self) -> dict[str, Any]:
        """The fields this variant sets (``null`` included: it leaves a parameter out)."""
        return {k: v for k, v in self.dump(exclude_unset=True).items() if k != "name"}


@dataclass(frozen=True, kw_only=True)
class MatrixConfig(ConfigRecord):
    """``matrix:``: the variants of a model system (``run --matrix``)."""

    variants: list[MatrixVariant] = _field(default_factory=list)
    baseline: str | None = None
    product: dict[str, Any] | None = None

    EXCLUDED: ClassVar[frozenset[str]] = frozenset({"product"})

    def baseline_name(self) -> str:
        """The variant the others are compared against: ``baseline:``, else the first."""
        return self.baseline or str(self.variants[0].name)

    def names(self) -> list[str]:
        return [str(v.name) for v in self.variants]


@dataclass(frozen=True, kw_only=True)
class SystemConfig(ConfigRecord):
    """The system under test: exactly one of ``callable``, ``http`` and ``model``."""

    name: str
    version: str | None = None
    callable: str | None = None
    code_paths: list[str] = _field(default_factory=list)
    timeout_s: float = 30
    http: HttpSystemConfig | None = None
    model: ModelSystemConfig | None = None


@dataclass(frozen=True, kw_only=True)
class AdaptiveConfig(ConfigRecord):
    """Which limits adapt to rate limits (``concurrency.adaptive``)."""

    system: bool = False
    judge: bool = False


@dataclass(frozen=True, kw_only=True)
class ConcurrencyConfig(ConfigRecord):
    """How many calls may be in flight at once (project/models.py says what is accepted)."""

    system: int = 8
    judge: int = 4
    evaluator: int | None = None
    evaluator_processes: int | None = None
    adaptive: AdaptiveConfig = _field(default_factory=AdaptiveConfig)

    def evaluator_limit(self) -> int:
        """``evaluator``, or the number of CPUs when it is not set."""
        return self.evaluator or max(1, min(os.cpu_count() or 1, MAX_EVALUATOR_CONCURRENCY))


@dataclass(frozen=True, kw_only=True)
class RayConfig(ConfigRecord):
    """The optional top-level ``ray:`` block (``executor: ray``; docs/scaling.md)."""

    workers: int | None = None


@dataclass(frozen=True, kw_only=True)
class SequentialConfig(ConfigRecord):
    """``sequential:`` in oloproof.yaml (docs/sequential-decisions.md)."""

    seed: int = 0
    margin: float = 0.05


@dataclass(frozen=True, kw_only=True)
class RetryConfig(ConfigRecord):
    """The optional top-level ``retry:`` block."""

    max_retry_wait_s: float = 60


@dataclass(frozen=True, kw_only=True)
class LimitsConfig(ConfigRecord):
    """The optional top-level ``limits:`` block (each limit: docs/refusals.md)."""

    evaluator_timeout_s: float = 30
    max_response_bytes: int = 10 * 1024 * 1024
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    failure_threshold: float | None = None
    store_busy_timeout_s: float = 30
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES


# -- evaluators -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _EvaluatorBase(ConfigRecord):
    criterion: str
    #: Metadata keys to break this metric down by; never part of an identity (not dumped).
    group_by: list[str] = _field(default_factory=list)

    EXCLUDED: ClassVar[frozenset[str]] = frozenset({"group_by"})

    @property
    def metric_kind(self) -> MetricKind:
        """BINARY (each case passes or fails) or MEAN (each case has a score)."""
        return MetricKind.BINARY


@dataclass(frozen=True, kw_only=True)
class ExactMatchEvaluator(_EvaluatorBase):
    """``output[field] == expected[expected_field or field]``."""

    type: Literal["exact_match"] = "exact_match"
    field: str | None = None
    expected_field: str | None = None
    strip: bool = True
    casefold: bool = False


@dataclass(frozen=True, kw_only=True)
class ContainsEvaluator(_EvaluatorBase):
    """The expected text is a substring of ``output[field]``."""

    type: Literal["contains"] = "contains"
    field: str | None = None
    expected_field: str | None = None
    casefold: bool = False


def nothing_to_find(expected: object) -> bool:
    """Whether a ``contains`` expected value asks for no text at all: ``""``, ``null``,
    ``[]``, or a list of empty texts and nulls. Every output holds the empty text, so such
    a case would pass whatever the system answered; it is excluded instead, as a case
    without the value (and a ``contains`` whose every expected value is empty is refused
    at load). ``null`` is what a blank cell becomes in many exports (pandas writes NaN as
    null): it was looked for as the text 'null', which any output holding a null field
    contains."""
    needles = expected if isinstance(expected, list) else [expected]
    return all(n == "" or n is None for n in needles)


@dataclass(frozen=True, kw_only=True)
class RegexEvaluator(_EvaluatorBase):
    """``output[field]`` matches (or, with ``pass_if: no_match``, does not match) ``pattern``."""

    type: Literal["regex"] = "regex"
    field: str | None = None
    pattern: str
    pass_if: Literal["match", "no_match"] = "match"
    flags: list[Literal["IGNORECASE", "MULTILINE", "DOTALL"]] = _field(default_factory=list)

    @property
    def re_flags(self) -> int:
        """The ``flags`` as a value for :func:`re.compile`."""
        return regex_flags(self.flags)

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (checked at load time, so this cannot fail)."""
        return _compile(self.pattern, self.re_flags)


@dataclass(frozen=True, kw_only=True)
class JsonSchemaEvaluator(_EvaluatorBase):
    """``output[field]`` is valid against a JSON Schema (YAML key ``schema``)."""

    type: Literal["json_schema"] = "json_schema"
    field: str | None = None
    schema_: dict[str, Any]

    ALIASES: ClassVar[dict[str, str]] = {"schema_": "schema"}


@dataclass(frozen=True, kw_only=True)
class AbsoluteErrorEvaluator(_EvaluatorBase):
    """``|output[field] - expected[expected_field or field]|``: a MEAN metric."""

    type: Literal["absolute_error"] = "absolute_error"
    field: str
    expected_field: str | None = None
    range: tuple[float, float] | None = None

    @property
    def metric_kind(self) -> MetricKind:
        return MetricKind.MEAN


if TYPE_CHECKING:  # the type checker's only: typing stays off the run path
    Provider = Literal["anthropic", "openai", "openai_compatible"]


@dataclass(frozen=True, kw_only=True)
class PanelMember(ConfigRecord):
    """One judge of a panel: what differs from the ``rubric_judge`` it belongs to."""

    provider: Provider | None = None
    model: str | None = None
    api_key_env: str | None = None
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    extra_body: dict[str, Any] | None = None
    timeout_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class RubricJudgeEvaluator(_EvaluatorBase):
    """An LLM judge answering pass or fail (or a score on ``scale``) against a rubric.

    :attr:`rubric` is the rubric's text: ``rubric_text``, or the content of ``rubric_file``,
    read at load time (``rubric_read``). :meth:`members` are a panel's judges as complete
    configurations, validated at load time (``panel_judges``).
    """

    type: Literal["rubric_judge"] = "rubric_judge"
    provider: Provider
    model: str
    rubric_file: str | None = None
    rubric_text: str | None = None
    api_key_env: str | None = None
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    extra_body: dict[str, Any] = _field(default_factory=dict)
    timeout_s: float = 60
    panel: list[PanelMember] | None = None
    panel_rule: Literal["majority", "unanimous", "median", "mean"] = "majority"
    scale: tuple[int, int] | None = None
    #: The rubric file's text, read when the configuration was validated (None: not read).
    rubric_read: str | None = _field(default=None, repr=False, compare=False)
    #: The panel's judges as complete configurations (:meth:`members`).
    panel_judges: tuple[RubricJudgeEvaluator, ...] = _field(
        default=(), repr=False, compare=False)

    INTERNAL: ClassVar[frozenset[str]] = frozenset(
        {"fields_set", "rubric_read", "panel_judges"})

    @property
    def metric_kind(self) -> MetricKind:
        """BINARY for a pass/fail judge; MEAN for a scored one (``scale:``)."""
        return MetricKind.BINARY if self.scale is None else MetricKind.MEAN

    @property
    def value_range(self) -> tuple[float, float] | None:
        """A scored judge's scale as its metric's range; None for a pass/fail judge."""
        if self.scale is None:
            return None
        return float(self.scale[0]), float(self.scale[1])

    @property
    def request_temperature(self) -> float | None:
        """The ``temperature`` sent, or None (left out of the request).

        Written in oloproof.yaml (a number, or ``null`` to leave it out): that. Otherwise 0
        for ``anthropic`` and ``openai_compatible``, and nothing for ``openai``, whose
        reasoning models refuse any temperature but the default.
        """
        if "temperature" in self.fields_set:
            return self.temperature
        return None if self.provider == "openai" else 0.0

    @property
    def request_max_tokens(self) -> int | None:
        """The ``max_tokens`` sent, or None: 512 by default for ``anthropic`` (its API
        requires it) and ``openai_compatible``; nothing by default for ``openai``."""
        if "max_tokens" in self.fields_set:
            return self.max_tokens
        if self.provider == "openai" or self.max_completion_tokens is not None:
            return None
        return 512

    @property
    def rubric(self) -> str:
        """The rubric's text (read from ``rubric_file`` if it was not read at load time)."""
        if self.rubric_text is not None:
            return self.rubric_text
        if self.rubric_read is None:
            assert self.rubric_file is not None
            with open(self.rubric_file, encoding="utf-8-sig") as f:
                text = f.read()
            object.__setattr__(self, "rubric_read", text)  # a cache, as a frozen record may
            return text
        return self.rubric_read

    def members(self) -> list[RubricJudgeEvaluator]:
        """The panel's judges as complete configs (empty without a panel)."""
        return list(self.panel_judges)


@dataclass(frozen=True, kw_only=True)
class CustomEvaluator(_EvaluatorBase):
    """Your own Python function, ``module:function``, imported from the project directory."""

    type: Literal["custom"] = "custom"
    function: str
    kind: Literal["binary", "mean"] = "binary"
    range: tuple[float, float] | None = None
    code_paths: list[str] = _field(default_factory=list)
    timeout_s: float | None = None
    params: dict[str, Any] = _field(default_factory=dict)

    @property
    def metric_kind(self) -> MetricKind:
        return MetricKind.MEAN if self.kind == "mean" else MetricKind.BINARY


Evaluator = (
    ExactMatchEvaluator
    | ContainsEvaluator
    | RegexEvaluator
    | JsonSchemaEvaluator
    | AbsoluteErrorEvaluator
    | RubricJudgeEvaluator
    | CustomEvaluator
)


# -- oloproof.yaml ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ProjectConfig(ConfigRecord):
    """The content of oloproof.yaml."""

    version: Literal[1] = 1
    project: str
    dataset: str
    system: SystemConfig
    concurrency: ConcurrencyConfig = _field(default_factory=ConcurrencyConfig)
    retry: RetryConfig = _field(default_factory=RetryConfig)
    limits: LimitsConfig = _field(default_factory=LimitsConfig)
    evaluators: list[Evaluator]
    policy: str | None = None
    human_labels: str | None = None
    trials: int = 1
    store: str | None = None
    executor: Literal["local", "ray"] = "local"
    ray: RayConfig = _field(default_factory=RayConfig)
    sequential: SequentialConfig | None = None
    matrix: MatrixConfig | None = None

    def judge_criteria(self) -> list[str]:
        """The criteria of the project's rubric judges, in declared order."""
        return [e.criterion for e in self.evaluators if e.type == "rubric_judge"]

    def judge_scales(self) -> dict[str, tuple[int, int] | None]:
        """Judge criterion -> its scale (a scored judge) or None (pass/fail), in order."""
        return {
            e.criterion: (None if e.scale is None else (int(e.scale[0]), int(e.scale[1])))
            for e in self.evaluators if isinstance(e, RubricJudgeEvaluator)
        }

    @property
    def declares_no_policy(self) -> bool:
        """Whether oloproof.yaml says ``policy: none`` (no release rules, on purpose)."""
        return self.policy is not None and self.policy.strip().lower() == NO_POLICY

    def metrics(self) -> dict[str, MetricKind]:
        """Criterion -> metric kind, in declared order."""
        return {e.criterion: e.metric_kind for e in self.evaluators}


#: Every record class by name: what project/models.py converts into, and the only classes
#: a snapshot may name.
RECORDS: dict[str, type[ConfigRecord]] = {
    **{cls.__name__: cls for cls in (
        ProjectConfig, SystemConfig, HttpSystemConfig, ModelSystemConfig, MatrixConfig,
        MatrixVariant, ConcurrencyConfig, AdaptiveConfig,
        RetryConfig, RayConfig, SequentialConfig, LimitsConfig, ExactMatchEvaluator,
        ContainsEvaluator,
        RegexEvaluator, JsonSchemaEvaluator, AbsoluteErrorEvaluator, RubricJudgeEvaluator,
        PanelMember, CustomEvaluator,
    )},
    **POLICY_RECORDS,
}
