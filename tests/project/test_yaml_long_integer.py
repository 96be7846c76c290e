"""An integer of more than 4,300 digits in a YAML file (oloproof.yaml, release.yaml,
compare.yaml) is refused at its line: PyYAML's int() raised ValueError past Python's
digit limit, and ``run`` ended as an internal error (exit 70)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from oloproof.errors import ConfigError
from oloproof.project._yaml import load_yaml


@pytest.mark.parametrize("number", ["9" * 5000, "-" + "1" * 4400, "+" + "9_9" * 3000])
def test_a_number_past_the_digit_limit(tmp_path: Path, number: str) -> None:
    path = tmp_path / "release.yaml"
    path.write_text(f"version: 1\nconfidence_level: 0.95\nx: {number}\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path, "release.yaml")
    text = str(info.value)
    assert text.startswith("release.yaml:3: a number is too long to read")
    assert f"more than {sys.get_int_max_str_digits():,} digits" in text


def test_the_same_digits_quoted_are_text(tmp_path: Path) -> None:
    path = tmp_path / "release.yaml"
    path.write_text(f"version: 1\nx: '{'9' * 5000}'\n")
    data, _ = load_yaml(path, "release.yaml")
    assert data["x"] == "9" * 5000
