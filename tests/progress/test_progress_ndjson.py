"""The ``--json`` writer on real files and pipes: whole lines, prompt writes, a reader that leaves."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from oloproof.events import CaseExecuted, CaseJudged, Event, RunStarted
from oloproof.render.ndjson import CLOSED_REASON, NdjsonWriter

RUN = "run_01M8NB0K05N712D53MBP4ADEG8"


def _events(n: int) -> list[Event]:
    out: list[Event] = [RunStarted(RUN, suite_digest="sha256:" + "0" * 64, cases=n)]
    for i in range(n):
        out.append(CaseExecuted(RUN, scenario_id=f"q{i}", status="OK", from_cache=False,
                                latency_ms=1.5, attempts=1, error=None))
        out.append(CaseJudged(RUN, scenario_id=f"q{i}", criterion="exact_label", status="OK",
                              passed=True, score=None, from_cache=False))
    return out


def test_lines_are_the_events_json_form(tmp_path: Path) -> None:
    events = _events(3)
    events.append(CaseExecuted(RUN, scenario_id="é \"quoted\"\n", status="ERROR",
                               from_cache=False, latency_ms=None, attempts=4, error="naïve ✓"))
    path = tmp_path / "out.ndjson"
    with path.open("w") as stream:
        writer = NdjsonWriter(stream)
        for e in events:
            writer(e)  # no loop running: written at once
            assert path.read_text().count("\n") == writer.lines
    assert path.read_text() == "".join(e.to_line() + "\n" for e in events)


def test_inside_the_loop_lines_go_out_when_the_step_ends(tmp_path: Path) -> None:
    path = tmp_path / "out.ndjson"
    events = _events(5)
    seen: list[int] = []

    async def main(writer: NdjsonWriter) -> None:
        for e in events[:3]:
            writer(e)
        seen.append(path.read_text().count("\n"))  # same step: nothing written yet
        await asyncio.sleep(0)
        seen.append(path.read_text().count("\n"))  # the step ended: all three are out
        for e in events[3:]:
            writer(e)
        await asyncio.sleep(0)
        seen.append(path.read_text().count("\n"))

    with path.open("w") as stream:
        writer = NdjsonWriter(stream)
        asyncio.run(main(writer))
    assert seen == [0, 3, len(events)]
    assert path.read_text() == "".join(e.to_line() + "\n" for e in events)


def test_a_reader_that_goes_away_is_a_stop_request() -> None:
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w")
    calls: list[str] = []
    writer = NdjsonWriter(stream, on_closed=calls.append)
    writer(_events(1)[0])
    assert os.read(read_end, 1 << 16).count(b"\n") == 1
    os.close(read_end)  # the reader quits, like `head -1`
    for e in _events(3):
        writer(e)
    assert calls == [CLOSED_REASON]
    assert writer.closed and writer.lines == 1
    stream.close()  # fd now points at /dev/null: closing (and flushing) is quiet
