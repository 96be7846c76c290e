"""A real ``oloproof view`` process for the tests: started, its printed address read, stopped."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import OLOPROOF

ADDRESS = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9._~-]+)")


@dataclass
class Viewer:
    proc: subprocess.Popen[str]
    url: str  # the address it printed, with its token
    base: str  # http://127.0.0.1:PORT/
    token: str
    port: int

    @property
    def cookie(self) -> str:
        return f"oloproof-view-{self.port}"

    def auth(self) -> dict[str, str]:
        """The header a script sends instead of the cookie."""
        return {"Authorization": f"Bearer {self.token}"}


def viewer_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OLOPROOF_DEBUG", "OLOPROOF_VIEW_TOKEN")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def start_viewer(
    root: Path, *args: str, env: dict[str, str] | None = None, user: int | None = None,
) -> Viewer:
    """Start ``oloproof view --no-open`` in ``root`` and read the address it prints."""
    proc = subprocess.Popen(
        [*OLOPROOF, "view", "--no-open", *args], cwd=root, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=viewer_env(env),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = ADDRESS.search(line)
    if not match:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"no address printed: {line!r} {err[-2000:]!r}")
    port = int(match.group(1))
    return Viewer(proc, match.group(), f"http://127.0.0.1:{port}/", match.group(2), port)


def stop(viewer: Viewer) -> None:
    viewer.proc.terminate()
    try:
        viewer.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        viewer.proc.kill()
        viewer.proc.wait(timeout=15)


@contextmanager
def running_viewer(root: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Viewer]:
    viewer = start_viewer(root, *args, env=env)
    try:
        yield viewer
    finally:
        stop(viewer)


def routes(run_id: str, cmp_id: str | None, case_id: str) -> Sequence[str]:
    """Every route of the viewer (and some it does not have), as paths."""
    from urllib.parse import quote

    paths = [
        "/", f"/runs/{run_id}", f"/runs/{run_id}?page=2&outcome=failed",
        f"/runs/{run_id}/events", f"/runs/{run_id}/case?id={quote(case_id, safe='')}",
        f"/runs/{run_id}/cases/{quote(case_id, safe='')}",
        "/static/style.css", "/favicon.ico", "/no/such/page", "/runs/run_NOPE",
    ]
    if cmp_id:
        paths.append(f"/comparisons/{cmp_id}")
    return paths
