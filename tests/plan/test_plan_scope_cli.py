"""``oloproof plan`` on a rule whose cases are not the whole run: a rule on a group
(``group:``, ``each_group:``) and a metric that excluded some cases.

Such a rule is sized in its own cases (the group's, or those its metric scores): the plan
has to say so, or "78 more cases (98 in total)" beside "the 100 already run" reads as 78
more cases of the suite, of which only a fifth would fall in the group. The size itself is
checked against a brute-force search with scipy (``brute_binary``), and the promise by
adding that many cases of the group to the suite and running it again.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, write_project
from tests.plan.test_plan_run import brute_binary

APP = """
def answer(case_input):
    return {"label": "ok" if case_input["ok"] else "bad"}
"""

RELEASE = """\
version: 1
rules:
  - {id: french, metric: exact_label, min: 0.6, group: {lang: fr}}
"""

EVALUATORS = """
- {type: exact_match, criterion: exact_label, field: label, group_by: [lang]}
"""


def _cases(fr_ok: int, fr_bad: int, en: int, start: int = 0) -> list[dict[str, object]]:
    rows = [("fr", True)] * fr_ok + [("fr", False)] * fr_bad + [("en", True)] * en
    return [
        {"id": f"q{start + i:04d}", "input": {"ok": ok}, "expected": {"label": "ok"},
         "metadata": {"lang": lang}}
        for i, (lang, ok) in enumerate(rows)
    ]


def test_a_group_rule_is_sized_in_the_groups_cases(tmp_path: Path) -> None:
    # 14 of the 20 French cases right (70%) against min 0.6, among 100 cases.
    cases = _cases(14, 6, 80)
    project = write_project(tmp_path / "p", app=APP, cases=cases, evaluators=EVALUATORS,
                            release=RELEASE)
    assert run_cli("run", cwd=project).code == 3
    plan = run_cli("plan", "latest", "--run", cwd=project)
    assert plan.code == 0, plan.text
    total = brute_binary(14, 20, 0.6, "min")
    assert total is not None
    more = total - 20
    assert (
        f"french: about {more} more cases of the group lang=fr would decide it, if the"
        f" observed rate holds ({total} of the group in total)"
    ) in plan.out
    assert ("the cases to come are in the group lang=fr and resemble the 20 cases of it"
            " already run (of the 100 run)") in plan.out
    assert "resemble the 100 already run" not in plan.out
    doc = json.loads(run_cli("plan", "latest", "--run", "--json", cwd=project).out)
    rule = doc["rules"][0]
    assert (rule["more"], rule["total"]) == (more, total)
    assert rule["scope"] == {"group": "lang=fr", "cases": 20, "run_cases": 100, "excluded": 0}

    # The promise: that many more cases of the group, at the observed rate, decide it.
    passes = round(14 * total / 20) - 14
    grown = cases + _cases(passes, more - passes, 0, start=len(cases))
    (project / "data" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in grown))
    again = run_cli("run", cwd=project)
    assert again.code == 0, again.text


CHECKS = """
from oloproof import Verdict

def ok(output, case):
    if case.input.get("skip"):
        return Verdict(excluded=True, reason="not applicable")
    return output["label"] == "ok"
"""


def test_a_metric_that_excluded_cases_is_sized_in_the_cases_it_scores(tmp_path: Path) -> None:
    # 60 of 80 scored cases right against max 0.8; 20 more cases excluded from the metric.
    cases = [
        {"id": f"q{i:03d}", "input": {"ok": i < 60, "skip": i >= 80},
         "expected": {"label": "ok"}}
        for i in range(100)
    ]
    project = write_project(
        tmp_path / "p", app=APP, cases=cases,
        evaluators="- {type: custom, criterion: checked, function: checks:ok, kind: binary}",
        release="version: 1\nrules:\n  - {id: floor, metric: checked, max: 0.8}\n",
        extra_files={"checks.py": CHECKS},
    )
    assert run_cli("run", cwd=project).code == 3
    plan = run_cli("plan", "latest", "--run", cwd=project)
    assert plan.code == 0, plan.text
    total = brute_binary(60, 80, 0.8, "max")
    assert total is not None
    assert (
        f"floor: about {total - 80} more cases scored by checked would decide it, if the"
        f" observed rate holds ({total} scored in total)"
    ) in plan.out
    assert ("the cases to come are scored by checked and resemble the 80 of the 100 already"
            " run that it scored; 20 cases were excluded from it") in plan.out
