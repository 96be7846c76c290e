"""A huge output, error or input does not make a huge page: the report file writes at most
10,000 characters of each value (the viewer's case page 1,000,000), and says where it cut
and how to see the rest. Read in Chromium.

Before, a report wrote every value whole, twice (on its case's page and in the row's search
text): 20 cases of 5 MB outputs made a 200 MB file (4 s and 812 MB to write), and a run of
1,000 such cases (the report's default number of cases) 10 GB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli, write_project
from tests.report._browser import Requests, chromium, needs_chromium
from tests.report._viewer import running_viewer

pytestmark = [pytest.mark.slow, needs_chromium]

BIG = 300_000
HUGE = 1_200_000

APP = f"""
from oloproof import system

@system(name="big", version="1")
def answer(case_input):
    n = case_input["n"]
    if n == 0:
        raise RuntimeError("E" * {BIG})
    if n == 1:
        return {{"label": "ok", "text": "x" * {HUGE}}}
    return {{"label": "no", "text": "y" * {BIG} + "TAIL"}}
"""

CASES = [{"id": f"c{i}", "input": {"n": i, "pad": "p" * (BIG if i == 2 else 1)},
          "expected": {"label": "ok"}} for i in range(4)]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_project(tmp_path_factory.mktemp("large-values") / "p", app=APP, cases=CASES)
    result = run_cli("run", cwd=root)
    assert result.code == 0, result.text
    return root


OUT_1 = {"label": "ok", "text": "x" * HUGE}
OUT_3 = {"label": "no", "text": "y" * BIG + "TAIL"}


def _pretty(value: Any) -> int:
    """The length of a value as a page writes it whole (indented JSON)."""
    return len(json.dumps(value, indent=2, sort_keys=True))


def _texts(page: Any, selector: str) -> list[str]:
    return [str(t) for t in page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")]


def test_the_report_writes_at_most_10000_characters_of_a_value_and_says_so(
    project: Path,
) -> None:
    assert run_cli("report", "latest", "-o", "r.html", cwd=project).code == 0
    report = project / "r.html"
    # 4 cases holding 2.1 million characters: the file holds a few tens of thousands.
    assert report.stat().st_size < 200_000, report.stat().st_size
    run_id = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)["run_id"]
    with chromium() as browser:
        page = browser.new_page()
        seen = Requests(page)
        page.goto(report.as_uri() + "#case-2")
        page.wait_for_load_state("load")
        pres = _texts(page, "#case-2 pre.value")
        assert [len(t) for t in pres] == [10_000, _pretty({"label": "ok"}), 10_000], [len(t) for t in pres]
        assert "TAIL" not in pres[2]
        notes = _texts(page, "#case-2 .cut")
        assert notes == [
            (f"This page shows the first 10,000 of the input's {_pretty(CASES[2]['input']):,} characters;"
            f" oloproof inspect {run_id} --case c2 --json prints it whole."),
            (f"This page shows the first 10,000 of the output's {_pretty(OUT_3):,} characters;"
            f" oloproof inspect {run_id} --case c2 --json prints it whole."),
        ], notes
        assert page.is_visible("#case-2 .cut")
        page.goto(report.as_uri() + "#case-0")
        error = _texts(page, "#case-0 pre.error-text")
        assert error == ["RuntimeError: " + "E" * (10_000 - len("RuntimeError: "))]
        assert "of the error's" in _texts(page, "#case-0 .cut")[0]
        # The search matches the first 2,000 characters of each value, no more.
        page.goto(report.as_uri())
        page.fill("#filter-search", "yyyy")
        assert page.inner_text("#filter-count") == "2 of 4 cases shown"
        page.fill("#filter-search", "tail")
        assert page.inner_text("#filter-count") == "0 of 4 cases shown"
        assert seen.outside("file://") == [] and seen.errors == []


def test_the_viewer_case_page_writes_at_most_a_million_characters(project: Path) -> None:
    run_id = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)["run_id"]
    with running_viewer(project) as viewer, chromium() as browser:
        page = browser.new_page()
        page.goto(viewer.url)
        page.goto(f"{viewer.base}runs/{run_id}/case?id=c1")
        out = _texts(page, "pre.output")
        assert [len(t) for t in out] == [1_000_000]
        assert _texts(page, ".cut") == [
            (f"This page shows the first 1,000,000 of the output's {_pretty(OUT_1):,} characters;"
            f" oloproof inspect {run_id} --case c1 --json prints it whole.")
        ]
        page.goto(f"{viewer.base}runs/{run_id}/case?id=c3")
        assert _texts(page, ".cut") == []  # 300,000 characters: shown whole
        assert len(_texts(page, "pre.output")[0]) == _pretty(OUT_3)
