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


@pytest.mark.parametrize(("line", "named"), [
    (b"\xef\xbb\xbf" + b'{"id": "b", "input": 1}', "U+FEFF (BYTE ORDER MARK)"),
    (b"\x00" * 64, "U+0000 (NUL)"),
    (b"\xc2\xa0" + b'{"id": "b", "input": 1}', "U+00A0 (NO-BREAK SPACE)"),
])
def test_a_character_that_does_not_show_is_named(tmp_path: Path, line: bytes,
                                                 named: str) -> None:
    """Two suites put together with ``cat`` (the second saved with a byte order mark), a
    file padded with NUL bytes: "Expecting value at column 1" of a line that looks right."""
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'{"id": "a", "input": "ok"}\n' + line + b"\n")
    with pytest.raises(ConfigError) as info:
        load_suite(path, "cases.jsonl")
    text = str(info.value)
    assert "cases.jsonl:2: not valid JSON: Expecting value at column 1" in text
    assert f"it holds {named} there, which does not show: delete it" in text
    labels = tmp_path / "labels.jsonl"
    labels.write_bytes(b'{"id": "a", "criterion": "helpful", "pass": true}\n' + line + b"\n")
    with pytest.raises(ConfigError) as info:
        load_labels(labels, "labels.jsonl", ["helpful"])
    assert f"it holds {named} there" in str(info.value)


def test_a_line_that_is_only_not_json_names_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text('{"id": "a", "input": "ok"}\nhello\n')
    with pytest.raises(ConfigError) as info:
        load_suite(path, "cases.jsonl")
    assert "it holds" not in str(info.value)
