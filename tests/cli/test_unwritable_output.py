"""A report that cannot be written does not change the exit code.

A run's decision is stored before its report is printed. When the report cannot reach its
reader (a full disk, a reader that went away, a descriptor closed at start or by the system
under test), it is dropped and the exit code stays the command's: 1 would read as a
blocking FAIL, and 70 as our bug."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import IO

import pytest
from tests.conftest import OLOPROOF, RELEASE_FLOOR, events, labelled_cases, write_project

FULL = "/dev/full"
needs_dev_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")


def _project(root: Path, label: str) -> Path:
    """30 cases the system answers with ``label``: all right (ALLOW, 0) or all wrong (1)."""
    return write_project(
        root, app=f"def answer(case_input):\n    return {{'label': {label!r}}}\n",
        cases=labelled_cases(30), release=RELEASE_FLOOR,
    )


def _run(args: list[str], cwd: Path, stdout: IO[str] | int, stderr: IO[str] | int
         ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    return subprocess.run([*OLOPROOF, *args], cwd=cwd, env=env, text=True, check=False,
                          stdin=subprocess.DEVNULL, timeout=120, stdout=stdout, stderr=stderr)


@needs_dev_full
@pytest.mark.parametrize(("label", "code"), [("ok", 0), ("no", 1)])
def test_a_report_to_a_full_disk_keeps_the_gates_exit_code(tmp_path: Path, label: str, code: int) -> None:
    root = _project(tmp_path / "p", label)
    with open(FULL, "w") as full:
        proc = _run(["run"], root, stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == code, proc.stderr
    assert "the report could not be written (No space left on device)" in proc.stderr
    assert "internal error" not in proc.stderr
    with open(FULL, "w") as full:
        gate = _run(["gate", "latest"], root, stdout=full, stderr=subprocess.PIPE)
    assert gate.returncode == code, gate.stderr


@needs_dev_full
def test_json_events_with_standard_error_full_exit_as_the_final_event_says(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "ok")
    with open(FULL, "w") as full:
        proc = _run(["run", "--json"], root, stdout=subprocess.PIPE, stderr=full)
    last = events(proc.stdout)[-1]
    assert last["type"] == "run_finished"
    assert (last["status"], last["exit_code"]) == ("DECIDED", 0)
    assert proc.returncode == 0


@pytest.mark.parametrize("closed", ["stderr", "both"])
def test_descriptors_closed_at_start_keep_the_exit_code(tmp_path: Path, closed: str) -> None:
    root = _project(tmp_path / "p", "ok")
    # --json sends the report to standard error: closed, it has nowhere to go.
    redirect = "--json >/dev/null 2>&-" if closed == "stderr" else ">&- 2>&-"
    cmd = " ".join(f"'{w}'" for w in OLOPROOF)
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    proc = subprocess.run(f"{cmd} run {redirect}; echo $?", shell=True, cwd=root, env=env,
                          text=True, capture_output=True, check=False, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.stdout.strip().splitlines()[-1] == "0", proc.stdout  # the rule's PASS


@needs_dev_full
def test_every_command_writing_to_a_full_disk_keeps_its_exit_code(tmp_path: Path) -> None:
    """The --json documents, plan's text and report's 'written to' line went to standard
    output unguarded: on a full disk 'gate latest --json' exited 70 (internal error) for a
    run whose gate was 1, and runs/inspect/plan/compare --json and report did the same."""
    root = _project(tmp_path / "p", "no")
    assert _run(["run"], root, subprocess.DEVNULL, subprocess.PIPE).returncode == 1
    assert _run(["run", "--no-cache"], root, subprocess.DEVNULL, subprocess.PIPE).returncode == 1
    commands = {
        ("gate", "latest", "--json"): 1,
        ("runs", "--json"): 0,
        ("inspect", "latest", "--json"): 0,
        ("plan", "latest", "--run"): 0,
        ("plan", "latest", "--run", "--json"): 0,
        ("report", "latest", "-o", str(tmp_path / "r.html")): 0,
        ("init", str(tmp_path / "new"), "--example", "starter"): 0,
    }
    ids = [r["id"] for r in json.loads(_run(["runs", "--json"], root, subprocess.PIPE,
                                              subprocess.PIPE).stdout)]
    compare = ("compare", ids[0], ids[1], "--json")
    commands[compare] = _run(list(compare), root, subprocess.DEVNULL, subprocess.PIPE).returncode
    for args, code in commands.items():
        with open(FULL, "w") as full:
            proc = _run(list(args), root, stdout=full, stderr=subprocess.PIPE)
        assert proc.returncode == code, (args, proc.stderr)
        assert "internal error" not in proc.stderr, (args, proc.stderr)
        assert "the report could not be written (No space left on device)" in proc.stderr


@needs_dev_full
def test_a_report_asked_for_on_a_full_standard_output_is_an_error_saying_so(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "ok")
    assert _run(["run"], root, subprocess.DEVNULL, subprocess.PIPE).returncode == 0
    with open(FULL, "w") as full:
        proc = _run(["report", "latest", "-o", "-"], root, stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == 2, proc.stderr
    assert "cannot write the report (No space left on device)" in proc.stderr


@needs_dev_full
def test_json_events_to_a_full_disk_stop_the_run_saying_why(tmp_path: Path) -> None:
    """The events cannot be written: the run stops (exit 5), and says the disk is full,
    not 'standard output was closed by its reader', which sent the user looking for a
    reader that never went away."""
    root = _project(tmp_path / "p", "ok")
    with open(FULL, "w") as full:
        proc = _run(["run", "--json"], root, stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == 5, proc.stderr
    assert "Stopped: standard output cannot be written (No space left on device)." in proc.stderr
    listed = json.loads(_run(["runs", "--json"], root, subprocess.PIPE, subprocess.PIPE).stdout)
    assert listed[0]["stop_reason"] == "standard output cannot be written (No space left on device)"


@needs_dev_full
def test_the_viewer_serves_when_its_address_line_cannot_be_written(tmp_path: Path) -> None:
    """view with standard output on a full disk ended at once as an internal error (exit
    70) before serving; it serves (a --token the user chose, or the browser it opens,
    reaches it) and warns once."""
    pytest.importorskip("uvicorn")
    import signal
    import time

    root = _project(tmp_path / "p", "ok")
    assert _run(["run"], root, subprocess.DEVNULL, subprocess.PIPE).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    with open(FULL, "w") as full:
        proc = subprocess.Popen([*OLOPROOF, "view", "--no-open", "--port", "0"], cwd=root,
                                env=env, stdout=full, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
        try:
            time.sleep(4)
            assert proc.poll() is None, proc.communicate()
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
    assert "internal error" not in err, err
    assert "could not be written (No space left on device)" in err, err


def test_annotations_to_a_reader_that_went_away_keep_the_gates_exit_code(tmp_path: Path) -> None:
    """`gate --github-annotations | head -c 10`: the report reached the pipe, the
    annotations after it met the closed reader, and BrokenPipeError ended the command with
    5 in place of the gate's 1 (9 runs in 10). They are written as the report is."""
    root = _project(tmp_path / "p", "no")
    assert _run(["run"], root, subprocess.DEVNULL, subprocess.PIPE).returncode == 1
    cmd = " ".join(f"'{w}'" for w in OLOPROOF)
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    for _ in range(5):
        proc = subprocess.run(
            f"{cmd} gate latest --github-annotations | head -c 10 >/dev/null;"
            " echo ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", cwd=root, env=env,
            text=True, capture_output=True, check=False, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.stdout.strip() == "1", proc.stderr
        assert "Traceback" not in proc.stderr


@needs_dev_full
@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_help_version_and_usage_errors_to_a_full_disk_keep_their_exit_code(
    tmp_path: Path, unbuffered: str
) -> None:
    """With PYTHONUNBUFFERED=1 (set in many container images) the write itself fails on a
    full disk: '--version' and '--help' ended with a traceback and exit 1, 'init --example
    list' as an internal error (70), and a usage error with standard error full exited 1
    (a FAIL) in place of 2."""
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    env["PYTHONUNBUFFERED"] = unbuffered
    cases = [(["--version"], "out", 0), (["--help"], "out", 0), ([], "out", 2),
             (["gate", "--help"], "out", 0), (["init", "--example", "list"], "out", 0),
             (["--bogus"], "err", 2), (["gate", "--bogus"], "err", 2)]
    for args, where, code in cases:
        with open(FULL, "w") as full:
            proc = subprocess.run(
                [*OLOPROOF, *args], cwd=tmp_path, env=env, text=True, check=False,
                timeout=120, stdin=subprocess.DEVNULL,
                stdout=full if where == "out" else subprocess.PIPE,
                stderr=full if where == "err" else subprocess.PIPE)
        assert proc.returncode == code, (args, proc.stderr)
        assert "Traceback" not in (proc.stderr or ""), (args, proc.stderr)


@needs_dev_full
def test_both_streams_full_keep_the_exit_code_not_120(tmp_path: Path) -> None:
    """Buffered standard error (PYTHONUNBUFFERED unset): the warning or the error line that
    could not be written stayed in its buffer, failed again at the interpreter's exit, and
    Python exited 120: 'gate latest >/dev/full 2>/dev/full' for a gate of 1, and every
    refusal ('gate nosuchrun 2>/dev/full') in place of 2."""
    root = _project(tmp_path / "p", "no")
    assert _run(["run"], root, subprocess.DEVNULL, subprocess.PIPE).returncode == 1
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "PYTHONUNBUFFERED")}
    for args, code in ((["gate", "latest"], 1), (["gate", "latest", "--json"], 1),
                       (["gate", "nosuchrun"], 2), (["run", "--policy", "nope.yaml"], 2)):
        with open(FULL, "w") as out, open(FULL, "w") as err:
            proc = subprocess.run([*OLOPROOF, *args], cwd=root, env=env, check=False,
                                  timeout=120, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        assert proc.returncode == code, args
