"""Custom evaluators in worker processes (``concurrency.evaluator_processes``, issue 27 §3):
the same outcomes, time limits and error handling as the threads, in processes of their
own that are killed when stuck, replaced, and never outlive the run."""

from __future__ import annotations

import functools
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project

import oloproof

APP = """
from oloproof import system

@system(name="instant", version="1")
def answer(case_input):
    return {"label": "ok", "n": case_input["n"]}
"""

CHECKS = """
import os, subprocess, sys, time
from pathlib import Path

from oloproof import Verdict

LOG = Path(__file__).parent / "calls"


def _log(kind, **more):
    LOG.mkdir(exist_ok=True)
    (LOG / f"{kind}-{os.getpid()}-{time.monotonic_ns()}").write_text(repr(more))


def whose(output, case):
    _log("whose")
    return Verdict(passed=output["n"] % 3 != 0, reason=str(os.getpid()))


def overlap(output, case):
    # Counts the calls running at once across processes, with marker files.
    LOG.mkdir(exist_ok=True)
    mine = LOG / f"running-{os.getpid()}-{time.monotonic_ns()}"
    mine.write_text("")
    now = len(list(LOG.glob("running-*")))
    (LOG / f"seen-{now}-{os.getpid()}-{time.monotonic_ns()}").write_text("")
    time.sleep(0.3)
    mine.unlink()
    return True


def stuck_first(output, case):
    if output["n"] == 0:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        (Path(__file__).parent / "stuck.json").write_text(
            '{"pid": %d, "child": %d}' % (os.getpid(), child.pid))
        time.sleep(120)
    return True


def raises(output, case):
    n = output["n"]
    if n == 0:
        raise ValueError("bad output")
    if n == 1:
        raise SystemExit(3)
    if n == 2:
        raise KeyboardInterrupt
    if n == 3:
        return (x for x in ())  # a generator: neither bool, number nor Verdict
    if n == 4:
        return Verdict(passed=True, reason=object)  # a reason that is not text
    if n == 5:
        return 1.5  # a number for a BINARY criterion
    return True


def exits(output, case):
    if output["n"] == 1:
        os._exit(7)
    return True


def spins(output, case):
    (Path(__file__).parent / f"spin-{os.getpid()}").write_text("")
    end = time.monotonic() + 120
    while time.monotonic() < end:
        pass
    return True


async def awaited(output, case):
    return Verdict(passed=True, reason=str(os.getpid()))
"""


def _custom(criterion: str, function: str, *more: str) -> str:
    lines = ["- type: custom", f"  criterion: {criterion}", f"  function: checks:{function}"]
    return "\n".join([*lines, *("  " + line for line in more)]) + "\n"


def _project(root: Path, evaluators: str, *, processes: int | None = 2, n: int = 12,
             evaluator: int | None = None) -> Path:
    write_project(root, app=APP, cases=labelled_cases(n), evaluators=evaluators,
                  concurrency=(4, 2), extra_files={"checks.py": CHECKS}, policy="none")
    extra = ""
    if processes is not None:
        extra += f"  evaluator_processes: {processes}\n"
    if evaluator is not None:
        extra += f"  evaluator: {evaluator}\n"
    cfg = root / "oloproof.yaml"
    cfg.write_text(cfg.read_text().replace("  judge: 2\n", "  judge: 2\n" + extra))
    return root


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too (not yet reaped by whoever its parent is now).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _wait_dead(pid: int, within_s: float = 15.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _reasons(result: oloproof.RunResult, criterion: str) -> dict[str, tuple[str, str | None]]:
    return {c.id: (c.judgments[criterion].status, c.judgments[criterion].reason)
            for c in result.cases()}


@pytest.mark.slow  # starts processes
def test_sync_custom_evaluators_run_in_worker_processes(project_dir: Path) -> None:
    _project(project_dir, _custom("whose", "whose"))
    result = oloproof.run(project_dir)
    m = result.metrics["whose"]
    assert (m.passed, m.observed, m.missing) == (8, 12, 0)
    pids = {int(reason) for _, reason in _reasons(result, "whose").values() if reason}
    assert os.getpid() not in pids
    assert 1 <= len(pids) <= 2
    # The run ends its processes with itself.
    assert all(_wait_dead(pid) for pid in pids)


@pytest.mark.slow  # starts processes; calls that sleep
def test_at_most_evaluator_processes_calls_run_at_once_and_they_overlap(
    project_dir: Path,
) -> None:
    # concurrency.evaluator (for threads) is 1: the processes have their own limit.
    _project(project_dir, _custom("overlap", "overlap"), processes=3, n=9, evaluator=1)
    result = oloproof.run(project_dir)
    assert result.metrics["overlap"].observed == 9
    seen = [int(p.name.split("-")[1]) for p in (project_dir / "calls").glob("seen-*")]
    assert len(seen) == 9
    assert max(seen) == 3  # three processes, each running a call at the same time


def test_without_the_setting_custom_evaluators_stay_in_threads(project_dir: Path) -> None:
    _project(project_dir, _custom("whose", "whose"), processes=None)
    result = oloproof.run(project_dir)
    pids = {int(reason) for _, reason in _reasons(result, "whose").values() if reason}
    assert pids == {os.getpid()}


@pytest.mark.slow  # starts processes
def test_async_custom_evaluators_stay_on_the_async_host(project_dir: Path) -> None:
    _project(project_dir, _custom("awaited", "awaited") + _custom("whose", "whose"))
    result = oloproof.run(project_dir)
    awaited = {reason for _, reason in _reasons(result, "awaited").values()}
    assert awaited == {str(os.getpid())}
    whose = {reason for _, reason in _reasons(result, "whose").values()}
    assert str(os.getpid()) not in whose


@pytest.mark.slow  # starts processes
def test_errors_read_as_they_do_in_threads(tmp_path: Path) -> None:
    threads = oloproof.run(_project(tmp_path / "threads", _custom("raises", "raises"),
                                    processes=None, n=8))
    procs = oloproof.run(_project(tmp_path / "procs", _custom("raises", "raises"), n=8))
    in_threads = _reasons(threads, "raises")
    in_processes = _reasons(procs, "raises")
    assert in_processes["q000"] == ("ERROR", "ValueError: bad output")
    assert in_processes["q001"] == ("ERROR", "SystemExit: 3")
    assert in_processes["q002"] == ("ERROR", "KeyboardInterrupt")
    assert in_processes["q003"][0] == "ERROR"
    assert "returned generator" in (in_processes["q003"][1] or "")
    assert in_processes["q004"] == ("OK", "<class 'object'>")
    assert in_processes["q005"] == ("ERROR", "returned a number for a BINARY criterion")
    assert in_processes["q006"] == ("OK", None)
    assert in_processes == in_threads
    # Observed and missing alike: the metric is the same.
    a, b = threads.metrics["raises"], procs.metrics["raises"]
    assert (a.passed, a.observed, a.missing) == (b.passed, b.observed, b.missing) == (3, 3, 5)


@pytest.mark.slow  # starts processes
def test_a_process_that_exits_fails_its_case_only_and_is_replaced(project_dir: Path) -> None:
    _project(project_dir, _custom("exits", "exits"), processes=1, n=6)
    result = oloproof.run(project_dir)
    reasons = _reasons(result, "exits")
    assert reasons["q001"] == (
        "ERROR", "the evaluator failed: its process ended before it answered (exit code 7)"
    )
    assert all(reasons[f"q00{i}"] == ("OK", None) for i in (0, 2, 3, 4, 5))
    assert result.status == "DECIDED"


@pytest.mark.slow  # a call that times out: real time
def test_a_stuck_process_is_killed_with_what_it_started_and_replaced(project_dir: Path) -> None:
    _project(project_dir, _custom("stuck", "stuck_first", "timeout_s: 1.5"), processes=1, n=5)
    started = time.monotonic()
    result = oloproof.run(project_dir)
    assert time.monotonic() - started < 60  # not the 120 s the stuck call would take
    reasons = _reasons(result, "stuck")
    assert reasons["q000"] == ("ERROR", "the evaluator gave no verdict within timeout_s = 1.5s")
    assert all(reasons[f"q00{i}"] == ("OK", None) for i in range(1, 5))
    stuck = json.loads((project_dir / "stuck.json").read_text())
    assert _wait_dead(stuck["pid"]) and _wait_dead(stuck["child"])
    case0 = next(c for c in result.cases() if c.id == "q000")
    assert case0.judgments["stuck"].latency_ms == pytest.approx(1500.0)


@pytest.mark.slow  # starts processes
def test_the_cache_and_identity_ignore_where_evaluators_run(project_dir: Path) -> None:
    _project(project_dir, _custom("whose", "whose"), processes=None)
    first = oloproof.run(project_dir)
    assert first.cache["judgment_misses"] == 12
    cfg = project_dir / "oloproof.yaml"
    cfg.write_text(cfg.read_text().replace("  judge: 2\n", "  judge: 2\n  evaluator_processes: 2\n"))
    calls = project_dir / "calls"
    before = len(list(calls.glob("whose-*")))
    again = oloproof.run(project_dir)
    assert again.cache["judgment_hits"] == 12 and again.cache["judgment_misses"] == 0
    assert len(list(calls.glob("whose-*"))) == before  # nothing called, no process started


@pytest.mark.parametrize(("value", "words"), [
    ("0", "must be at least 1, got 0"),
    ("true", "expected a whole number, got true"),
    ("2.5", "expected a whole number, got 2.5"),
])
def test_a_bad_setting_is_refused_before_anything_runs(
    project_dir: Path, value: str, words: str
) -> None:
    _project(project_dir, _custom("whose", "whose"), processes=None)
    cfg = project_dir / "oloproof.yaml"
    cfg.write_text(cfg.read_text().replace("  judge: 2\n", f"  judge: 2\n  evaluator_processes: {value}\n"))
    with pytest.raises(oloproof.ConfigError) as caught:
        oloproof.run(project_dir)
    text = str(caught.value)
    assert "evaluator_processes" in text and words in text
    assert not (project_dir / "calls").exists()


# -- the whole command, stopped or killed ------------------------------------------------


def _spinning_run(project_dir: Path) -> tuple[subprocess.Popen[str], list[int]]:
    """``oloproof run`` whose two evaluator processes spin on the CPU; their pids."""
    _project(project_dir, _custom("spins", "spins", "timeout_s: 300"), processes=2, n=4)
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    proc = subprocess.Popen([*OLOPROOF, "run"], cwd=project_dir, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pids = [int(p.name.split("-")[1]) for p in project_dir.glob("spin-*")]
        if len(pids) == 2:
            return proc, pids
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the evaluator processes did not start: {proc.communicate()}")


@pytest.mark.slow  # the CLI in a subprocess
def test_ctrl_c_stops_the_run_and_its_evaluator_processes(project_dir: Path) -> None:
    proc, pids = _spinning_run(project_dir)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, err
    assert "RUN_ERROR/PARTIAL" in out
    assert all(_wait_dead(pid) for pid in pids)
    conn = sqlite3.connect(project_dir / ".oloproof" / "store.sqlite")
    try:
        assert conn.execute("SELECT status FROM runs").fetchone()[0] == "RUN_ERROR"
    finally:
        conn.close()


@pytest.mark.slow  # the CLI in a subprocess
def test_a_killed_run_leaves_no_evaluator_process_behind(project_dir: Path) -> None:
    proc, pids = _spinning_run(project_dir)
    proc.kill()
    proc.communicate(timeout=60)
    # Each child sees its parent gone within a second or so and ends itself.
    assert all(_wait_dead(pid, within_s=30) for pid in pids)


@pytest.mark.slow  # the CLI in a subprocess
def test_a_cli_run_streams_every_judgment_of_its_processes(tmp_path: Path) -> None:
    evaluators = _custom("whose_ok", "exits") + _custom("raises", "raises")
    # (exits kills only a process of its own: with threads, os._exit would end the run)
    done = run_cli("run", "--json", cwd=_project(tmp_path / "p", evaluators, n=8))
    assert done.code == 0, done.err
    judged = [json.loads(line) for line in done.out.splitlines()]
    statuses = {(e["scenario_id"], e["criterion"]): e["status"]
                for e in judged if e["type"] == "case_judged"}
    assert statuses[("q001", "whose_ok")] == "ERROR"
    assert statuses[("q000", "raises")] == "ERROR"
    assert sum(s == "OK" for s in statuses.values()) == 7 + 3


def test_a_verdict_whose_reason_is_not_text_is_stored_as_its_text(project_dir: Path) -> None:
    # In threads too: an object as the reason once made the store refuse the row, and the
    # whole run ended RUN_ERROR/PARTIAL.
    _project(project_dir, _custom("raises", "raises"), processes=None, n=5)
    result = oloproof.run(project_dir)
    assert result.status == "DECIDED"
    assert _reasons(result, "raises")["q004"] == ("OK", "<class 'object'>")


def test_warm_children_serve_the_first_calls_and_no_call_starts_one_more() -> None:
    """warm() starts the pool's children in the background; calls made while they are
    still starting wait for them instead of starting children of their own."""
    from concurrent.futures import ThreadPoolExecutor

    from oloproof.transport.processes import ProcessPool

    pool = ProcessPool(2, ("operator", "itemgetter", (0,)))
    try:
        pool.warm()
        pool.warm()  # twice: still two
        # At once, while the two children are starting: calls from two threads (the
        # engine's limit: at most the pool's size at once).
        with ThreadPoolExecutor(2) as threads:
            replies = list(threads.map(lambda i: pool.call((i, "x"), 60.0), range(40)))
        assert replies == list(range(40))
        assert len(pool.started) == 2, pool.started
    finally:
        pool.close()


def test_a_closed_pool_warms_nothing_and_its_calls_are_refused() -> None:
    from oloproof.transport.processes import ProcessEnded, ProcessPool

    pool = ProcessPool(2, ("operator", "itemgetter", (0,)))
    pool.close()
    pool.warm()
    assert pool.started == []
    with pytest.raises(ProcessEnded):
        pool.call((1,), 5.0)


def _count_pipe_closes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every pipe closed from now on, by the name of the thread that closed it; closing
    is slowed down, so that two threads closing one pipe would both be inside it."""
    from multiprocessing.connection import Connection

    closed: list[str] = []

    def slow_close(self: Connection) -> None:
        closed.append(threading.current_thread().name)
        time.sleep(0.2)
        os.close(self._handle)  # type: ignore[attr-defined]

    monkeypatch.setattr(Connection, "_close", slow_close)
    return closed


def test_a_child_killed_from_two_threads_at_once_closes_its_pipe_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI once failed with EBADF: pool.close() and the thread still starting a child
    killed it at the same moment, and both closed its pipe; the second close could as
    well have closed a descriptor number already given to another file."""
    from oloproof.transport.processes import ProcessPool

    pool = ProcessPool(1, ("operator", "itemgetter", (0,)))
    assert pool.call((7,), 60.0) == 7
    (child,) = pool._idle
    closed = _count_pipe_closes(monkeypatch)
    errors: list[BaseException] = []

    def kill() -> None:
        try:
            child.kill()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=kill) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pool.close()
    assert errors == []
    assert len(closed) == 1, closed


def _a_call_in_a_thread(pool: Any) -> tuple[threading.Thread, list[BaseException]]:
    """A call of a minute on ``pool`` from a thread named ``the-caller``, started, once it
    has taken the pool's child; what the call raises is appended to the list."""
    raised: list[BaseException] = []

    def busy() -> None:
        try:
            pool.call(functools.partial(time.sleep, 60), 120.0)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            raised.append(exc)

    caller = threading.Thread(target=busy, name="the-caller")
    caller.start()
    deadline = time.monotonic() + 30
    while pool._idle and time.monotonic() < deadline:  # the call took the child
        time.sleep(0.01)
    return caller, raised


def test_closing_the_pool_leaves_a_busy_pipe_to_the_thread_reading_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from oloproof.transport.processes import ProcessEnded, ProcessPool

    pool = ProcessPool(1, ("operator", "methodcaller", ("__call__",)))
    pool.call(functools.partial(time.sleep, 0), 60.0)  # started and set up
    closed = _count_pipe_closes(monkeypatch)
    caller, raised = _a_call_in_a_thread(pool)
    time.sleep(0.2)  # and is waiting on its pipe
    pid = pool.started[0]
    pool.close()
    assert not _alive(pid)  # killed and reaped by close() itself
    caller.join(30)
    assert not caller.is_alive()
    assert [type(exc) for exc in raised] == [ProcessEnded]
    assert closed == ["the-caller"]


def test_a_child_reaped_by_close_is_never_signalled_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """close() kills and reaps a busy child; the thread whose call it ended then killed its
    process group again. Once reaped, the child's PID is free: the kernel may give it to a
    new process that leads a group of its own, and SIGKILL would reach that group. Here the
    caller's signal is held until close() has returned (and reaped), as a loaded machine
    may hold it."""
    from oloproof.transport.processes import ProcessEnded, ProcessPool

    pool = ProcessPool(1, ("operator", "methodcaller", ("__call__",)))
    pool.call(functools.partial(time.sleep, 0), 60.0)  # started and set up
    (child,) = pool._idle
    closed = threading.Event()
    after_reaping: list[int] = []
    real_killpg = os.killpg

    def killpg(pgid: int, sig: int) -> None:
        if threading.current_thread().name == "the-caller":
            closed.wait(30)
        if child.proc.returncode is not None:
            after_reaping.append(pgid)
        real_killpg(pgid, sig)

    monkeypatch.setattr(os, "killpg", killpg)
    caller, raised = _a_call_in_a_thread(pool)
    pool.close()
    closed.set()
    caller.join(60)
    assert not caller.is_alive()
    assert [type(exc) for exc in raised] == [ProcessEnded]
    assert child.proc.returncode is not None
    assert after_reaping == []


def test_a_child_warm_could_not_start_leaves_the_calls_to_start_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """warm() starts children in threads of their own, and a call waits for one of those
    rather than start another. A start that failed otherwise than ProcessEnded (the
    socket pair refused: too many open files, on a big run) killed its thread with a
    traceback before it said it was done, and every call then waited for it for ever."""
    import errno
    import socket

    from oloproof.transport.processes import ProcessPool

    real_socketpair = socket.socketpair
    refused: list[str] = []

    def socketpair(*args: Any) -> tuple[socket.socket, socket.socket]:
        if not refused:  # the first start, warm()'s
            refused.append(threading.current_thread().name)
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_socketpair(*args)

    monkeypatch.setattr(socket, "socketpair", socketpair)
    pool = ProcessPool(1, ("operator", "itemgetter", (0,)), name="warm-test")
    answers: list[object] = []
    try:
        pool.warm()
        for thread in threading.enumerate():
            if thread.name == "warm-test-start":
                thread.join(60)
        assert refused == ["warm-test-start"]

        def call() -> None:
            try:
                answers.append(pool.call((7,), 60.0))
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                answers.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        caller.join(60)
        waited = caller.is_alive()
    finally:
        pool.close()
    assert not waited, "the call waited for a child warm() never started"
    assert answers == [7]
