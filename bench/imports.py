"""Import-time budget: what the start-up of ``oloproof --help`` and of an unchanged rerun
spends importing, by package, from ``python -X importtime``.

    python bench/imports.py [--repeat N]

For each command (``--help``, and ``run`` of the support_bot example with every execution
and judgment in the cache) it runs the process ``--repeat`` times with ``-X importtime``,
takes each module's self time, sums it per top-level package (``oloproof`` split by its
subpackages), and reports the median per package beside a budget. A package over its budget
is named in the output, so a regression shows by name. The budgets are today's medians with
room for noise; lower them as start-up work lands (issue 16).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import OLOPROOF, PY, bench_env, machine, record, write_section

# Milliseconds of self time per package on the cached-rerun path (2-core machine). Today's
# medians plus about a third for noise; anything not listed has a budget of 15 ms.
BUDGET_MS = {
    "oloproof.project": 60, "oloproof.runner": 25, "oloproof.engine": 15, "oloproof.api": 15,
    "oloproof.store": 30, "oloproof.policy": 15, "oloproof.render": 15, "oloproof.cli": 15,
    "pydantic": 60, "pydantic_core": 25, "rich": 80, "jsonschema": 30, "referencing": 25,
    "httpx": 25, "yaml": 20, "asyncio": 20,
}
DEFAULT_BUDGET_MS = 15.0


def _package(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "oloproof" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def importtime(args: list[str], cwd: Path) -> dict[str, float]:
    """Self import time per package, in ms, of one process running ``args``."""
    done = subprocess.run(
        [PY, "-X", "importtime", *args], cwd=cwd, capture_output=True, text=True,
        env=bench_env(), check=False,
    )
    per: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.split(":", 1)[1].split("|")
        per[_package(name.strip())] += int(self_us) / 1000.0
    return dict(per)


def measure(args: list[str], cwd: Path, repeat: int) -> dict[str, float]:
    runs = [importtime(args, cwd) for _ in range(repeat)]
    names = set().union(*runs)
    return {n: statistics.median(r.get(n, 0.0) for r in runs) for n in names}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    opts = parser.parse_args()
    main_module = ["-m", "oloproof.cli.main"]
    sections = []
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "bot"
        subprocess.run([*OLOPROOF, "init", str(project), "--example", "support_bot"],
                       check=True, capture_output=True)
        subprocess.run([*OLOPROOF, "run"], cwd=project, capture_output=True, check=False)
        for label, args in (("oloproof --help", [*main_module, "--help"]),
                            ("oloproof run (unchanged rerun, all cache)", [*main_module, "run"])):
            per = measure(args, project, opts.repeat)
            total = sum(per.values())
            top = sorted(per.items(), key=lambda kv: -kv[1])[:15]
            over = [(n, ms) for n, ms in per.items() if ms > BUDGET_MS.get(n, DEFAULT_BUDGET_MS)]
            rows = [f"| `{n}` | {ms:.1f} ms | {BUDGET_MS.get(n, DEFAULT_BUDGET_MS):.0f} ms |"
                    f" {'over' if (n, ms) in over else ''} |" for n, ms in top]
            sections.append("\n".join([
                f"### {label}", "",
                (f"All imports together: **{total:.0f} ms** of self time (median of"
                f" {opts.repeat}). The 15 largest packages:"), "",
                "| package | self time | budget | |", "|---|---:|---:|---|", *rows, "",
                ("Over budget: " + ", ".join(f"`{n}` ({ms:.1f} ms)" for n, ms in over) + "."
                 if over else "Every package is within its budget."),
            ]))
            figures.append({"name": f"import time, {label}", "value": total / 1000.0,
                            "unit": "s"})
            print(f"{label}: {total:.0f} ms;", ", ".join(f"{n} {ms:.0f}" for n, ms in top[:8]))
    body = "\n".join([
        "## Import-time budget", "",
        (f"Machine: {machine()}. `python bench/imports.py --repeat {opts.repeat}`: `python -X"
        " importtime`, each module's self time summed per package (Oloproof's by subpackage),"
        " the median over the runs. Budgets are in `bench/imports.py`."), "",
        *sections,
    ])
    write_section("import-budget", body)
    record("imports", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
