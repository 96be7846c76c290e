"""Shared pieces of the benchmarks: projects on disk, timing whole commands, the report file.

Every figure is the wall time of a whole process (start to exit), as a user
would see it, measured with ``os.wait4`` so that its CPU time and peak memory
(max RSS) come with it. Commands run with the bytecode cache enabled, as an
installed package does (``PYTHONDONTWRITEBYTECODE`` is dropped from their
environment, and the sources are compiled once up front).
"""

from __future__ import annotations

import compileall
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "performance.md"
_SCRIPT = Path(sys.executable).parent / "oloproof"
# The console script a user types; `python -m` where it is not installed.
OLOPROOF = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "oloproof.cli.main"]
PY = sys.executable

HEADER = (
    "# Performance\n\n"
    "Figures measured by `make bench` (`bench/run_all.py`; each script in `bench/` also runs "
    "alone). Each figure is the median over several runs of the wall time of a whole process, "
    "start to exit, shown beside its ideal. The machine is a shared 2-core VM: other jobs ran "
    "beside the benchmark, so single runs vary by 10–30%; the medians are what to compare.\n"
)


def bench_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a measured command: the user's, without debugging or bytecode quirks."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "OLOPROOF_DEBUG", "PYTHONPROFILEIMPORTTIME")
    }
    env["OLOPROOF_NO_LIVE"] = "1"
    env.update(extra or {})
    return env


def compile_sources() -> None:
    """Write the bytecode cache of oloproof, as `pip install` does for a wheel."""
    compileall.compile_dir(str(ROOT / "src" / "oloproof"), quiet=1, workers=1)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}){mem}, "
        f"Python {platform.python_version()}"
    )


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def write_project(
    root: Path, *, n: int, app: str, system: int = 8, judge: int = 4, evaluators: str | None = None,
    extra: str = "",
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "app.py").write_text(app)
    (root / "data").mkdir(exist_ok=True)
    with (root / "data" / "cases.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"q{i:06d}", "input": {"n": i}, "expected": {"label": "ok"}}) + "\n")
    evaluators = evaluators or (
        "  - type: exact_match\n    criterion: exact_label\n    field: label\n"
    )
    (root / "oloproof.yaml").write_text(
        "version: 1\nproject: bench\ndataset: data/cases.jsonl\npolicy: none\n"
        "system:\n  name: bench\n  version: '1'\n  callable: app:answer\n"
        f"concurrency:\n  system: {system}\n  judge: {judge}\n{extra}evaluators:\n{evaluators}"
    )
    return root


def set_concurrency(root: Path, system: int) -> None:
    cfg = root / "oloproof.yaml"
    cfg.write_text(re.sub(r"(?m)^  system: \d+$", f"  system: {system}", cfg.read_text()))


@dataclass
class Measure:
    wall: float  # seconds, the whole process
    cpu: float  # user + system seconds of the process
    max_rss_mb: float  # peak resident memory of the process
    user: float = 0.0  # user seconds alone
    system: float = 0.0  # system seconds alone
    minor_faults: int = 0  # pages the process touched first (minor page faults)


def measure(
    args: Sequence[str], cwd: Path, env: dict[str, str] | None = None, *,
    stdout: Any = subprocess.DEVNULL, ok: tuple[int, ...] = (0, 1, 3),
) -> Measure:
    """Run one command to its end; its wall time, CPU time and max RSS."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(args), cwd=cwd, env=bench_env(env), stdout=stdout,
                                stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in ok:
            err.seek(0)
            raise RuntimeError(
                f"{' '.join(args)} exited {proc.returncode}: {err.read().decode()[-2000:]}"
            )
    return Measure(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                   usage.ru_utime, usage.ru_stime, usage.ru_minflt)


def timed(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Wall time of a whole command, in seconds (the process, start to exit)."""
    return measure(args, cwd, env).wall


def repeat(n: int, args: Sequence[str], cwd: Path, env: dict[str, str] | None = None,
           **kw: Any) -> list[Measure]:
    return [measure(args, cwd, env, **kw) for _ in range(n)]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def med_wall(runs: Sequence[Measure]) -> float:
    return statistics.median(m.wall for m in runs)


def spread(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    return ", ".join(fmt.format(v) for v in values)


def seconds(value: float) -> str:
    return f"{value:.2f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"


def record(script: str, figures: list[dict[str, Any]]) -> None:
    """Hand this script's headline figures to run_all.py (when it is the caller).

    Each figure: ``name``, ``value``, ``unit`` ("s", "µs", "MB", "calls/s"), and
    optionally ``ideal``, ``target`` (text), ``met`` (bool), ``note``.
    """
    out = os.environ.get("OLOPROOF_BENCH_RESULTS")
    if not out:
        return
    path = Path(out) / f"{script}.json"
    path.write_text(json.dumps({"script": script, "figures": figures}, indent=2))


def write_section(name: str, body: str) -> None:
    """Replace (or add) the section ``name`` of docs/performance.md, leaving the others."""
    REPORT.parent.mkdir(exist_ok=True)
    text = REPORT.read_text() if REPORT.exists() else HEADER
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.DOTALL)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    REPORT.write_text(text)
