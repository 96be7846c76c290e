"""A rule id written in the form each_group gives its group rules (``floor[lang=en]``)
would share its id with one of them: the Holm step-down keyed its decisions by id, and a
floor of 0.99 that FAILs took the PASS of the group rule ``floor[lang=en]`` (gate exit 0);
``run`` stored two decisions under one id and stopped PARTIAL (exit 5). It is refused at
load, exit 2, naming the file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, write_project

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    return {"label": x["say"]}
"""

CASES = [
    {"id": f"c{i:03d}", "input": {"say": "ok" if i % 10 else "no"},
     "expected": {"label": "ok"}, "metadata": {"lang": "en" if i < 100 else "fr"}}
    for i in range(200)
]

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
  group_by: [lang]
"""

COLLIDING = """
version: 1
families:
  f: {multiplicity: holm}
rules:
  - {id: "floor[lang=en]", metric: exact_label, min: 0.99, family: f}
  - {id: floor, metric: exact_label, min: 0.5, each_group: true, family: f}
"""

PLAIN = """
version: 1
rules:
  - {id: floor, metric: exact_label, min: 0.5}
"""


def test_a_rule_id_in_the_form_of_a_group_rule_id_is_refused(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=CASES, evaluators=EVALUATORS, release=PLAIN)
    assert run_cli("run", cwd=project_dir).code == 0
    (project_dir / "other.yaml").write_text(COLLIDING)
    gated = run_cli("gate", "latest", "--policy", "other.yaml", cwd=project_dir)
    assert gated.code == 2, gated.text
    assert "other.yaml:6: rules[0].id:" in gated.err, gated.err
    assert "each_group" in gated.err and "floor" in gated.err, gated.err
    assert "Traceback" not in gated.text
    ran = run_cli("run", "--policy", "other.yaml", cwd=project_dir)
    assert ran.code == 2, ran.text
    assert "other.yaml:6: rules[0].id:" in ran.err, ran.err
    # Nothing was stored by the refused run: the one run before it is still the latest.
    assert len(json.loads(run_cli("runs", "--json", cwd=project_dir).out)) == 1


def test_group_rule_ids_that_cannot_collide_are_accepted(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=CASES, evaluators=EVALUATORS, release=PLAIN)
    (project_dir / "other.yaml").write_text(COLLIDING.replace('"floor[lang=en]"', "strict"))
    ran = run_cli("run", "--policy", "other.yaml", cwd=project_dir)
    assert ran.code == 1, ran.text  # strict FAILs, under its own id
    assert "│ strict " in ran.out and "│ floor[lang=en] " in ran.out, ran.out
