"""Fixtures for the project-file tests: real files in a temporary directory."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from project_helpers import GOOD_SUITE, Writer


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary project directory, made the current directory, with a suite."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "suite.jsonl").write_text(GOOD_SUITE, encoding="utf-8")
    return tmp_path


@pytest.fixture
def write(project_dir: Path) -> Writer:
    """Write a file (dedented) relative to the project directory."""

    def _write(name: str, text: str) -> Path:
        path = project_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return _write
