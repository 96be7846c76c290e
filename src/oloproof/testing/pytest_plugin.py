"""A pytest plugin: keep release gates beside the unit tests.

Installed with Oloproof (entry point ``pytest11``), it adds one fixture::

    def test_support_bot_release_gate(oloproof_run):
        oloproof_run("support_bot").assert_allowed()

``oloproof_run(project=".", **kwargs)`` is :func:`oloproof.run` (same keywords: ``policy``,
``use_cache``, ``limit``, ...); a relative ``project`` is found from the directory of the
test file that asks for it. ``assert_allowed()`` fails the test with every blocking
rule, its state and its interval. The fixture's runs go to the project's store like any
other run (``oloproof runs`` lists them).

This module imports nothing of Oloproof's until the fixture is used, so installing
Oloproof costs other projects' test sessions nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from oloproof.api import RunResult

__all__ = ["oloproof_run"]


@pytest.fixture
def oloproof_run(request: pytest.FixtureRequest) -> Callable[..., RunResult]:
    """Run an Oloproof project from a test: ``oloproof_run("path").assert_allowed()``."""
    base = Path(str(request.path)).parent

    def run(project: str | os.PathLike[str] = ".", **kwargs: Any) -> RunResult:
        from oloproof.api import run as api_run

        path = Path(project)
        if not path.is_absolute():
            path = base / path
        return api_run(path, **kwargs)

    return run
