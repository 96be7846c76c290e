"""The live view in a real pseudo-terminal, and its absence outside one (SPEC §6)."""

from __future__ import annotations

import io
import re
import shlex
import time
from pathlib import Path
from typing import Any

import pexpect
from rich.console import Console
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.progress._support import INSTANT, SLOW, checked_events, cli_env, plain

from oloproof.enums import CaseStatus, JudgmentStatus
from oloproof.events import CaseExecuted, CaseJudged
from oloproof.render.live import LiveView

TITLE = re.compile(r"(\d+)/120 cases · (\d+) cached · (\d+) errors")
CAPTION = "Provisional Wilson estimates over finished cases; not a decision."
HEADERS = ("Metric", "Estimate", "Provisional interval", "Cases")


def _slow_cases(n: int, sleep: float) -> list[dict[str, object]]:
    cases = labelled_cases(n)
    for c in cases:
        c["input"] = {**c["input"], "sleep": sleep}  # type: ignore[dict-item]
    return cases


def _in_terminal(command: str, cwd: Path) -> tuple[str, int, float]:
    """Run ``command`` under bash in a pseudo-terminal; its whole transcript, exit code, time."""
    started = time.monotonic()
    child = pexpect.spawn(
        "bash", ["-c", command], cwd=str(cwd), env=cli_env(), dimensions=(40, 200),
        encoding="utf-8", timeout=60,
    )
    child.expect(pexpect.EOF)
    transcript = child.before or ""
    child.close()
    assert child.exitstatus is not None, f"killed by signal {child.signalstatus}"
    return transcript, child.exitstatus, time.monotonic() - started


def test_live_view_in_a_terminal(project_dir: Path) -> None:
    write_project(project_dir, app=SLOW, cases=_slow_cases(120, 0.03), concurrency=(2, 1))
    transcript, code, seconds = _in_terminal(f"{shlex.join(OLOPROOF)} run", project_dir)
    assert code == 0, transcript
    text = plain(transcript)

    frames = TITLE.findall(text)
    done = [int(f[0]) for f in frames]
    assert any(0 < d < 120 for d in done), done  # a frame caught mid-run
    assert done == sorted(done)
    mid = text.index(next(f"{d}/120 cases" for d in done if 0 < d < 120))
    frame = text[mid : text.index(CAPTION, mid) + len(CAPTION)]
    for header in HEADERS:
        assert header in frame
    assert re.search(r"│ exact_label │ 100\.0% +│ \[\d+\.\d%, 100\.0%\] +│ \d+ observed · 0 missing", frame)

    # Redrawn a few times a second, never more than 10. Count frames two ways: titles, and
    # the runs of cursor-up-and-erase that start each redraw.
    assert len(frames) <= 10 * seconds + 2, (len(frames), seconds)
    redraws = len(re.findall(r"(?:\x1b\[1A\x1b\[2K)+", transcript))
    assert redraws <= 10 * seconds + 2, (redraws, seconds)
    assert len(frames) >= 2 and redraws >= 1

    # Replaced by the final tables: they come after the last frame, and the cursor is back.
    last_frame = text.rindex(CAPTION)
    report = text[last_frame:]
    assert re.search(r"Run run_[0-9A-Z]{26} \[DECIDED/COMPLETE\]", report)
    assert "120 / 120 observed · 0 missing · 0 excluded" in report
    assert "executions 0 hits · 120 misses" in report
    assert "\x1b[?25h" in transcript[transcript.rindex("Provisional interval") :]


def test_live_view_when_only_stderr_is_a_terminal(project_dir: Path, tmp_path: Path) -> None:
    """Tables to a file, the frame on the terminal: no crash, and the file stays plain."""
    write_project(project_dir, app=SLOW, cases=_slow_cases(120, 0.01), concurrency=(4, 1))
    out = tmp_path / "report.txt"
    transcript, code, _ = _in_terminal(f"{shlex.join(OLOPROOF)} run > {out}", project_dir)
    assert code == 0, transcript
    report = out.read_text()
    assert "\x1b[" not in report
    assert "[DECIDED/COMPLETE]" in report and "Run run_" not in plain(transcript)
    # The tables did not go to the terminal, so its last frame stays there.
    assert "120/120 cases · 0 cached · 0 errors" in plain(transcript)


def test_json_to_a_file_with_the_frame_on_the_terminal(project_dir: Path, tmp_path: Path) -> None:
    app = """
    import time
    from oloproof import system

    @system(name="chatty", version="1")
    def answer(case_input):
        time.sleep(0.01)
        if case_input["n"] % 40 == 0:
            print("debug from the system", case_input["n"])
        return {"label": "ok"}
    """
    write_project(project_dir, app=app, cases=labelled_cases(120), concurrency=(4, 1))
    out = tmp_path / "run.ndjson"
    transcript, code, _ = _in_terminal(f"{shlex.join(OLOPROOF)} run --json > {out}", project_dir)
    assert code == 0, transcript
    events = checked_events(out.read_text())  # what the system printed did not get in
    assert len(events) == 1 + 2 + 120 + 120 + 11 + 1
    text = plain(transcript)
    assert "debug from the system 40" in text
    assert "[DECIDED/COMPLETE]" in text[text.rindex(CAPTION) :]


def test_outside_a_terminal_nothing_is_redrawn(project_dir: Path) -> None:
    write_project(project_dir, app=INSTANT, cases=labelled_cases(30))
    for args in (("run",), ("run", "--json"), ("run", "--no-cache")):
        result = run_cli(*args, cwd=project_dir, env={"TERM": "xterm-256color"})
        assert result.code == 0, result.text
        assert "\x1b[" not in result.out + result.err
        assert "cases · " not in result.err  # no frame at all
        assert result.text.count("Metrics") == 1  # the tables, once


# The frame of the seed page ("Progress and concurrency"), as that page printed it: 56 of
# 120 cases executed, 49 of them judged, 44 of those right. Written out here from the page,
# never from our own output, so a drift in a figure, a header, the caption or the layout
# fails (SPEC §9 item 5).
SEED_FRAME = """\
                    56/120 cases · 0 cached · 0 errors
┏━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ Metric      ┃ Estimate ┃ Provisional interval ┃ Cases                   ┃
┡━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ exact_label │ 89.8%    │ [78.2%, 95.6%]       │ 49 observed · 0 missing │
└─────────────┴──────────┴──────────────────────┴─────────────────────────┘
     Provisional Wilson estimates over finished cases; not a decision.
"""


def test_the_frame_of_the_seed_page_byte_for_byte() -> None:
    view = LiveView(Console(file=io.StringIO(), width=120), ["exact_label"], 120)
    for i in range(56):
        view(CaseExecuted("run_x", scenario_id=f"q{i:03d}", status=CaseStatus.OK,
                          from_cache=False, latency_ms=100.0, attempts=1, error=None))
    for i in range(49):
        view(CaseJudged("run_x", scenario_id=f"q{i:03d}", criterion="exact_label",
                        status=JudgmentStatus.OK, passed=i < 44, score=None, from_cache=False))
    out = io.StringIO()
    Console(file=out, width=120, color_system=None, force_terminal=True).print(view.render())
    drawn = "".join(line.rstrip() + "\n" for line in plain(out.getvalue()).splitlines())
    assert drawn == SEED_FRAME


def test_a_frame_drawn_while_an_event_arrives_reads_the_counts_of_one_moment() -> None:
    """rich's refresh thread draws the frame while the run's thread counts events: a frame
    that read a metric's observed cases just before a pass arrived, and its passes just
    after, had 6 passes of 5 observed (ValueError in the refresh thread, and the frame
    froze). The event arrives here exactly there: a trace of the frame's thread hands it
    over, from a thread of its own, when ``observed`` has been read."""
    import sys
    import threading

    view = LiveView(Console(file=io.StringIO(), width=120), ["exact_label"], 120)

    def judged(i: int) -> CaseJudged:
        return CaseJudged("run_x", scenario_id=f"q{i:03d}", criterion="exact_label",
                          status=JudgmentStatus.OK, passed=True, score=None, from_cache=False)

    for i in range(5):
        view(judged(i))
    handed: list[threading.Thread] = []

    def on_return(frame: Any, event: str, _arg: Any) -> Any:
        if event == "return" and not handed:
            handed.append(threading.Thread(target=view, args=(judged(5),)))
            handed[0].start()
            handed[0].join(2)  # at once, unless the frame's reading holds it off
        return on_return

    def tracer(frame: Any, event: str, _arg: Any) -> Any:
        code = frame.f_code
        if event == "call" and code.co_name == "observed" and code.co_filename.endswith(
                "evidence.py"):
            return on_return
        return None

    drawn: list[object] = []

    def draw() -> None:
        sys.settrace(tracer)
        try:
            drawn.append(view.render())
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            drawn.append(exc)
        finally:
            sys.settrace(None)

    frame_thread = threading.Thread(target=draw)
    frame_thread.start()
    frame_thread.join(60)
    handed[0].join(60)
    assert handed and not handed[0].is_alive()
    (table,) = drawn
    assert not isinstance(table, BaseException), repr(table)
    out = io.StringIO()
    Console(file=out, width=120, color_system=None, force_terminal=True).print(table)
    assert "5 observed · 0 missing" in plain(out.getvalue()), out.getvalue()
    # And the next frame has the sixth.
    out = io.StringIO()
    Console(file=out, width=120, color_system=None, force_terminal=True).print(view.render())
    assert "6 observed · 0 missing" in plain(out.getvalue()), out.getvalue()
