"""A suite line past the line limit is refused without copying it: a 200 MB line (a dump,
a binary file) took four times its size in memory to be refused (the file's bytes, its
text, the line cut out of the text, and the line encoded again to count its bytes);
now the bytes and the text only, and the bytes are let go once decoded."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from oloproof.errors import ConfigError
from oloproof.project.suite import load_suite

SIZE = 40 << 20  # past the 16 MiB line limit


@pytest.mark.parametrize("newline", [True, False], ids=["ended", "last-line"])
def test_an_overlong_line_is_refused_without_copies(tmp_path: Path, newline: bool) -> None:
    path = tmp_path / "cases.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"id": "a", "input": 1}\n{"id": "b", "input": "')
        fh.write(b"x" * SIZE)
        fh.write(b'"}\n' if newline else b'"}')
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as info:
            load_suite(path, "cases.jsonl")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "cases.jsonl:2" in str(info.value)
    assert "the line is longer than the limit" in str(info.value)
    assert peak < 2.3 * SIZE, f"peak {peak / SIZE:.2f}x the line"


def test_a_line_at_the_limit_in_characters_of_several_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes are what is limited: a line of 64 characters (fewer than the limit) but 104
    bytes is refused by a limit of 100 bytes; one of 84 bytes is read."""
    monkeypatch.setenv("OLOPROOF_MAX_SUITE_LINE_BYTES", "100")
    path = tmp_path / "cases.jsonl"
    line = '{"id": "a", "input": "' + "é" * 30 + '"}'
    assert len(line.encode()) == 84
    path.write_text(line + "\n", encoding="utf-8")
    assert len(load_suite(path, "cases.jsonl")) == 1
    path.write_text('{"id": "a", "input": "' + "é" * 40 + '"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="longer than the limit of 100 bytes"):
        load_suite(path, "cases.jsonl")


def test_a_labels_file_of_one_enormous_line_is_refused_without_copies(tmp_path: Path) -> None:
    """The labels file (up to 256 MiB) was split into a list of copies of its lines before
    the first was read: three times its size in memory for one line that is not JSON."""
    from oloproof.project.labels import load_labels

    path = tmp_path / "labels.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"id": "a", "criterion": "helpful", "pass": true}\n')
        fh.write(b"x" * SIZE)
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as info:
            load_labels(path, "labels.jsonl", ["helpful"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "labels.jsonl:2" in str(info.value)
    assert peak < 2.3 * SIZE, f"peak {peak / SIZE:.2f}x the line"
