"""ALLOW is earned for ``estimate: corrected`` too: a floor that the prediction-powered
interval could not FAIL with the labels the run has, even if every case failed for the
judge and the person alike, is INSUFFICIENT_EVIDENCE (``evidence_cannot_fail``), not a
PASS. With 29 labels, `min: 0.05` could only pass: 29 labelled fails and 171 verdicts of
fail give [0.0%, 13.3%], which does not lie below 5%; the gate said ALLOW, exit 0. With 300
labels the same outcome gives an upper bound of 1.3%, and the floor is decided as before.
A real judge over HTTP (the offline fake provider), the CLI in a subprocess."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project
from tests.fakes.provider import FakeServer

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    return {"answer": "a helpful answer"}
"""


@pytest.fixture
def provider() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _project(root: Path, url: str, cases: int, labels: int, floor: float) -> None:
    evaluators = f"""
    - type: rubric_judge
      criterion: helpful
      provider: anthropic
      model: fake-judge-1
      base_url: {url}
      api_key_env: FAKE_PROVIDER_KEY
      rubric_text: Pass if the answer helps.
    """
    write_project(
        root, app=APP, evaluators=evaluators,
        cases=[{"id": f"c{i:04d}", "input": {"q": i}} for i in range(cases)],
        release=("version: 1\nrules:\n  - {id: person-floor, metric: helpful,"
                 f" min: {floor}, estimate: corrected}}\n"),
    )
    step = cases // labels
    (root / "labels.jsonl").write_text("".join(
        json.dumps({"id": f"c{i:04d}", "criterion": "helpful", "pass": True}) + "\n"
        for i in range(0, step * labels, step)
    ))
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace(
        "dataset: data/cases.jsonl", "dataset: data/cases.jsonl\nhuman_labels: labels.jsonl"))


def test_a_corrected_floor_the_labels_could_not_fail_does_not_pass(
    project_dir: Path, provider: FakeServer
) -> None:
    _project(project_dir, provider.url, 200, 29, 0.05)
    result = run_cli("run", "--json", cwd=project_dir, env={"FAKE_PROVIDER_KEY": "k"})
    assert result.code == 3, result.text
    [d] = json.loads(result.out.splitlines()[-1])["decisions"]
    assert (d["state"], d["reason"]) == ("INSUFFICIENT_EVIDENCE", "evidence_cannot_fail"), d
    assert "the rule alone: PASS" in d["detail"], d["detail"]
    gated = run_cli("gate", "latest", cwd=project_dir)
    assert gated.code == 3 and "evidence_cannot_fail" in gated.out, gated.text


def test_a_corrected_floor_enough_labels_could_fail_passes(
    project_dir: Path, provider: FakeServer
) -> None:
    _project(project_dir, provider.url, 600, 300, 0.05)
    result = run_cli("run", cwd=project_dir, env={"FAKE_PROVIDER_KEY": "k"})
    assert result.code == 0, result.text
    assert "lower_bound_meets_min" in result.out, result.out


OUT_OF_RANGE_APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    return {"answer": "FAIL" if x["q"] < 10 else "a helpful answer"}
"""


def test_a_corrected_interval_above_every_rate_blocks(
    project_dir: Path, provider: FakeServer
) -> None:
    """The judge fails 10 of the 30 labelled cases, which the person passes all, and passes
    all 109 others: the PPI interval is [110.7%, 153.7%]. Its ends clipped apart gave
    [110.7%, 100.0%] and min: 0.9 passed, exit 0; now MANUAL_REVIEW, exit 4."""
    _project(project_dir, provider.url, 139, 30, 0.9)
    (project_dir / "app.py").write_text(OUT_OF_RANGE_APP)
    (project_dir / "labels.jsonl").write_text("".join(
        json.dumps({"id": f"c{i:04d}", "criterion": "helpful", "pass": True}) + "\n"
        for i in range(30)))
    result = run_cli("run", "--json", cwd=project_dir, env={"FAKE_PROVIDER_KEY": "k"})
    assert result.code == 4, result.text
    [d] = json.loads(result.out.splitlines()[-1])["decisions"]
    assert (d["state"], d["reason"]) == ("MANUAL_REVIEW", "corrected_estimate_out_of_range"), d
    assert "[110.7%, 153.7%] lies wholly above 100%" in d["detail"], d["detail"]
    gated = run_cli("gate", "latest", cwd=project_dir)
    assert gated.code == 4 and "corrected_estimate_out_of_range" in gated.out, gated.text
