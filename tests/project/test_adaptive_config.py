"""concurrency.adaptive: true/false for both limits, or one flag per limit; off by default;
every mistake is one ConfigError naming file, field and line."""

from __future__ import annotations

import pytest
from project_helpers import Writer, check, config_error, line_of, project_yaml

from oloproof.project import load_project


def _load(write: Writer, top: str) -> object:
    write("oloproof.yaml", project_yaml(top=top))
    return load_project("oloproof.yaml")


def test_off_by_default(write: Writer) -> None:
    config = _load(write, "concurrency:\n  system: 32\n").config  # type: ignore[attr-defined]
    assert (config.concurrency.adaptive.system, config.concurrency.adaptive.judge) == (False, False)
    assert config.concurrency.system == 32


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", (True, True)),
        ("false", (False, False)),
        ("{system: true}", (True, False)),
        ("{judge: true}", (False, True)),
        ("{system: true, judge: false}", (True, False)),
        ("\n    system: false\n    judge: true", (False, True)),
    ],
)
def test_both_or_one_flag_per_limit(write: Writer, value: str, expected: tuple[bool, bool]) -> None:
    top = f"concurrency:\n  system: 32\n  judge: 8\n  adaptive: {value}\n"
    config = _load(write, top).config  # type: ignore[attr-defined]
    assert (config.concurrency.adaptive.system, config.concurrency.adaptive.judge) == expected
    # The numbers stay what they were: ceilings now.
    assert (config.concurrency.system, config.concurrency.judge) == (32, 8)


@pytest.mark.parametrize(
    ("value", "field", "says"),
    [
        ("3", "concurrency.adaptive", ("expected true or false, got 3",
                                       "accepted: true, false, or a mapping")),
        ("sometimes", "concurrency.adaptive", ("expected true or false, got 'sometimes'",)),
        ("null", "concurrency.adaptive", ("expected true or false, got null",)),
        ("[system]", "concurrency.adaptive", ("expected true or false, got a list",)),
        ("{system: 1}", "concurrency.adaptive.system", ("expected true or false, got 1",)),
        ("{sytem: true}", "concurrency.adaptive.sytem",
         ("unknown key 'sytem'", "accepted: system, judge", "did you mean 'system'?")),
        ("{evaluator: true}", "concurrency.adaptive.evaluator",
         ("unknown key 'evaluator'", "accepted: system, judge")),
    ],
)
def test_a_bad_value_is_one_clear_error(
    write: Writer, value: str, field: str, says: tuple[str, ...]
) -> None:
    text = project_yaml(top=f"concurrency:\n  system: 32\n  adaptive: {value}\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field=field, line=line_of(text, "adaptive:"), contains=says)


@pytest.mark.parametrize(("limit", "value"), [("system", "adaptive"), ("judge", "auto")])
def test_a_limit_written_as_adaptive_says_where_adaptive_goes(
    write: Writer, limit: str, value: str
) -> None:
    """``system: adaptive`` said only "expected a whole number"; it now says how an adaptive
    limit is written."""
    text = project_yaml(top=f"concurrency:\n  {limit}: {value}\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field=f"concurrency.{limit}", line=line_of(text, f"{limit}:"),
          contains=(f"expected a whole number, got '{value}'",
                    f"add `adaptive: {{{limit}: true}}` under concurrency"))
