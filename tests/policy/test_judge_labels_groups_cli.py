"""Rules on a group (``group:``, ``each_group:``) or an aggregate over trials of a judge's
metric, with ``judge_validation`` or ``estimate: corrected``. The judge's labels were found
under the criterion's name only, and such a rule's metric is ``helpful[lang=fr]`` or
``helpful[pass^2]``: it said "no human labels on this run" beside 140 labels, and stayed
MANUAL_REVIEW whatever was labelled. A group rule now measures the judge on that group's
labelled cases, and corrects that group's rate; an aggregate's rule measures it on its
metric's. A real judge over HTTP (the offline fake provider), the CLI in a subprocess."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project
from tests.fakes.provider import FakeServer

# The fake judge passes "a helpful answer" and fails an answer with FAIL in it.
APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    return {"answer": "a helpful answer" if x["i"] < 140 else "FAIL: no idea"}
"""

ENV = {"FAKE_PROVIDER_KEY": "k"}

VALIDATION = "judge_validation: {min_labels: 30, min_sensitivity: 0.85, min_specificity: 0.85}"


@pytest.fixture
def provider() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _project(root: Path, url: str, release: str, trials: int = 1) -> None:
    evaluators = f"""
    - type: rubric_judge
      criterion: helpful
      provider: anthropic
      model: fake-judge-1
      base_url: {url}
      api_key_env: FAKE_PROVIDER_KEY
      rubric_text: Pass if the answer helps.
      group_by: [lang]
    """
    write_project(
        root, app=APP, evaluators=evaluators, release=release,
        cases=[{"id": f"c{i:03d}", "input": {"i": i},
                "metadata": {"lang": "en" if i % 2 == 0 else "fr"}} for i in range(200)],
    )
    # en: 40 the person passes and 30 she fails, each as the judge says. fr: 40 she
    # passes as the judge does, and of the 30 the judge fails she passes 15.
    labels = {i: True for i in range(80)} | {i: i % 2 == 1 and i % 4 == 1
                                              for i in range(140, 200)}
    (root / "labels.jsonl").write_text("".join(
        json.dumps({"id": f"c{i:03d}", "criterion": "helpful", "pass": p}) + "\n"
        for i, p in labels.items()))
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace(
        "dataset: data/cases.jsonl",
        f"dataset: data/cases.jsonl\nhuman_labels: labels.jsonl\ntrials: {trials}"))


def _decisions(result: object) -> dict[str, dict[str, str]]:
    doc = json.loads(result.out)  # type: ignore[attr-defined]
    return {d["rule"]: d for d in doc["decisions"]}


def test_a_group_rule_measures_the_judge_on_the_groups_labels(
    project_dir: Path, provider: FakeServer
) -> None:
    release = ("version: 1\nrules:\n"
               f"  - {{id: per-lang, metric: helpful, min: 0.5, each_group: true, {VALIDATION}}}\n"
               f"  - {{id: whole, metric: helpful, min: 0.5, {VALIDATION}}}\n"
               "  - {id: en-person, metric: helpful, min: 0.5, group: {lang: en},"
               " estimate: corrected}\n")
    _project(project_dir, provider.url, release)
    assert run_cli("run", cwd=project_dir, env=ENV).code == 4
    result = run_cli("gate", "latest", "--json", cwd=project_dir)
    assert result.code == 4, result.text
    d = _decisions(result)
    assert "no human labels" not in result.out, result.out
    # en: 40/40 and 30/30 (CP lowers 91.2% and 88.4%): validated, decided on its interval.
    assert (d["per-lang[lang=en]"]["state"], d["per-lang[lang=en]"]["reason"]) == (
        "PASS", "lower_bound_meets_min"), d["per-lang[lang=en]"]
    # fr: sensitivity 40/55 = 72.7%, whatever the number of labels.
    fr = d["per-lang[lang=fr]"]
    assert (fr["state"], fr["reason"]) == ("MANUAL_REVIEW", "judge_sensitivity_below_floor"), fr
    assert "sensitivity 40/55 = 72.7%" in fr["detail"] and "specificity 15/15" in fr["detail"]
    # The whole run: 80/95.
    assert "sensitivity 80/95" in d["whole"]["detail"], d["whole"]
    # The corrected rate of en: its 70 labels, and the judge's rate on en's 100 cases.
    corr = d["en-person"]
    assert "corrected by 70 human labels; judge alone 70.0%" in corr["detail"], corr
    # plan decides as gate does.
    plan = run_cli("plan", "latest", "--run", cwd=project_dir)
    assert "per-lang[lang=en]: decided (PASS)" in plan.out, plan.text


def test_an_aggregate_rule_is_validated_on_its_metrics_labels(
    project_dir: Path, provider: FakeServer
) -> None:
    release = ("version: 1\nrules:\n"
               "  - {id: en-all, metric: helpful, min: 0.5, aggregate: pass_all_k,"
               f" group: {{lang: en}}, {VALIDATION}}}\n")
    _project(project_dir, provider.url, release, trials=2)
    result = run_cli("run", "--json", cwd=project_dir, env=ENV)
    assert result.code == 0, result.text
    [d] = json.loads(result.out.splitlines()[-1])["decisions"]
    assert (d["metric"], d["state"]) == ("helpful[lang=en][pass^2]", "PASS"), d
