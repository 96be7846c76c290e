"""A suite or labels line holding a raw control character (a NUL, a tab inside a string):
the refusal says where, once. Python's decoder ends its message with "at" (it expects the
position after it), so the suite said "Invalid control character at at column 39" and the
labels file "Invalid control character at", with no position at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from oloproof.errors import ConfigError
from oloproof.project.labels import load_labels
from oloproof.project.suite import load_suite


def test_suite_line_with_a_raw_nul(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'{"id": "a", "input": "ok"}\n{"id": "b", "input": "x\x00y"}\n')
    with pytest.raises(ConfigError) as info:
        load_suite(path, "cases.jsonl")
    text = str(info.value)
    assert "cases.jsonl:2" in text
    assert "Invalid control character at column 24" in text
    assert "at at" not in text


def test_labels_line_with_a_raw_tab(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_bytes(b'{"id": "a", "criterion": "helpful", "pass": true, "note": "a\tb"}\n')
    with pytest.raises(ConfigError) as info:
        load_labels(path, "labels.jsonl", ["helpful"])
    text = str(info.value)
    assert "labels.jsonl:1" in text
    assert "Invalid control character at column 61" in text
    assert "at at" not in text and not text.rstrip().endswith(" at")
