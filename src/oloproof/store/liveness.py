"""Is the process that started a run still that process?

A run's row is ``RUNNING`` until its process records an end. A process that
is killed records nothing, and its PID is later given to some other process:
the PID alone would then keep the run ``RUNNING`` for ever. So a run also
stores an *owner* token, the process's identity as the kernel knows it:
boot id, PID and the process's start time in clock ticks since boot
(``/proc/<pid>/stat`` field 22). The run is live only while a process with
that exact token exists. A store read on another machine, or after a reboot,
has a different boot id: its ``RUNNING`` rows read as ended, which they are.

Where ``/proc`` is not available (macOS), no token is stored and liveness
falls back to the PID, checked against the run's creation time where the
platform says when a process started.
"""

from __future__ import annotations

import os
from datetime import datetime
from functools import cache

__all__ = ["owner_token", "run_owner_alive"]

# A process is made before the run it starts; allow for clock and tick rounding.
_START_SLACK_S = 2.0


@cache
def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


@cache
def _boot_time() -> float | None:
    try:
        with open("/proc/stat") as f:
            text = f.read()
        for line in text.splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat``: when the process started, in ticks since boot."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces
    # and parentheses: count fields from the last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def owner_token(pid: int | None = None) -> str | None:
    """The kernel's identity of process ``pid`` (default: this one), or ``None`` off Linux."""
    pid = os.getpid() if pid is None else pid
    boot = _boot_id()
    ticks = _start_ticks(pid)
    if boot is None or ticks is None:
        return None
    return f"{boot}:{pid}:{ticks}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _epoch(timestamp: str) -> float | None:
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None


def run_owner_alive(pid: int | None, owner: str | None, created_at: str) -> bool:
    """Whether the process that started a run (stored ``pid``, ``owner``) still runs.

    With an owner token, a process must match it exactly (same boot, PID and
    start time). Without one (a row written where tokens are not available),
    the PID must be alive and, where its start time can be read, must have
    started before the run was created: a younger process has reused the PID.
    """
    if not pid or pid <= 0:
        return False
    if owner is not None and _boot_id() is not None:
        return owner_token(pid) == owner
    if not _pid_alive(pid):
        return False
    ticks = _start_ticks(pid)
    boot = _boot_time()
    created = _epoch(created_at)
    if ticks is None or boot is None or created is None:
        return True
    started = boot + ticks / os.sysconf("SC_CLK_TCK")
    return started <= created + _START_SLACK_S
