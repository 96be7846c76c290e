"""The configuration's records (project/config.py) and the pydantic models that validate
into them (project/models.py): one record per model, with the same fields in the same
order and the same defaults, so that a field added to one and not the other fails here,
not in a user's run."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_core import PydanticUndefined

from oloproof._records import MISSING, FrozenInstanceError
from oloproof.project import config as records
from oloproof.project import models
from oloproof.project.config import RECORDS, ConfigRecord

MODELS = models._MODELS
#: The fields whose one accepted value a record may take as its default.
TAGS = {"type", "kind", "version"}


def _record_fields(cls: type[ConfigRecord]) -> list[Any]:
    return [f for f in cls.__record_fields__  # type: ignore[attr-defined]
            if f.name not in cls.INTERNAL]


def test_one_record_per_model() -> None:
    assert sorted(RECORDS) == sorted(MODELS)
    # Every model of models.py is in the table (a model left out could not be converted).
    declared = {name for name, value in vars(models).items()
                if isinstance(value, type) and issubclass(value, models._Model)
                and value is not models._Model and not name.startswith("_")}
    assert declared == set(MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_record_has_its_models_fields_and_defaults(name: str) -> None:
    model, record = MODELS[name], RECORDS[name]
    fields = _record_fields(record)
    assert [f.name for f in fields] == list(model.model_fields), name
    for f in fields:
        info = model.model_fields[f.name]
        if info.default is PydanticUndefined and info.default_factory is None:
            if f.name in TAGS and f.default is not MISSING:
                # A tag the file must write (``type:``, ``version: 1``) may have its one
                # value as the record's default: a record made in code needs not repeat it.
                assert (f.default,) == info.annotation.__args__, (name, f.name)  # type: ignore[union-attr]
                continue
            assert f.default is MISSING and f.default_factory is MISSING, (name, f.name)
            continue
        expected = info.default_factory() if info.default_factory else info.default  # type: ignore[call-arg]
        given = f.default_factory() if f.default_factory is not MISSING else f.default
        # A nested model's default is its record's.
        if isinstance(expected, models._Model):
            expected = models.to_record(expected).dump()
            given = given.dump()
        assert given == expected and type(given) is type(expected), (name, f.name)
        # What the file calls it (an alias) is the record's ALIASES.
        if info.alias and info.alias != f.name:
            assert record.ALIASES[f.name] == info.alias
        if info.exclude:
            assert f.name in record.EXCLUDED


def test_records_are_frozen_and_made_by_keyword() -> None:
    rule = records.IntervalRule(id="r", metric="m", min=0.5)
    with pytest.raises(FrozenInstanceError):
        rule.min = 0.1  # type: ignore[misc]
    with pytest.raises(TypeError):
        records.IntervalRule("r", "m")  # type: ignore[misc]
    assert rule == records.IntervalRule.validate({"id": "r", "metric": "m", "min": 0.5})


def test_no_pydantic_model_leaves_the_validation(tmp_path: Any) -> None:
    """What the loaders give is records all the way down."""
    from oloproof.project.loader import load_release_policy

    path = tmp_path / "release.yaml"
    path.write_text("version: 1\nfamilies: {q: {multiplicity: holm}}\nrules:\n"
                    "  - {id: a, metric: m, min: 0.5, family: q,"
                    " judge_validation: {min_labels: 3}}\n  - {id: b, metric: m, max_failures: 1}\n")
    policy = load_release_policy(path, {"m": "BINARY"}, judges=["m"])
    assert type(policy) is records.ReleasePolicy
    assert type(policy.families["q"]) is records.RuleFamily
    assert [type(r) for r in policy.rules] == [records.IntervalRule, records.ObservedCountRule]
    assert type(policy.rules[0].judge_validation) is records.JudgeValidation  # type: ignore[union-attr]
    assert policy.rules[0].fields_set == {"id", "metric", "min", "family", "judge_validation",
                                          "kind"}
