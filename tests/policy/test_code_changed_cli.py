"""A stored run whose system (or custom evaluator) code was edited since: `gate` says so.

`gate latest` decides a run on the outputs it stored, and imports no user code; after an
edit to app.py that breaks every answer, and no run, it exited 0 without a word. The run
now stores the digest of every project file its code reached; `gate` (and the report)
hash those written since the run again, import none of them, and name what changed. The
exit code stays the stored run's."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system
from helpers import label

@system(name="s", version="1")
def answer(case_input):
    return {"label": label(case_input["n"])}
"""

HELPERS = """
import pathlib

pathlib.Path("imported.txt").touch()  # imported: it would leave this file where it ran

def label(n):
    return "ok" if n % 4 else "no"
"""

CHECKS = """
def long_enough(output):
    return len(output["label"]) >= 2
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: custom
  criterion: long_enough
  function: checks:long_enough
"""

LOOSE = "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.3}\n"


def _write_later(path: Path, text: str) -> None:
    """``text`` written to ``path``, dated after the run started whatever the clock's grain."""
    path.write_text(text)
    later = time.time() + 5
    os.utime(path, (later, later))


def _note(text: str) -> bool:
    return "The code the run called has changed since it started" in text


def _project(tmp_path: Path) -> Path:
    project = write_project(
        tmp_path / "p", app=APP, cases=labelled_cases(40), release=LOOSE,
        evaluators=EVALUATORS, extra_files={"helpers.py": HELPERS, "checks.py": CHECKS},
    )
    assert run_cli("run", cwd=project).code == 0
    (project / "imported.txt").unlink()
    return project


def test_gate_names_the_system_code_edited_since_the_run(tmp_path: Path) -> None:
    """30 of 40 right under min 0.3: ALLOW. app.py then made to answer "bad" everywhere (a
    run now: FAIL, exit 1): `gate latest` said `ALLOW exit code 0` and nothing else. It now
    names app.py, exit 0, and imports nothing; the same bytes written again say nothing."""
    project = _project(tmp_path)
    app = project / "app.py"
    _write_later(app, APP)  # a checkout of the same code
    same = run_cli("gate", "latest", cwd=project)
    assert same.code == 0 and not _note(same.out), same.text

    _write_later(app, APP.replace('label(case_input["n"])', '"bad"'))
    gated = run_cli("gate", "latest", cwd=project)
    assert gated.code == 0, gated.text
    assert "): app.py; these decisions are on what the code gave then, and `oloproof run`" \
        " decides on the code as it is now." in gated.out, gated.text
    assert "--no-cache" not in gated.out  # app.py is in the system's identity
    assert not (project / "imported.txt").exists()  # no user code was imported
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    assert any(_note(n) and "app.py" in n for n in doc["gate_notes"]), doc["gate_notes"]
    report = run_cli("report", "latest", "-o", str(tmp_path / "r.html"), cwd=project)
    assert report.code == 0 and "The code the run called has changed" in (
        tmp_path / "r.html").read_text()
    elsewhere = run_cli("gate", "latest", "--config", "p/oloproof.yaml", cwd=tmp_path)
    assert "): p/app.py; these decisions" in elsewhere.out, elsewhere.text

    # What the note says: a run of the code as it is now does not pass.
    assert run_cli("run", cwd=project).code == 1
    after = run_cli("gate", "latest", cwd=project)
    assert after.code == 1 and not _note(after.out), after.text


def test_a_helper_outside_the_identity_and_a_check_are_named(tmp_path: Path) -> None:
    """helpers.py (imported by app.py, outside its identity: an edit keeps the cache) and
    checks.py (a custom evaluator's module) edited since the run: both named, and the
    helper with the --no-cache a run needs to see it; a removed file is named too."""
    project = _project(tmp_path)
    _write_later(project / "helpers.py", HELPERS.replace('"no"', '"nope"'))
    _write_later(project / "checks.py", CHECKS.replace(">= 2", ">= 3"))
    gated = run_cli("gate", "latest", cwd=project)
    assert gated.code == 0 and _note(gated.out), gated.text
    assert "): checks.py, helpers.py; these decisions" in gated.out, gated.text
    assert "`oloproof run --no-cache` decides on the code as it is now (helpers.py is outside" \
        " the identity of the code that uses it" in gated.out, gated.text
    (project / "checks.py").unlink()
    gone = run_cli("gate", "latest", cwd=project)
    assert "checks.py (removed)" in gone.out and "Traceback" not in gone.err, gone.text


def test_a_store_from_before_the_code_was_kept_still_reads(tmp_path: Path) -> None:
    """A run stored without its code's digests (an older version, or a damaged row):
    `gate` reads it as before, with no note it cannot back."""
    project = _project(tmp_path)
    _write_later(project / "app.py", APP.replace('label(case_input["n"])', '"bad"'))
    store = project / ".oloproof" / "store.sqlite"
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE run_sources SET sources_json = '[1]'")
    damaged = run_cli("gate", "latest", cwd=project)
    assert damaged.code == 0 and not _note(damaged.out), damaged.text
    with sqlite3.connect(store) as conn:
        conn.execute("DROP TABLE run_sources")
    older = run_cli("gate", "latest", cwd=project)
    assert older.code == 0 and not _note(older.out) and "Traceback" not in older.err


def test_a_merged_run_names_code_edited_after_its_shards(tmp_path: Path) -> None:
    """Two shards, then app.py broken (written before the merge, so older than the merged
    run), then `merge`: the merged run keeps its shards' files and when the first of them
    started, so `gate latest` names app.py as for the shards themselves."""
    project = write_project(
        tmp_path / "p", app=APP, cases=labelled_cases(40), release=LOOSE,
        extra_files={"helpers.py": HELPERS},
    )
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=project).code == 5
    app = project / "app.py"
    app.write_text(APP.replace('label(case_input["n"])', '"bad"'))
    started = time.time() + 2
    os.utime(app, (started, started))
    while time.time() < started + 0.1:  # the merge starts after the edit, whatever the grain
        time.sleep(0.05)
    assert run_cli("merge", cwd=project).code == 0
    gated = run_cli("gate", "latest", cwd=project)
    assert gated.code == 0 and "): app.py; these decisions" in gated.out, gated.text


def test_a_checkout_at_another_place_finds_what_the_run_read(tmp_path: Path) -> None:
    """`code_paths: [../shared/rules.txt]`, a file beside the project. The store read in a
    checkout at another place (a CI artefact, the tree moved): its path was stored whole,
    so `gate` named it `(removed)` though nothing had changed. It is stored from the
    project directory (`../shared/rules.txt`), found beside the project wherever it is,
    and named when edited; and so is the policy file the run read."""
    (tmp_path / "a" / "shared").mkdir(parents=True)
    (tmp_path / "a" / "shared" / "rules.txt").write_text("ok\n")
    project = write_project(
        tmp_path / "a" / "p", app=APP, cases=labelled_cases(40), release=LOOSE,
        extra_files={"helpers.py": HELPERS}, system_extra="code_paths: [../shared/rules.txt]",
    )
    assert run_cli("run", cwd=project).code == 0
    (tmp_path / "a").rename(tmp_path / "b")
    moved = tmp_path / "b" / "p"
    gated = run_cli("gate", "latest", cwd=moved)
    assert gated.code == 0 and not _note(gated.out), gated.text
    _write_later(tmp_path / "b" / "shared" / "rules.txt", "no\n")
    edited = run_cli("gate", "latest", cwd=moved)
    assert "): ../shared/rules.txt; these decisions" in edited.out, edited.text
    _write_later(moved / "release.yaml", LOOSE.replace("0.3", "0.95"))
    stricter = run_cli("gate", "latest", cwd=moved)
    assert "release.yaml has changed since this run started (" in stricter.out, stricter.text
