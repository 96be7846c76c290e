"""Start-up's freeze (cli/main.py, _after_imports): what the command surely imports is moved
out of the collector's sight before any user code runs, and the user's objects are not.

Checked from inside a real ``oloproof run`` process: a sitecustomize registers an atexit
handler that looks, with ``gc.get_objects()`` (which lists only the objects the collector
still walks), for one of asyncio's classes and for a class of the user's app.py. The app
also leaves a reference cycle with a finalizer behind; the interpreter's teardown must
still finalize it, as it would without Oloproof.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

SITECUSTOMIZE = """
import atexit, gc, json, os, sys

def _report():
    walked = gc.get_objects()
    asyncio = sys.modules.get("asyncio")
    app = sys.modules.get("app")
    report = {
        "asyncio_imported": asyncio is not None,
        "asyncio_walked": asyncio is not None
            and any(o is asyncio.base_events.BaseEventLoop for o in walked),
        "app_walked": app is not None and any(o is app.Answerer for o in walked),
        "frozen": gc.get_freeze_count(),
    }
    with open(os.environ["FREEZE_REPORT"], "w") as fh:
        json.dump(report, fh)

atexit.register(_report)
"""

APP = """
import os


class Answerer:
    pass


class _Closer:
    # In a reference cycle, reachable only from this module: the teardown's collection
    # finalizes it, and its write must happen.
    def __init__(self):
        self.me = self
        self.path = os.environ["FINALIZED"]

    # open is bound here: the teardown has cleared the module's builtins by then.
    def __del__(self, open=open):
        with open(self.path, "a") as fh:
            fh.write("finalized\\n")


_closer = _Closer()


def answer(case_input):
    return {"label": "ok"}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    write_project(root, app=APP, cases=labelled_cases(6))
    return root


def _run(project: Path, tmp_path: Path, *args: str) -> tuple[dict[str, object], str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    report, finalized = tmp_path / "report.json", tmp_path / "finalized.txt"
    finalized.unlink(missing_ok=True)
    env = {"PYTHONPATH": str(site), "FREEZE_REPORT": str(report), "FINALIZED": str(finalized)}
    result = run_cli("run", *args, cwd=project, env=env)
    assert result.code in (0, 3), result.err
    return json.loads(report.read_text()), finalized.read_text() if finalized.exists() else ""


def test_a_run_without_the_cache_freezes_the_command_and_not_the_user_objects(
    project: Path, tmp_path: Path
) -> None:
    report, finalized = _run(project, tmp_path, "--no-cache")
    assert isinstance(report["frozen"], int) and report["frozen"] > 10_000
    # asyncio comes after the freeze, while the first calls are under way (Engine.start_early:
    # they start before the loop does), so the collector still walks it.
    assert report["asyncio_imported"] is True
    assert report["asyncio_walked"] is True
    # The user's module came after the freeze: collected as usual, finalizers included.
    assert report["app_walked"] is True
    assert finalized == "finalized\n"


def test_a_run_that_may_use_the_cache_leaves_the_user_objects_alone(
    project: Path, tmp_path: Path
) -> None:
    report, finalized = _run(project, tmp_path)
    assert report["app_walked"] is True
    assert finalized == "finalized\n"
    # A rerun from the cache calls nothing: it never imports asyncio at all.
    report, finalized = _run(project, tmp_path)
    assert report["asyncio_imported"] is False
    assert report["app_walked"] is True
    assert finalized == "finalized\n"
