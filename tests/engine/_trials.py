"""A project whose system is flaky on purpose, for the repeated-trials tests.

Every call appends the case's id to ``calls.log`` beside the app, so a test counts the calls
the system really received. With ``concurrency.system: 1`` a case's trials run in order, so
the n-th call of a case is its trial n - 1, and the behaviour below is deterministic:

- ``steady``: always right;
- ``wrong``: always wrong;
- ``flaky``: right on even trials, wrong on odd ones;
- ``fail_on``: a list of trials on which the call raises (the trial is missing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import write_project

FLAKY_APP = """
import os
from oloproof import system

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")

@system(name="flaky", version="1")
def answer(case_input):
    me = str(case_input["n"])
    with open(LOG, "a") as fh:
        fh.write(me + "\\n")
    with open(LOG) as fh:
        trial = sum(1 for line in fh if line.strip() == me) - 1
    if trial in case_input.get("fail_on", []):
        raise RuntimeError(f"trial {trial} failed on purpose")
    kind = case_input["kind"]
    right = kind == "steady" or (kind == "flaky" and trial % 2 == 0)
    return {"label": "ok" if right else "no"}
"""


def flaky_cases(steady: int, flaky: int, wrong: int, **extra: Any) -> list[dict[str, Any]]:
    kinds = ["steady"] * steady + ["flaky"] * flaky + ["wrong"] * wrong
    return [
        {"id": f"c{i:03d}", "input": {"n": i, "kind": kind, **extra.get(f"c{i:03d}", {})},
         "expected": {"label": "ok"}}
        for i, kind in enumerate(kinds)
    ]


def flaky_project(
    root: Path, cases: list[dict[str, Any]], *, release: str | None = None,
    trials: int | None = None,
) -> Path:
    write_project(root, app=FLAKY_APP, cases=cases, release=release, concurrency=(1, 1))
    if trials is not None:
        config = root / "oloproof.yaml"
        config.write_text(config.read_text() + f"trials: {trials}\n")
    return root


def calls(root: Path) -> int:
    log = root / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def dump(value: Any) -> str:
    return json.dumps(value)
