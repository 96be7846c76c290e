"""Regenerate the screenshots in docs/screenshots/ (``make screenshots``).

Copies the ``compare`` example into a temporary directory, runs its baseline and its
candidate, compares them, writes the HTML reports, and photographs them in Debian's
headless chromium (never a downloaded browser). Also photographs the viewer
(``oloproof view``) when its extra is installed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
OLOPROOF = [sys.executable, "-m", "oloproof.cli.main"]
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
]


def olo(*args: str, cwd: Path) -> str:
    proc = subprocess.run([*OLOPROOF, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"oloproof {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "compare"
        olo("init", str(project), "--example", "compare", cwd=Path(tmp))
        olo("run", "--config", "baseline.yaml", cwd=project)
        baseline = json.loads(olo("runs", "--json", cwd=project))[0]["id"]
        olo("run", cwd=project)
        cmp_id = json.loads(olo("compare", "latest", baseline, "--json", cwd=project))[
            "comparison_id"
        ]
        olo("report", baseline, "-o", "run.html", cwd=project)
        olo("report", cmp_id, "-o", "comparison.html", cwd=project)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            run_url = (project / "run.html").as_uri()
            page.goto(run_url)
            page.screenshot(path=str(OUT / "report-run.png"))
            page.select_option("#filter-outcome", "failed")
            page.locator("#cases").scroll_into_view_if_needed()
            page.screenshot(path=str(OUT / "report-cases-failed.png"))
            page.locator("tr.case-row:not([hidden]) a.case-link").first.click()
            page.screenshot(path=str(OUT / "report-case.png"))
            page.goto((project / "comparison.html").as_uri())
            page.screenshot(path=str(OUT / "report-comparison.png"), full_page=True)
            phone = browser.new_page(viewport={"width": 390, "height": 844},
                                     device_scale_factor=2)
            phone.goto(run_url + "#cases")
            phone.screenshot(path=str(OUT / "report-phone.png"))
            phone.close()
            _viewer(page, project)
            browser.close()
    for png in sorted(OUT.glob("*.png")):
        print(f"wrote {png.relative_to(ROOT)}")
    return 0


def _viewer(page: object, project: Path) -> None:
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        print("viewer screenshot skipped: pip install 'oloproof[view]'")
        return
    proc = subprocess.Popen(
        [*OLOPROOF, "view", "--no-open", "--port", "0"], cwd=project, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        url = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not url:
            # The address with its token: the first visit trades it for a cookie.
            match = re.search(r"http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9._~-]+",
                              proc.stdout.readline())
            url = match.group() if match else ""
        if not url:
            raise SystemExit("oloproof view did not print its address")
        page.goto(url)  # type: ignore[attr-defined]
        page.screenshot(path=str(OUT / "viewer-runs.png"))  # type: ignore[attr-defined]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    raise SystemExit(main())
