"""``oloproof view`` in a real browser: runs list, run page, case page, comparison, and a run
in progress followed live; nothing leaves 127.0.0.1 and no script from model output runs."""

from __future__ import annotations

import json
import re
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

pytestmark = [pytest.mark.slow, needs_chromium]

SLOW_APP = """
import time
from oloproof import system

@system(name="slow", version="1")
def answer(case_input):
    time.sleep(0.35)
    return {"label": "yes" if case_input["n"] % 4 else "no"}
"""


def _start_viewer(root: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [*OLOPROOF, "view", "--no-open"], cwd=root, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, match.group()


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def hostile_viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = hostile_project(tmp_path_factory.mktemp("hostile-view"))
    assert run_cli("run", cwd=root).code == 3
    assert run_cli("run", "--no-cache", cwd=root).code == 3
    ids = [r["id"] for r in json.loads(run_cli("runs", "--json", cwd=root).out)]
    assert run_cli("compare", ids[0], ids[1], cwd=root).code == 0
    proc, url = _start_viewer(root)
    try:
        yield root, url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_viewer_pages(hostile_viewer: tuple[Path, str], browser: Any) -> None:
    _, url = hostile_viewer
    page = browser.new_page()
    seen = Requests(page)
    page.goto(url)
    assert page.locator("#runs-table tbody tr").count() == 2
    page.locator("#runs-table a").first.click()
    page.wait_for_selector("#run-page")
    assert "/runs/run_" in page.url
    page.select_option("#filter-outcome", "failed")
    assert page.inner_text("#filter-count") == "3 of 8 cases shown"
    page.fill("#filter-search", "boom")
    page.select_option("#filter-outcome", "")
    page.click("a.case-link:visible")
    page.wait_for_selector("#case-page")
    assert page.locator("#case-page h2 code").inner_text() == '<b id="boom">case</b>'
    assert IMG.replace('"', '\\"') in page.locator("#case-page pre.value").first.inner_text()
    page.goto(url)
    page.locator("#comparisons a").first.click()
    page.wait_for_selector("#comparison-page")
    assert "Paired differences" in page.inner_text("#paired")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img").count() == 0
    assert seen.outside(url) == []
    assert seen.errors == []
    page.close()


def test_viewer_is_read_only_and_local(hostile_viewer: tuple[Path, str]) -> None:
    root, url = hostile_viewer
    store = root / ".oloproof" / "store.sqlite"
    before = store.stat().st_mtime_ns
    assert httpx.get(url + "runs/run_NOPE").status_code == 404
    assert httpx.get(url, headers={"Host": "attacker.example"}).status_code == 400
    assert httpx.post(url).status_code == 405
    assert store.stat().st_mtime_ns == before


def test_a_run_in_progress_updates_live(tmp_path: Path, browser: Any) -> None:
    root = write_project(
        tmp_path / "live", app=SLOW_APP, concurrency=(1, 1),
        cases=[{"id": f"c{n:02d}", "input": {"n": n}, "expected": {"label": "yes"}} for n in range(16)],
    )
    assert run_cli("run", cwd=root).code == 0  # the store exists before the viewer opens
    proc, url = _start_viewer(root)
    run = subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=root,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    page = browser.new_page()
    seen = Requests(page)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            runs = json.loads(run_cli("runs", "--json", cwd=root).out)
            if runs[0]["status"] == "RUNNING":
                break
            time.sleep(0.1)
        run_id = runs[0]["id"]
        page.goto(f"{url}runs/{run_id}")
        assert page.locator("#live").is_visible()
        page.wait_for_function(
            "document.getElementById('live-status').textContent === 'live'", timeout=10_000
        )
        first = page.wait_for_selector("#live-metrics tr.live-metric", timeout=10_000)
        assert first is not None
        progress = page.inner_text("#live-progress")
        page.wait_for_function(
            "p => document.getElementById('live-progress').textContent !== p", arg=progress,
            timeout=10_000,
        )
        assert re.match(r"\d+/16 cases", page.inner_text("#live-progress"))
        # When the run ends, the page reloads as the decided run.
        page.wait_for_selector(".runstate-DECIDED", timeout=30_000)
        assert page.locator("#live").count() == 0
        assert run.wait(timeout=30) == 0
        assert seen.outside(url) == []
        assert seen.errors == []
    finally:
        page.close()
        if run.poll() is None:
            run.terminate()
            run.wait(timeout=10)
        proc.terminate()
        proc.wait(timeout=10)
