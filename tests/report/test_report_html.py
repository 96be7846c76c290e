"""``oloproof report``: one self-contained HTML file, with everything a model wrote shown as text."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from tests.report._hostile import CLOSE, IMG, SCRIPT, hostile_project

from oloproof.cli.main import main
from oloproof.render.html import script_json


class _Page(HTMLParser):
    """Every element and attribute of a page, and its text, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = hostile_project(tmp_path_factory.mktemp("hostile"))
    config = str(root / "oloproof.yaml")
    assert main(["run", "--config", config]) == 3  # 4 of 7 observed: undecided against 50%
    out = root / "report.html"
    assert main(["report", "latest", "--config", config, "--output", str(out)]) == 0
    return root, out.read_text(encoding="utf-8")


def test_hostile_text_is_never_markup(hostile_report: tuple[Path, str]) -> None:
    _, html = hostile_report
    page = _parse(html)
    tags = [t for t, _ in page.tags]
    assert "img" not in tags
    assert tags.count("script") == 1  # ours, at the end of the body
    assert not [a for _, attrs in page.tags for a in attrs if a.startswith("on")]
    assert not [attrs for t, attrs in page.tags if attrs.get("id") == "boom"]
    assert "__pwned" not in "".join(page.scripts)
    text = "".join(page.text)
    # Shown as text, in the output panes and in the judge's reasons.
    for hostile in (SCRIPT, IMG, CLOSE):
        assert hostile.replace('"', '\\"') in text or hostile in text
    assert '<b id="boom">case</b>' in text


def test_no_request_can_leave_the_file(hostile_report: tuple[Path, str]) -> None:
    _, html = hostile_report
    page = _parse(html)
    for tag, attrs in page.tags:
        for name in ("src", "href", "action", "data"):
            value = attrs.get(name) or ""
            assert not re.match(r"^(https?:)?//", value), (tag, name, value)
    assert re.search(r"default-src 'none'", html)
    assert "script-src 'sha256-" in html


def test_report_holds_header_gate_decisions_metrics_and_cases(
    hostile_report: tuple[Path, str],
) -> None:
    _, html = hostile_report
    page = _parse(html)
    text = " ".join(" ".join(page.text).split())
    assert "test-system 1" in text  # system name and version
    assert "sha256:" in text  # suite digest and identity
    assert "8 of 8 cases stored · 1 execution error · COMPLETE" in text
    assert "BLOCK" in text and "exit code 3" in text
    assert "label-floor" in text and "INSUFFICIENT_EVIDENCE" in text
    assert "4 / 7 observed · 1 missing · 0 excluded" in text
    rows = [a for t, a in page.tags if t == "tr" and "case-row" in (a.get("class") or "")]
    assert [r["data-outcome"] for r in rows] == [
        "passed", "passed", "passed", "failed", "failed", "failed", "missing", "passed",
    ]
    case_pages = [a for t, a in page.tags if t == "section" and (a.get("id") or "").startswith("case-")]
    assert len(case_pages) == 8
    assert "RuntimeError" in text  # the missing case's error, on its page
    svgs = [a for t, a in page.tags if t == "svg"]
    assert len(svgs) == 1  # the one interval rule, drawn against its threshold


def test_default_output_name_and_comparison(
    hostile_report: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    root, _ = hostile_report
    monkeypatch.chdir(root)
    assert main(["run", "--no-cache"]) == 3
    first = re.search(r"run_[0-9A-Z]{26}", capsys.readouterr().out)
    assert first is not None
    assert main(["run", "--no-cache"]) == 3
    capsys.readouterr()
    assert main(["report", "latest"]) == 0
    written = capsys.readouterr().out.strip()
    match = re.fullmatch(r"Report written to (oloproof-report-(run_[0-9A-Z]{26})\.html)", written)
    assert match is not None, written
    assert (root / match.group(1)).exists()

    runs = sorted(p.name for p in root.glob("oloproof-report-run_*.html"))
    assert len(runs) == 1
    assert main(["compare", "latest", first.group()]) == 0
    out = capsys.readouterr().out
    cmp_id = re.search(r"cmp_[0-9A-Z]{26}", out)
    assert cmp_id is not None
    assert main(["report", cmp_id.group(), "-o", "cmp.html"]) == 0
    page = _parse((root / "cmp.html").read_text(encoding="utf-8"))
    text = " ".join(" ".join(page.text).split())
    assert "Paired differences" in text and "Discordant cases" in text
    assert "The two runs agree on every paired case." in text
    assert "img" not in [t for t, _ in page.tags]


def test_unknown_refs_are_usage_errors(
    hostile_report: tuple[Path, str], capsys: pytest.CaptureFixture[str],
) -> None:
    root, _ = hostile_report
    config = str(root / "oloproof.yaml")
    assert main(["report", "run_NOPE", "--config", config]) == 2
    assert main(["report", "cmp_NOPE", "--config", config]) == 2
    assert "no comparison 'cmp_NOPE'" in capsys.readouterr().err


def test_script_json_cannot_close_the_script() -> None:
    text = str(script_json({"a": "</script><script>x()</script>", "b": "&<>\u2028"}))
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\\u003c/script\\u003e" in text


def test_help_and_run_never_import_the_templates(tmp_path: Path) -> None:
    """Jinja2 and the viewer's server are for `report` and `view` only."""
    import subprocess
    import sys

    root = hostile_project(tmp_path / "p")
    probe = (
        "import sys\n"
        "from oloproof.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('jinja2', 'starlette', 'uvicorn', 'oloproof.render.html') if m in sys.modules]\n"
        "sys.stderr.write('HEAVY=' + ','.join(heavy) + '\\n')\n"
    )
    for args in (["--help"], ["run", "--help"], ["run", "--config", str(root / "oloproof.yaml")]):
        proc = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=False,
            timeout=120,
        )
        assert "HEAVY=\n" in proc.stderr, (args, proc.stderr[-400:])


def test_view_without_a_store_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    root = hostile_project(tmp_path / "empty")
    assert main(["view", "--no-open", "--config", str(root / "oloproof.yaml")]) == 2
    assert "no store" in capsys.readouterr().err
