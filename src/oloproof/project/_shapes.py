"""What the configuration's objects answer besides their fields, without pydantic.

The models in project/models.py validate oloproof.yaml and the policies with pydantic.
A run whose files did not change since the last validation reads the configuration
from its snapshot instead (project/_snapshot.py), as plain objects that import no
pydantic. Both kinds inherit the classes here, so that every property and method a
consumer calls (``metric_kind``, ``compiled``, ``evaluator_limit``, ``metrics()``...)
has one definition, and ``isinstance(rule, IntervalRuleShape)`` holds for both.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.enums import MetricKind

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = [
    "DEFAULT_JUDGE_FLOOR",
    "MAX_EVALUATOR_CONCURRENCY",
    "MAX_SCALE_SPAN",
    "NO_POLICY",
    "AbsoluteErrorShape",
    "ComparePolicyShape",
    "CompareRuleShape",
    "ConcurrencyShape",
    "CustomShape",
    "EvaluatorShape",
    "IntervalRuleShape",
    "JudgeValidationShape",
    "MatrixShape",
    "MatrixVariantShape",
    "ObservedCountRuleShape",
    "ProjectConfigShape",
    "RegexShape",
    "ReleasePolicyShape",
    "RubricJudgeShape",
]

#: Upper bound on ``concurrency.evaluator`` (and on its default, the CPU count).
MAX_EVALUATOR_CONCURRENCY = 256
#: The value of ``policy:`` in oloproof.yaml that declares no release rules.
NO_POLICY = "none"
#: The widest scale a scored judge may have, in points above its low (``[0, 100]``).
MAX_SCALE_SPAN = 100
#: A pass/fail judge's sensitivity and specificity floors when a policy sets neither
#: them nor ``min_agreement`` (judge_validation).
DEFAULT_JUDGE_FLOOR = 0.85

_RE_FLAGS: dict[str, re.RegexFlag] = {
    "IGNORECASE": re.IGNORECASE,
    "MULTILINE": re.MULTILINE,
    "DOTALL": re.DOTALL,
}


@functools.lru_cache(maxsize=256)
def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


class ConcurrencyShape:
    if TYPE_CHECKING:  # fields of the models; not declared here, or pydantic would take them
        evaluator: int | None

    def evaluator_limit(self) -> int:
        """``evaluator``, or the number of CPUs when it is not set."""
        return self.evaluator or max(1, min(os.cpu_count() or 1, MAX_EVALUATOR_CONCURRENCY))


class EvaluatorShape:
    @property
    def metric_kind(self) -> MetricKind:
        """BINARY (each case passes or fails) or MEAN (each case has a score)."""
        return MetricKind.BINARY


class AbsoluteErrorShape(EvaluatorShape):
    @property
    def metric_kind(self) -> MetricKind:
        return MetricKind.MEAN


class CustomShape(EvaluatorShape):
    if TYPE_CHECKING:  # fields of the models; not declared here, or pydantic would take them
        kind: str

    @property
    def metric_kind(self) -> MetricKind:
        return MetricKind.MEAN if self.kind == "mean" else MetricKind.BINARY


class RegexShape(EvaluatorShape):
    if TYPE_CHECKING:  # fields of the models; not declared here, or pydantic would take them
        pattern: str
        flags: Sequence[str]

    @property
    def re_flags(self) -> int:
        """The ``flags`` as a value for :func:`re.compile` (the one place they are read)."""
        value = 0
        for name in self.flags:
            value |= int(_RE_FLAGS[name])
        return value

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (checked at load time, so this cannot fail)."""
        return _compile(self.pattern, self.re_flags)


class RubricJudgeShape(EvaluatorShape):
    if TYPE_CHECKING:  # fields of the models; not declared here, or pydantic would take them
        scale: tuple[int, int] | None
        provider: str
        temperature: float | None
        max_tokens: int | None
        max_completion_tokens: int | None
        rubric_file: str | None
        rubric_text: str | None
        _rubric: str | None
        model_fields_set: Any

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
        if "temperature" in self.model_fields_set:
            return self.temperature
        return None if self.provider == "openai" else 0.0

    @property
    def request_max_tokens(self) -> int | None:
        """The ``max_tokens`` sent, or None: 512 by default for ``anthropic`` (its API
        requires it) and ``openai_compatible``; nothing by default for ``openai``."""
        if "max_tokens" in self.model_fields_set:
            return self.max_tokens
        if self.provider == "openai" or self.max_completion_tokens is not None:
            return None
        return 512

    @property
    def rubric(self) -> str:
        """The rubric's text (read from ``rubric_file`` if not read at load time)."""
        if self.rubric_text is not None:
            return self.rubric_text
        if self._rubric is None:
            assert self.rubric_file is not None
            self._rubric = Path(self.rubric_file).read_text(encoding="utf-8-sig")
        return self._rubric


class MatrixVariantShape:
    def overrides(self) -> dict[str, Any]:
        """The fields this variant sets (``null`` included: it leaves a parameter out)."""
        dump = self.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
        return {k: v for k, v in dump.items() if k != "name"}


class MatrixShape:
    if TYPE_CHECKING:
        variants: list[Any]
        baseline: str | None

    def baseline_name(self) -> str:
        """The variant the others are compared against: ``baseline:``, else the first."""
        return self.baseline or str(self.variants[0].name)

    def names(self) -> list[str]:
        return [str(v.name) for v in self.variants]


class ProjectConfigShape:
    if TYPE_CHECKING:  # fields of the models; not declared here, or pydantic would take them
        evaluators: list[Any]
        policy: str | None

    def judge_criteria(self) -> list[str]:
        """The criteria of the project's rubric judges, in declared order."""
        return [e.criterion for e in self.evaluators if e.type == "rubric_judge"]

    def judge_scales(self) -> dict[str, tuple[int, int] | None]:
        """Judge criterion -> its scale (a scored judge) or None (pass/fail), in order."""
        return {
            e.criterion: (None if e.scale is None else (int(e.scale[0]), int(e.scale[1])))
            for e in self.evaluators if e.type == "rubric_judge"
        }

    @property
    def declares_no_policy(self) -> bool:
        """Whether oloproof.yaml says ``policy: none`` (no release rules, on purpose)."""
        return self.policy is not None and self.policy.strip().lower() == NO_POLICY

    def metrics(self) -> dict[str, MetricKind]:
        """Criterion -> metric kind, in declared order."""
        return {e.criterion: e.metric_kind for e in self.evaluators}


class IntervalRuleShape:
    """A release rule on the interval (``kind: interval_threshold``)."""


class JudgeValidationShape:
    """``judge_validation`` on a rule: the floors that apply, with their defaults."""

    if TYPE_CHECKING:  # fields of the models; not declared here, or pydantic would take them
        min_agreement: float | None
        min_sensitivity: float | None
        min_specificity: float | None

    @property
    def sensitivity_floor(self) -> float:
        """``min_sensitivity``, else ``min_agreement`` (an earlier policy's one floor),
        else 0.85."""
        for value in (self.min_sensitivity, self.min_agreement):
            if value is not None:
                return float(value)
        return DEFAULT_JUDGE_FLOOR

    @property
    def specificity_floor(self) -> float:
        """``min_specificity``, else ``min_agreement``, else 0.85."""
        for value in (self.min_specificity, self.min_agreement):
            if value is not None:
                return float(value)
        return DEFAULT_JUDGE_FLOOR


class ObservedCountRuleShape:
    """A release rule counting failures (``kind: observed_count``)."""


class ReleasePolicyShape:
    """release.yaml."""


class CompareRuleShape:
    """A rule of compare.yaml."""


class ComparePolicyShape:
    """compare.yaml."""
