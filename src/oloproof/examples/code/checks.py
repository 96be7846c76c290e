"""Executing generated code, safely-ish: the custom evaluator of this example.

`passes(output, case, timeout_s=..., memory_mb=...)` runs the completion and the case's
tests in a child Python process and says whether every test ran and passed.

What it does, and why:

- a **child process** (`python -I`: isolated mode, no user site-packages, no PYTHON*
  variables), in a fresh temporary directory, with an empty environment and no stdin:
  the completion cannot crash, hang or pollute the evaluator's own process;
- a **timeout** (`timeout_s`, from `params:` in oloproof.yaml): an infinite loop is a
  failure, not a hung run; the child is killed;
- **resource limits** (POSIX `setrlimit`, set by the child on itself before the first line
  of the completion runs): address space (`memory_mb`), CPU seconds, file size, open files,
  and no core dumps;
- **pass = the tests reached their end**, not "exit code 0": the program prints a random
  token after the last test, and the case passes only if the child exited 0 *and* printed
  it. A completion that calls `sys.exit(0)` or `os._exit(0)` before the tests run exits
  with code 0 and has passed nothing: with `exit code 0 == pass` it would pass.

What it does not do: it is not a sandbox. The child can still read files your user can
read, open network connections and start processes. For untrusted code (anything a model
wrote that you have not read), run the evaluator inside a container or a VM with no
network and a read-only file system, as HumanEval's authors advise.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile

from oloproof import Verdict


# Prepended to the program: the child limits itself before any line of the completion
# runs. Not a preexec_fn: that runs between fork and exec in a process with threads
# (Oloproof runs evaluators in worker threads), which Python documents as unsafe, and it
# forces a full fork of the evaluating process, slower than the spawn used without it.
_LIMITS = """\
import resource as _r
for _k, _v in ((_r.RLIMIT_AS, {mem}), (_r.RLIMIT_CPU, {cpu}), (_r.RLIMIT_FSIZE, 1 << 20),
               (_r.RLIMIT_NOFILE, 64), (_r.RLIMIT_CORE, 0)):
    _r.setrlimit(_k, (_v, _v))
del _r, _k, _v
"""


def run_program(program: str, *, timeout_s: float, memory_mb: int) -> tuple[int | None, str, str]:
    """Run ``program`` in a limited child Python: (exit code or None on timeout, stdout, stderr)."""
    if os.name == "posix":
        limits = _LIMITS.format(mem=memory_mb * 1024 * 1024, cpu=max(1, int(timeout_s) + 1))
        program = limits + program
    with tempfile.TemporaryDirectory(prefix="oloproof-exec-") as tmp:
        path = os.path.join(tmp, "program.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(program)
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-S", path], cwd=tmp, env={}, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=timeout_s,
                # Its own session: a timeout kills the child and anything it started.
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            return None, _text(exc.stdout), _text(exc.stderr)
    return proc.returncode, proc.stdout, proc.stderr


def _text(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


def passes(output: dict, case, timeout_s: float = 10.0, memory_mb: int = 512) -> Verdict:
    """The completion, then the case's tests, then a token only a finished run prints."""
    token = secrets.token_hex(16)
    program = "\n".join([
        case.input["prompt"] + output["completion"],
        "",
        case.expected["tests"],
        "",
        f"check({case.input['entry_point']})",
        f"print({token!r})",
    ])
    code, stdout, stderr = run_program(program, timeout_s=timeout_s, memory_mb=memory_mb)
    if code is None:
        return Verdict(passed=False, reason=f"timed out after {timeout_s:g}s")
    finished = stdout.rstrip().endswith(token)
    if code == 0 and finished:
        return Verdict(passed=True)
    if code == 0:
        return Verdict(passed=False, reason="exited 0 before the tests finished (sys.exit?)")
    last = (stderr.strip().splitlines() or ["(no message)"])[-1]
    return Verdict(passed=False, reason=f"exit code {code}: {last[:200]}")
