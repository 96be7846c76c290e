"""``oloproof run --sequential --baseline RUN`` (issue 26, comparisons): a sequential
candidate decides compare.yaml's rules against a stored baseline by sequential paired tests,
in the same seeded order as its release rules, and stops calling the system once those are
decided too; ``gate`` re-decides them identically from the stored evidence. Through the CLI
in a subprocess, with the baseline stored first by a fixed run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli, write_project
from tests.progress._support import checked_events

import oloproof

TOTAL = 600

# The baseline errs on a fifth of the cases (n % 10 < 2); the candidate on none.
WEAK = """
from oloproof import system

@system(name="bot", version="weak")
def answer(case_input):
    n = case_input["n"]
    return {"label": "no" if n % 10 < 2 else "ok", "days": n % 3}
"""

STRONG = """
from oloproof import system

@system(name="bot", version="strong")
def answer(case_input):
    return {"label": "ok", "days": case_input["n"] % 3}
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: absolute_error
  criterion: days_error
  field: days
"""

RELEASE = "version: 1\nrules:\n  - id: label-floor\n    metric: exact_label\n    min: 0.5\n"

COMPARE = ("version: 1\nrules:\n  - id: label-better\n    kind: superiority\n"
           "    metric: exact_label\n")


def _project(root: Path, app: str) -> Path:
    cases = [{"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok", "days": 0}}
             for i in range(TOTAL)]
    return write_project(root, app=app, cases=cases, evaluators=EVALUATORS, release=RELEASE)


def _baseline(root: Path) -> str:
    done = run_cli("run", "--json", cwd=root, timeout=300)
    assert done.code == 0, done.text
    end = checked_events(done.out)[-1]
    assert end["completeness"] == "COMPLETE"
    return str(end["run_id"])


def _view(decisions: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(d["rule"], d["state"], d["reason"], d["detail"], d["estimate"], d["lower"],
             d["upper"], d["action"]) for d in decisions]


def test_a_sequential_candidate_stops_once_its_comparison_rule_is_decided(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p", WEAK)
    baseline = _baseline(root)
    (root / "app.py").write_text(STRONG)
    (root / "compare.yaml").write_text(COMPARE)

    done = run_cli("run", "--sequential", "--baseline", baseline, "--json", cwd=root,
                   timeout=300)
    assert done.code == 0, done.text
    events = checked_events(done.out)
    end = events[-1]
    assert end["completeness"] == "SEQUENTIAL"
    decided = {e["rule"]: e for e in events if e["type"] == "rule_decided"}
    assert set(decided) == {"label-floor", "label-better"}
    assert decided["label-better"]["state"] == "PASS"
    assert decided["label-better"]["method"] == "sequential paired betting test"
    floor_n, better_n = decided["label-floor"]["n"], decided["label-better"]["n"]
    # The release rule is decided first; the run went on for the comparison rule, and
    # stopped once it was decided, far short of the suite.
    assert floor_n < better_n < TOTAL
    executed = [e for e in events if e["type"] == "case_executed"]
    assert not any(e["from_cache"] for e in executed)  # another system: nothing cached
    assert better_n <= len(executed) < TOTAL
    by_rule = {d["rule"]: d for d in end["decisions"]}
    better = by_rule["label-better"]
    assert better["state"] == "PASS" and better["reason"] == "sequential_pass"
    assert better["kind"] == "superiority"
    assert f"decided after {better_n} of {TOTAL} cases" in better["detail"]
    assert baseline in better["detail"]
    assert better["lower"] > 0.0  # the betting sequence on the difference excludes 0

    gate = run_cli("gate", "latest", "--json", cwd=root)
    assert gate.code == 0, gate.text
    doc = json.loads(gate.out)
    assert _view(doc["decisions"]) == _view(end["decisions"])
    assert doc["sequential"]["read"] == better_n
    assert doc["sequential"]["baseline"] == baseline
    text = run_cli("gate", "latest", cwd=root)
    assert f"comparisons with baseline {baseline} included" in text.out
    # plan lists the comparison rule as decided, beside the release rule.
    planned = json.loads(run_cli("plan", "latest", "--run", "--json", cwd=root).out)
    assert [(r["rule"], r["plan"]) for r in planned["rules"]] == [
        ("label-floor", "decided"), ("label-better", "decided")]
    # compare, asked afterwards with the same policy, reads the same pairs to the same end.
    compared = json.loads(run_cli("compare", "latest", baseline, "--json", cwd=root).out)
    assert compared["decisions"][0]["state"] == "PASS"
    assert f"after {better_n} pairs in the candidate's order" in compared["decisions"][0]["detail"]

    # The same decision from another concurrency, calling everything afresh.
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("system: 8", "system: 1"))
    again = run_cli("run", "--sequential", "--baseline", baseline, "--no-cache", "--json",
                    cwd=root, timeout=300)
    assert again.code == 0, again.text
    again_events = checked_events(again.out)
    assert _view(again_events[-1]["decisions"]) == _view(end["decisions"])
    # One call at a time: nothing runs past the case that decided the last rule.
    assert len([e for e in again_events if e["type"] == "case_executed"]) == better_n


def test_a_worse_candidate_fails_its_comparison_early(tmp_path: Path) -> None:
    """The other way round: the candidate errs where the baseline did not, and the
    non-inferiority rule FAILs (blocking, exit 1) well before the suite's end, through the
    Python API; read_run decides it again the same way."""
    root = _project(tmp_path / "p", STRONG)
    baseline = oloproof.run(root)
    assert baseline.exit_code == 0
    (root / "app.py").write_text(WEAK.replace('"weak"', '"weak-2"'))
    (root / "no-worse.yaml").write_text(  # not compare.yaml: named by compare_policy=
        "version: 1\nrules:\n  - id: no-worse\n    kind: non_inferiority\n"
        "    metric: exact_label\n    margin: 0.05\n"
    )
    result = oloproof.run(root, sequential=True, baseline=baseline.run_id,
                          compare_policy=root / "no-worse.yaml")
    assert result.exit_code == 1
    by_rule = {d.rule: d for d in result.decisions}
    assert by_rule["no-worse"].state == "FAIL"
    assert by_rule["no-worse"].reason == "sequential_fail"
    assert result.sequential is not None
    assert result.sequential["read"] < TOTAL
    assert result.sequential["baseline"] == baseline.run_id
    again = oloproof.read_run(result.run_id, project=root)
    assert [(d.rule, d.state, d.detail) for d in again.decisions] == [
        (d.rule, d.state, d.detail) for d in result.decisions]


@pytest.mark.parametrize(("compare", "args", "expected"), [
    (None, ("--sequential", "--baseline", "BASE"), "no compare.yaml beside oloproof.yaml"),
    (COMPARE, ("--baseline", "BASE"), "add --sequential"),
    (COMPARE, ("--sequential", "--baseline", "run_01AAAAAAAAAAAAAAAAAAAAAAAA"),
     "run_01AAAAAAAAAAAAAAAAAAAAAAAA"),
    ("version: 1\nrules:\n  - id: days\n    kind: equivalence\n    metric: days_error\n"
     + "    margin: 1\n",
     ("--sequential", "--baseline", "BASE"), "MEAN without a declared range"),
    ("version: 1\nrules:\n  - id: label-floor\n    kind: superiority\n    metric: exact_label\n",
     ("--sequential", "--baseline", "BASE"), "has the id of a release rule"),
    (COMPARE, ("--sequential", "--compare-policy", "compare.yaml"), "--baseline RUN"),
    (COMPARE, ("--matrix", "--baseline", "BASE"), "--matrix compares its variants"),
    # A policy under which a FAIL would not block is refused, as compare refuses it.
    ("version: 1\nblock_on: [INSUFFICIENT_EVIDENCE]\n" + COMPARE.split("\n", 1)[1],
     ("--sequential", "--baseline", "BASE"), "FAIL is not in block_on"),
])
def test_what_cannot_be_compared_while_running_is_refused_with_one_line(
    stored_baseline: tuple[Path, str], compare: str | None, args: tuple[str, ...],
    expected: str,
) -> None:
    root, baseline = stored_baseline
    policy = root / "compare.yaml"
    if compare is None:
        policy.unlink(missing_ok=True)
    else:
        policy.write_text(compare)
    done = run_cli("run", *(baseline if a == "BASE" else a for a in args), cwd=root)
    assert done.code == 2, done.text
    assert expected in done.err and "Traceback" not in done.err
    assert len(done.err.strip().splitlines()) <= 2
    runs = json.loads(run_cli("runs", "--json", cwd=root).out)
    assert len(runs) == 1  # nothing new was stored


@pytest.fixture(scope="module")
def stored_baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A project whose baseline (the weak system) is stored, its app now the strong one."""
    root = _project(tmp_path_factory.mktemp("refusals") / "p", WEAK)
    baseline = _baseline(root)
    (root / "app.py").write_text(STRONG)
    return root, baseline


def test_a_baseline_whose_cases_say_something_else_is_refused(tmp_path: Path) -> None:
    """A case id the baseline ran with another input would pair two different questions:
    refused before anything is called."""
    root = _project(tmp_path / "p", WEAK)
    baseline = _baseline(root)
    (root / "app.py").write_text(STRONG)
    (root / "compare.yaml").write_text(COMPARE)
    data = root / "data" / "cases.jsonl"
    data.write_text(data.read_text().replace('{"n": 7}', '{"n": 8}'))
    done = run_cli("run", "--sequential", "--baseline", baseline, cwd=root)
    assert done.code == 2, done.text
    assert "1 case(s) of this suite have another input" in done.err
    assert "first: q007" in done.err and "Traceback" not in done.err
    assert len(json.loads(run_cli("runs", "--json", cwd=root).out)) == 1


def test_a_baseline_that_ran_part_of_its_suite_is_refused(tmp_path: Path) -> None:
    """A subset (or shard) baseline would give a comparison with part of a suite, which
    never allows a release (`compare` blocks it, exit 5): refused before anything runs."""
    root = _project(tmp_path / "p", WEAK)
    part = run_cli("run", "--limit", "100", "--json", cwd=root, timeout=300)
    assert part.code == 5, part.text
    baseline = str(checked_events(part.out)[-1]["run_id"])
    (root / "app.py").write_text(STRONG)
    (root / "compare.yaml").write_text(COMPARE)
    done = run_cli("run", "--sequential", "--baseline", baseline, cwd=root)
    assert done.code == 2, done.text
    assert (f"baseline {baseline} cannot be compared with while running: it ran part of its"
            " suite (a subset or a shard)") in done.err and "Traceback" not in done.err
    assert len(json.loads(run_cli("runs", "--json", cwd=root).out)) == 1


def test_a_baseline_that_judged_the_metric_otherwise_is_refused(tmp_path: Path) -> None:
    """The same criterion name, another evaluator (a regex that always passes): the paired
    difference would measure the evaluator, so it is refused, as `compare` refuses it."""
    root = _project(tmp_path / "p", WEAK)
    baseline = _baseline(root)
    (root / "app.py").write_text(STRONG)
    (root / "compare.yaml").write_text(COMPARE)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace(
        "- type: exact_match\n    criterion: exact_label\n    field: label",
        "- type: regex\n    criterion: exact_label\n    field: label\n    pattern: '.+'"))
    done = run_cli("run", "--sequential", "--baseline", baseline, cwd=root)
    assert done.code == 2, done.text
    assert (f"comparison rule label-better is on metric exact_label, which this run and"
            f" baseline {baseline} judge by different evaluators") in done.err, done.err
    assert "Traceback" not in done.err
