"""Where ``oloproof report`` writes (issue 29), through the real CLI: ``-o -`` is standard
output; a link, a pipe or a device is written through, never replaced by a file; the file
is no more readable than the store it was drawn from; ``--cases`` caps what it carries."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, run_cli, write_project

pytestmark = pytest.mark.slow

APP = """
from oloproof import system

@system(name="few", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 3 else "no"}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_project(
        tmp_path_factory.mktemp("out") / "p", app=APP,
        cases=[{"id": f"c{n}", "input": {"n": n}, "expected": {"label": "ok"}} for n in range(12)],
    )
    assert run_cli("run", cwd=root).code == 0
    return root


def _is_report(data: bytes) -> bool:
    return data.startswith(b"<!doctype html>") and data.rstrip().endswith(b"</html>")


def test_a_dash_is_standard_output(project: Path) -> None:
    result = subprocess.run([*OLOPROOF, "report", "latest", "-o", "-"], cwd=project,
                            capture_output=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert _is_report(result.stdout)
    assert b"Report written" not in result.stdout
    assert not (project / "-").exists()


def test_dev_stdout_is_written_into(project: Path, tmp_path: Path) -> None:
    """``-o /dev/stdout``: a link to the process's own standard output. The test names a
    link of its own to the same place (/proc/self/fd/1), never /dev/stdout itself: a
    regression would replace the machine's /dev/stdout by a file."""
    stdout_link = tmp_path / "stdout"
    stdout_link.symlink_to("/proc/self/fd/1")
    for redirect in ("file", "pipe"):
        out = tmp_path / f"captured-{redirect}.html"
        with out.open("wb") as fh:
            result = subprocess.run(
                [*OLOPROOF, "report", "latest", "-o", str(stdout_link)], cwd=project,
                stdout=fh if redirect == "file" else subprocess.PIPE, stderr=subprocess.PIPE,
                check=False, timeout=120,
            )
        assert result.returncode == 0, result.stderr
        assert stdout_link.is_symlink() and os.readlink(stdout_link) == "/proc/self/fd/1"
        data = out.read_bytes() if redirect == "file" else result.stdout
        assert _is_report(data)  # the report alone, nothing printed after it


def test_a_link_is_kept_and_its_target_replaced(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "reports" / "run.html"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "latest.html"
    link.symlink_to(target)
    assert run_cli("report", "latest", "-o", str(link), cwd=project).code == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert _is_report(target.read_bytes())
    dangling = tmp_path / "next.html"
    dangling.symlink_to(tmp_path / "reports" / "new.html")
    assert run_cli("report", "latest", "-o", str(dangling), cwd=project).code == 0
    assert dangling.is_symlink() and _is_report((tmp_path / "reports" / "new.html").read_bytes())


def test_a_pipe_and_a_device_are_written_into(project: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "to-fifo"
    link.symlink_to(fifo)
    got: list[bytes] = []

    def drain() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=drain)
    reader.start()
    assert run_cli("report", "latest", "-o", str(link), cwd=project).code == 0
    reader.join(timeout=60)
    assert _is_report(got[0])
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    null_link = tmp_path / "null"
    null_link.symlink_to("/dev/null")
    assert run_cli("report", "latest", "-o", str(null_link), cwd=project).code == 0
    assert null_link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_the_report_is_no_more_readable_than_the_store(project: Path, tmp_path: Path) -> None:
    store = project / ".oloproof" / "store.sqlite"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    out = tmp_path / "r.html"
    out.write_text("old")
    out.chmod(0o644)
    assert run_cli("report", "latest", "-o", str(out), cwd=project).code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.html"
    assert run_cli("report", "latest", "-o", str(fresh), cwd=project).code == 0
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    # A store its owner opened to the group gives a report the group may read, never more.
    store.chmod(0o640)
    try:
        shared = tmp_path / "shared.html"
        assert run_cli("report", "latest", "-o", str(shared), cwd=project).code == 0
        assert stat.S_IMODE(shared.stat().st_mode) == 0o640
    finally:
        store.chmod(0o600)


def test_bad_targets_and_caps_are_refused(project: Path, tmp_path: Path) -> None:
    result = run_cli("report", "latest", "-o", str(tmp_path), cwd=project)
    assert result.code == 2 and "cannot write the report" in result.err
    assert "Traceback" not in result.err
    for bad in ("0", "-3", "some", ""):
        result = run_cli("report", "latest", "--cases", bad, cwd=project)
        assert result.code == 2, (bad, result.text)
        assert "'all'" in result.err


def test_cases_caps_the_file_and_says_what_it_left_out(project: Path, tmp_path: Path) -> None:
    capped = tmp_path / "capped.html"
    assert run_cli("report", "latest", "--cases", "5", "-o", str(capped), cwd=project).code == 0
    html = capped.read_text()
    assert html.count('class="case-row"') == 5
    assert 'id="cases-left-out"' in html
    text = " ".join(html.split())
    assert ("This file holds 5 of the run's 12 cases: all 4 failed and missing, and the"
            " first 1 of the others in suite order. Left out: 7 passed.") in text
    assert "--cases all</code>" in html
    whole = tmp_path / "all.html"
    assert run_cli("report", "latest", "--cases", "all", "-o", str(whole), cwd=project).code == 0
    text = whole.read_text()
    assert text.count('class="case-row"') == 12 and 'id="cases-left-out"' not in text
