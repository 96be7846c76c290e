"""A real Ray cluster on this machine for the tests: a head node and a second worker node,
each started by ``ray start --block`` in a session of its own, with a token of the tests'
own (``RAY_AUTH_TOKEN``), and stopped with everything they started.

Ray's processes (the GCS, the raylets, their workers) stay in the session of the ``ray
start`` that made them; :meth:`RayCluster.stop` ends each session (SIGTERM, then SIGKILL)
and checks that none of its processes is left, so that no raylet outlives the tests.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
RAY_INSTALLED = Path(RAY).exists()


class Unavailable(Exception):
    """Ray is not installed, or the cluster did not come up."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def session_pids(sid: int) -> list[int]:
    """Every live process of session ``sid`` (zombies left out)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        # state, ppid, pgrp, session
        if fields[0] != "Z" and int(fields[3]) == sid:
            out.append(int(entry.name))
    return out


class RayCluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {
            **os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self.env.pop("RAY_ADDRESS", None)
        self.nodes: list[subprocess.Popen[bytes]] = []

    def _start(self, *args: str, log: str) -> None:
        with (self.tmp / log).open("wb") as out:
            self.nodes.append(subprocess.Popen(
                [RAY, "start", "--block", "--num-cpus=1", *args], env=self.env,
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            ))

    def start(self, timeout_s: float = 240.0) -> None:
        if not Path(RAY).exists():
            raise Unavailable("Ray is not installed (pip install 'oloproof[ray]')")
        self._start("--head", f"--port={self.port}", "--include-dashboard=false",
                    f"--temp-dir={self.tmp / 'ray'}", "--disable-usage-stats", log="head.log")
        self._wait(1, timeout_s)
        self._start(f"--address={self.address}", log="worker.log")
        self._wait(2, timeout_s)

    def alive_nodes(self) -> int:
        done = subprocess.run([RAY, "status", f"--address={self.address}"], env=self.env,
                              capture_output=True, text=True, check=False, timeout=60)
        if done.returncode != 0:
            return 0
        active = done.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
        return sum(1 for line in active.splitlines() if "node_" in line)

    def _wait(self, nodes: int, timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if any(p.poll() is not None for p in self.nodes):
                self.stop()
                raise Unavailable(f"ray start ended: {self._logs()}")
            if self.alive_nodes() >= nodes:
                return
            time.sleep(1)
        self.stop()
        raise Unavailable(f"the cluster had not {nodes} nodes after {timeout_s:g}s: {self._logs()}")

    def _logs(self) -> str:
        return " | ".join(
            (self.tmp / name).read_text(errors="replace")[-800:]
            for name in ("head.log", "worker.log") if (self.tmp / name).exists()
        )

    def processes(self) -> list[int]:
        return [pid for node in self.nodes for pid in session_pids(node.pid)]

    def stop(self) -> list[int]:
        """Stop every node and whatever it started; the pids still alive after (none)."""
        for node in reversed(self.nodes):
            try:
                os.killpg(node.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 20
        while time.monotonic() < end and self.processes():
            time.sleep(0.5)
        for node in self.nodes:
            for pid in session_pids(node.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for node in self.nodes:
            try:
                node.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        time.sleep(0.5)
        return self.processes()
