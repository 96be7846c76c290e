"""The gate a page shows is the gate ``oloproof gate RUN`` exits on, with what the terminal
prints beside it: the report file and the viewer, read in Chromium.

Before, a run's page showed the gate and exit code stored in the run's row and nothing of
the lines ``gate`` prints with them: a release.yaml made stricter since the run, a rule
whose evidence is too incomplete to count (it blocks whatever ``warn_on`` says), FAIL
declared not to block. A run whose stored gate an earlier version got wrong showed that
gate in green while ``oloproof gate`` exited non-zero.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import RELEASE_FLOOR, labelled_cases, run_cli, write_project
from tests.report._browser import Requests, chromium, needs_chromium
from tests.report._viewer import running_viewer

pytestmark = [pytest.mark.slow, needs_chromium]

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    if case_input["n"] % 3 == 0 and case_input.get("down"):
        raise RuntimeError("down")
    return {"label": "ok" if case_input["n"] % 5 else "bad"}
"""


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as b:
        yield b


def _page_of(browser: Any, path: Path) -> tuple[Any, Requests]:
    page = browser.new_page()
    seen = Requests(page)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, seen


def _gate_line(page: Any) -> list[str]:
    return str(page.inner_text("#gate")).split()


def _notes(page: Any) -> list[str]:
    return [str(t) for t in page.eval_on_selector_all(
        ".gate-note", "els => els.map(e => e.textContent)")]


def test_a_policy_file_changed_since_the_run_is_said_on_the_page(
    tmp_path: Path, browser: Any,
) -> None:
    """32 of 40 pass, floor min 0.5: ALLOW. release.yaml made stricter (min 0.9) after the
    run: `gate` still exits 0 under the stored policy and says the file changed; the report
    and the viewer's run page now say it too (before: ALLOW, and not a word)."""
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40),
                         release=RELEASE_FLOOR)
    assert run_cli("run", cwd=root).code == 0
    policy = root / "release.yaml"
    policy.write_text(RELEASE_FLOOR.replace("0.5", "0.9"))
    later = time.time() + 5
    os.utime(policy, (later, later))
    gate = run_cli("gate", "latest", cwd=root)
    assert gate.code == 0 and "release.yaml has changed since this run started" in gate.out

    assert run_cli("report", "latest", "-o", "r.html", cwd=root).code == 0
    page, seen = _page_of(browser, root / "r.html")
    assert _gate_line(page)[1:5] == ["ALLOW", "exit", "code", "0"]
    notes = _notes(page)
    assert len(notes) == 1 and notes[0].startswith(
        "release.yaml has changed since this run started"), notes
    assert "--policy release.yaml` decides under the file as it is now" in notes[0]
    assert seen.outside("file://") == [] and seen.errors == []

    with running_viewer(root) as viewer:
        run_id = json.loads(run_cli("gate", "latest", "--json", cwd=root).out)["run_id"]
        live = browser.new_page()
        live.goto(viewer.url)
        live.goto(f"{viewer.base}runs/{run_id}")
        assert any("release.yaml has changed since this run started" in n
                   for n in _notes(live)), _notes(live)


def test_a_suite_file_changed_since_the_run_is_said_on_the_page(
    tmp_path: Path, browser: Any,
) -> None:
    """32 of 40 pass, floor min 0.5: ALLOW. Every expected label of data/cases.jsonl then
    changed (a run of it now would FAIL): `gate` exits 0 on the stored cases and says the
    file changed; the report and the viewer's run page say it beside the gate too (before:
    ALLOW, and not a word)."""
    cases = labelled_cases(40)
    root = write_project(tmp_path / "p", app=APP, cases=cases, release=RELEASE_FLOOR)
    assert run_cli("run", cwd=root).code == 0
    suite = root / "data" / "cases.jsonl"
    suite.write_text("".join(json.dumps({**c, "expected": {"label": "yes"}}) + "\n"
                             for c in cases))
    later = time.time() + 5
    os.utime(suite, (later, later))
    gate = run_cli("gate", "latest", cwd=root)
    assert gate.code == 0 and "data/cases.jsonl has changed since this run started" in gate.out

    assert run_cli("report", "latest", "-o", "r.html", cwd=root).code == 0
    page, seen = _page_of(browser, root / "r.html")
    assert _gate_line(page)[1:5] == ["ALLOW", "exit", "code", "0"]
    notes = _notes(page)
    assert len(notes) == 1 and notes[0].startswith(
        "data/cases.jsonl has changed since this run started"), notes
    assert "`oloproof run` decides on the file as it is now" in notes[0]
    assert seen.outside("file://") == [] and seen.errors == []

    with running_viewer(root) as viewer:
        run_id = json.loads(run_cli("gate", "latest", "--json", cwd=root).out)["run_id"]
        live = browser.new_page()
        live.goto(viewer.url)
        live.goto(f"{viewer.base}runs/{run_id}")
        assert any("data/cases.jsonl has changed since this run started" in n
                   for n in _notes(live)), _notes(live)

    # The file as it was, and oloproof.yaml pointed at another one: said the same way.
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
    os.utime(suite, (later - 3600, later - 3600))
    (root / "data" / "v2.jsonl").write_text("".join(
        json.dumps({**c, "expected": {"label": "yes"}}) + "\n" for c in cases))
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("data/cases.jsonl", "data/v2.jsonl"))
    os.utime(config, (later, later))
    moved = "oloproof.yaml names data/v2.jsonl as the suite since this run of data/cases.jsonl"
    assert run_cli("report", "latest", "-o", "r.html", cwd=root).code == 0
    page, seen = _page_of(browser, root / "r.html")
    assert [n for n in _notes(page) if n.startswith(moved)], _notes(page)
    with running_viewer(root) as viewer:
        live = browser.new_page()
        live.goto(viewer.url)
        live.goto(f"{viewer.base}runs/{run_id}")
        assert [n for n in _notes(live) if n.startswith(moved)], _notes(live)


def test_incomplete_evidence_and_fail_declared_not_blocking_are_said(
    tmp_path: Path, browser: Any,
) -> None:
    """14 of 40 cases fail to execute (35% missing, over max_missing 20%) under a policy
    with FAIL in warn_on: `gate` exits 5 and prints the incomplete-evidence note and the
    declaration; the page, which showed a bare "BLOCK exit code 5", says both."""
    release = ("version: 1\nblock_on: [INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]\nwarn_on: [FAIL]\n"
               "rules:\n  - {id: floor, metric: exact_label, min: 0.95}\n")
    cases = [{**c, "input": {**c["input"], "down": True}} for c in labelled_cases(40)]
    root = write_project(tmp_path / "p", app=APP, cases=cases, release=release)
    gate_run = run_cli("run", cwd=root)
    assert gate_run.code == 5, gate_run.text
    gate = run_cli("gate", "latest", cwd=root)
    assert gate.code == 5
    assert "Incomplete evidence: floor (35% missing)" in gate.out
    assert "FAIL does not block, by declaration: FAIL is in warn_on" in gate.out

    assert run_cli("report", "latest", "-o", "r.html", cwd=root).code == 0
    page, _ = _page_of(browser, root / "r.html")
    line = " ".join(_gate_line(page))
    assert line.startswith("GATE BLOCK exit code 5"), line
    assert line.endswith("FAIL does not block, by declaration: FAIL is in warn_on"), line
    notes = _notes(page)
    assert len(notes) == 1 and notes[0].startswith("Incomplete evidence: floor (35% missing)")


def test_the_page_shows_the_gate_the_cli_exits_on_not_a_stale_stored_one(
    tmp_path: Path, browser: Any,
) -> None:
    """A run whose row says ALLOW, exit 0 (as an earlier version that decided it wrongly
    would have stored) while its evidence blocks: 32 of 40 against min 0.9, CP lower bound
    64%, INSUFFICIENT_EVIDENCE. `oloproof gate` exits 3; the page showed a green ALLOW.
    Now it shows BLOCK, exit code 3, and what the run recorded."""
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40),
                         release=RELEASE_FLOOR.replace("0.5", "0.9"))
    assert run_cli("run", cwd=root).code == 3
    with sqlite3.connect(root / ".oloproof" / "store.sqlite") as conn:
        conn.execute("UPDATE runs SET gate = 'ALLOW', exit_code = 0")
    assert run_cli("gate", "latest", cwd=root).code == 3

    assert run_cli("report", "latest", "-o", "r.html", cwd=root).code == 0
    page, _ = _page_of(browser, root / "r.html")
    assert _gate_line(page)[1:5] == ["BLOCK", "exit", "code", "3"]
    assert "ALLOW" not in str(page.get_attribute(".runstate", "class"))
    recorded = str(page.inner_text("#gate-recorded"))
    assert recorded.startswith("The run recorded ALLOW (exit code 0) when it ended"), recorded
    assert recorded.endswith("it is BLOCK (exit code 3)."), recorded


def test_the_viewer_index_shows_the_gate_the_cli_exits_on(
    tmp_path: Path, browser: Any,
) -> None:
    """Two runs: one whose row says ALLOW, exit 0 (as an earlier version that decided it
    wrongly would have stored) while `oloproof gate` exits 3 on its evidence (32 of 40 against
    min 0.9), and one that really allows (floor 0.5, then the policy relaxed in its row is
    left alone). The index coloured the first green and said `ALLOW (exit 0)`; it now says
    what `gate` exits on, and what the run recorded beside it."""
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40),
                         release=RELEASE_FLOOR.replace("0.5", "0.9"))
    assert run_cli("run", cwd=root).code == 3
    stale = json.loads(run_cli("gate", "latest", "--json", cwd=root).out)["run_id"]
    with sqlite3.connect(root / ".oloproof" / "store.sqlite") as conn:
        conn.execute("UPDATE runs SET gate = 'ALLOW', exit_code = 0")
    assert run_cli("gate", stale, cwd=root).code == 3
    (root / "release.yaml").write_text(RELEASE_FLOOR)
    assert run_cli("run", cwd=root).code == 0
    good = json.loads(run_cli("gate", "latest", "--json", cwd=root).out)["run_id"]

    with running_viewer(root) as viewer:
        page = browser.new_page()
        page.goto(viewer.url)
        rows = {str(r[0]): r[1:] for r in page.eval_on_selector_all(
            "#runs-table tbody tr", """rows => rows.map(r => [
                r.cells[0].textContent.trim(), r.cells[5].textContent.trim(),
                r.querySelector('.runstate').className])""")}
    assert rows[stale][0] == "BLOCK (exit 3) recorded ALLOW (exit 0)", rows
    assert "chip-BLOCK" in rows[stale][1] and "chip-ALLOW" not in rows[stale][1], rows
    assert rows[good][0] == "ALLOW (exit 0)", rows
    assert "chip-ALLOW" in rows[good][1], rows
