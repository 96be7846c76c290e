"""Helpers for the store tests: read-only places, file snapshots, strict JSON."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import OLOPROOF, Result, labelled_cases, run_cli, write_project

RELEASE = """\
version: 1
rules:
  - id: label-floor
    metric: exact_label
    min: 0.5
"""

INSTANT = """
from oloproof import system

@system(name="instant", version="1")
def answer(case_input):
    return {"label": "ok"}
"""

SLOW = """
import time
from oloproof import system

@system(name="slow", version="1")
def answer(case_input):
    time.sleep(float(case_input.get("sleep", 0.05)))
    return {"label": "ok"}
"""

# Mount the first argument read-only on itself in a private mount namespace, then
# run the rest: the way to make a place read-only for root, who ignores file modes.
_RO_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@functools.cache
def _can_mount_readonly() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", _RO_MOUNT, "/tmp", "true"],
        capture_output=True, check=False,
    )
    return probe.returncode == 0


def run_cli_readonly(*args: str, cwd: Path, readonly: Path) -> Result:
    """Run the CLI in ``cwd`` with ``readonly`` (a directory) not writable by it.

    Root ignores file modes, so for root the directory is mounted read-only in a
    private mount namespace; anyone else gets its write bits removed meanwhile.
    """
    if os.geteuid() == 0:
        if not _can_mount_readonly():
            pytest.skip("running as root without the means to mount a directory read-only")
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c", _RO_MOUNT, str(readonly), *OLOPROOF, *args],
            cwd=cwd, env=_env(), capture_output=True, text=True, check=False, timeout=120,
            stdin=subprocess.DEVNULL,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)
    modes = {p: p.stat().st_mode for p in [readonly, *readonly.iterdir()]}
    try:
        for p in modes:
            p.chmod(0o500 if p.is_dir() else 0o400)
        return run_cli(*args, cwd=cwd)
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def snapshot(directory: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under ``directory`` (the configuration snapshots in ``snapshots/`` too):
    its content hash, mtime (ns) and mode, by its path inside ``directory``."""
    out = {}
    for p in sorted(directory.rglob("*")):
        st = p.stat()
        if p.is_dir():
            out[str(p.relative_to(directory))] = ("", st.st_mtime_ns, st.st_mode)
            continue
        out[str(p.relative_to(directory))] = (
            hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_mode)
    return out


def _no_constants(name: str) -> Any:
    raise AssertionError(f"not strict JSON: {name}")


def strict_json(text: str) -> Any:
    """Parse ``text`` as strict JSON: no NaN/Infinity, and encodable as UTF-8 (no lone surrogate)."""
    text.encode("utf-8")
    value = json.loads(text, parse_constant=_no_constants)
    json.dumps(value, allow_nan=False).encode("utf-8")
    _no_surrogates(value)
    return value


def _no_surrogates(value: Any) -> None:
    if isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_surrogates(k)
            _no_surrogates(v)
    elif isinstance(value, list):
        for v in value:
            _no_surrogates(v)


def finished_project(root: Path, n: int = 12) -> Path:
    """A project with one finished, decided run of ``n`` cases."""
    write_project(root, app=INSTANT, cases=labelled_cases(n), release=RELEASE)
    result = run_cli("run", cwd=root)
    assert result.code == 0, result.text
    return root


def store_of(root: Path) -> Path:
    return root / ".oloproof" / "store.sqlite"


def stored_cases(root: Path) -> int:
    conn = sqlite3.connect(store_of(root), timeout=5)
    try:
        return int(conn.execute("SELECT count(*) FROM run_cases").fetchone()[0])
    finally:
        conn.close()


def start_slow_run(root: Path, n: int = 400, sleep: float = 0.05) -> subprocess.Popen[str]:
    """Start ``oloproof run`` on a slow project; the caller stops it."""
    cases = labelled_cases(n)
    for c in cases:
        c["input"] = {**c["input"], "sleep": sleep}
    write_project(root, app=SLOW, cases=cases, release=RELEASE, concurrency=(2, 2))
    return subprocess.Popen(
        [*OLOPROOF, "run"], cwd=root, env=_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
    )


def wait_for_cases(root: Path, at_least: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            n = stored_cases(root) if store_of(root).exists() else 0
        except sqlite3.OperationalError:
            n = 0
        if n >= at_least:
            return n
        assert time.monotonic() < deadline, f"only {n} cases stored after {timeout}s"
        time.sleep(0.05)


def kill_hard(proc: subprocess.Popen[str]) -> None:
    """SIGKILL: the process records nothing, as after a crash or a power cut."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def runs_json(root: Path) -> list[dict[str, Any]]:
    result = run_cli("runs", "--json", cwd=root)
    assert result.code == 0, result.text
    value = strict_json(result.out)
    assert isinstance(value, list)
    return value


def inspect_json(root: Path, *extra: str) -> dict[str, Any]:
    result = run_cli("inspect", "latest", "--json", *extra, cwd=root)
    assert result.code == 0, result.text
    value = strict_json(result.out)
    assert isinstance(value, dict)
    return value


