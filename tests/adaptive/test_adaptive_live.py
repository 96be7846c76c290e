"""The live view shows each adaptive limit as it stands, beside its ceiling."""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from rich.console import Console
from test_adaptive_runs import CEILING, SYSTEM, write_http_project
from tests.conftest import OLOPROOF
from tests.fakes.provider import FakeServer
from tests.progress._support import cli_env, plain

from oloproof.events import CaseExecuted, ConcurrencyChanged
from oloproof.render.live import LiveView, limits_line

RUN = "run_01J00000000000000000000000"


def _frame(view: LiveView) -> str:
    out = io.StringIO()
    Console(file=out, width=120, force_terminal=False, color_system=None).print(view.render())
    return out.getvalue()


def test_the_frame_names_each_adaptive_limit() -> None:
    view = LiveView(Console(file=io.StringIO()), ["exact_label"], 120)
    assert "adaptive" not in _frame(view)  # no adaptive limit: the frame is as it was
    view(ConcurrencyChanged(RUN, limit_name="system", previous=None, limit=4, ceiling=32,
                            reason="start"))
    view(ConcurrencyChanged(RUN, limit_name="judge", previous=None, limit=4, ceiling=8,
                            reason="start"))
    view(ConcurrencyChanged(RUN, limit_name="system", previous=4, limit=8, ceiling=32,
                            reason="clean_window"))
    view(ConcurrencyChanged(RUN, limit_name="system", previous=8, limit=6, ceiling=32,
                            reason="rate_limited"))
    view(CaseExecuted(RUN, scenario_id="c1", status="OK", from_cache=False, latency_ms=1.0,
                      attempts=1, error=None))
    frame = _frame(view)
    assert "1/120 cases · 0 cached · 0 errors" in frame
    assert "adaptive limits: system 6 of 32 · judge 4 of 8" in frame
    assert limits_line({}) == ""


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def test_the_live_view_in_a_terminal_shows_the_limit(srv: FakeServer, tmp_path: Path) -> None:
    srv.configure(SYSTEM, capacity=6, delay_s=0.08, capacity_retry_after_ms=80)
    root = write_http_project(tmp_path / "p", srv, system=CEILING, adaptive="true")
    child = pexpect.spawn(
        "bash", ["-c", f"{shlex.join(OLOPROOF)} run --no-cache"], cwd=str(root), env=cli_env(),
        dimensions=(40, 200), encoding="utf-8", timeout=120,
    )
    child.expect(pexpect.EOF)
    transcript = plain(child.before or "")
    child.close()
    assert child.exitstatus == 0, transcript
    shown = [int(n) for n in re.findall(r"adaptive limits: system (\d+) of 32", transcript)]
    assert shown, transcript
    assert all(1 <= n <= 32 for n in shown)
    assert re.search(r"\d+/120 cases · 0 cached · 0 errors", transcript)
