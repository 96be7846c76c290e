"""Start-up of this checkout against other commits, interleaved, in CPU time.

    python bench/startup_ab.py REF [REF ...] [--repeat N]

bench/startup.py holds each command to a multiple of a bare interpreter's start, in wall
time; on a busy shared machine every wall time stretches, and its figures then say little.
This benchmark answers the question that remains answerable there: does this checkout
start slower than a commit whose start-up was measured on a quiet machine? Each REF's
``src/`` is exported (``git archive``) to a temporary folder and run with the development
venv's interpreter (``PYTHONPATH`` first, so the exported package is the one imported),
each on a project of its own (the seed load of bench/startup.py: 120 cases, all cached).
Every round runs ``python -c pass`` and then each version of a command, rotating their
order; the figure is the median CPU time (user + system) of the whole process, and the
median of the paired differences with this checkout, also in floors (the floor's CPU).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PY,
    ROOT,
    Measure,
    compile_sources,
    load_average,
    machine,
    measure,
    write_project,
)

APP = """from oloproof import system

@system(name="seed", version="1")
def answer(case_input):
    return {"label": "ok"}
"""
COMMANDS = [("`oloproof --help`", ["--help"]), ("`oloproof runs`", ["runs"]),
            ("`oloproof gate latest`", ["gate", "latest"]), ("unchanged rerun", ["run"])]


def export(ref: str, into: Path) -> Path:
    """``ref``'s ``src/`` in ``into``, compiled."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], check=True,
                             capture_output=True).stdout
    into.mkdir(parents=True)
    tar = into / "src.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    subprocess.run([PY, "-m", "compileall", "-q", str(into / "src")], check=True)
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("refs", nargs="+", help="commits to compare with this checkout")
    ap.add_argument("--repeat", type=int, default=11)
    args = ap.parse_args()
    compile_sources()
    with tempfile.TemporaryDirectory() as tmp:
        sides = {ref: export(ref, Path(tmp) / f"ref{i}") for i, ref in enumerate(args.refs)}
        sides["this checkout"] = ROOT / "src"
        roots = {}
        for i, (name, src) in enumerate(sides.items()):
            root = write_project(Path(tmp) / f"project{i}", n=120, app=APP, system=16)
            for _ in range(3):  # stored, cached, snapshot kept, bytecode written
                measure([PY, "-m", "oloproof.cli.main", "run"], root, {"PYTHONPATH": str(src)})
            roots[name] = root
        names = list(sides)
        print(f"Machine: {machine()}. `python bench/startup_ab.py {' '.join(args.refs)}"
              f" --repeat {args.repeat}`: median CPU time of the whole process, and as a"
              " multiple of the floor's (`python -c pass`, run first in every round).\n")
        print("| command | " + " | ".join(names) + " | this checkout minus each, paired | floor (wall / CPU) |")
        print("|---|" + "---:|" * len(names) + "---|---:|")
        for label, words in COMMANDS:
            floor: list[Measure] = []
            got: dict[str, list[Measure]] = {n: [] for n in names}
            for i in range(args.repeat):
                floor.append(measure([PY, "-c", "pass"], roots[names[-1]]))
                for name in names[i % len(names):] + names[:i % len(names)]:
                    got[name].append(measure([PY, "-m", "oloproof.cli.main", *words], roots[name],
                                             {"PYTHONPATH": str(sides[name])}))
            fc = statistics.median(m.cpu for m in floor)
            fw = statistics.median(m.wall for m in floor)
            cells = []
            for name in names:
                c = statistics.median(m.cpu for m in got[name])
                cells.append(f"{c * 1000:.0f} ms ({c / fc:.2f}×)")
            diffs = []
            for name in names[:-1]:
                d = statistics.median(b.cpu - a.cpu for a, b in zip(got[name], got[names[-1]]))
                diffs.append(f"{name}: {d * 1000:+.1f} ms ({d / fc:+.2f} floors)")
            print(f"| {label} | " + " | ".join(cells) + f" | {'; '.join(diffs)} |"
                  f" {fw * 1000:.0f} / {fc * 1000:.0f} ms |", flush=True)
        print(f"\nLoad average after the runs: {load_average()}.")


if __name__ == "__main__":
    main()
