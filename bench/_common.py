"""Shared pieces of the benchmarks: projects on disk, timing whole commands, the report file."""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "performance.md"
OLOPROOF = [sys.executable, "-m", "oloproof.cli.main"]


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
        "version: 1\nproject: bench\ndataset: data/cases.jsonl\n"
        "system:\n  name: bench\n  version: '1'\n  callable: app:answer\n"
        f"concurrency:\n  system: {system}\n  judge: {judge}\n{extra}evaluators:\n{evaluators}"
    )
    return root


def set_concurrency(root: Path, system: int) -> None:
    cfg = root / "oloproof.yaml"
    cfg.write_text(re.sub(r"(?m)^  system: \d+$", f"  system: {system}", cfg.read_text()))


def timed(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Wall time of a whole command, in seconds (the process, start to exit)."""
    full = dict(os.environ)
    full.update(env or {})
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=full, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1, 3):
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return elapsed


def median(values: list[float]) -> float:
    return statistics.median(values)


def write_section(name: str, body: str) -> None:
    """Replace (or add) the section ``name`` of docs/performance.md, leaving the others."""
    REPORT.parent.mkdir(exist_ok=True)
    text = REPORT.read_text() if REPORT.exists() else (
        "# Performance\n\nFigures measured by `make bench` (see `bench/`). Each is a median over "
        "several runs on a shared, noisy machine, shown beside its ideal.\n"
    )
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    REPORT.write_text(text)
