"""Every page kind in Chromium at a phone's width (390 px) and a laptop's (1280 px), on a
project that makes wide pages (issue 30, item 5): the document is never wider than the
window (tables scroll in their own box). Case ids a browser would rewrite (``.``, ``..``,
``/``, ``%``, ``?``, ``#``, any script) get links that open their own case (issue 29). The
case table shows why a case did not pass, expandable (issue 30, item 7)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from tests.conftest import run_cli
from tests.report._browser import Requests, chromium, needs_chromium
from tests.report._viewer import Viewer, start_viewer, stop
from tests.report._wide import LONG_ID, ODD_IDS, wide_project

pytestmark = [pytest.mark.slow, needs_chromium]

WIDTHS = (390, 1280)

CANDIDATE_APP = '''
from oloproof import system

@system(name="wide-system-with-a-rather-long-name", version="v2")
def answer(case_input):
    n = case_input["n"]
    return {"label": "ok" if n % 2 else "no", "answer": "word " * 40 + "x" * 300,
            "blob": "y" * 200, "days": n % 5}
'''

COMPARE = """
version: 1
rules:
  - id: label-no-regression-with-a-long-identifier
    kind: non_inferiority
    metric: exact_label_with_a_long_criterion_name
    margin: 0.10
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = wide_project(tmp_path_factory.mktemp("wide") / "p")
    (root / "compare.yaml").write_text(COMPARE)
    assert run_cli("run", cwd=root).code == 1
    baseline = json.loads(run_cli("runs", "--json", cwd=root).out)[0]["id"]
    (root / "app.py").write_text(CANDIDATE_APP)
    assert run_cli("run", cwd=root).code in (0, 1, 3)
    candidate = json.loads(run_cli("runs", "--json", cwd=root).out)[0]["id"]
    made = run_cli("compare", candidate, baseline, "--json", cwd=root)
    cmp_id = json.loads(made.out)["comparison_id"]
    assert run_cli("report", baseline, "-o", "run.html", cwd=root).code == 0
    assert run_cli("report", cmp_id, "-o", "cmp.html", cwd=root).code == 0
    viewer = start_viewer(root)
    try:
        yield {"root": root, "baseline": baseline, "candidate": candidate, "cmp": cmp_id,
               "viewer": viewer}
    finally:
        stop(viewer)


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as b:
        yield b


def _fits(page: Any) -> tuple[int, int]:
    width, inner = page.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth]")
    return int(width), int(inner)


def _pages(site: dict[str, Any]) -> list[tuple[str, str]]:
    root, viewer = site["root"], site["viewer"]
    run_html, cmp_html = (root / "run.html").as_uri(), (root / "cmp.html").as_uri()
    return [
        ("run report", run_html),
        ("run report, a case", run_html + "#case-21"),
        ("comparison report", cmp_html),
        ("viewer index", viewer.base),
        ("viewer run page", f"{viewer.base}runs/{site['baseline']}"),
        ("viewer case page", f"{viewer.base}runs/{site['baseline']}/case?id={quote(LONG_ID)}"),
        ("viewer comparison", f"{viewer.base}comparisons/{site['cmp']}"),
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_the_window(site: dict[str, Any], browser: Any, width: int) -> None:
    viewer: Viewer = site["viewer"]
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    seen = Requests(page)
    page.goto(viewer.url)  # the token, for the viewer's pages
    for name, url in _pages(site):
        page.goto(url)
        page.wait_for_load_state("load")
        assert _fits(page)[0] <= _fits(page)[1], (name, width, _fits(page))
        # Opened, every row's reasons still wrap inside the page.
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        assert _fits(page)[0] <= _fits(page)[1], (name, width, "details open", _fits(page))
        # And a table that does not fit scrolls in its own box, not the page.
        for box in page.locator(".scroll").all():
            assert box.evaluate("e => getComputedStyle(e).overflowX") == "auto"
    assert seen.errors == []
    context.close()


def test_odd_case_ids_open_their_own_case(site: dict[str, Any], browser: Any) -> None:
    viewer: Viewer = site["viewer"]
    page = browser.new_page()
    page.goto(viewer.url)
    page.goto(f"{viewer.base}runs/{site['baseline']}")
    hrefs = page.eval_on_selector_all("#case-table a.case-link", "els => els.map(e => e.href)")
    texts = page.eval_on_selector_all("#case-table a.case-link",
                                      "els => els.map(e => e.textContent)")
    assert set(ODD_IDS) <= set(texts)
    for text in texts:
        page.goto(f"{viewer.base}runs/{site['baseline']}")
        link = page.locator("#case-table a.case-link").nth(texts.index(text))
        with page.expect_navigation():
            link.click()
        assert page.locator("#case-page h2 code.case-id").inner_text() == text, (
            text, page.url)
    assert len(hrefs) == len(set(hrefs))
    # The report file's links are by position: each opens its own case too.
    page.goto((site["root"] / "run.html").as_uri())
    for n, text in enumerate(texts):
        page.locator("#case-table a.case-link").nth(n).click()
        assert page.locator(f"#case-{n} h2 code.case-id").inner_text() == text
        # The page shows it on `hashchange`, which the browser fires after the click
        # returns: wait for it (is_visible() does not wait, and lost that race).
        page.locator(f"#case-{n}").wait_for(state="visible", timeout=10_000)
        page.go_back()
    # From the comparison's discordant cases to the candidate's case.
    page.goto(f"{viewer.base}comparisons/{site['cmp']}")
    links = page.locator("table.discordant a")
    assert links.count() > 0
    first = links.first.inner_text()
    with page.expect_navigation():
        links.first.click()
    assert page.locator("#case-page h2 code.case-id").inner_text() == first
    page.close()


def test_the_case_table_says_why_and_opens_for_more(site: dict[str, Any], browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((site["root"] / "run.html").as_uri())
    row = page.locator("tr.case-row[data-case-index='1']")  # id "..", fails `polite`
    summary = row.locator("td.why-cell summary")
    assert summary.inner_text().startswith("polite: The answer does not thank the customer")
    assert summary.inner_text().endswith("…")
    full = row.locator("td.why-cell dl.why-list")
    assert not full.is_visible()
    summary.click()
    assert full.is_visible()
    text = full.inner_text()
    assert "before deciding; averyveryverylong" in text  # the whole reason
    assert '"label": "ok"' in text or '"label":"ok"' in text  # and the output
    # Reasons wrap at word boundaries (a word longer than the cell still breaks).
    style = row.locator("td.why-cell").evaluate(
        "e => [getComputedStyle(e).overflowWrap, getComputedStyle(e).wordBreak]")
    assert style == ["break-word", "normal"]
    # A passed case has nothing to say; its short output is in the row.
    passed = page.locator("tr.case-row[data-case-index='2']")
    assert passed.locator("td.why-cell").inner_text().strip() == ""
    assert passed.locator("td.out").inner_text().startswith('{"label":"ok"')
    page.close()
