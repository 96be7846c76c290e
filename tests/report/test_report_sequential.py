"""The report of a sequential run says what its decision read (issue 26): after how many
of the suite's cases, in the seeded order stored with the run (and its seed), that the
cases which finished after the decision are stored but were not read by it, and each
rule's method; in the HTML file and in a real browser."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli
from tests.report._browser import Requests, chromium, needs_chromium
from tests.report._viewer import running_viewer

pytestmark = pytest.mark.slow  # the sequential example, through the CLI


@pytest.fixture(scope="module")
def sequential_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    base = tmp_path_factory.mktemp("seq-report")
    assert run_cli("init", str(base / "ex"), "--example", "sequential", cwd=base).code == 0
    root = base / "ex"
    done = run_cli("run", cwd=root, timeout=300)
    assert done.code == 0, done.text
    gate = run_cli("gate", "latest", "--json", cwd=root)
    reading = json.loads(gate.out)["sequential"]
    made = run_cli("report", "latest", "-o", "report.html", cwd=root)
    assert made.code == 0, made.text
    return root / "report.html", reading


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def _expected(reading: dict[str, Any]) -> list[str]:
    read, beyond = reading["read"], reading["beyond"]
    lines = [(f"Decided after {read:,} of 2,000 cases, read one by one in the seeded order"
              " stored with the run (seed 0).")]
    if beyond == 1:
        lines.append("The case that finished after the decision (calls already in flight"
                     " when it was reached) is stored and listed below, but the decision did"
                     " not read it.")
    elif beyond:
        lines.append(f"The {beyond:,} cases that finished after the decision (calls already"
                     " in flight when it was reached) are stored and listed below, but the"
                     " decision did not read them.")
    else:
        lines.append("Every stored case was read by the decision.")
    return lines


def test_the_report_says_what_the_sequential_decision_read(
    sequential_report: tuple[Path, dict[str, Any]],
) -> None:
    path, reading = sequential_report
    assert reading["decided"] and reading["read"] < 2000
    html = path.read_text(encoding="utf-8")
    section = re.search(r'<dd id="sequential"[^>]*>(.*?)</dd>', html, re.DOTALL)
    assert section is not None
    said = _text(section.group(1))
    for line in _expected(reading):
        assert line in said, (line, said)
    assert f'data-read="{reading["read"]}"' in html
    assert f'data-beyond="{reading["beyond"]}"' in html
    # The decisions table names each rule's method in a column of its own.
    decisions = re.search(r'<section id="decisions">(.*?)</section>', html, re.DOTALL)
    assert decisions is not None
    assert "<th>Method</th>" in decisions.group(1)
    assert re.search(r'<td class="muted method">beta-binomial mixture e-process</td>',
                     decisions.group(1))
    # Each case stored beyond the decision is marked in the case table, and only those.
    assert html.count('class="muted not-read"') == reading["beyond"]


def test_a_fixed_run_report_has_no_sequential_note(tmp_path: Path) -> None:
    assert run_cli("init", str(tmp_path / "ex"), "--example", "support_bot",
                   cwd=tmp_path).code == 0
    root = tmp_path / "ex"
    run_cli("run", cwd=root, timeout=300)
    assert run_cli("report", "latest", "-o", "r.html", cwd=root).code == 0
    html = (root / "r.html").read_text(encoding="utf-8")
    assert 'id="sequential"' not in html and "<th>Method</th>" not in html.split(
        '<section id="metrics"')[0]


@needs_chromium
def test_the_sequential_note_in_the_browser(
    sequential_report: tuple[Path, dict[str, Any]],
) -> None:
    path, reading = sequential_report
    with chromium() as browser:
        page = browser.new_page()
        seen = Requests(page)
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        note = page.locator("#sequential")
        assert note.is_visible()
        shown = " ".join(note.inner_text().split())
        for line in _expected(reading):
            assert line in shown, (line, shown)
        method = page.locator("#decisions td.method").first
        assert method.is_visible() and method.inner_text() == "beta-binomial mixture e-process"
        assert seen.errors == []
        page.close()


@needs_chromium
def test_every_list_of_runs_says_how_many_cases_a_sequential_run_stored(
    sequential_report: tuple[Path, dict[str, Any]],
) -> None:
    """A sequential run decided after about 57 of the 2,000 cases and stored the few more in
    flight. `runs` said "Cases 2000", `runs --json` `"cases": 2000` and the viewer's list
    2000, while `inspect` and the run's page said "65 of 2000 stored". Every list now says
    the cases stored, of the suite's: the same number `inspect --json` reads."""
    root = sequential_report[0].parent
    stored = json.loads(run_cli("inspect", "latest", "--json", cwd=root).out)["run"]
    assert stored["cases_total"] == 2000 and stored["cases_stored"] < 200
    shown = f"{stored['cases_stored']} of 2000"
    listed = json.loads(run_cli("runs", "--json", cwd=root).out)[0]
    assert (listed["cases"], listed["cases_stored"]) == (2000, stored["cases_stored"])
    table = run_cli("runs", cwd=root, env={"COLUMNS": "200"})
    assert re.search(rf"│ {shown}\s+│", table.out), table.out

    with running_viewer(root) as viewer, chromium() as browser:
        page = browser.new_page()
        page.goto(viewer.url)
        cells = page.eval_on_selector_all(
            "#runs-table tbody td.cases", "els => els.map(e => e.textContent.trim())")
        assert cells == [shown], cells
