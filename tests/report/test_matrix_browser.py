"""The matrix page, in the report file and in the viewer, in headless Chromium at a phone's
width (390 px) and a laptop's (1280 px): the `prompts` example's 3 × 2 matrix run through
the CLI against the fake provider over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tests.conftest import run_cli
from tests.fakes.provider import FakeServer
from tests.report._browser import Requests, chromium, needs_chromium
from tests.report._viewer import start_viewer, stop

pytestmark = [pytest.mark.slow, needs_chromium]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("matrix")
    root = base / "prompts"
    with FakeServer() as provider:
        assert run_cli("init", str(root), "--example", "prompts", cwd=base).code == 0
        config = root / "oloproof.yaml"
        config.write_text(config.read_text().replace(
            "http://127.0.0.1:8787/v1", provider.openai_base_url))
        done = run_cli("run", "--matrix", cwd=root, env={"FAKE_PROVIDER_KEY": "k-fake"})
    assert done.code == 0, done.text
    matrix_id = next(w for w in done.out.split() if w.startswith("mx_"))
    assert run_cli("report", matrix_id, "-o", "matrix.html", cwd=root).code == 0
    doc = json.loads(run_cli("inspect", matrix_id, "--json", cwd=root).out)
    viewer = start_viewer(root)
    try:
        yield {"root": root, "mx": matrix_id, "doc": doc, "viewer": viewer}
    finally:
        stop(viewer)


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as b:
        yield b


def _check_page(page: Any, doc: dict[str, Any]) -> None:
    rows = page.locator("#variants-table tbody tr")
    assert rows.count() == 6
    assert "terse/fake-small" in rows.first.inner_text()
    assert "(baseline)" in rows.first.inner_text()
    verdicts = page.locator("#comparisons-table tr.comparison").evaluate_all(
        "rows => rows.map(r => r.dataset.verdict)")
    assert verdicts == [c["verdict"] for c in doc["comparisons"]]
    assert "better" in verdicts
    assert "Holm" in page.locator("#matrix-page").inner_text()


@pytest.mark.parametrize("width", (390, 1280))
def test_the_matrix_page_fits_and_says_what_the_matrix_decided(
    site: dict[str, Any], browser: Any, width: int
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    seen = Requests(page)
    report = (site["root"] / "matrix.html").as_uri()
    page.goto(report)
    _check_page(page, site["doc"])
    assert seen.outside("file://") == []  # the report file makes no request
    viewer = site["viewer"]
    page.goto(viewer.url)  # the token
    link = page.locator(f"#matrices a[href='/matrices/{site['mx']}']")
    assert link.count() == 1
    with page.expect_navigation():
        link.click()
    _check_page(page, site["doc"])
    for url in (report, f"{viewer.base}matrices/{site['mx']}"):
        page.goto(url)
        width_seen, inner = page.evaluate(
            "() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width_seen <= inner, (url, width, width_seen, inner)
        for box in page.locator(".scroll").all():
            assert box.evaluate("e => getComputedStyle(e).overflowX") == "auto"
    # From the matrix to a variant's own run.
    page.goto(f"{viewer.base}matrices/{site['mx']}")
    first_run = site["doc"]["variants"][0]["run_id"]
    with page.expect_navigation():
        page.locator(f"#variants-table a[href='/runs/{first_run}']").click()
    assert first_run in page.locator("h1").inner_text()
    assert seen.errors == []
    context.close()


def test_a_sequential_matrix_page_says_when_each_variant_was_decided(
    tmp_path: Any, browser: Any
) -> None:
    """``run --matrix --sequential``: each variant's row says after how many of the suite's
    cases its decision was made, and the page still fits a phone's width."""
    root = tmp_path / "prompts"
    with FakeServer() as provider:
        assert run_cli("init", str(root), "--example", "prompts", cwd=tmp_path).code == 0
        config = root / "oloproof.yaml"
        config.write_text(config.read_text().replace(
            "http://127.0.0.1:8787/v1", provider.openai_base_url))
        done = run_cli("run", "--matrix", "--sequential", cwd=root,
                       env={"FAKE_PROVIDER_KEY": "k-fake"})
    assert done.code in (0, 3), done.text
    matrix_id = next(w for w in done.out.split() if w.startswith("mx_"))
    assert run_cli("report", matrix_id, "-o", "matrix.html", cwd=root).code == 0
    doc = json.loads(run_cli("inspect", matrix_id, "--json", cwd=root).out)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto((root / "matrix.html").as_uri())
    rows = page.locator("#variants-table tbody tr")
    assert rows.count() == 6
    for i, v in enumerate(doc["variants"]):
        reading = v["sequential"]
        said = (f"decided after {reading['decided_after']} of 80 cases" if reading["decided"]
                else f"undecided after {reading['read']} of 80 cases")
        assert said in rows.nth(i).locator(".sequential").inner_text(), (i, reading)
    width_seen, inner = page.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width_seen <= inner
    context.close()
