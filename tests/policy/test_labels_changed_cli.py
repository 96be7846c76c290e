"""Labels corrected after a run. A run stores the labels it measured its judges against,
and ``gate RUN`` decides with those (reproducibly); a person who then corrected the labels
file (the judge was wrong on 10 cases she had first marked as it said) got ``gate latest``
ALLOW, exit 0, without a word, where ``--labels`` with the file makes the rule
MANUAL_REVIEW. As for a policy file changed since the run, the gate (and the report) now
says the file changed and how to decide with it; a file rewritten with the same labels
says nothing. A real judge over HTTP (the offline fake provider), the CLI in a
subprocess."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer
from tests.policy.test_judge_validation_missing_cli import ENV, _project


@pytest.fixture
def provider() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _lines(labels: dict[int, bool]) -> str:
    return "".join(json.dumps({"id": f"c{i:03d}", "criterion": "helpful", "pass": p}) + "\n"
                   for i, p in labels.items())


def _changed(text: str) -> bool:
    return "labels.jsonl has changed since this run started" in text


def test_labels_changed_since_the_run_are_said_beside_the_gate(
    project_dir: Path, provider: FakeServer
) -> None:
    first = {i: True for i in range(50)} | {i: False for i in range(120, 170)}
    _project(project_dir, provider.url, first)
    assert run_cli("run", cwd=project_dir, env=ENV).code == 0
    labels = project_dir / "labels.jsonl"
    later = time.time() + 5
    # The same labels written again (another order of keys, a blank line): no note.
    labels.write_text(_lines(first) + "\n")
    os.utime(labels, (later, later))
    same = run_cli("gate", "latest", cwd=project_dir)
    assert same.code == 0 and not _changed(same.out), same.text
    # The person corrects ten labels: the judge failed cases she now passes.
    labels.write_text(_lines(first | {i: True for i in range(160, 170)}))
    os.utime(labels, (later, later))
    stored = run_cli("gate", "latest", cwd=project_dir)
    assert stored.code == 0, stored.text  # the stored labels, as before
    assert _changed(stored.out), stored.out
    run_id = json.loads(run_cli("gate", "latest", "--json", cwd=project_dir).out)["run_id"]
    assert f"`oloproof gate {run_id} --labels labels.jsonl` measures them" in stored.out
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project_dir).out)
    assert any(_changed(n) for n in doc["gate_notes"]), doc["gate_notes"]
    now = run_cli("gate", "latest", "--labels", "labels.jsonl", cwd=project_dir)
    assert now.code == 4 and "judge_sensitivity_below_floor" in now.out, now.text
    assert not _changed(now.out)
    assert run_cli("report", "latest", "-o", "r.html", cwd=project_dir).code == 0
    assert _changed((project_dir / "r.html").read_text())
    # A file that no longer reads for this run differs all the same.
    labels.write_text('{"id": "c000", "criterion": "helpful", "pass": "yes"}\n')
    os.utime(labels, (later, later))
    broken = run_cli("gate", "latest", cwd=project_dir)
    assert broken.code == 0 and _changed(broken.out), broken.text


def test_labels_of_a_run_made_from_another_directory_are_found_when_corrected(
    tmp_path: Path, provider: FakeServer
) -> None:
    """The run made from the parent directory (`--config p/oloproof.yaml`) stored its labels
    as `p/labels.jsonl`; corrected afterwards, `gate latest` inside the project looked for
    that path from there (and under p/p/), found nothing, and said nothing. The file the
    run read is found where the run stored it, and named from where the gate runs."""
    project = tmp_path / "p"
    first = {i: True for i in range(50)} | {i: False for i in range(120, 170)}
    _project(project, provider.url, first)
    assert run_cli("run", "--config", "p/oloproof.yaml", cwd=tmp_path, env=ENV).code == 0
    labels = project / "labels.jsonl"
    labels.write_text(_lines(first | {i: True for i in range(160, 170)}))
    later = time.time() + 5
    os.utime(labels, (later, later))
    stored = run_cli("gate", "latest", cwd=project)
    assert stored.code == 0 and _changed(stored.out), stored.text
    assert "--labels labels.jsonl` measures them" in stored.out, stored.text


def test_gate_says_when_oloproof_yaml_now_names_other_labels(
    project_dir: Path, provider: FakeServer
) -> None:
    """`human_labels:` pointed at a corrected copy after an ALLOW run (ten labels the judge
    got wrong; `--labels` with it makes the rule MANUAL_REVIEW, exit 4), not run again:
    the run's labels.jsonl, unchanged, is older than the run, and `gate latest` allowed
    without a word. It now names the file oloproof.yaml names; the same labels under
    another name say nothing."""
    first = {i: True for i in range(50)} | {i: False for i in range(120, 170)}
    _project(project_dir, provider.url, first)
    assert run_cli("run", cwd=project_dir, env=ENV).code == 0
    config = project_dir / "oloproof.yaml"
    text = config.read_text()
    later = time.time() + 5
    (project_dir / "copy.jsonl").write_text(_lines(first))
    config.write_text(text.replace("human_labels: labels.jsonl", "human_labels: copy.jsonl"))
    os.utime(config, (later, later))
    same = run_cli("gate", "latest", cwd=project_dir)
    assert same.code == 0 and "as the human labels" not in same.out, same.text

    (project_dir / "v2.jsonl").write_text(_lines(first | {i: True for i in range(160, 170)}))
    config.write_text(text.replace("human_labels: labels.jsonl", "human_labels: v2.jsonl"))
    os.utime(config, (later, later))
    stored = run_cli("gate", "latest", cwd=project_dir)
    assert stored.code == 0, stored.text
    assert ("oloproof.yaml names v2.jsonl as the human labels since this run with"
            " labels.jsonl started (") in stored.out, stored.text
    assert "--labels v2.jsonl` measures them against it" in stored.out, stored.text
    assert run_cli("gate", "latest", "--labels", "v2.jsonl", cwd=project_dir).code == 4
