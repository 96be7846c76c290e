"""Small things the report and the viewer showed wrong (issue 30, item 10), in process on a
real store: the comparison's policy as a temporary absolute path, a case's verdicts as
``True``/``False``, a blocked SUBSET run with a green chip."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from tests.conftest import write_project

from oloproof.analysis.report import case_page_document
from oloproof.cli.main import main
from oloproof.render.html import TEMPLATES, render_case_page, shown_path
from oloproof.store.db import open_store_readonly, store_path

APP = """
from oloproof import system

@system(name="fixes", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 5 else "no"}
"""

RELEASE = """
version: 1
rules:
  - id: label-floor
    metric: exact_label
    min: 0.5
"""

COMPARE = """
version: 1
rules:
  - id: no-regression
    kind: non_inferiority
    metric: exact_label
    margin: 0.2
"""


class _Chips(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.chips: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = dict(attrs).get("class") or ""
        if "runstate" in classes.split():
            self.chips.append(classes)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_project(
        tmp_path_factory.mktemp("fixes") / "p", app=APP, release=RELEASE,
        cases=[{"id": f"c{n}", "input": {"n": n}, "expected": {"label": "ok"}} for n in range(40)],
        extra_files={"compare.yaml": COMPARE},
    )
    config = str(root / "oloproof.yaml")
    assert main(["run", "--config", config]) == 0
    return root


def _text(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def test_the_comparison_shows_its_policy_inside_the_project(
    project: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    config = str(project / "oloproof.yaml")
    assert main(["run", "--no-cache", "--config", config]) == 0
    first = re.search(r"run_[0-9A-Z]{26}", capsys.readouterr().out)
    assert first is not None
    assert main(["run", "--no-cache", "--config", config]) == 0
    capsys.readouterr()
    assert main(["compare", "latest", first.group(), "--config", config]) in (0, 3)
    cmp_id = re.search(r"cmp_[0-9A-Z]{26}", capsys.readouterr().out)
    assert cmp_id is not None
    out = project / "cmp.html"
    assert main(["report", cmp_id.group(), "--config", config, "-o", str(out)]) == 0
    html = _text(out)
    assert "<dt>Policy</dt><dd>compare.yaml</dd>" in html
    assert str(project) not in html


def test_shown_path() -> None:
    root = Path("/tmp/project")
    assert shown_path("/tmp/project/policies/strict.yaml", root) == "policies/strict.yaml"
    assert shown_path("/elsewhere/tmp123/compare.yaml", root) == "compare.yaml"
    assert shown_path("release.yaml", root) == "release.yaml"
    assert shown_path(None, root) == ""


def test_a_case_shows_verdicts_as_words(project: Path) -> None:
    conn = open_store_readonly(store_path(project))
    try:
        failed = case_page_document(conn, "latest", "c0")
        passed = case_page_document(conn, "latest", "c1")
    finally:
        conn.close()
    assert failed is not None and passed is not None
    for doc, word in ((failed, "failed"), (passed, "passed")):
        html = render_case_page(doc)
        row = re.search(r"<tbody>\s*<tr><td>exact_label</td>(.*?)</tr>", html, re.DOTALL)
        assert row is not None
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.DOTALL)
        assert cells[2] == word, cells  # the Verdict column
        assert "True" not in html and "False" not in html


def test_a_blocked_subset_run_never_has_a_green_chip(
    project: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    config = str(project / "oloproof.yaml")
    # A subset never allows a release: DECIDED/SUBSET, gate BLOCK (exit 5).
    assert main(["run", "--limit", "4", "--config", config]) == 5
    capsys.readouterr()
    out = project / "subset.html"
    assert main(["report", "latest", "--config", config, "-o", str(out)]) == 0
    parser = _Chips()
    parser.feed(out.read_text(encoding="utf-8"))
    (chip,) = parser.chips
    assert "chip-BLOCK" in chip.split(), chip
    css = (TEMPLATES / "style.css").read_text()
    green = re.search(r"([^}]*)\{ background: #e3f4e8", css)
    red = re.search(r"([^}]*)\{ background: #fbe4e5", css)
    assert green is not None and red is not None
    assert ".chip-BLOCK" in red.group(1) and ".chip-BLOCK" not in green.group(1)
    assert ".chip-DECIDED" not in red.group(1)
    text = _text(out)
    assert "DECIDED/SUBSET" in text and "a subset never allows a release" in text
