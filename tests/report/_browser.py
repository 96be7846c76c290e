"""Headless Chromium for the browser tests: Debian's package, driven by Playwright.

Never a downloaded browser: ``/usr/bin/chromium`` (``.ci/run`` installs it when it is
missing). Without it the browser tests skip, saying why.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium;"
    " .ci/run installs it)",
)


@contextmanager
def chromium() -> Iterator[Any]:
    """A Playwright browser on Debian's chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Requests:
    """Every request a page makes, and every script error it raises."""

    def __init__(self, page: Any) -> None:
        self.urls: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda r: self.urls.append(r.url))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def outside(self, *allowed_prefixes: str) -> list[str]:
        return [u for u in self.urls if not u.startswith(allowed_prefixes)]
