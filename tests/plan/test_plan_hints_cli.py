"""The commands that ``run``, ``gate`` and ``compare`` print for an undecided rule work as
printed: typed into a shell (split as a shell splits them), from the directory the command
was run in, with a project and a policy whose paths hold spaces and quotes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.conftest import run_cli, write_project

APP = """
def answer(case_input):
    return {"label": "ok" if case_input["i"] % 10 < 7 else "bad"}
"""

POLICY = """\
version: 1
rules:
  - {id: floor, metric: exact_label, min: 0.6}
"""

COMPARE = """\
version: 1
rules:
  - {id: better, metric: exact_label, kind: superiority}
"""


def _hint(out: str, command: str) -> list[str]:
    """The command printed under "size it with" (or after "see ... with"), as a shell
    splits it, without its leading ``oloproof``."""
    found = re.findall(rf"^    (oloproof {command} .*)$", out, re.MULTILINE)
    assert found, out
    argv = shlex.split(found[0])
    assert argv[0] == "oloproof"
    return argv[1:]


def test_the_suggested_plan_command_runs_as_printed(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "my project", app=APP,
        cases=[{"id": f"q{i:03d}", "input": {"i": i}, "expected": {"label": "ok"}}
               for i in range(20)],
        release=POLICY, extra_files={"it's strict.yaml": POLICY},
    )
    config = "my project/oloproof.yaml"
    policy = "my project/it's strict.yaml"
    run = run_cli("run", "--config", config, "--policy", policy, cwd=tmp_path)
    assert run.code == 3, run.text
    argv = _hint(run.out, "plan")
    assert argv[-4:] == ["--config", config, "--policy", policy]
    plan = run_cli(*argv, cwd=tmp_path)
    assert plan.code == 0, plan.text
    assert "floor: about " in plan.out

    gate = run_cli("gate", "latest", "--config", config, "--policy", policy, cwd=tmp_path)
    assert gate.code == 3, gate.text
    plan = run_cli(*_hint(gate.out, "plan"), cwd=tmp_path)
    assert plan.code == 0, plan.text
    assert "floor: about " in plan.out

    # A comparison's hint (the candidate a new version of the system: the same answers).
    (project / "oloproof.yaml").write_text(
        (project / "oloproof.yaml").read_text().replace('version: "1"', 'version: "2"'))
    (project / "it's compare.yaml").write_text(COMPARE)
    second = run_cli("run", "--config", config, cwd=tmp_path)
    first_id = re.search(r"Run (run_\w+)", run.out).group(1)  # type: ignore[union-attr]
    second_id = re.search(r"Run (run_\w+)", second.out).group(1)  # type: ignore[union-attr]
    cmp = run_cli("compare", second_id, first_id, "--config", config, "--policy",
                  "my project/it's compare.yaml", cwd=tmp_path)
    assert cmp.code == 3, cmp.text
    argv = _hint(cmp.out, "plan")
    assert argv[-2:] == ["--config", config]
    plan = run_cli(*argv, cwd=tmp_path)
    assert plan.code == 0, plan.text
    assert "better: " in plan.out
