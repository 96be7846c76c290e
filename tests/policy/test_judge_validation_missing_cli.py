"""judge_validation with labelled cases the judge gave no verdict on (the system or the
judge failed): a missing verdict could have been a miss, and missing cases never make a
figure look better (SPEC: "bounded for missing cases"). Earlier versions left them out of
sensitivity and specificity: 15 of the 50 cases a person failed had no verdict, the 35
others the judge failed all, and specificity 35/35 (CP lower 90.0%) validated the judge at
0.85, the gate exit 0; counted as the misses they could have been, 35/50 (lower 55.4%).
A real judge over HTTP (the offline fake provider), the CLI in a subprocess."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from scipy.stats import beta
from tests.conftest import run_cli, write_project
from tests.fakes.provider import FakeServer

# Cases 0-119 answer well (the fake judge passes them), 120-184 answer with FAIL in the
# text (it fails them), and the system raises on 185-199 (no verdict: missing).
APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    i = x["i"]
    if i >= 185:
        raise RuntimeError("the backend is down")
    return {"answer": "a helpful answer" if i < 120 else "FAIL: no idea"}
"""

ENV = {"FAKE_PROVIDER_KEY": "k"}


@pytest.fixture
def provider() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _project(root: Path, url: str, labels: dict[int, bool]) -> None:
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
        cases=[{"id": f"c{i:03d}", "input": {"i": i}} for i in range(200)],
        release=("version: 1\nrules:\n  - {id: validated, metric: helpful, min: 0.4,"
                 " judge_validation: {min_labels: 30, min_sensitivity: 0.85,"
                 " min_specificity: 0.85}}\n"),
    )
    (root / "labels.jsonl").write_text("".join(
        json.dumps({"id": f"c{i:03d}", "criterion": "helpful", "pass": p}) + "\n"
        for i, p in labels.items()))
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace(
        "dataset: data/cases.jsonl", "dataset: data/cases.jsonl\nhuman_labels: labels.jsonl"))


def _lower(k: int, n: int) -> float:
    return float(beta.ppf(0.025, k, n - k + 1))


def test_labelled_cases_without_a_verdict_count_against_the_judge(
    project_dir: Path, provider: FakeServer
) -> None:
    # 50 labels the person passes (the judge passes them), 35 she fails that the judge
    # fails, and 15 she fails that have no verdict.
    labels = {i: True for i in range(50)} | {i: False for i in range(120, 155)} | {
        i: False for i in range(185, 200)}
    _project(project_dir, provider.url, labels)
    result = run_cli("run", "--json", cwd=project_dir, env=ENV)
    assert result.code == 4, result.text
    [d] = json.loads(result.out.splitlines()[-1])["decisions"]
    assert (d["state"], d["reason"]) == ("MANUAL_REVIEW", "judge_specificity_unproven"), d
    # Left out, 35/35 would have shown it: CP lower 90.0% >= 85%.
    assert _lower(35, 35) >= 0.85
    assert f"CP [{math.floor(1000 * _lower(35, 50)) / 10:.1f}%" in d["detail"], d["detail"]
    assert "specificity 35/50 = 70.0%" in d["detail"], d["detail"]
    assert "15 without a verdict, counted as misses" in d["detail"], d["detail"]
    assert "rerun to get the judge's verdicts on them" in d["detail"], d["detail"]
    assert "the rule alone: PASS" in d["detail"], d["detail"]
    gated = run_cli("gate", "latest", "--json", cwd=project_dir)
    assert gated.code == 4, gated.text
    # The agreement table still shows the figures on the cases with a verdict.
    report = json.loads(gated.out)
    [judge] = report["judges"]
    assert judge["specificity"]["k"] == judge["specificity"]["n"] == 35
    assert judge["judge_missing"] == 15


def test_without_missing_verdicts_the_same_judge_is_validated(
    project_dir: Path, provider: FakeServer
) -> None:
    labels = {i: True for i in range(50)} | {i: False for i in range(120, 170)}
    _project(project_dir, provider.url, labels)
    result = run_cli("run", "--json", cwd=project_dir, env=ENV)
    assert result.code == 0, result.text
    [d] = json.loads(result.out.splitlines()[-1])["decisions"]
    assert d["state"] == "PASS", d
