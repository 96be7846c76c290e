"""StopRequest.signals (runner/stop.py): SIGINT and SIGTERM are routed to the request on
the main thread, and left alone on any other thread (where Python refuses to set them),
without importing threading to find out which thread it is. StopRequest.attached: while a
run's loop waits, a signal the kernel delivers to another thread still wakes it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project

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



def _signal_from_a_thread_of_its_own(sig: signal.Signals, after_s: float) -> None:
    """Deliver ``sig`` to a new thread, not the main one (as the kernel may do with a
    signal sent to the process), once the main thread is surely waiting."""
    def send() -> None:
        time.sleep(after_s)
        signal.pthread_kill(threading.get_ident(), sig)

    threading.Thread(target=send, daemon=True).start()


def test_a_signal_that_lands_on_another_thread_wakes_the_waiting_loop() -> None:
    stop = StopRequest()
    wakeup: list[int] = []

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        with stop.attached(task):
            during = signal.set_wakeup_fd(-1)
            signal.set_wakeup_fd(during, warn_on_full_buffer=False)  # as it was
            wakeup.append(during)
            _signal_from_a_thread_of_its_own(signal.SIGTERM, after_s=0.3)
            # Nothing else is scheduled: without the wakeup the loop sleeps out the 30 s.
            await asyncio.sleep(30)

    began = time.monotonic()
    with stop.signals(), pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    took = time.monotonic() - began
    assert stop.reason == "terminated (SIGTERM)"
    assert took < 10, f"the stop waited {took:.1f} s for the loop to wake"
    assert wakeup[0] != -1
    assert signal.set_wakeup_fd(-1) == -1  # restored when the block ended


def test_attached_off_the_main_thread_leaves_the_wakeup_descriptor_alone() -> None:
    seen: list[object] = []

    async def main(stop: StopRequest) -> None:
        task = asyncio.current_task()
        assert task is not None
        with stop.attached(task):
            seen.append("ran")

    worker = threading.Thread(target=lambda: asyncio.run(main(StopRequest())))
    worker.start()
    worker.join(10)
    assert seen == ["ran"]
    assert signal.set_wakeup_fd(-1) == -1


APP_SIGNALLED = """
import signal, threading, time

_sent = []


def answer(case_input):
    # The kernel may hand a signal sent to the process to any thread: here the call's own
    # thread gets the Ctrl-C, then the call goes on for a long time.
    if not _sent:
        _sent.append(True)
        time.sleep(0.5)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    time.sleep(60)
    return {"label": "ok"}
"""


def test_ctrl_c_delivered_to_a_call_thread_stops_the_run_at_once(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP_SIGNALLED, cases=labelled_cases(4),
                         concurrency=(2, 1))
    began = time.monotonic()
    result = run_cli("run", "--no-cache", cwd=root, timeout=180)
    took = time.monotonic() - began
    assert result.code == 5, result.out + result.err
    assert "RUN_ERROR/PARTIAL" in result.out and "interrupted" in result.out
    # The calls take a minute: the stop did not wait for them to end.
    assert took < 15, f"the run took {took:.0f} s to stop"


APP_SLOW = """
import time


def answer(case_input):
    time.sleep(60)
    return {"label": "ok"}
"""


def test_with_debug_sigusr1_prints_where_the_run_waits(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP_SLOW, cases=labelled_cases(3),
                         concurrency=(2, 1))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=root,
                            env={**env, "OLOPROOF_DEBUG": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # Both calls under way (their threads exist; they start before the loop does), then,
        # the loop surely running by now, ask where the run waits.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(os.listdir(f"/proc/{proc.pid}/task")) < 3:
            time.sleep(0.1)
        time.sleep(3.0)
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        assert proc.poll() is None  # still running: the dump does not stop it
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 5, out + err
    assert "task(s) on the run's loop (stop requested: no)" in err
    # Each task's whole chain of awaits, down to what is pending: the engine's waits for its
    # workers, each worker waits for its call.
    assert "engine/pipeline.py" in err and " in run\n" in err
    assert " in _system_worker\n" in err and "systems/callable.py" in err and "awaiting <" in err
    assert "most recent call first" in err and "app.py" in err  # every thread, the calls'
    assert "RUN_ERROR/PARTIAL" in out


def test_without_debug_sigusr1_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    before = signal.getsignal(signal.SIGUSR1)
    monkeypatch.delenv("OLOPROOF_DEBUG", raising=False)
    with StopRequest().signals():
        assert signal.getsignal(signal.SIGUSR1) is before
