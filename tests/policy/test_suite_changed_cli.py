"""A stored run's suite file edited since the run: `gate latest` says so.

The run's decisions are on the cases it stored; a person who edits the cases and does not
run them again (CI then runs `gate latest`) got the old run's exit code without a word,
as if the file the project now holds had been run. A note now says the file changed, as
for a policy or labels file written since (the exit code stays the stored run's: SPEC,
`gate` re-decides stored evidence)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 4 else "no"}
"""

LOOSE = "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.3}\n"


def _note(text: str, shown: str = "data/cases.jsonl") -> bool:
    return f"{shown} has changed since this run started" in text


def _write_later(path: Path, rows: list[dict[str, object]] | str) -> None:
    """``rows`` written to ``path``, dated after the run started whatever the clock's grain."""
    path.write_text(rows if isinstance(rows, str)
                    else "".join(json.dumps(r) + "\n" for r in rows))
    later = time.time() + 5
    os.utime(path, (later, later))


def test_gate_says_when_the_suite_file_now_holds_other_cases(tmp_path: Path) -> None:
    """30 of 40 right, floor min 0.3: ALLOW. Every expected label then changed to one the
    system never gives (a run of the file now: FAIL, exit 1). `gate latest` exited 0 and
    said nothing; now it says the file changed (text and --json), still exit 0. The same
    cases written again in another key order and spacing say nothing."""
    cases = labelled_cases(40)
    project = write_project(tmp_path / "p", app=APP, cases=cases, release=LOOSE)
    assert run_cli("run", cwd=project).code == 0
    before = run_cli("gate", "latest", cwd=project)
    assert before.code == 0 and not _note(before.out), before.text

    suite = project / "data" / "cases.jsonl"
    # The same cases, rewritten (a checkout, a formatter): the digest is of the cases.
    _write_later(suite, "\n".join(json.dumps(dict(reversed(list(c.items()))), indent=None)
                                  for c in cases) + "\n\n")
    same = run_cli("gate", "latest", cwd=project)
    assert same.code == 0 and not _note(same.out), same.text

    _write_later(suite, [{**c, "expected": {"label": "yes"}} for c in cases])
    human = run_cli("gate", "latest", cwd=project)
    assert human.code == 0, human.text  # the run's evidence still decides
    assert _note(human.out), human.text
    assert "these decisions are on the cases the run stored (sha256:" in human.out
    assert "the file now holds other cases (sha256:" in human.out
    assert "`oloproof run` decides on the file as it is now" in human.out
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    assert any(_note(n) for n in doc["gate_notes"]), doc["gate_notes"]

    # From another directory, the file is the project's and named from there.
    elsewhere = run_cli("gate", "latest", "--config", "p/oloproof.yaml", cwd=tmp_path)
    assert elsewhere.code == 0 and _note(elsewhere.out, "p/data/cases.jsonl"), elsewhere.text

    # A file that no longer loads differs all the same.
    _write_later(suite, '{"id": "q000", "input": \n')
    broken = run_cli("gate", "latest", cwd=project)
    assert broken.code == 0 and _note(broken.out), broken.text
    assert "the file no longer loads as a suite" in broken.out
    assert "Traceback" not in broken.err

    # What the note says: the file as it is now does not pass.
    _write_later(suite, [{**c, "expected": {"label": "yes"}} for c in cases])
    assert run_cli("run", cwd=project).code == 1
    after = run_cli("gate", "latest", cwd=project)
    assert after.code == 1 and not _note(after.out), after.text


def test_gate_says_when_oloproof_yaml_now_names_another_suite(tmp_path: Path) -> None:
    """`dataset:` pointed at a new file after the run (cases_v2.jsonl, where the system
    fails every case), not run again: `gate latest` exited 0 on the old file's cases and
    said nothing (the old file, unchanged, is older than the run). It now names the file
    oloproof.yaml names; a copy of the same cases under another name says nothing."""
    cases = labelled_cases(40)
    project = write_project(tmp_path / "p", app=APP, cases=cases, release=LOOSE)
    assert run_cli("run", cwd=project).code == 0
    config = project / "oloproof.yaml"
    text = config.read_text()
    (project / "data" / "copy.jsonl").write_text((project / "data" / "cases.jsonl").read_text())
    _write_later(config, text.replace("data/cases.jsonl", "data/copy.jsonl"))
    same = run_cli("gate", "latest", cwd=project)
    assert same.code == 0 and "as the suite" not in same.out, same.text

    _write_later(project / "data" / "v2.jsonl",
                 [{**c, "expected": {"label": "yes"}} for c in cases])
    _write_later(config, text.replace("data/cases.jsonl", "data/v2.jsonl"))
    human = run_cli("gate", "latest", cwd=project)
    assert human.code == 0, human.text
    assert ("oloproof.yaml names data/v2.jsonl as the suite since this run of"
            " data/cases.jsonl started (") in human.out, human.text
    assert "and data/v2.jsonl now holds other cases (sha256:" in human.out
    elsewhere = run_cli("gate", "latest", "--config", "p/oloproof.yaml", "--json",
                        cwd=tmp_path)
    assert any(n.startswith("p/oloproof.yaml names p/data/v2.jsonl as the suite")
               for n in json.loads(elsewhere.out)["gate_notes"]), elsewhere.out

    # A name that holds no suite, or an oloproof.yaml that no longer reads: no traceback.
    _write_later(config, text.replace("data/cases.jsonl", "data/missing.jsonl"))
    missing = run_cli("gate", "latest", cwd=project)
    assert missing.code == 0 and "data/missing.jsonl does not load as a suite" in missing.out
    _write_later(config, text + "evaluators: [\n")
    broken = run_cli("gate", "latest", cwd=project)
    assert broken.code == 0 and "Traceback" not in broken.err, broken.text
