"""StopRequest.signals (runner/stop.py): SIGINT and SIGTERM are routed to the request on
the main thread, and left alone on any other thread (where Python refuses to set them),
without importing threading to find out which thread it is."""

from __future__ import annotations

import signal
import threading

from oloproof.runner import StopRequest


def test_on_the_main_thread_the_signals_are_routed_then_restored() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stop = StopRequest()
    with stop.signals():
        inside = {sig: signal.getsignal(sig) for sig in before}
        assert all(inside[sig] is not before[sig] for sig in before)
        signal.raise_signal(signal.SIGTERM)
        assert stop.count == 1 and stop.reason == "terminated (SIGTERM)"
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_on_another_thread_the_block_runs_and_the_handlers_stay() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    seen: list[object] = []

    def body() -> None:
        try:
            with StopRequest().signals():
                seen.append({sig: signal.getsignal(sig) for sig in before})
        except BaseException as exc:  # noqa: BLE001 - reported to the test's thread
            seen.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(10)
    assert seen == [before]
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_an_error_in_the_block_off_the_main_thread_is_not_chained_to_the_refusal() -> None:
    seen: list[BaseException] = []

    def body() -> None:
        try:
            with StopRequest().signals():
                raise KeyError("from the block")
        except KeyError as exc:
            seen.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(10)
    assert len(seen) == 1
    assert seen[0].__context__ is None  # not "during handling of ValueError"
