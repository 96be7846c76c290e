"""A stored run decided under another policy file than the one the project now names.

`gate latest` decides a run under the policy stored with it, and said so only when the
very file the run read had been edited since. A run made with `--policy lenient.yaml`,
or an oloproof.yaml whose `policy:` was pointed at a stricter file after the run, left
`gate latest`, the report and the viewer on the old rules without a word. The run now
stores where its policy came from, and the gate notes the project's policy file when it
now holds other rules; the exit code stays the run's (the stored policy decides it)."""

from __future__ import annotations

import json
import os
import sqlite3
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
STRICT = "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.95}\n"


def _write_later(path: Path, text: str) -> None:
    """``text`` written to ``path``, dated after the run started whatever the clock's grain."""
    path.write_text(text)
    later = time.time() + 5
    os.utime(path, (later, later))


def _moved(text: str) -> bool:
    return "as the release policy since this run" in text


def test_a_run_made_with_policy_names_the_project_s_own(tmp_path: Path) -> None:
    """release.yaml says min 0.95 (30 of 40 right FAILs it); the run used `--policy
    lenient.yaml` (min 0.3): ALLOW. `gate latest` then exited 0 on the lenient rules and
    said nothing; it now says the run was decided under --policy lenient.yaml and not the
    project's release.yaml, still exit 0; `gate --policy release.yaml` exits 1."""
    project = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40), release=STRICT)
    (project / "lenient.yaml").write_text(LOOSE)
    assert run_cli("run", "--policy", "lenient.yaml", cwd=project).code == 0
    gated = run_cli("gate", "latest", cwd=project)
    assert gated.code == 0, gated.text
    assert ("this run was decided under --policy lenient.yaml, not under the project's"
            " release policy (release.yaml), which holds other rules") in gated.out, gated.text
    run_id = json.loads(run_cli("runs", "--json", cwd=project).out)[0]["id"]
    assert f"`oloproof gate {run_id} --policy release.yaml`" in gated.out, gated.text
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    assert any("--policy lenient.yaml" in n for n in doc["gate_notes"]), doc["gate_notes"]
    assert run_cli("gate", "latest", "--policy", "release.yaml", cwd=project).code == 1
    # From another directory, the project's file is named from there.
    elsewhere = run_cli("gate", run_id, "--config", "p/oloproof.yaml", cwd=tmp_path)
    assert "project's release policy (p/release.yaml)" in elsewhere.out, elsewhere.text

    # A copy of the same rules under the project's name says nothing.
    _write_later(project / "release.yaml", LOOSE)
    same = run_cli("gate", "latest", cwd=project)
    assert same.code == 0 and "--policy lenient.yaml" not in same.out, same.text

    # The same project run as it is: the project's own policy, no note.
    _write_later(project / "release.yaml", STRICT)
    assert run_cli("run", cwd=project).code == 1
    own = run_cli("gate", "latest", cwd=project)
    assert own.code == 1 and "--policy" not in own.out, own.text


def test_gate_says_when_oloproof_yaml_now_names_another_policy(tmp_path: Path) -> None:
    """`policy:` pointed at strict.yaml after an ALLOW run under release.yaml (unchanged,
    so older than the run): `gate latest` and the report said `ALLOW` on the old rules
    without a word. They now name strict.yaml; a copy of the same rules says nothing."""
    project = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40), release=LOOSE)
    assert run_cli("run", cwd=project).code == 0
    config = project / "oloproof.yaml"
    text = config.read_text()
    assert "policy:" not in text
    with_policy = text.replace("dataset:", "policy: {}\ndataset:")

    (project / "copy.yaml").write_text(LOOSE)
    _write_later(config, with_policy.format("copy.yaml"))
    same = run_cli("gate", "latest", cwd=project)
    assert same.code == 0 and not _moved(same.out), same.text

    (project / "strict.yaml").write_text(STRICT)
    _write_later(config, with_policy.format("strict.yaml"))
    gated = run_cli("gate", "latest", cwd=project)
    assert gated.code == 0, gated.text
    assert ("oloproof.yaml names strict.yaml as the release policy since this run under"
            " release.yaml started (") in gated.out, gated.text
    assert "--policy strict.yaml` decides under it" in gated.out, gated.text
    assert any(_moved(n) for n in
               json.loads(run_cli("gate", "latest", "--json", cwd=project).out)["gate_notes"])
    report = run_cli("report", "latest", "-o", str(tmp_path / "r.html"), cwd=project)
    assert report.code == 0, report.text
    assert "as the release policy since this run" in (tmp_path / "r.html").read_text()

    # A name that is not there, or that does not load: said, no traceback.
    _write_later(config, with_policy.format("gone.yaml"))
    gone = run_cli("gate", "latest", cwd=project)
    assert gone.code == 0 and "gone.yaml does not load as a release policy" in gone.out, gone.text
    assert "Traceback" not in gone.err
    _write_later(config, with_policy.format("none"))
    declared_none = run_cli("gate", "latest", cwd=project)
    assert declared_none.code == 0 and "Traceback" not in declared_none.err


def test_a_store_from_before_the_policy_s_origin_was_kept_still_reads(tmp_path: Path) -> None:
    """A run stored without where its policy came from (an older version): `gate` reads it
    as before, and says nothing it cannot know."""
    project = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40), release=STRICT)
    (project / "lenient.yaml").write_text(LOOSE)
    assert run_cli("run", "--policy", "lenient.yaml", cwd=project).code == 0
    with sqlite3.connect(project / ".oloproof" / "store.sqlite") as conn:
        conn.execute("DROP TABLE run_sources")
    gated = run_cli("gate", "latest", cwd=project)
    assert gated.code == 0 and "--policy lenient.yaml" not in gated.out, gated.text
    assert "Traceback" not in gated.err


def test_a_policy_given_from_another_directory_is_found_when_edited(tmp_path: Path) -> None:
    """`oloproof run --config p/oloproof.yaml --policy p/lenient.yaml` from the parent
    directory, lenient.yaml then made strict: `gate latest` run in the project looked for
    `p/lenient.yaml` from there (and in p/p/), found nothing, and said nothing. The file
    the run read is found where it is, and named from where the gate runs."""
    project = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40), release=LOOSE)
    (project / "lenient.yaml").write_text(LOOSE)
    ran = run_cli("run", "--config", "p/oloproof.yaml", "--policy", "p/lenient.yaml",
                  cwd=tmp_path)
    assert ran.code == 0, ran.text
    _write_later(project / "lenient.yaml", STRICT)
    gated = run_cli("gate", "latest", cwd=project)
    assert gated.code == 0, gated.text
    assert "lenient.yaml has changed since this run started (" in gated.out, gated.text
    assert "--policy lenient.yaml` decides under the file as it is now" in gated.out
    assert "not under the project's release policy" not in gated.out  # the same rules


def test_a_run_without_rules_names_the_policy_the_project_has_since(tmp_path: Path) -> None:
    """A project that said `policy: none` ran: `Gate ALLOW by declaration`, exit 0. Then a
    release.yaml was written (min 0.95: 30 of 40 right FAILs it) and `policy: none` taken
    out of oloproof.yaml, and not run again: `gate latest` still allowed by declaration,
    without a word. It now names release.yaml; the exit code stays the run's."""
    project = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40))
    assert run_cli("run", cwd=project).code == 0
    config = project / "oloproof.yaml"
    assert "policy: none\n" in config.read_text()
    (project / "release.yaml").write_text(STRICT)
    _write_later(config, config.read_text().replace("policy: none\n", ""))
    gated = run_cli("gate", "latest", cwd=project)
    assert gated.code == 0, gated.text
    assert ("oloproof.yaml names release.yaml as the release policy since this run under"
            " policy: none started (") in gated.out, gated.text
    assert "--policy release.yaml` decides under it" in gated.out, gated.text
    assert run_cli("gate", "latest", "--policy", "release.yaml", cwd=project).code == 1
