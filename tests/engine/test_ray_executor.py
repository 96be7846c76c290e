"""The Ray executor (issue 27 §2) against a real Ray cluster on this machine: a head and a
second worker node (tests/raycluster.py), one for the whole module; and one local instance
that ``oloproof run --executor ray`` starts and must stop, even when it is SIGKILLed.

What is checked: the same stored evidence and decision as the local executor; the system's
calls and the custom evaluators ran in Ray worker processes, on both nodes; a worker killed
mid-run loses only its calls in flight, which the next run makes, the rest coming from the
cache; Ctrl-C stores what finished; no Ray process outlives its run or the tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.raycluster import RAY_INSTALLED, RayCluster, Unavailable, session_pids

APP = """
import os, time
from pathlib import Path
from oloproof import TransientError, current_case, system

LOG = Path((Path(__file__).parent / "log_to").read_text().strip())


def _log(*words):
    with open(LOG / "calls.log", "a") as fh:
        fh.write(" ".join(str(w) for w in words) + "\\n")


@system(name="ray-shaped", version="1")
def answer(case_input):
    n = case_input["n"]
    pause = float((Path(__file__).parent / "pause").read_text() or 0)
    _log("start", os.getpid(), n)
    time.sleep(pause)
    if n % 7 == 3:
        raise RuntimeError(f"no answer for {n}")
    if n % 5 == 1 and current_case().attempt == 1:
        raise TransientError("busy, try again", retryable=True)
    _log("end", os.getpid(), n)
    return {"label": "ok" if n % 4 else "ko", "n": n}
"""

CHECKS = """
import os
from pathlib import Path

LOG = Path((Path(__file__).parent / "log_to").read_text().strip())


def even(output, case):
    with open(LOG / "checks.log", "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    return output["n"] % 2 == 0
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: custom
  criterion: even
  function: checks:even
"""

RELEASE = """
version: 1
rules:
  - id: label-floor
    metric: exact_label
    min: 0.4
  - id: evens
    metric: even
    kind: observed_count
    max_failures: 20
"""


def _project(root: Path, n: int = 16, *, pause: float = 0.05, system: int = 4) -> Path:
    write_project(root, app=APP, cases=labelled_cases(n), evaluators=EVALUATORS,
                  # A budget the suite can exceed (issue 25 refuses one it cannot).
                  release=RELEASE.replace("max_failures: 20", f"max_failures: {n // 2}"),
                  concurrency=(system, 2),
                  extra_files={"checks.py": CHECKS, "log_to": str(root / "logs"),
                               "pause": str(pause)})
    (root / "logs").mkdir()
    return root


def _log(root: Path, name: str = "calls.log") -> list[list[str]]:
    path = root / "logs" / name
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    # A short path: Ray's Unix sockets live under it (at most 107 bytes).
    tmp = Path(tempfile.mkdtemp(prefix="olo-ray-", dir="/tmp"))
    ray = RayCluster(tmp)
    try:
        ray.start()
    except Unavailable as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if not RAY_INSTALLED:
            pytest.skip(f"Ray is not installed (pip install 'oloproof[ray]'): {exc}")
        pytest.fail(f"Ray is installed and its cluster did not start: {exc}")
    yield ray
    left = ray.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    assert left == [], f"Ray processes left behind: {left}"


def _env(cluster: RayCluster) -> dict[str, str]:
    return {k: cluster.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}


_TIMING = {"created_at", "finished_at", "latency_ms", "pid", "id", "run_id"}


def _stored(root: Path) -> dict[str, Any]:
    """The newest run's rows, timing fields and ids left out, and the project's directory
    as PROJECT in the text (an error's traceback names the file it was raised in)."""
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        run_id = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()[0]
        out = {}
        for table, key in (("runs", "id"), ("run_cases", "run_id"), ("run_judgments", "run_id"),
                           ("decisions", "run_id")):
            cur = conn.execute(f"SELECT * FROM {table} WHERE {key} = ? ORDER BY 1, 2, 3",
                               (run_id,))
            names = [d[0] for d in cur.description]
            out[table] = [
                {k: v.replace(str(root), "PROJECT") if isinstance(v, str) else v
                 for k, v in zip(names, row, strict=True) if k not in _TIMING}
                for row in cur.fetchall()
            ]
        return out
    finally:
        conn.close()


@pytest.mark.slow  # a Ray cluster
def test_a_ray_run_stores_and_decides_what_a_local_run_does(
    tmp_path: Path, cluster: RayCluster
) -> None:
    local = run_cli("run", "--executor", "local", cwd=_project(tmp_path / "local"))
    assert local.code in (0, 1, 3), local.text
    root = _project(tmp_path / "ray")
    remote = run_cli("run", "--executor", "ray", "--ray-address", cluster.address, cwd=root,
                     env=_env(cluster), timeout=600)
    assert remote.code == local.code, remote.text
    assert _stored(root) == _stored(tmp_path / "local")
    # Where the calls ran: Ray worker processes, one per node of the cluster.
    said = re.search(r"Ran on the Ray cluster at \S+: 2 workers on 2 nodes \(pids (\d+), (\d+)\)",
                     remote.out)
    assert said is not None, remote.out
    workers = {int(said.group(1)), int(said.group(2))}
    calls = _log(root)
    assert {int(pid) for _, pid, _ in calls} <= workers
    assert len({pid for _, pid, _ in calls}) == 2  # both workers called the system
    checks = {int(line[0]) for line in _log(root, "checks.log")}
    assert checks and checks <= workers
    local_pids = {int(pid) for _, pid, _ in _log(tmp_path / "local")}
    assert not local_pids & workers
    # Retries are the driver's: the cases that asked for one were called twice, as locally.
    assert sum(1 for kind, _, n in calls if kind == "start" and int(n) % 5 == 1) == 2 * 3


@pytest.mark.slow  # a Ray cluster
def test_an_unchanged_ray_run_starts_no_ray(tmp_path: Path, cluster: RayCluster) -> None:
    root = _project(tmp_path / "p")
    # Every case answers, so every result is cached after the first run.
    (root / "app.py").write_text(APP.replace("n % 7 == 3", "False"))
    first = run_cli("run", "--executor", "ray", "--ray-address", cluster.address, cwd=root,
                    env=_env(cluster), timeout=600)
    assert first.code in (0, 1, 3), first.text
    # An address nobody answers: a rerun that needed Ray would fail.
    again = run_cli("run", "--executor", "ray", "--ray-address", "127.0.0.1:1", cwd=root,
                    env=_env(cluster))
    assert again.code == first.code, again.text
    assert "Ran on" not in again.out
    assert "executions 16 hits · 0 misses" in again.out


def _stored_ok(root: Path) -> set[str]:
    """The cases stored OK so far (none while the store or its tables do not exist yet)."""
    path = root / ".oloproof" / "store.sqlite"
    if not path.exists():
        return set()
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return {r[0] for r in conn.execute("SELECT case_id FROM run_cases WHERE status = 'OK'")}
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return set()


def _wait_for(predicate: Any, timeout_s: float = 300.0, every_s: float = 0.1) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError("timed out")


@pytest.mark.slow  # a Ray cluster, calls that sleep
def test_a_worker_killed_mid_run_loses_only_its_calls_in_flight(
    tmp_path: Path, cluster: RayCluster
) -> None:
    root = _project(tmp_path / "p", n=12, pause=2.0, system=4)
    (root / "app.py").write_text(APP.replace("n % 7 == 3", "False").replace(
        "n % 5 == 1 and", "False and"))
    proc = subprocess.Popen([*OLOPROOF, "run", "--executor", "ray", "--ray-address",
                             cluster.address], cwd=root, env={**os.environ, **_env(cluster)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = _wait_for(lambda: [c for c in _log(root) if c[0] == "start"])
        victim = int(started[0][1])
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    calls = _log(root)
    in_flight = {int(n) for kind, pid, n in calls if kind == "start" and int(pid) == victim} - {
        int(n) for kind, pid, n in calls if kind == "end" and int(pid) == victim}
    assert in_flight, calls
    assert "DECIDED/COMPLETE" in out, out + err
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    rows = dict(conn.execute("SELECT case_id, status || ' ' || coalesce(error, '') FROM run_cases"))
    conn.close()
    lost = {case for case, what in rows.items() if what.startswith("ERROR")}
    # Lost: the calls the victim had started (its log says so) and, on a loaded machine, a
    # call the driver had already handed to it that had not yet written its first line.
    # Never a call that ended anywhere.
    assert {f"q{n:03d}" for n in in_flight} <= lost
    ended = {f"q{int(n):03d}" for kind, _, n in calls if kind == "end"}
    assert not lost & ended, (lost, ended)
    assert all("the Ray worker running this call ended" in rows[c] for c in lost)
    assert all(what.startswith("OK") for case, what in rows.items() if case not in lost)
    # The next run makes only the lost calls; every other case comes from the cache.
    before = len(calls)
    again = run_cli("run", "--executor", "ray", "--ray-address", cluster.address, "--json",
                    cwd=root, env=_env(cluster), timeout=600)
    events = [json.loads(line) for line in again.out.splitlines()]
    fresh = {e["scenario_id"] for e in events if e["type"] == "case_executed" and not e["from_cache"]}
    assert fresh == lost
    assert {f"q{int(n):03d}" for kind, _, n in _log(root)[before:] if kind == "start"} == lost
    end = events[-1]
    assert end["type"] == "run_finished" and end["completeness"] == "COMPLETE"


@pytest.mark.slow  # a Ray cluster, calls that sleep
@pytest.mark.parametrize(("sig", "reason"), [(signal.SIGINT, "interrupted"),
                                             (signal.SIGTERM, "terminated (SIGTERM)")])
def test_ctrl_c_stores_what_finished(
    tmp_path: Path, cluster: RayCluster, sig: signal.Signals, reason: str
) -> None:
    root = _project(tmp_path / "p", n=20, pause=1.0, system=2)
    (root / "app.py").write_text(APP.replace("n % 7 == 3", "False").replace(
        "n % 5 == 1 and", "False and"))
    # A run that does not end is made to say where it waits: OLOPROOF_DEBUG=1 has SIGUSR1
    # print its loop's tasks and its threads, PYTHONFAULTHANDLER has SIGABRT print the
    # threads once more as it dies.
    proc = subprocess.Popen([*OLOPROOF, "run", "--executor", "ray", "--ray-address",
                             cluster.address], cwd=root,
                            env={**os.environ, **_env(cluster), "PYTHONFAULTHANDLER": "1",
                                 "OLOPROOF_DEBUG": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Four cases stored (committed), not only four calls ended in the workers: a call
        # that ended there may still be on its way back when the signal comes, and is then
        # in flight, not finished (seen once in CI: 4 ended, 3 stored).
        _wait_for(lambda: len(_stored_ok(root)) >= 4)
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(5)
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate(timeout=60)
            pytest.fail(f"the run did not end within 300 s of SIGINT; where it waited:\n"
                        f"{err[-40000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 5, out + err
    assert "RUN_ERROR/PARTIAL" in out and reason in out
    # Ray's failure signal handler in the driver wrote a crash dump on SIGTERM.
    assert "received at time" not in err, err
    stored = _stored_ok(root)
    ended = {f"q{int(n):03d}" for kind, _, n in _log(root) if kind == "end"}
    assert len(stored) >= 4 and stored <= ended


# -- a local instance of the run's own -------------------------------------------------


def _run_in_own_session(root: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "OLOPROOF_DEBUG")}
    return subprocess.Popen([*OLOPROOF, "run", "--executor", "ray", *args], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.mark.slow  # starts a local Ray instance twice
def test_a_local_instance_is_stopped_with_its_run_even_a_killed_one(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", n=8)
    proc = _run_in_own_session(root)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (0, 1, 3), out + err
    assert "Ran on a local Ray instance: 2 workers on 1 node" in out
    # Every process the instance started was in the run's session: none is left.
    assert _wait_for(lambda: not session_pids(proc.pid), timeout_s=60, every_s=0.5)
    # Killed while its workers run: the instance dies with the thread that started it.
    (root / "pause").write_text("30")
    cfg = root / "oloproof.yaml"
    cfg.write_text(cfg.read_text().replace("version: \"1\"", "version: \"2\""))
    before = len(_log(root))
    proc = _run_in_own_session(root, "--no-cache")
    try:
        _wait_for(lambda: len(_log(root)) > before, timeout_s=600)  # its calls have started
        names = {_comm(pid) for pid in session_pids(proc.pid)}
        assert {"gcs_server", "raylet"} <= names, names  # Ray's own, in the run's session
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _wait_for(lambda: not session_pids(proc.pid), timeout_s=120, every_s=0.5), (
        session_pids(proc.pid))


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_without_ray_installed_the_executor_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p", n=8)
    hide = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if it were not installed\n"
        "from oloproof.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run([sys.executable, "-c", hide, "run", "--executor", "ray"], cwd=root,
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "oloproof run: error: --executor ray needs Ray, which is not installed here:"
        " pip install 'oloproof[ray]' (or run with --executor local)"
    )
    cfg = root / "oloproof.yaml"
    cfg.write_text(cfg.read_text() + "executor: ray\n")
    done = subprocess.run([sys.executable, "-c", hide, "run"], cwd=root, capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "oloproof run: error: oloproof.yaml:18: executor: ray needs Ray, which is not installed"
        " here: pip install 'oloproof[ray]' (accepted: local, ray)"
    )
    assert not (root / ".oloproof" / "store.sqlite").exists()


@pytest.mark.slow  # starts a local Ray instance
def test_a_matrix_runs_each_variant_on_ray_workers_with_one_ray_start(tmp_path: Path) -> None:
    """``run --matrix --executor ray`` (refused, exit 2, by the old code): each variant's
    calls on Ray workers of its own that built that variant's system, one local Ray instance
    for the whole matrix, stopped with it, and the same evidence and decisions as the matrix
    run locally. (A local instance: its workers inherit the run's environment, where the
    model's key is; a cluster's workers need it set on their nodes, as for an HTTP system's
    header variables: docs/prompts-and-models.md.)"""
    from tests.fakes.provider import FakeServer
    from tests.systems.test_model_system import KEY, _cases
    from tests.systems.test_model_system import _project as model_project

    matrix = "matrix:\n  product:\n    model: {small: fake-small, large: fake-large}\n"
    release = "version: 1\nrules:\n  - id: floor\n    metric: correct\n    min: 0.4\n"
    with FakeServer() as srv:
        local_root = model_project(tmp_path / "local", srv.openai_base_url, matrix=matrix,
                                   cases=_cases(24), release=release)
        root = model_project(tmp_path / "ray", srv.openai_base_url, matrix=matrix,
                             cases=_cases(24), release=release)
        local = run_cli("run", "--matrix", cwd=local_root, env={"MODEL_TEST_KEY": KEY})
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "OLOPROOF_DEBUG")}
        proc = subprocess.Popen([*OLOPROOF, "run", "--matrix", "--executor", "ray"], cwd=root,
                                env={**env, "MODEL_TEST_KEY": KEY}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
        calls = srv.total_calls("/v1/chat/completions")
    assert local.code == 0, local.text
    assert proc.returncode == local.code, out + err
    assert calls == 2 * 2 * 24  # each matrix called each variant once per case
    # Ray stopped with the matrix: no process of the instance is left.
    assert _wait_for(lambda: not session_pids(proc.pid), timeout_s=120, every_s=0.5)
    here, there = (
        json.loads(run_cli("inspect", next(w for w in text.split() if w.startswith("mx_")),
                           "--json", cwd=where).out)
        for where, text in ((local_root, local.out), (root, out))
    )
    assert there["ray_starts"] == 1 and "Ray was started once" in out, out
    jobs = set()
    pids: list[set[int]] = []
    for v in there["variants"]:
        ran_on = v["ran_on"]
        assert ran_on is not None and ran_on["executor"] == "ray", v
        assert f"{v['name']}: Ran on a local Ray instance: 2 workers on 1 node" in out, out
        jobs.add(ran_on["ray_job"])
        pids.append({int(w[0]) for w in ran_on["workers"]})
    assert len(jobs) == 1  # one Ray start (one job) for both variants
    assert not pids[0] & pids[1]  # each variant had workers of its own
    assert proc.pid not in pids[0] | pids[1]
    assert all(v["ran_on"] is None for v in here["variants"])

    def evidence(doc: dict[str, Any]) -> list[Any]:
        return [(v["name"], v["metrics"], [d["state"] for d in v["decisions"]])
                for v in doc["variants"]]

    assert evidence(there) == evidence(here)
    assert [c["verdict"] for c in there["comparisons"]] == [
        c["verdict"] for c in here["comparisons"]]


@pytest.mark.slow  # a Ray cluster
def test_a_matrix_joins_a_ray_cluster_once(tmp_path: Path, cluster: RayCluster) -> None:
    """On a running cluster: one Ray job for the whole matrix, each variant's workers spread
    over both nodes. The model's key is read where the call is made, so its variable must be
    set on the nodes: here RAY_AUTH_TOKEN, which the cluster's nodes and the driver both
    have (the fake provider takes any key)."""
    from tests.fakes.provider import FakeServer
    from tests.systems.test_model_system import _cases
    from tests.systems.test_model_system import _project as model_project

    matrix = "matrix:\n  product:\n    model: {small: fake-small, large: fake-large}\n"
    with FakeServer() as srv:
        root = model_project(tmp_path / "p", srv.openai_base_url, matrix=matrix,
                             cases=_cases(12))
        config = root / "oloproof.yaml"
        config.write_text(config.read_text().replace("api_key_env: MODEL_TEST_KEY",
                                                     "api_key_env: RAY_AUTH_TOKEN"))
        done = run_cli("run", "--matrix", "--executor", "ray", "--ray-address",
                       cluster.address, cwd=root, env=_env(cluster), timeout=600)
        calls = srv.total_calls("/v1/chat/completions")
    assert done.code == 0, done.text
    assert calls == 2 * 12
    matrix_id = next(w for w in done.out.split() if w.startswith("mx_"))
    doc = json.loads(run_cli("inspect", matrix_id, "--json", cwd=root).out)
    assert doc["ray_starts"] == 1
    assert len({v["ran_on"]["ray_job"] for v in doc["variants"]}) == 1
    for v in doc["variants"]:
        assert f"{v['name']}: Ran on the Ray cluster at {cluster.address}: 2 workers on 2 nodes" \
            in done.out, done.out


# -- the workers as Ray makes them, built here without starting Ray ----------------------


def _ray_prepared(root: Path) -> Any:
    """The run ``oloproof run --executor ray`` prepares (nothing started), and its executor."""
    pytest.importorskip("ray")
    from oloproof.runner.build import prepare

    prepared = prepare(str(root / "oloproof.yaml"), None, executor="ray")
    return prepared, prepared.system.executor


def test_a_worker_that_sees_another_custom_evaluator_is_refused(tmp_path: Path) -> None:
    """A worker checked the system's identity against the driver's, not the custom
    evaluators': checks.py edited while Ray started (tens of seconds), or a node holding
    another checkout, had the worker judge with other code than the driver's, and its
    verdicts were stored and cached under the driver's evaluator identity (a later run of
    the driver's code took them from the cache)."""
    from oloproof.runner.ray_executor import ExecutorError, _Worker

    root = _project(tmp_path / "p", n=8)
    _, executor = _ray_prepared(root)
    args = executor.worker_args()
    assert _Worker(*args).customs["even"].identity == executor.customs[0].identity
    (root / "checks.py").write_text(CHECKS.replace("% 2 == 0", "% 2 == 1"))
    with pytest.raises(ExecutorError, match=r"sees other code for the custom evaluator even"
                       r" than the driver: identity sha256:"):
        _Worker(*args)
    # An oloproof.yaml that no longer has the criterion: refused too, before any call.
    (root / "checks.py").write_text(CHECKS)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("criterion: even", "criterion: odd"))
    with pytest.raises(ExecutorError, match=r"finds no custom evaluator even in .*oloproof\.yaml"):
        _Worker(*args)


HELD = """
import threading

RELEASED = threading.Event()


async def held(output, case):
    RELEASED.wait(30)  # blocks its loop, as a sync client called inside async def does
    return RELEASED.is_set()
"""


def test_an_async_evaluator_that_blocks_its_loop_holds_no_system_call(tmp_path: Path) -> None:
    """A worker awaited an ``async def`` custom evaluator on its own actor loop, where the
    system's calls are answered: one that blocked its loop (a time.sleep or a sync client
    inside async def) held every call sent to that worker until it returned, for ever for
    one that never does (the run hung), and its timeout_s could not fire. Locally it runs on
    a loop of its own (engine/pipeline.py); on a worker now too. Here the evaluator waits
    for the system's call to have been answered: it was not, until its 30 s ran out."""
    import asyncio

    from oloproof.runner.ray_executor import _Worker

    root = _project(tmp_path / "p", n=8)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("function: checks:even", "function: held:held"))
    (root / "held.py").write_text(HELD)
    (root / "app.py").write_text(APP.replace("n % 7 == 3", "False"))
    (root / "pause").write_text("0")
    _, executor = _ray_prepared(root)
    worker = _Worker(*executor.worker_args())
    released = worker.customs["even"].fn.__globals__["RELEASED"]

    async def scenario() -> tuple[Any, Any]:
        judged = asyncio.create_task(worker.evaluate(
            "even", ("q000", {"n": 0}, None, None), {"label": "ko", "n": 0}, 60.0))
        await asyncio.sleep(0)  # the evaluation starts, and blocks whichever loop it is on
        answered = await worker.call("q002", {"n": 2}, 1)
        released.set()
        return answered, await judged

    try:
        answered, verdict = asyncio.run(scenario())
    finally:
        released.set()
    assert answered[0] == "ok" and answered[1] == {"label": "ok", "n": 2}
    assert verdict[:3] == ("ok", "OK", True)  # released by the answered call, not timed out


DIES = """
import os

def even(output, case):
    if output["n"] == 4:
        os._exit(1)  # generated code run by the check ends its process, the worker with it
    return output["n"] % 2 == 0
"""


@pytest.mark.slow  # a Ray cluster
def test_a_run_whose_last_worker_died_during_its_evaluations_stops(
    tmp_path: Path, cluster: RayCluster
) -> None:
    """Every worker gone while only custom evaluations were left (the outputs cached, a check
    that runs generated code, which ended its process): each evaluation after it failed with
    'every Ray worker of the run has ended', never a stop, and the run was decided on the
    verdicts left: DECIDED/COMPLETE (blocked here by max_missing, 4 of 8 verdicts missing;
    under a policy that tolerates missing cases, decided on the 4 judged before the loss).
    A system call meeting the same stopped the run. It stops now, RUN_ERROR/PARTIAL, exit 5."""
    root = _project(tmp_path / "p", n=8)
    (root / "app.py").write_text(APP.replace("n % 7 == 3", "False").replace(
        "n % 5 == 1 and", "False and"))
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("concurrency:\n", "concurrency:\n  evaluator: 1\n")
                      + "ray:\n  workers: 1\n")
    first = run_cli("run", "--executor", "local", cwd=root)  # caches every output
    assert first.code in (0, 1, 3), first.text
    (root / "checks.py").write_text(DIES)  # a new evaluator: its verdicts are not cached
    done = run_cli("run", "--executor", "ray", "--ray-address", cluster.address, cwd=root,
                   env=_env(cluster), timeout=600)
    assert done.code == 5, done.text
    assert "RUN_ERROR/PARTIAL" in done.out, done.out
    assert "every Ray worker of the run has ended" in done.out, done.out
    assert "executions 8 hits · 0 misses" in done.out, done.out  # no system call was made
