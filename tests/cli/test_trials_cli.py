"""Repeated trials from the command line, as a user drives them: the real CLI in a
subprocess, a real store, a system that counts its calls (tests/engine/_trials.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import OLOPROOF, run_cli
from tests.engine._trials import calls, flaky_cases, flaky_project
from tests.progress._support import checked_events

FLAKY_RULES = """\
version: 1
rules:
  - id: floor
    metric: exact_label
    min: 0.5
  - id: few-flaky
    metric: exact_label
    aggregate: flaky_share
    max: 0.5
  - id: all-pass
    metric: exact_label
    aggregate: pass_all_k
    min: 0.9
"""


def _run_id(out: str) -> str:
    found = re.search(r"Run (run_\w+)", out)
    assert found, out
    return found.group(1)


def test_trials_flaky_cases_and_a_flaky_share_rule(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(20, 4, 1), release=FLAKY_RULES)
    result = run_cli("run", "--trials", "3", cwd=root)
    assert calls(root) == 75
    # all-pass: 20 of 25 cases pass all 3 trials, CP [59.3%, 93.2%] under 90%: undecided
    assert result.code == 3, result.text
    out = result.out
    assert "25 cases × 3 trials: 68 / 75 observed · 0 missing · 0 excluded" in out
    assert re.search(r"few-flaky\s*│ exact_label\[flaky\]\s*│ PASS", out), out
    assert re.search(r"all-pass\s*│ exact_label\[pass\^3\]\s*│ INSUFFICIENT_EVIDENCE", out), out
    assert "exact_label[flaky]" in out and "4 / 25 observed" in out
    run_id = _run_id(out)

    flaky = run_cli("inspect", run_id, "--flaky", cwd=root)
    assert flaky.code == 0, flaky.text
    assert "Flaky cases in " + run_id + ": 4 of 25 cases, 3 trials each" in flaky.out
    for case in ("c020", "c021", "c022", "c023"):
        assert re.search(rf"{case}\s*│ exact_label\s*│ 2 / 3\s*│ ✓✗✓", flaky.out), flaky.out
    doc = json.loads(run_cli("inspect", run_id, "--flaky", "--json", cwd=root).out)
    assert doc["trials"] == 3 and doc["cases"] == 25
    assert [f["case"] for f in doc["flaky"]] == ["c020", "c021", "c022", "c023"]
    assert doc["flaky"][0]["verdicts"] == [True, False, True]

    case = json.loads(run_cli("inspect", run_id, "--case", "c021", "--json", cwd=root).out)
    assert case["trial"] == 0 and [t["trial"] for t in case["trials"]] == [1, 2]
    assert [t["judgments"]["exact_label"]["passed"] for t in case["trials"]] == [False, True]

    gate = run_cli("gate", run_id, "--json", cwd=root)
    assert gate.code == 3
    stored = {d["rule"]: d["state"] for d in json.loads(gate.out)["decisions"]}
    assert stored == {"floor": "PASS", "few-flaky": "PASS", "all-pass": "INSUFFICIENT_EVIDENCE"}

    report = run_cli("report", run_id, "-o", str(tmp_path / "r.html"), cwd=root)
    assert report.code == 0, report.text
    html = (tmp_path / "r.html").read_text()
    assert "4 of 25 cases disagree across their 3 trials" in html
    assert html.count('class="flaky-row"') == 4
    # each case's page shows its other trials, trial by trial
    assert html.count("Other trials") == 25
    assert '<code>{"label": "no"}</code>' in html  # a flaky case's trial 1


def test_raising_k_calls_only_the_new_trials(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(10, 5, 0), release=FLAKY_RULES)
    assert "DECIDED/COMPLETE" in run_cli("run", "--trials", "2", cwd=root).out
    assert calls(root) == 30
    four = run_cli("run", "--trials", "4", cwd=root)
    assert calls(root) == 60
    assert "executions 30 hits · 30 misses" in four.out, four.out
    again = run_cli("run", "--trials", "4", cwd=root)
    assert calls(root) == 60
    assert "executions 60 hits · 0 misses" in again.out
    # and trials: in oloproof.yaml is the same as --trials
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "trials: 4\n")
    assert "executions 60 hits · 0 misses" in run_cli("run", cwd=root).out
    assert calls(root) == 60


def test_json_events_of_a_trial_run_follow_the_schema(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(6, 2, 0), release=FLAKY_RULES)
    result = run_cli("run", "--trials", "2", "--json", cwd=root)
    events = checked_events(result.out)
    executed = [e for e in events if e["type"] == "case_executed"]
    assert len(executed) == 16 and {e["trial"] for e in executed} == {0, 1}
    assert events[0]["type"] == "run_started" and events[0]["cases"] == 8
    one = run_cli("run", "--json", cwd=root)
    assert all("trial" not in e for e in checked_events(one.out))


def test_bad_trials_are_one_clear_message(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(6, 0, 0), release=FLAKY_RULES)
    bad = run_cli("run", "--trials", "0", cwd=root)
    assert bad.code == 2 and "expected a whole number of trials from 1 to 100" in bad.err
    one = run_cli("run", cwd=root)
    assert one.code == 2
    assert "release.yaml" in one.err and "rules[1].aggregate" in one.err
    assert "one trial per case" in one.err and "Traceback" not in one.err
    assert not (root / "calls.log").exists()  # refused before anything was called
    # gate a stored one-trial run under a policy with a flaky-share rule: refused too
    (root / "floor.yaml").write_text(FLAKY_RULES.split("  - id: few-flaky")[0])
    (root / "flaky.yaml").write_text(FLAKY_RULES)
    run_id = _run_id(run_cli("run", "--policy", "floor.yaml", cwd=root).out)
    gate = run_cli("gate", run_id, "--policy", "flaky.yaml", cwd=root)
    assert gate.code == 2, gate.text
    assert "one trial per case" in gate.err and "Traceback" not in gate.err
    none = run_cli("inspect", run_id, "--flaky", cwd=root)
    assert none.code == 0 and "made one trial per case: no case can be flaky" in none.out
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "trials: many\n")
    wrong = run_cli("run", "--policy", "floor.yaml", cwd=root)
    assert wrong.code == 2 and "trials" in wrong.err and "Traceback" not in wrong.err


def test_plan_weighs_more_cases_against_more_trials(tmp_path: Path) -> None:
    # Every case flaky the same way, one pass in two trials: the 30 fractions are all 0.5,
    # and the interval over 30 cases, [0.423, 0.577], is as narrow as 30 cases allow (the
    # betting interval over cases, issue 33). More trials cannot narrow it further; more
    # cases can, and the plan weighs both.
    rules = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.45\n"
    root = flaky_project(tmp_path / "low", flaky_cases(0, 30, 0), release=rules)
    run_id = _run_id(run_cli("run", "--trials", "2", cwd=root).out)
    plan = run_cli("plan", run_id, "--run", "--json", cwd=root)
    assert plan.code == 0, plan.text
    (rule,) = json.loads(plan.out)["rules"]
    assert rule["plan"] == "sized" and rule["calls"] == rule["more"] * 2
    assert rule["trials"]["status"] == "beyond_limit" and rule["trials"]["current"] == 2
    assert "the interval is over the 30 cases" in rule["trials"]["reason"]
    text = run_cli("plan", run_id, "--run", cwd=root).out
    assert "calls " in text and "more trials would not decide it" in text

    # Cases that either always pass or always fail (ICC 1): more trials tell nothing new.
    rules = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
    root = flaky_project(tmp_path / "high", flaky_cases(15, 0, 12), release=rules)
    run_id = _run_id(run_cli("run", "--trials", "3", cwd=root).out)
    (rule,) = json.loads(run_cli("plan", run_id, "--run", "--json", cwd=root).out)["rules"]
    assert rule["plan"] == "sized" and rule["trials"]["status"] == "beyond_limit"
    assert "only more cases" in rule["trials"]["reason"]


def test_sigkill_mid_trial_run_loses_nothing_finished(tmp_path: Path) -> None:
    slow = flaky_cases(60, 0, 0)
    root = flaky_project(tmp_path / "p", slow, release=FLAKY_RULES)
    app = root / "app.py"
    app.write_text(app.read_text().replace("    kind = case_input", "    import time\n"
                                           "    time.sleep(0.02)\n    kind = case_input"))
    proc = subprocess.Popen([*OLOPROOF, "run", "--trials", "3"], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while calls(root) < 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    made = calls(root)
    assert 60 <= made < 180
    again = run_cli("run", "--trials", "3", cwd=root)
    assert again.code in (0, 3), again.text
    hits = int(again.out.split("executions ")[1].split(" hits")[0])
    # At most the call in flight (concurrency 1) and the last few milliseconds are lost.
    assert hits >= made - 2
    assert calls(root) == made + (180 - hits)
    assert "60 cases × 3 trials: 180 / 180 observed" in again.out


def test_ctrl_c_mid_trial_run_is_partial_and_the_rerun_finishes_it(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(40, 0, 0), release=FLAKY_RULES)
    app = root / "app.py"
    app.write_text(app.read_text().replace("    kind = case_input", "    import time\n"
                                           "    time.sleep(0.02)\n    kind = case_input"))
    proc = subprocess.Popen([*OLOPROOF, "run", "--trials", "3"], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while calls(root) < 30 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, _err = proc.communicate(timeout=60)
    assert proc.returncode == 5
    assert "RUN_ERROR/PARTIAL" in out
    made = calls(root)
    assert made < 120
    again = run_cli("run", "--trials", "3", cwd=root)
    assert "DECIDED/COMPLETE" in again.out
    hits = int(again.out.split("executions ")[1].split(" hits")[0])
    assert hits >= made - 1  # every finished trial was stored; at most the one in flight lost
    assert "40 cases × 3 trials: 120 / 120 observed" in again.out
