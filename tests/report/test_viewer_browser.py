"""``oloproof view`` in a real browser: the token exchanged for a cookie, runs list, run page
(its filters and pages served by the viewer), case page, comparison, and a run in progress
followed live; nothing leaves 127.0.0.1 and no script from model output runs."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import OLOPROOF, run_cli, write_project
from tests.report._browser import Requests, chromium, needs_chromium
from tests.report._hostile import IMG, hostile_project
from tests.report._viewer import Viewer, start_viewer, stop

from oloproof.cli.view import _opener

pytestmark = [pytest.mark.slow, needs_chromium]

# A run the test paces, so that it holds on a loaded machine: cases 4 to 9 wait for the file
# named by OLOPROOF_TEST_GATE + ".a", cases 10 and on for ".b". Case c05 fails.
SLOW_APP = """
import os
import time
from oloproof import system

@system(name="slow", version="1")
def answer(case_input):
    n = case_input["n"]
    gate = os.environ["OLOPROOF_TEST_GATE"] + (".a" if n < 10 else ".b")
    while n >= 4 and not os.path.exists(gate):
        time.sleep(0.02)
    time.sleep(0.05)
    if n == 5:
        raise RuntimeError("boom")
    return {"label": "yes" if n % 4 else "no"}
"""


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def hostile_viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Viewer]]:
    root = hostile_project(tmp_path_factory.mktemp("hostile-view"))
    assert run_cli("run", cwd=root).code == 3
    assert run_cli("run", "--no-cache", cwd=root).code == 3
    ids = [r["id"] for r in json.loads(run_cli("runs", "--json", cwd=root).out)]
    assert run_cli("compare", ids[0], ids[1], cwd=root).code == 0
    viewer = start_viewer(root)
    try:
        yield root, viewer
    finally:
        stop(viewer)


def test_viewer_pages(hostile_viewer: tuple[Path, Viewer], browser: Any) -> None:
    _, viewer = hostile_viewer
    page = browser.new_page()
    seen = Requests(page)
    page.goto(viewer.url)
    # The token was exchanged for a cookie, and the address no longer shows it.
    assert page.url == viewer.base
    cookie = next(c for c in page.context.cookies() if c["name"] == viewer.cookie)
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert page.locator("#runs-table tbody tr").count() == 2
    page.locator("#runs-table a").first.click()
    page.wait_for_selector("#run-page")
    assert "/runs/run_" in page.url
    # The viewer filters on its side: choosing an outcome asks for its first page.
    with page.expect_navigation():
        page.select_option("#filter-outcome", "failed")
    assert "outcome=failed" in page.url
    assert page.inner_text("#filter-count") == "1–3 of 3 matching cases"
    assert [str(x) for x in page.eval_on_selector_all(
        "#case-table a.case-link", "els => els.map(e => e.textContent)")] == [
        "q_script", "q_img", "q_close"]
    page.select_option("#filter-outcome", "")
    page.wait_for_load_state()
    page.fill("#filter-search", "boom")
    with page.expect_navigation():
        page.click("#case-filters button")
    assert page.inner_text("#filter-count") == "1–1 of 1 matching cases"
    page.click("a.case-link")
    page.wait_for_selector("#case-page")
    assert page.locator("#case-page h2 code").inner_text() == '<b id="boom">case</b>'
    assert IMG.replace('"', '\\"') in page.locator("#case-page pre.value").first.inner_text()
    page.goto(viewer.base)
    page.locator("#comparisons a").first.click()
    page.wait_for_selector("#comparison-page")
    assert "Paired differences" in page.inner_text("#paired")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img").count() == 0
    assert seen.outside(viewer.base) == []
    assert seen.errors == []
    page.close()


def test_the_file_oloproof_view_opens_lets_the_browser_in(
    hostile_viewer: tuple[Path, Viewer], browser: Any, tmp_path: Path,
) -> None:
    """The browser is sent to the viewer through a private file (the token never on a
    command line): from a file:// page, a SameSite=Strict cookie set on a redirect would
    be held back, so the viewer's own page moves on to the clean address."""
    _, viewer = hostile_viewer
    opener = _opener(viewer.url, tmp_path)
    assert opener.stat().st_mode & 0o777 == 0o600
    context = browser.new_context()
    page = context.new_page()
    page.goto(opener.as_uri())
    page.wait_for_url(viewer.base, timeout=15_000)
    page.wait_for_selector("#runs-table")
    assert page.locator("#runs-table tbody tr").count() == 2
    context.close()


def test_viewer_is_read_only_and_local(hostile_viewer: tuple[Path, Viewer]) -> None:
    root, viewer = hostile_viewer
    store = root / ".oloproof" / "store.sqlite"
    before = store.stat().st_mtime_ns
    auth = viewer.auth()
    assert httpx.get(viewer.base + "runs/run_NOPE", headers=auth).status_code == 404
    assert httpx.get(viewer.base, headers={**auth, "Host": "attacker.example"}).status_code == 400
    assert httpx.post(viewer.base, headers=auth).status_code == 405
    assert store.stat().st_mtime_ns == before


def test_a_run_in_progress_updates_live(tmp_path: Path, browser: Any) -> None:
    root = write_project(
        tmp_path / "live", app=SLOW_APP, concurrency=(1, 1),
        cases=[{"id": f"c{n:02d}", "input": {"n": n}, "expected": {"label": "yes"}} for n in range(16)],
    )
    gate = tmp_path / "gate"
    env = {"OLOPROOF_TEST_GATE": str(gate)}
    Path(f"{gate}.a").touch()
    Path(f"{gate}.b").touch()
    assert run_cli("run", cwd=root, env=env).code == 0  # the store exists before the viewer
    Path(f"{gate}.a").unlink()
    Path(f"{gate}.b").unlink()
    viewer = start_viewer(root)
    run = subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=root, env={**os.environ, **env},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    page = browser.new_page()
    seen = Requests(page)
    try:
        deadline = time.monotonic() + 60
        while True:
            runs = json.loads(run_cli("runs", "--json", cwd=root).out)
            if runs[0]["status"] == "RUNNING":
                break
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.1)
        run_id = runs[0]["id"]
        page.goto(viewer.url)
        page.goto(f"{viewer.base}runs/{run_id}")
        assert page.locator("#live").is_visible()
        page.wait_for_function(
            "() => document.getElementById('live-status').textContent === 'following'",
            timeout=30_000,
        )
        assert "Live live" not in page.inner_text("#live h2")
        assert page.inner_text("#live h2").startswith("In progress")
        first = page.wait_for_selector("#live-metrics tr.live-metric", timeout=30_000)
        assert first is not None
        assert "as of page load" in page.inner_text("#metrics h2")
        assert "as of page load" in page.inner_text("#cases h2")
        # The live page fits a phone's window and a laptop's (issue 30, item 5).
        for width in (390, 1280):
            page.set_viewport_size({"width": width, "height": 844})
            fits = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            assert fits[0] <= fits[1], (width, fits)
        # Cases 4 to 9 may go on now; the run waits again before case 10.
        Path(f"{gate}.a").touch()
        page.wait_for_function(
            "() => document.getElementById('live-progress').textContent.startsWith('10/16 cases')",
            timeout=60_000,
        )
        # Everything that moves moves together: the header counts what the panel counts
        # (c05's error included), and the frozen tables say since when they are frozen.
        page.wait_for_function(
            "() => document.getElementById('completeness').textContent.includes('10 of 16')",
            timeout=30_000,
        )
        completeness = " ".join(page.inner_text("#completeness").split())
        assert completeness == "10 of 16 cases stored · 1 execution error · PARTIAL", completeness
        assert "more finished since" in page.inner_text("#cases-since")
        # When the run ends, the page reloads as the decided run.
        Path(f"{gate}.b").touch()
        page.wait_for_selector(".runstate-DECIDED", timeout=60_000)
        assert page.locator("#live").count() == 0
        assert "as of page load" not in page.inner_text("#metrics h2")
        assert run.wait(timeout=60) == 0
        assert seen.outside(viewer.base) == []
        assert seen.errors == []
    finally:
        page.close()
        for name in (".a", ".b"):
            Path(f"{gate}{name}").touch()  # a run left waiting goes on to its end
        if run.poll() is None:
            run.terminate()
            run.wait(timeout=30)
        stop(viewer)
