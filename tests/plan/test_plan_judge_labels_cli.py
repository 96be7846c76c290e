"""``oloproof plan`` decides a run as ``gate`` does, judges measured against the human labels
stored with the run. It decided without them: a rule whose judge the labels validate, and
whose interval holds the bar (gate: INSUFFICIENT_EVIDENCE, exit 3, "more cases"), was shown
as "MANUAL_REVIEW: a person has to look at the evidence; more cases do not settle it", and
was never sized. Through the real CLI, against the fake provider over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer

ENV = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}

# The example's 8 labels of helpful: sensitivity 6/6 (95% CP lower 54.1%), specificity 1/2
# (lower 1.3%), so these floors are met; 10 of 12 passed, [51.5%, 98.0%], holds 60%.
POLICY = """version: 1
rules:
  - id: validated
    metric: helpful
    min: 0.60
    judge_validation: {min_labels: 8, min_sensitivity: 0.5, min_specificity: 0.01}
  - id: corrected
    metric: helpful
    min: 0.60
    estimate: corrected
"""


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def test_plan_measures_the_judge_against_the_runs_labels(tmp_path: Path, srv: FakeServer) -> None:
    project = tmp_path / "judged"
    assert run_cli("init", str(project), "--example", "judge", cwd=tmp_path).code == 0
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace("http://127.0.0.1:8787",
                                                 srv.anthropic_base_url))
    (project / "release.yaml").write_text(POLICY)
    run = run_cli("run", cwd=project, env=ENV)
    assert run.code == 3, run.text
    gate = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    states = {d["rule"]: d["state"] for d in gate["decisions"]}
    assert states == {"validated": "INSUFFICIENT_EVIDENCE", "corrected": "INSUFFICIENT_EVIDENCE"}

    plan = run_cli("plan", "latest", "--run", cwd=project)
    assert plan.code == 0, plan.text
    assert "MANUAL_REVIEW" not in plan.out
    assert "validated: about " in plan.out and "more cases would decide it" in plan.out
    assert "corrected: sizing is not admitted for a rule with estimate: corrected" in plan.out
    doc = json.loads(run_cli("plan", "latest", "--run", "--json", cwd=project).out)
    rules = {r["rule"]: r for r in doc["rules"]}
    assert rules["validated"]["state"] == "INSUFFICIENT_EVIDENCE"
    assert rules["validated"]["plan"] == "sized" and rules["validated"]["total"] > 12
    assert rules["corrected"]["plan"] == "not_admitted"
