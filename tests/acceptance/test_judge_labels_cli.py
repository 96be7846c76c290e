"""Human labels, agreement, MANUAL_REVIEW and the corrected estimate, through the real CLI
against the fake provider over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer

ENV = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _example(tmp_path: Path, srv: FakeServer) -> Path:
    project = tmp_path / "judged"
    assert run_cli("init", str(project), "--example", "judge", cwd=tmp_path).code == 0
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace("http://127.0.0.1:8787",
                                                 srv.anthropic_base_url))
    return project


def test_the_judge_example_shows_agreement_the_corrected_rate_and_manual_review(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    first = run_cli("run", cwd=project, env=ENV)
    assert first.code == 4, first.text
    assert "Traceback" not in first.text
    row = next(line for line in first.out.splitlines() if "helpful-validated" in line)
    assert "MANUAL_REVIEW" in row and "label 22 more" in row and "BLOCK" in row
    judges = [line for line in first.out.splitlines() if line.startswith("│ helpful ")][-1]
    assert "87.5% [47.3%, 99.7%]" in judges and "6 · 1 · 0 · 1" in judges
    assert "label more cases, drawn at random" in first.out
    # The total at the observed rates, beside the 22 that min_labels asks for.
    assert "at the observed specificity (1/2 = 50.0%) no number of labels" in row
    (project / "agreement.yaml").write_text(
        "version: 1\nrules:\n  - id: a\n    metric: helpful\n    min: 0.5\n"
        "    judge_validation: {min_labels: 30, min_sensitivity: 0.5, min_specificity: 0.01,"
        " min_agreement: 0.85}\n")
    agreed = run_cli("gate", "latest", "--policy", "agreement.yaml", cwd=project)
    assert agreed.code == 4, agreed.text
    assert ("label 22 more; 756 labels in all would validate it at the observed rates"
            " (748 more)") in agreed.out

    shown = run_cli("inspect", "latest", "--judges", "--json", cwd=project)
    assert shown.code == 0, shown.text
    report, scored = json.loads(shown.out)["judges"]
    assert scored["criterion"] == "quality" and scored["pairs"] == 8
    assert report["labels"] == 8 and report["agreement"]["k"] == 7
    assert report["confusion"]["judge_pass_person_fail"] == 1
    corrected = report["corrected"]
    assert corrected["labelled"] == 8 and corrected["unlabelled"] == 4
    assert corrected["lower"] <= corrected["estimate"] <= corrected["upper"]
    assert "uniformly random" in corrected["assumes"]

    # Changing the labels re-decides without calling anything: a rerun is all cache and
    # stores the new labels; gate --labels re-decides the stored run.
    labels = project / "data" / "labels.jsonl"
    lines = labels.read_text().splitlines()
    labels.write_text("\n".join(line.replace('"pass": false', '"pass": true', 1)
                                if '"q02"' in line else line for line in lines) + "\n")
    calls = srv.total_calls("/v1/messages")
    second = run_cli("run", cwd=project, env=ENV)
    assert "executions 12 hits · 0 misses   judgments 24 hits · 0 misses" in second.out
    assert srv.total_calls("/v1/messages") == calls
    again = json.loads(run_cli("inspect", "latest", "--judges", "--json", cwd=project).out)
    assert again["judges"][0]["agreement"]["k"] == 8

    policy = project / "validated.yaml"
    policy.write_text("version: 1\nrules:\n  - id: v\n    metric: helpful\n    min: 0.5\n"
                      "    judge_validation: {min_labels: 8, min_sensitivity: 0.5,"
                      " min_specificity: 0.02}\n")
    runs = json.loads(run_cli("runs", "--json", cwd=project).out)
    oldest = runs[-1]["id"] if isinstance(runs, list) else runs["runs"][-1]["id"]
    before = run_cli("gate", oldest, "--policy", "validated.yaml", cwd=project)
    assert before.code == 4, before.text  # specificity 1 of 2: CP lower 1.3% < 2%
    assert "judge_specificity_unproven" in before.out
    after = run_cli("gate", oldest, "--policy", "validated.yaml", "--labels",
                    "data/labels.jsonl", cwd=project)
    # 7 of 7 passes (CP lower 59.0% >= 50%) and 1 of 1 fail (CP lower 2.5% >= 2%).
    assert after.code == 0, after.text


def test_a_bad_labels_file_stops_the_run_before_anything_is_called(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    (project / "data" / "labels.jsonl").write_text(
        '{"id": "q01", "criterion": "helpful", "pass": "yes"}\n')
    result = run_cli("run", cwd=project, env=ENV)
    assert result.code == 2, result.text
    assert "Traceback" not in result.text
    assert "data/labels.jsonl:1" in result.err and "pass" in result.err
    assert srv.total_calls("/v1/messages") == 0


def test_a_refused_parameter_names_the_file_the_run_read(tmp_path: Path, srv: FakeServer
                                                         ) -> None:
    """`run --config reasoning.yaml`: the parameter to change is in reasoning.yaml (the
    message said oloproof.yaml, a file that does not send max_tokens to that model)."""
    project = _example(tmp_path, srv)
    text = (project / "oloproof.yaml").read_text()
    text = text.replace("provider: anthropic", "provider: openai")
    text = text.replace(srv.anthropic_base_url, srv.openai_base_url)
    (project / "reasoning.yaml").write_text(text.replace("model: fake-judge-1",
                                                         "model: fake-reasoning-1"))
    (project / "data" / "labels.jsonl").write_text("")
    result = run_cli("run", "--config", "reasoning.yaml", cwd=project, env=ENV)
    assert result.code == 5, result.text
    line = next(x for x in result.out.splitlines() if x.startswith("Stopped:"))
    assert "refuses the parameter 'max_tokens'" in line, line
    assert "reasoning.yaml: evaluators[" in line and "oloproof.yaml" not in line, line


def test_a_refused_parameter_stops_the_run_with_one_line(tmp_path: Path, srv: FakeServer
                                                         ) -> None:
    project = _example(tmp_path, srv)
    config = project / "oloproof.yaml"
    text = config.read_text()
    # Both judges: with the second left on anthropic (its line has no comment after the
    # provider) and sent to the openai base URL, its 404 raced the first's refusal, and at
    # load the run stopped on the 404 first.
    text = text.replace("provider: anthropic", "provider: openai")
    text = text.replace(srv.anthropic_base_url, srv.openai_base_url)
    text = text.replace("model: fake-judge-1", "model: fake-reasoning-1")
    config.write_text(text)  # keeps temperature: 0 and max_tokens: 256 as written
    (project / "data" / "labels.jsonl").write_text("")
    result = run_cli("run", cwd=project, env=ENV)
    assert result.code == 5, result.text
    assert "Traceback" not in result.text
    line = next((x for x in result.out.splitlines() if "refuses the parameter" in x), None)
    assert line is not None, result.text
    assert any(f"evaluators[{i}].{field}" in line
               for i in (0, 1) for field in ("max_tokens", "temperature")), line
