"""A huge output, error or input does not make a huge page: the report file writes at most
10,000 characters of each value (the viewer's case page 1,000,000), and says where it cut
and how to see the rest. Read in Chromium.

Before, a report wrote every value whole, twice (on its case's page and in the row's search
text): 20 cases of 5 MB outputs made a 200 MB file (4 s and 812 MB to write), and a run of
1,000 such cases (the report's default number of cases) 10 GB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli, write_project
from tests.report._browser import Requests, chromium, needs_chromium
from tests.report._viewer import running_viewer, viewer_env

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


def _stored(value: Any) -> int:
    """The length of a value's stored JSON (compact): what a report says of a value longer
    than it reads (READ_CHARS, 100,000 characters)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


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
        # Both are over the 100,000 characters a report reads of a value: each is written
        # from the start of its stored JSON, and the note says so.
        assert pres[2].startswith('{"label":"no","text":"yyy'), pres[2][:40]
        assert notes == [
            (f"This page shows the first 10,000 of the input's {_stored(CASES[2]['input']):,}"
            " characters (as stored: JSON, not indented);"
            f" oloproof inspect {run_id} --case c2 --json prints it whole."),
            (f"This page shows the first 10,000 of the output's {_stored(OUT_3):,} characters"
            " (as stored: JSON, not indented);"
            f" oloproof inspect {run_id} --case c2 --json prints it whole."),
        ], notes
        assert page.is_visible("#case-2 .cut")
        page.goto(report.as_uri() + "#case-0")
        error = _texts(page, "#case-0 pre.error-text")
        assert error == ["RuntimeError: " + "E" * (10_000 - len("RuntimeError: "))]
        cut = _texts(page, "#case-0 .cut")[0]
        # An error is text, not JSON: cut from the store all the same, said plainly.
        assert "of the error's 300," in cut and "characters; oloproof inspect" in cut, cut
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


MB5 = 5_000_000
MANY_APP = f"""
from oloproof import system

@system(name="many", version="1")
def answer(case_input):
    return {{"label": "ok", "text": str(case_input["n"]) * {MB5}}}
"""


#: Runs ``oloproof ARGS`` (the CLI's ``main``) in this process, then writes the process's
#: peak resident memory (``VmHWM`` of /proc/self/status: this program's, from its exec on)
#: to standard error, and exits with the command's code.
_PEAK_OF_MAIN = """
import sys
from oloproof.cli.main import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    sys.stderr.write([line for line in status if line.startswith("VmHWM:")][0])
sys.exit(code)
"""


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 outputs of 5 MB: 150 MB of them."""
    cases = [{"id": f"c{i:02d}", "input": {"n": i % 10}, "expected": {"label": "ok"}}
             for i in range(30)]
    root = write_project(tmp_path_factory.mktemp("many") / "p", app=MANY_APP, cases=cases,
                         concurrency=(2, 2))
    assert run_cli("run", cwd=root, timeout=300).code == 0
    return root


def test_a_report_reads_only_the_start_of_each_huge_value(many: Path) -> None:
    """30 outputs of 5 MB (150 MB of them): the report writes 10,000 characters of each, but
    read every one whole (and parsed it, and indented it): its peak memory was several
    times the outputs' size (1.9 GB for 200 such outputs). It now reads at most 100,000
    characters of each from the store, so it holds less than the outputs' size at its peak,
    and the page says it shows the value as stored."""
    root = many
    # The command's own high-water mark (VmHWM), read by the command's process as it ends:
    # not the ru_maxrss wait4 gives, which counts the pytest worker's memory copied at the
    # fork (a CI worker of 650 MB made a report of 60 MB read 651 MB).
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_OF_MAIN, "report", "latest", "-o", "r.html"], cwd=root,
        env=viewer_env(), capture_output=True, text=True, stdin=subprocess.DEVNULL,
        timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak = int(proc.stderr.rsplit("VmHWM:", 1)[1].split()[0]) * 1024  # kB
    assert peak < 30 * MB5, f"peak RSS {peak / 1e6:.0f} MB"
    with chromium() as browser:
        page = browser.new_page()
        page.goto((root / "r.html").as_uri() + "#case-7")
        page.wait_for_load_state("load")
        shown = _texts(page, "#case-7 pre.output")
        assert shown == ['{"label":"ok","text":"' + "7" * (10_000 - 22)], [s[:40] for s in shown]
        notes = _texts(page, "#case-7 .cut")
        assert len(notes) == 1 and notes[0].startswith(
            f"This page shows the first 10,000 of the output's {_stored({'label': 'ok', 'text': '7' * MB5}):,}"
            " characters (as stored: JSON, not indented);"), notes


def test_the_viewer_run_page_reads_only_the_start_of_each_huge_value(many: Path) -> None:
    """The viewer's run page writes 80 (and, expanded, 2,000) characters of each output of
    its page of cases, but read them whole: a page of 100 outputs of 4.4 MB took 1.1 GB and
    12 s. It now reads at most 100,000 characters of each: the viewer's peak memory stays
    under the outputs' size, and the rows show what they showed."""
    run_id = json.loads(run_cli("gate", "latest", "--json", cwd=many).out)["run_id"]
    with running_viewer(many) as viewer, chromium() as browser:
        page = browser.new_page()
        page.goto(viewer.url)
        page.goto(f"{viewer.base}runs/{run_id}")
        shown = _texts(page, "#case-table td.out code")
        assert len(shown) == 30 and shown[7] == (
            '{"label":"ok","text":"' + "7" * (80 - 23) + "…"), shown[7]
        status = Path(f"/proc/{viewer.proc.pid}/status").read_text()
        peak = int(status.split("VmHWM:")[1].split()[0]) * 1024
    assert peak < 30 * MB5, f"the viewer's peak RSS {peak / 1e6:.0f} MB"
