"""Shared helpers for the project-file tests (imported by the test modules)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from oloproof.errors import ConfigError

GOOD_SUITE = (
    '{"id": "refund_00", "input": {"question": "Can I get a refund?"}, '
    '"expected": {"label": "refund"}, "metadata": {"lang": "en"}}\n'
    '{"id": "refund_01", "input": {"question": "Money back?"}, "expected": {"label": "refund"}}\n'
)

MINIMAL_CONFIG = """\
version: 1
project: demo
dataset: data/suite.jsonl
system:
  name: bot
  version: "1"
  callable: app:answer
evaluators:
  - type: exact_match
    criterion: exact_label
    field: label
"""

Writer = Callable[[str, str], Path]


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """The 1-based line of the n-th line of ``text`` that contains ``needle``."""
    found = 0
    for number, line in enumerate(textwrap.dedent(text).splitlines(), 1):
        if needle in line:
            found += 1
            if found == occurrence:
                return number
    raise AssertionError(f"{needle!r} not in text")


def config_error(action: Callable[[], object]) -> ConfigError:
    """Run ``action`` and return the ConfigError it raises."""
    with pytest.raises(ConfigError) as info:
        action()
    return info.value


def check(
    err: ConfigError,
    *,
    file: str,
    field: str | None,
    line: int | None,
    contains: tuple[str, ...] = (),
) -> str:
    """Assert the error names file, field and line, and says each of ``contains``."""
    message = str(err)
    assert err.file == file, message
    assert err.field == field, message
    assert err.line == line, message
    where = f"{file}:{line}" if line else file
    assert message.startswith(where + ": "), message
    if field:
        assert f": {field}: " in message, message
    for text in contains:
        assert text in message, f"{text!r} not in {message!r}"
    assert "Input should" not in message and "pydantic" not in message, message
    return message


def project_yaml(*, system: str | None = None, evaluators: str | None = None, top: str = "") -> str:
    """An oloproof.yaml text with the given (dedented, indented here) blocks."""
    system = system if system is not None else 'name: bot\nversion: "1"\ncallable: app:answer\n'
    evaluators = (
        evaluators
        if evaluators is not None
        else "- type: exact_match\n  criterion: exact_label\n  field: label\n"
    )
    return (
        "version: 1\n"
        "project: demo\n"
        "dataset: data/suite.jsonl\n"
        + top
        + "system:\n"
        + textwrap.indent(textwrap.dedent(system), "  ")
        + "evaluators:\n"
        + textwrap.indent(textwrap.dedent(evaluators), "  ")
    )
