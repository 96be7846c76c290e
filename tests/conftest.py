"""Shared test helpers: real projects in temporary directories, the real CLI in subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

OLOPROOF = [sys.executable, "-m", "oloproof.cli.main"]

# A module that uses any of these names drives the CLI in subprocesses, or a
# fake HTTP server whose scripted faults wait on real time (Retry-After,
# timeouts): all its tests are `slow`, left out of `make test-fast`. A test
# function that itself names one of _SLOW_IN_FUNCTION is `slow` too.
# (`cli` is tests/trust/_support.py's run_cli with the project as first argument.)
_SLOW_MODULE_NAMES = frozenset({"run_cli", "cli", "pexpect", "OLOPROOF", "FakeServer"})
_SLOW_IN_FUNCTION = frozenset({"run_cli", "subprocess", "Popen", "pexpect"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that start processes as ``slow``."""
    slow = pytest.mark.slow
    for item in items:
        module = getattr(item, "module", None)
        function = getattr(item, "function", None)
        names = set(getattr(getattr(function, "__code__", None), "co_names", ()))
        if (module is not None and _SLOW_MODULE_NAMES & set(vars(module))) or (
            _SLOW_IN_FUNCTION & names
        ):
            item.add_marker(slow)


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    full_env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    full_env["PYTHONUNBUFFERED"] = "1"
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [*OLOPROOF, *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def write_project(
    root: Path,
    *,
    app: str,
    cases: list[dict[str, Any]],
    evaluators: str | None = None,
    release: str | None = None,
    system_extra: str = "",
    concurrency: tuple[int, int] = (8, 4),
    version: str = "1",
    extra_files: dict[str, str] | None = None,
    policy: str | None = None,
) -> Path:
    """A real project on disk: app.py, oloproof.yaml, release.yaml, data/cases.jsonl.

    Without ``release`` (and ``policy``) the project gets a release.yaml without
    rules: a project with no policy at all is refused by ``run``. ``policy`` is
    written as ``policy:`` in oloproof.yaml (after ``dataset:``).
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "app.py").write_text(textwrap.dedent(app))
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases)
    )
    if evaluators is None:
        evaluators = """
          - type: exact_match
            criterion: exact_label
            field: label
        """
    lines = [
        "version: 1",
        "project: test-project",
        "dataset: data/cases.jsonl",
        "system:",
        "  name: test-system",
        f'  version: "{version}"',
        "  callable: app:answer",
        *["  " + line for line in textwrap.dedent(system_extra).strip().splitlines()],
        "concurrency:",
        f"  system: {concurrency[0]}",
        f"  judge: {concurrency[1]}",
        "evaluators:",
        *["  " + line for line in textwrap.dedent(evaluators).strip("\n").splitlines()],
    ]
    if policy is not None:
        lines.insert(3, f"policy: {policy}")
    elif release is None:
        # A project must have a release policy (a missing one is exit 2): by
        # default, an explicit one without rules.
        release = "version: 1\nrules: []\n"
    config = "\n".join(lines) + "\n"
    (root / "oloproof.yaml").write_text(config)
    if release is not None:
        (root / "release.yaml").write_text(textwrap.dedent(release))
    for name, content in (extra_files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content))
    return root


def labelled_cases(n: int, prefix: str = "q") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
        for i in range(n)
    ]


def events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    return tmp_path / "proj"


@contextlib.contextmanager
def mounted_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A real file system of ``size`` (``"2m"``) mounted at ``mount`` (created here) for a
    test: a disk that really fills. Skips the test where mounting is not allowed."""
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
        capture_output=True, check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
