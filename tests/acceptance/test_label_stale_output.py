"""A person's label is about the output they were shown: a run whose output for the case
differs (the system changed since) does not use it. Through the real CLI, against the fake
provider over real HTTP.

Before, labels were matched to a run by case id alone: labels a person gave to a working
system's answers corrected the judge's 0% on a system that answered every case with an
empty string up to a person's rate of 78% [64%, 90%], and `estimate: corrected` with
`min: 0.5` allowed it (gate exit 0).
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, run_cli
from tests.fakes.provider import FakeServer

ENV = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}
CASES = 60

APP = '''from oloproof import system

@system(name="faq-bot", version="{version}")
def answer(case_input):
    i = int(case_input["question"].split()[-1])
    if {broken}:
        return ""
    return "" if i % 4 == 0 else "You can ask for a refund within 30 days."
'''

POLICY = """version: 1
rules:
  - id: as-a-person-would-say
    metric: helpful
    min: 0.50
    estimate: corrected
"""


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _project(tmp_path: Path, srv: FakeServer) -> Path:
    project = tmp_path / "judged"
    assert run_cli("init", str(project), "--example", "judge", cwd=tmp_path).code == 0
    config = project / "oloproof.yaml"
    text = config.read_text().replace("http://127.0.0.1:8787", srv.anthropic_base_url)
    config.write_text(text[:text.index("  - type: rubric_judge            # a scored")])
    (project / "data" / "questions.jsonl").write_text("".join(
        json.dumps({"id": f"c{i:03d}", "input": {"question": f"a refund please {i}"}}) + "\n"
        for i in range(CASES)
    ))
    (project / "data" / "labels.jsonl").write_text("")
    (project / "release.yaml").write_text(POLICY)
    (project / "app.py").write_text(APP.format(version="v1", broken=False))
    return project


def _judges(project: Path) -> dict[str, object]:
    [report] = json.loads(
        run_cli("inspect", "latest", "--judges", "--json", cwd=project).out)["judges"]
    assert isinstance(report, dict)
    return report


def test_labels_of_another_output_are_not_used(tmp_path: Path, srv: FakeServer) -> None:
    project = _project(tmp_path, srv)
    assert run_cli("run", cwd=project, env=ENV).code in (3, 4)  # no labels yet
    # A person labels 40 cases, drawn as `label` draws them (sorted ids, then
    # random.Random(seed).sample), honestly: an empty answer fails, a real one passes.
    drawn = random.Random(5).sample([f"c{i:03d}" for i in range(CASES)], 40)
    answers = "".join("n\n" if int(case[1:]) % 4 == 0 else "y\n" for case in drawn)
    done = subprocess.run(
        [*OLOPROOF, "label", "latest", "--criterion", "helpful", "--n", "40", "--seed", "5"],
        cwd=project, input=answers, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "DISAGREES" not in done.stdout  # the draw was the one answered for
    labels = project / "data" / "labels.jsonl"
    written = [json.loads(line) for line in labels.read_text().splitlines()]
    assert len(written) == 40 and all(w["seen"].startswith("sha256:") for w in written)

    first = run_cli("run", cwd=project, env=ENV)  # all from the cache, now with labels
    assert first.code == 0, first.out + first.err
    assert _judges(project)["labels"] == 40

    # The system breaks: every answer is empty, and the judge fails every case.
    (project / "app.py").write_text(APP.format(version="v2", broken=True))
    second = run_cli("run", cwd=project, env=ENV)
    assert second.code == 1, second.out + second.err  # FAIL: a person's rate is low
    assert "FAIL" in second.out and "on another output, not used" in second.out
    report = _judges(project)
    still = sum(1 for case in drawn if int(case[1:]) % 4 == 0)  # empty then, empty now
    assert report["labels"] == still
    assert report["labels_on_another_output"] == 40 - still
    gate = run_cli("gate", "latest", cwd=project)
    assert gate.code == 1, gate.out

    # The cases whose output changed can be labelled again, on the new output.
    again = subprocess.run(
        [*OLOPROOF, "label", "latest", "--criterion", "helpful", "--n", "3", "--seed", "1"],
        cwd=project, input="n\nn\nn\n", capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert f"of {CASES - still} unlabelled cases" in again.stdout
    assert run_cli("run", cwd=project, env=ENV).code == 1
    assert _judges(project)["labels"] == still + 3


def test_the_seen_key_is_read_strictly(tmp_path: Path, srv: FakeServer) -> None:
    project = _project(tmp_path, srv)
    labels = project / "data" / "labels.jsonl"
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64

    def line(seen: object = None, passed: bool = True) -> str:
        item: dict[str, object] = {"id": "c001", "criterion": "helpful", "pass": passed}
        if seen is not None:
            item["seen"] = seen
        return json.dumps(item) + "\n"

    for text, message in (
        (line("abc"), "labels.jsonl:1: seen: expected a digest, got \"abc\""),
        (line(5), "labels.jsonl:1: seen: expected a digest, got 5"),
        (line(a) + line(a, False), "labels.jsonl:2: id: a second label of the same output"),
        (line(a) + line(), "labels.jsonl:2: id: a second label for case 'c001'"),
        (line() + line(b), "labels.jsonl:2: id: a second label for case 'c001'"),
    ):
        labels.write_text(text)
        result = run_cli("run", cwd=project, env=ENV)
        assert result.code == 2 and message in result.err, result.err
    labels.write_text(line(a) + line(b, False))  # two outputs of the case: both kept
    assert run_cli("run", cwd=project, env=ENV).code in (3, 4)
    assert _judges(project)["labels_on_another_output"] == 1
