"""The report file in a real browser: filters, search, case pages; no request leaves it and
no script from a model's output runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli
from tests.report._browser import Requests, chromium, needs_chromium
from tests.report._hostile import IMG, SCRIPT, hostile_project

pytestmark = [pytest.mark.slow, needs_chromium]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = hostile_project(tmp_path_factory.mktemp("hostile-browser"))
    assert run_cli("run", cwd=root).code == 3
    result = run_cli("report", "latest", "-o", "report.html", cwd=root)
    assert result.code == 0, result.text
    return root / "report.html"


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as b:
        yield b


def _visible_ids(page: Any) -> list[str]:
    return [str(x) for x in page.eval_on_selector_all(
        "#case-table tr.case-row:not([hidden]) a.case-link", "els => els.map(e => e.textContent)"
    )]


def test_report_filters_searches_and_opens_a_case(report: Path, browser: Any) -> None:
    page = browser.new_page()
    seen = Requests(page)
    url = report.as_uri()
    page.goto(url)
    page.wait_for_load_state("load")
    assert page.inner_text("#gate").split()[1] == "BLOCK"
    assert page.inner_text("#filter-count") == "8 of 8 cases shown"

    page.select_option("#filter-outcome", "failed")
    assert _visible_ids(page) == ["q_script", "q_img", "q_close"]
    page.select_option("#filter-outcome", "missing")
    assert _visible_ids(page) == ["q_error"]
    page.select_option("#filter-criterion", "0")  # exact_label
    page.select_option("#filter-outcome", "passed")
    assert _visible_ids(page) == ["q_ok_0", "q_ok_1", "q_ok_2", '<b id="boom">case</b>']
    page.select_option("#filter-outcome", "")
    page.select_option("#filter-criterion", "")
    page.fill("#filter-search", "ONERROR")  # case-insensitive, in inputs and outputs
    assert _visible_ids(page) == ["q_img", "q_error", '<b id="boom">case</b>']
    assert page.inner_text("#filter-count") == "3 of 8 cases shown"

    page.click("text=q_img")
    assert page.url.endswith("#case-4")
    # The page turns on the hashchange event, which comes after the URL has changed (CI
    # once read the run page still shown there): waited for, up to Playwright's 30 s.
    page.wait_for_selector("#run-page", state="hidden")
    assert page.is_hidden("#run-page")
    case = page.locator("#case-4")
    assert case.is_visible()
    output = case.locator("pre.output").inner_text()
    assert IMG.replace('"', '\\"') in output  # the output, as JSON text
    assert "expected 'ok', got" in case.locator("td.reason").first.inner_text()
    page.go_back()
    page.wait_for_selector("#run-page", state="visible")
    assert page.is_visible("#run-page")

    page.goto(url + "#case-3")
    assert SCRIPT in page.locator("#case-3 pre.output").inner_text()
    page.goto(url + "#case-7")
    assert page.locator("#case-7 h2 code").inner_text() == '<b id="boom">case</b>'
    assert page.locator("#boom").count() == 0

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img").count() == 0
    assert seen.outside(url.split("#")[0]) == []
    assert seen.errors == []
    page.close()


def test_comparison_report_in_the_browser(report: Path, browser: Any) -> None:
    root = report.parent
    assert run_cli("run", "--no-cache", cwd=root).code == 3
    ids = [r["id"] for r in json.loads(run_cli("runs", "--json", cwd=root).out)]
    made = run_cli("compare", ids[0], ids[1], "--json", cwd=root)
    cmp_id = json.loads(made.out)["comparison_id"]
    assert run_cli("report", cmp_id, "-o", "cmp.html", cwd=root).code == 0
    page = browser.new_page()
    seen = Requests(page)
    page.goto((root / "cmp.html").as_uri())
    assert "Paired differences" in page.inner_text("#paired")
    assert page.locator("#paired svg.plot").count() == 1
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert seen.outside((root / "cmp.html").as_uri()) == []
    page.close()
