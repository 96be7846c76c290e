"""A scored judge through the real CLI against the fake provider over real HTTP: the judge
example's scored criterion, a judge that answers off its scale, a person's scores with
`oloproof label`, and a bad score in the labels file."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, run_cli
from tests.fakes.provider import FakeServer

from oloproof.stats.agreement import mean_abs_diff, quadratic_weighted_kappa
from oloproof.testing.fake_provider import JudgeRule, score_verdict

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


def _row(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(start))


def test_the_judge_examples_scored_criterion_end_to_end(tmp_path: Path, srv: FakeServer) -> None:
    project = _example(tmp_path, srv)
    result = run_cli("run", cwd=project, env=ENV)
    assert result.code == 4, result.text
    assert "Traceback" not in result.text
    doc = json.loads(run_cli("inspect", "latest", "--json", cwd=project).out)
    scores = {}
    for case in doc["cases"]:
        judged = case["judgments"]["quality"]
        expected = score_verdict(case["output"], (1, 5), JudgeRule())["score"]
        assert (judged["status"], judged["score"], judged["passed"]) == ("OK", expected, None)
        scores[case["id"]] = float(expected)
    mean = sum(scores.values()) / len(scores)
    metric = _row(result.out, "│ quality ")
    assert f"│ {mean:.4g} " in metric and "12 observed · 0 missing · 0 excluded" in metric
    rule = _row(result.out, "│ quality-validated ")
    assert "MANUAL_REVIEW" in rule and "8 labelled cases with a score" in rule
    assert "label 22 more" in rule and "the rule alone:" in rule

    # The scored judge against the person's scores: figures as the stats functions give.
    labels = [json.loads(x) for x in (project / "data" / "labels.jsonl").read_text().splitlines()]
    person = {lab["id"]: float(lab["score"]) for lab in labels if lab["criterion"] == "quality"}
    judge = [scores[i] for i in person]
    shown = json.loads(run_cli("inspect", "latest", "--judges", "--json", cwd=project).out)
    report = next(r for r in shown["judges"] if r["criterion"] == "quality")
    assert report["scale"] == [1, 5] and report["labels"] == 8 and report["pairs"] == 8
    mad, mad_iv = mean_abs_diff(judge, list(person.values()), 4.0)
    kappa, kappa_iv = quadratic_weighted_kappa(judge, list(person.values()))
    assert report["mean_abs_diff"]["estimate"] == mad
    assert report["mean_abs_diff"]["upper"] == mad_iv.upper  # type: ignore[union-attr]
    assert report["weighted_kappa"]["estimate"] == kappa
    assert report["weighted_kappa"]["lower"] == kappa_iv.lower  # type: ignore[union-attr]
    assert "Hoeffding" in report["mean_abs_diff"]["method"]
    table = _row(run_cli("inspect", "latest", "--judges", cwd=project).out, "│ quality ")
    assert "1–5" in table and f"{kappa:.2f} [" in table

    # An unchanged rerun judges nothing again; the scale is part of the judge's identity.
    calls = srv.total_calls("/v1/messages")
    again = run_cli("run", cwd=project, env=ENV)
    assert "judgments 24 hits · 0 misses" in again.out
    assert srv.total_calls("/v1/messages") == calls
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace("scale: [1, 5]", "scale: [1, 10]"))
    (project / "data" / "labels.jsonl").write_text("\n".join(
        x for x in (project / "data" / "labels.jsonl").read_text().splitlines()
        if '"quality"' not in x) + "\n")
    rescored = run_cli("run", cwd=project, env=ENV)
    assert "judgments 12 hits · 12 misses" in rescored.out, rescored.text


def test_a_judge_answering_off_its_scale_leaves_each_case_missing(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    (project / "release.yaml").write_text(
        "version: 1\nrules:\n  - id: q\n    metric: quality\n    min: 4\n")
    (project / "data" / "labels.jsonl").write_text("")
    srv.configure("/v1/messages", judge_text='{"score": 7, "reason": "superb"}')
    result = run_cli("run", cwd=project, env=ENV)
    assert "Traceback" not in result.text
    metric = _row(result.out, "│ quality ")
    assert "0 observed · 12 missing" in metric
    lower, upper = (float(x) for x in metric.split("[", 1)[1].split("]", 1)[0].split(", "))
    assert lower <= 1 and upper >= 5  # every missing score anywhere on the scale
    # Never a guessed score: every case missing, past max_missing (issue 25): incomplete.
    assert result.code == 5, result.text
    case = json.loads(run_cli("inspect", "latest", "--case", "q01", "--json", cwd=project).out)
    judged = case["judgments"]["quality"]
    assert judged["status"] == "ERROR" and judged["score"] is None
    assert judged["reason"] == ('judge answer not understood: judge reply has "score": 7,'
                                " outside the scale [1, 5] (not clipped)")


def _label(project: Path, answers: str, *args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [*OLOPROOF, "label", "latest", "--criterion", "quality", *args], cwd=project,
        input=answers, capture_output=True, text=True, timeout=120, check=False,
    )
    return done.returncode, done.stdout, done.stderr


def test_label_asks_a_person_for_a_score_on_the_judges_scale(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    labels = project / "data" / "labels.jsonl"
    labels.write_text("")
    assert run_cli("run", cwd=project, env=ENV).code in (3, 4)
    code, out, err = _label(project, "4\n9\ny\n--3\n2.5\n2\ns\nq\n", "--n", "4", "--seed",
                            "5", "--labeler", "dana")
    assert code == 0, err
    assert "Answer a whole number from 1 (worst) to 5 (best), s (skip) or q (quit)." in out
    # 9, y, --3 and 2.5 are asked again
    assert out.count("answer a whole number from 1 to 5, s (skip) or q (quit)") == 4
    written = [json.loads(x) for x in labels.read_text().splitlines()]
    assert [(w["criterion"], w["score"], "pass" in w) for w in written] == [
        ("quality", 4, False), ("quality", 2, False)]
    assert all(w["sample"].startswith("uniform seed=5 n=4 pool=12 ") for w in written)
    said = [line for line in out.splitlines() if line.startswith("Score this output")]
    assert said and "[1-5/s/q]" in said[0]
    assert "the judge said: " in out and ("(agrees)" in out or "(DIFFERS by " in out)
    # The labels are read back by the next run: the scored judge is measured on them.
    assert run_cli("run", cwd=project, env=ENV).code in (3, 4)
    shown = json.loads(run_cli("inspect", "latest", "--judges", "--json", cwd=project).out)
    assert [r["pairs"] for r in shown["judges"] if r["criterion"] == "quality"] == [2]


def test_a_bad_score_in_the_labels_file_stops_the_run_before_any_call(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = _example(tmp_path, srv)
    labels = project / "data" / "labels.jsonl"
    lines = labels.read_text().splitlines()
    bad = next(i for i, x in enumerate(lines) if '"quality"' in x)
    lines[bad] = lines[bad].replace('"score": 5', '"score": 4.5')
    labels.write_text("\n".join(lines) + "\n")
    result = run_cli("run", cwd=project, env=ENV)
    assert result.code == 2, result.text
    assert "Traceback" not in result.text
    assert f"data/labels.jsonl:{bad + 1}: score: 4.5 is not a whole number" in result.err
    assert srv.total_calls("/v1/messages") == 0
