"""A system that raises a ``TimeoutError`` of its own (its client's read timeout, an
``asyncio.wait_for`` around its provider) failed by itself, in milliseconds: it is an ERROR
naming that exception, as any other, and not Oloproof's ``timeout_s`` running out, which
the case used to be recorded as (``TIMEOUT``, "no answer within timeout_s = 30s")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

SYNC = """
import socket
from oloproof import system

@system(name="own-timeout", version="1")
def answer(case_input):
    raise socket.timeout("the provider did not answer within 0.1s")
"""

ASYNC = """
import asyncio
from oloproof import system

async def provider():
    await asyncio.sleep(10)

@system(name="own-timeout", version="1")
async def answer(case_input):
    await asyncio.wait_for(provider(), 0.05)
    return {"label": "ok"}
"""

SLOW = """
import time
from oloproof import system

@system(name="slow", version="1")
def answer(case_input):
    time.sleep(5)
    return {"label": "ok"}
"""


@pytest.mark.parametrize("app", [SYNC, ASYNC], ids=["sync", "async"])
def test_a_timeout_error_the_system_raises_is_its_error(project_dir: Path, app: str) -> None:
    write_project(project_dir, app=app, cases=labelled_cases(2), system_extra="timeout_s: 30")
    result = run_cli("run", cwd=project_dir)
    assert result.code == 5, result.text
    shown = json.loads(run_cli("inspect", "latest", "--case", "q000", "--json",
                               cwd=project_dir).out)
    assert shown["status"] == "ERROR", shown
    assert "TimeoutError" in shown["error"], shown
    assert "timeout_s" not in shown["error"], shown


def test_the_runs_own_timeout_is_still_a_timeout(project_dir: Path) -> None:
    write_project(project_dir, app=SLOW, cases=labelled_cases(1), system_extra="timeout_s: 0.2")
    result = run_cli("run", cwd=project_dir)
    assert result.code == 5, result.text
    shown = json.loads(run_cli("inspect", "latest", "--case", "q000", "--json",
                               cwd=project_dir).out)
    assert shown["status"] == "TIMEOUT", shown
    assert "no answer within timeout_s = 0.2s" in shown["error"], shown
