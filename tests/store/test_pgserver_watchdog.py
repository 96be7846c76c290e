"""tests/pgserver.py's PostgreSQL server never outlives the process that started it: a
pytest killed with SIGKILL used to leave its server running, with its data directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests import pgserver

ROOT = Path(__file__).resolve().parents[2]

# A process that starts a server as the test session does, says where it is, and waits.
_OWNER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests import pgserver
server = pgserver.start()
watchdog = getattr(server, "watchdog", None)
print(server.directory, server.port, watchdog.pid if watchdog else 0, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _postmaster_pid(directory: Path) -> int:
    return int((directory / "data" / "postmaster.pid").read_text().splitlines()[0])


def _wait_until(condition: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return bool(condition())  # type: ignore[operator]


def _server_or_skip() -> pgserver.Server:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed")
    try:
        return pgserver.start()
    except pgserver.Unavailable as exc:
        if pgserver.required():
            pytest.fail(f"PostgreSQL is required here and cannot be started: {exc}")
        pytest.skip(f"PostgreSQL cannot be started here ({exc})")


def test_a_killed_owner_leaves_no_server_behind() -> None:
    _server_or_skip().stop()  # skips where PostgreSQL cannot run at all
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(ROOT)], stdout=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
    )
    directory: Path | None = None
    postmaster = 0
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline().split()
        assert len(line) == 3, f"the owner did not start a server (exit {owner.poll()})"
        directory, watchdog = Path(line[0]), int(line[2])
        postmaster = _postmaster_pid(directory)
        assert _alive(postmaster)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=60)
        # Generous: on a loaded machine the immediate stop may take a while.
        assert _wait_until(lambda: not _alive(postmaster), 120), (
            "the PostgreSQL server outlived the process that started it"
        )
        assert _wait_until(lambda: not directory.exists(), 60), (
            f"{directory} was left behind"
        )
        assert watchdog and _wait_until(lambda: not _alive(watchdog), 60)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(timeout=60)
        if postmaster and _alive(postmaster) and directory is not None:
            # What the watchdog should have done: never leave a server from this test.
            subprocess.run(
                [str(pgserver._binaries() / "pg_ctl"), "-D", str(directory / "data"), "-m",
                 "immediate", "stop"],
                user=pgserver.RUN_AS if os.geteuid() == 0 else None, check=False,
                capture_output=True, timeout=60, cwd="/",
            )


def test_stop_ends_the_watchdog_and_the_server() -> None:
    server = _server_or_skip()
    watchdog = server.watchdog
    assert watchdog is not None and watchdog.poll() is None
    postmaster = _postmaster_pid(server.directory)
    server.stop()
    assert watchdog.poll() is not None  # stop() waited for it
    assert not _alive(postmaster)
    assert not server.directory.exists()
