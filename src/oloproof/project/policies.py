"""The release and compare policies (release.yaml, compare.yaml) as records, and the base
every configuration record shares (:class:`ConfigRecord`).

Part of the configuration's records (project/config.py, which re-exports all of this): a
module of their own because the commands that decide a stored run (``gate``, ``inspect``,
``plan``, ``report``) read the run's policy and nothing else of the configuration, and
making the other records' classes was about 7 million instructions of each of them
(docs/performance.md). Imports neither pydantic nor PyYAML.
"""

from __future__ import annotations

from oloproof._records import dataclass
from oloproof._records import field as _field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Literal, Self

__all__ = [
    "DEFAULT_JUDGE_FLOOR",
    "DEFAULT_MAX_MISSING",
    "POLICY_RECORDS",
    "STATES",
    "ComparePolicy",
    "CompareRule",
    "ConfigRecord",
    "IntervalRule",
    "JudgeValidation",
    "ObservedCountRule",
    "ReleasePolicy",
    "ReleaseRule",
    "RuleFamily",
]

#: A pass/fail judge's sensitivity and specificity floors when a policy sets neither
#: them nor ``min_agreement`` (judge_validation).
DEFAULT_JUDGE_FLOOR = 0.85
#: ``max_missing`` by default (release.yaml, compare.yaml): the largest share of a rule's
#: cases that may be missing before its evidence is incomplete (docs/statistics.md).
DEFAULT_MAX_MISSING = 0.2

# The Literal aliases are the type checker's only: typing stays off the run path.
if TYPE_CHECKING:
    State = Literal["FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW"]
STATES: tuple[State, ...] = ("FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW")


# -- the base: fields_set and dump() ----------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ConfigRecord:
    """What every configuration record has: the fields its file set, and :meth:`dump`."""

    #: The fields the file (or the caller) set, as pydantic's ``model_fields_set``.
    fields_set: frozenset[str] = _field(default=frozenset(), repr=False, compare=False)

    #: Field name -> the key it has in the file, where they differ (``schema_``: ``schema``).
    ALIASES: ClassVar[dict[str, str]] = {}
    #: Fields never dumped: not part of an identity or of a stored policy.
    EXCLUDED: ClassVar[frozenset[str]] = frozenset()
    #: Fields that are not the file's: kept by the validation for the engine.
    INTERNAL: ClassVar[frozenset[str]] = frozenset({"fields_set"})

    def dump(
        self, *, mode: Literal["python", "json"] = "python", by_alias: bool = False,
        exclude: set[str] | frozenset[str] | None = None, exclude_unset: bool = False,
    ) -> dict[str, Any]:
        """The fields as a dict, nested records as dicts: what pydantic's ``model_dump``
        gave with the same arguments (``mode="json"``: tuples as lists)."""
        cls = type(self)
        out: dict[str, Any] = {}
        for f in cls.__record_fields__:  # type: ignore[attr-defined]
            name = f.name
            if name in cls.INTERNAL or name in cls.EXCLUDED or (exclude and name in exclude):
                continue
            if exclude_unset and name not in self.fields_set:
                continue
            key = cls.ALIASES.get(name, name) if by_alias else name
            out[key] = _dump(getattr(self, name), mode, by_alias, exclude_unset)
        return out

    @classmethod
    def validate(cls, data: Any, *, context: dict[str, Any] | None = None) -> Self:
        """Validate ``data`` (a mapping as in the file) with pydantic, into this record;
        pydantic's ``ValidationError`` when it is not valid. Imports pydantic."""
        from oloproof.project.models import validate

        return validate(cls, data, context)


def _dump(value: Any, mode: str, by_alias: bool, exclude_unset: bool) -> Any:
    if isinstance(value, ConfigRecord):
        return value.dump(mode=mode, by_alias=by_alias,  # type: ignore[arg-type]
                          exclude_unset=exclude_unset)
    if isinstance(value, tuple):
        items = [_dump(v, mode, by_alias, exclude_unset) for v in value]
        return items if mode == "json" else tuple(items)
    if isinstance(value, list):
        return [_dump(v, mode, by_alias, exclude_unset) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v, mode, by_alias, exclude_unset) for k, v in value.items()}
    return value


# -- release.yaml and compare.yaml ------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class JudgeValidation(ConfigRecord):
    """``judge_validation`` on a rule: the floors that apply, with their defaults."""

    min_labels: int = 30
    min_agreement: float | None = None
    min_sensitivity: float | None = None
    min_specificity: float | None = None
    max_mean_abs_diff: float | None = None
    min_weighted_kappa: float | None = None

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


if TYPE_CHECKING:
    Aggregate = Literal["mean", "pass_at_k", "pass_all_k", "flaky_share"]


@dataclass(frozen=True, kw_only=True)
class IntervalRule(ConfigRecord):
    """A release rule on the interval: ``min: t`` (a floor) or ``max: t`` (a ceiling)."""

    id: str
    metric: str
    kind: Literal["interval_threshold"] = "interval_threshold"
    min: float | None = None
    max: float | None = None
    family: str | None = None
    judge_validation: JudgeValidation | None = None
    estimate: Literal["judge", "corrected"] = "judge"
    aggregate: Aggregate | None = None
    group: dict[str, str | int | bool] | None = None
    each_group: bool = False


@dataclass(frozen=True, kw_only=True)
class ObservedCountRule(ConfigRecord):
    """At most ``max_failures`` failures, counting missing cases as failures."""

    id: str
    metric: str
    kind: Literal["observed_count"] = "observed_count"
    max_failures: int
    group: dict[str, str | int | bool] | None = None
    each_group: bool = False
    aggregate: Aggregate | None = None


ReleaseRule = IntervalRule | ObservedCountRule
if TYPE_CHECKING:
    Multiplicity = Literal["holm", "bonferroni", "none"]


@dataclass(frozen=True, kw_only=True)
class RuleFamily(ConfigRecord):
    """A family of interval rules whose family-wise error is held at 1 - confidence_level."""

    multiplicity: Multiplicity = "holm"


@dataclass(frozen=True, kw_only=True)
class ReleasePolicy(ConfigRecord):
    """The content of release.yaml: rules on one run."""

    version: Literal[1] = 1
    confidence_level: float = 0.95
    block_on: list[State] = _field(default_factory=lambda: list(STATES))
    warn_on: list[State] = _field(default_factory=list)
    families: dict[str, RuleFamily] = _field(default_factory=dict)
    rules: list[ReleaseRule] = _field(default_factory=list)
    max_missing: float = DEFAULT_MAX_MISSING


@dataclass(frozen=True, kw_only=True)
class CompareRule(ConfigRecord):
    """A rule on the paired difference candidate - baseline; ``margin`` is never None
    after validation."""

    id: str
    kind: Literal["superiority", "non_inferiority", "equivalence"]
    metric: str
    margin: float | None = None


@dataclass(frozen=True, kw_only=True)
class ComparePolicy(ConfigRecord):
    """The content of compare.yaml: rules on a candidate against a baseline."""

    version: Literal[1] = 1
    confidence_level: float = 0.95
    block_on: list[State] = _field(default_factory=lambda: list(STATES))
    warn_on: list[State] = _field(default_factory=list)
    rules: list[CompareRule] = _field(default_factory=list)
    max_missing: float = DEFAULT_MAX_MISSING


#: The policies' record classes by name (project/config.py's RECORDS holds them too): the
#: only classes a stored policy's snapshot may name.
POLICY_RECORDS: dict[str, type[ConfigRecord]] = {
    cls.__name__: cls
    for cls in (ReleasePolicy, RuleFamily, IntervalRule, ObservedCountRule, JudgeValidation,
                ComparePolicy, CompareRule)
}
