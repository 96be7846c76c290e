"""``oloproof run --json``: the event stream of SPEC §6, checked against the shipped schema."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project
from tests.progress._support import INSTANT, checked_events, validator

REPO = Path(__file__).resolve().parents[2]

RELEASE = """
version: 1
rules:
  - id: label-floor
    metric: exact_label
    min: 0.5
"""


def test_schema_ships_in_the_package_and_in_the_docs() -> None:
    shipped = resources.files("oloproof").joinpath("schemas/events.schema.json").read_bytes()
    assert (REPO / "docs" / "events.schema.json").read_bytes() == shipped
    validator()  # a valid draft 2020-12 schema


def test_a_120_case_run_emits_the_events_of_the_spec(project_dir: Path) -> None:
    write_project(project_dir, app=INSTANT, cases=labelled_cases(120), release=RELEASE)
    result = run_cli("run", "--json", cwd=project_dir)
    assert result.code == 0, result.text
    events = checked_events(result.out)

    counts = Counter(e["type"] for e in events)
    assert counts == {
        "run_started": 1,
        "run_phase_changed": 2,
        "case_executed": 120,
        "case_judged": 120,
        "provisional_metrics": 11,
        "run_finished": 1,
    }
    assert events[0]["type"] == "run_started"
    assert events[-1]["type"] == "run_finished"
    run_id = events[0]["run_id"]
    assert all(e["run_id"] == run_id for e in events)
    assert events[0]["cases"] == 120
    assert events[0]["suite_digest"].startswith("sha256:")
    assert [e["phase"] for e in events if e["type"] == "run_phase_changed"] == [
        "EXECUTING", "ANALYZING",
    ]

    provisional = [e for e in events if e["type"] == "provisional_metrics"]
    assert [p["cases_done"] for p in provisional] == [1, 13, 25, 37, 49, 61, 73, 85, 97, 109, 120]
    assert {p["cases_total"] for p in provisional} == {120}
    last = provisional[-1]["metrics"]
    assert [(m["metric"], m["estimate"], m["n_observed"], m["n_missing"]) for m in last] == [
        ("exact_label", 1.0, 120, 0)
    ]
    # A provisional_metrics event comes after the case that completes its count.
    done = 0
    for e in events:
        if e["type"] == "case_judged":
            done += 1
        elif e["type"] == "provisional_metrics":
            assert e["cases_done"] == done

    finished = events[-1]
    assert (finished["status"], finished["completeness"], finished["exit_code"]) == (
        "DECIDED", "COMPLETE", 0,
    )
    assert [(d["rule"], d["state"], d["action"]) for d in finished["decisions"]] == [
        ("label-floor", "PASS", "ALLOW")
    ]
    # The tables are on standard error, and standard output holds nothing but events.
    assert "label-floor" in result.err and f"Run {run_id} [DECIDED/COMPLETE]" in result.err
    assert all(line.startswith("{") for line in result.out.splitlines())


def test_the_events_say_what_came_from_the_cache(project_dir: Path) -> None:
    write_project(project_dir, app=INSTANT, cases=labelled_cases(5))
    assert run_cli("run", cwd=project_dir).code == 0
    again = checked_events(run_cli("run", "--json", cwd=project_dir).out)
    executed = [e for e in again if e["type"] == "case_executed"]
    judged = [e for e in again if e["type"] == "case_judged"]
    assert [e["from_cache"] for e in executed] == [True] * 5
    assert [e["from_cache"] for e in judged] == [True] * 5
    assert all(e["status"] == "OK" and e["attempts"] == 1 for e in executed)


def test_a_failing_case_is_streamed_with_its_error(project_dir: Path) -> None:
    app = """
    from oloproof import system

    @system(name="flaky", version="1")
    def answer(case_input):
        if case_input["n"] == 1:
            raise ValueError("no answer for one")
        return {"label": "ok"}
    """
    write_project(project_dir, app=app, cases=labelled_cases(3))
    events = checked_events(run_cli("run", "--json", cwd=project_dir).out)
    bad = next(e for e in events if e["type"] == "case_executed" and e["scenario_id"] == "q001")
    assert bad["status"] == "ERROR" and "no answer for one" in bad["error"]
    judged = next(e for e in events if e["type"] == "case_judged" and e["scenario_id"] == "q001")
    assert (judged["status"], judged["passed"]) == ("MISSING", None)
    last = [e for e in events if e["type"] == "provisional_metrics"][-1]["metrics"][0]
    assert (last["n_observed"], last["n_missing"]) == (2, 1)


def test_provisional_figures_of_the_seed(project_dir: Path) -> None:
    """SPEC §9 item 7: cases finishing in file order (system: 1) with the seed's outcomes."""
    outcomes = [True]  # case 1 passes
    outcomes += [True] * 10 + [False] * 2  # 11 of 13
    outcomes += [True] * 11 + [False]  # 22 of 25
    outcomes += [False] + [True] * 11  # 33 of 37
    outcomes += [True, False] * 41 + [True]  # up to 120
    assert len(outcomes) == 120
    cases = [
        {"id": f"c{i:03d}", "input": {"pass": ok}, "expected": {"label": "ok"}}
        for i, ok in enumerate(outcomes)
    ]
    write_project(project_dir, app=INSTANT, cases=cases, concurrency=(1, 1))
    result = run_cli("run", "--json", cwd=project_dir)
    events = checked_events(result.out)
    rows = [
        [e["cases_done"], *(e["metrics"][0][k] for k in ("estimate", "wilson_lower", "wilson_upper"))]
        for e in events
        if e["type"] == "provisional_metrics"
    ]
    seed = [
        [1, 1.0, 0.20654931411298355, 1.0],
        [13, 0.8461538461538461, 0.5776536895684791, 0.9567418216820717],
        [25, 0.88, 0.7004420606159933, 0.9583318285288502],
        [37, 0.8918918918918919, 0.7529146844205937, 0.9571481006263428],
    ]
    for got, want in zip(rows[:4], seed, strict=True):
        assert got[0] == want[0]
        for a, b in zip(got[1:], want[1:], strict=True):
            assert abs(a - b) <= 1e-12, (got, want)
    # The stream is plain JSON: the figures survive a round trip exactly.
    assert json.loads(json.dumps(rows)) == rows


def test_a_sequential_run_that_stops_early_streams_figures_after_its_last_case(
    tmp_path: Path,
) -> None:
    """SPEC §6: provisional_metrics come after the first case, every ceil(total/10), and after
    the last. A sequential run decided early never reaches the suite's last case; its last
    case is the last it ran, and the stream's last figures are over every case it ran (they
    stopped at 1 of 2,000 while the run went on to 65 cases). A rerun from the cache alike."""
    assert run_cli("init", "proj", "--example", "sequential", cwd=tmp_path).code == 0
    project = tmp_path / "proj"
    for attempt in ("called", "cached"):
        result = run_cli("run", "--json", cwd=project)
        assert result.code == 0, result.text
        events = checked_events(result.out)
        types = [e["type"] for e in events]
        done = types.count("case_executed")
        assert 1 < done < 2000, attempt
        provisional = [e for e in events if e["type"] == "provisional_metrics"]
        last = provisional[-1]
        assert (last["cases_done"], last["cases_total"]) == (done, 2000), attempt
        assert last["metrics"][0]["n_observed"] + last["metrics"][0]["n_missing"] == done
        # After the run's last case, before the decision.
        at = events.index(last)
        assert "case_judged" not in types[at:], attempt
        assert types.index("run_phase_changed", at) > at, attempt
        assert [e["phase"] for e in events[at:] if e["type"] == "run_phase_changed"] == [
            "ANALYZING"
        ]
