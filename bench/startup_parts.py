"""Where a short command's time goes beyond the bare interpreter: an accounting.

    python bench/startup_parts.py [--repeat N]

bench/startup.py holds an unchanged rerun to 6× and `gate latest` to 4× of `python -c
pass`. This script splits each command's whole-process time into four parts, each
measured as a whole process the same way (median wall time, user and system CPU time,
minor page faults; the four processes of a round run in random order, round after round,
so that the machine's load falls on all of them alike):

1. the floor: ``python -c pass``;
2. the standard library the command imports beyond the floor: a process that imports
   exactly those modules, in the command's order, with the collector off as the command
   has it while it imports (its part: this process less the floor);
3. Oloproof's modules: a process that imports the same standard library, then every
   module of the package the command imports (its part: this process less 2);
4. the rest: the command itself less 3, i.e. what it does (reading the configuration,
   the suite and the store, the cases, the decision, the report) and the teardown of
   what it made.

The module lists come from a run of the command under ``-X importtime``; third-party
packages count with the standard library (neither command imports one), the project's
own ``app`` module is left out. Each import process also tears down what it imported,
so each part includes its own share of the teardown.

    python bench/startup_parts.py --instructions

counts the same parts in instructions instead (``valgrind --tool=callgrind``, once each,
``PYTHONHASHSEED=0``; the command on a copy of the same store each time): a count does
not move with the machine's load, so parts of a few percent can be told apart. It also
counts what two modules of the standard library cost within the second part: ``typing``
and ``hashlib`` (with ``_hashlib``, OpenSSL's, and ``_blake2``), the two that issue 31
asks the code to use as they are; each is the standard library's process less that
process without the module (the modules it brings in are still imported, by the lines
that name them).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    OLOPROOF,
    PY,
    bench_env,
    compile_sources,
    load_average,
    machine,
    measure,
    write_project,
    write_section,
)
from startup import APP

_COMMANDS = [("rerun", ["run"], 6.0), ("gate", ["gate", "latest"], 4.0)]


def _measure(args: list[str], cwd: Path) -> tuple[float, float, float, int]:
    """Wall, user and system time (ms) and minor faults of one whole process."""
    m = measure(args, cwd)
    return m.wall * 1000, m.user * 1000, m.system * 1000, m.minor_faults


def _imported(args: list[str], cwd: Path) -> tuple[list[str], list[str]]:
    """The modules ``args`` imports beyond the floor, in order: (others, Oloproof's)."""
    def names(cmd: list[str]) -> list[str]:
        out = subprocess.run(cmd, cwd=cwd, env=bench_env({"PYTHONPROFILEIMPORTTIME": "1"}),
                             capture_output=True, text=True, check=False)
        found = []
        for line in out.stderr.splitlines():
            if line.startswith("import time:") and "imported package" not in line:
                found.append(line.rsplit("|", 1)[1].strip())
        return found

    floor = set(names([PY, "-c", "pass"]))
    seen = [n for n in names(args) if n not in floor and n != "app" and n != "__main__"]
    ours = [n for n in seen if n == "oloproof" or n.startswith("oloproof.")]
    others = [n for n in seen if n not in ours]
    return others, ours


def _importer(modules: list[str]) -> list[str]:
    body = "import gc\ngc.disable()\n" + "".join(f"import {m}\n" for m in modules)
    return [PY, "-c", body]


# The standard library that issue 31 has the code use as it is, counted apart (--instructions).
_ITEMS = [("`typing`", ("typing", "_typing", "typing.io", "typing.re")),
          ("`hashlib` (OpenSSL's `_hashlib`, `_blake2`)", ("hashlib", "_hashlib", "_blake2"))]


def _instructions(root: Path) -> list[str]:
    """The parts of each command in instructions (see the module's docstring)."""
    from instructions import count  # callgrind's count of a whole process

    rows: list[str] = []
    kept = root.parent / "kept"
    shutil.copytree(root, kept, symlinks=True)
    floor = count([PY, "-c", "pass"], root, None)
    for key, words, target in _COMMANDS:
        command = [*OLOPROOF, *words]
        others, ours = _imported(command, root)
        stdlib = count(_importer(others), root, None)
        with_ours = count(_importer(others + ours), root, None)
        shutil.rmtree(root)
        shutil.copytree(kept, root, symlinks=True)  # the same store, every time
        whole = count(command, root, None)
        parts = [("the floor, `python -c pass`", floor),
                 (f"standard library beyond the floor ({len(others)} modules)", stdlib - floor),
                 (f"Oloproof's modules ({len(ours)})", with_ours - stdlib),
                 ("the rest: the command's own work and its teardown", whole - with_ours)]
        for what, modules in _ITEMS:
            if set(modules) & set(others):
                without = count(_importer([m for m in others if m not in modules]), root, None)
                parts.append((f"within the standard library: {what}", stdlib - without))
        rows.append(f"**{key}** (`oloproof {' '.join(words)}`): {whole / 1e6:.1f} million"
                    f" instructions, {whole / floor:.2f}× the floor's (target {target:.0f}× in"
                    f" wall time: {target * floor / 1e6:.1f} million)")
        rows += ["", "| part | instructions (millions) | share of the command |", "|---|---:|---:|"]
        rows += [f"| {what} | {n / 1e6:.1f} | {100 * n / whole:.1f}% |" for what, n in parts]
        rows.append("")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=31)
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions (callgrind) instead of timing")
    args = ap.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind (Debian's package valgrind)")
    compile_sources()
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = write_project(Path(tmp) / "seed", n=120, app=APP, system=16)
        for setup in (["run", "--no-cache"], ["run"], ["run"]):
            _measure([*OLOPROOF, *setup], root)
        if args.instructions:
            rows = _instructions(root)
        for key, words, target in [] if args.instructions else _COMMANDS:
            command = [*OLOPROOF, *words]
            others, ours = _imported(command, root)
            sides = {
                "floor": [PY, "-c", "pass"],
                "stdlib": _importer(others),
                "ours": _importer(others + ours),
                "command": command,
            }
            got: dict[str, list[tuple[float, float, float, int]]] = {k: [] for k in sides}
            for _ in range(args.repeat):
                order = list(sides)
                random.shuffle(order)
                for name in order:
                    got[name].append(_measure(sides[name], root))
            med = {k: [statistics.median(col) for col in zip(*v)] for k, v in got.items()}
            floor = med["floor"][0]
            parts = [
                ("the floor, `python -c pass`", med["floor"], None),
                (f"standard library beyond the floor ({len(others)} modules)", med["stdlib"],
                 med["floor"]),
                (f"Oloproof's modules ({len(ours)})", med["ours"], med["stdlib"]),
                ("the rest: the command's own work and its teardown", med["command"],
                 med["ours"]),
            ]
            rows.append(f"**{key}** (`oloproof {' '.join(words)}`): {med['command'][0]:.1f} ms,"
                        f" {med['command'][0] / floor:.2f}× the floor (target {target:.0f}×:"
                        f" {target * floor:.1f} ms)")
            rows += ["", ("| part | wall (ms) | share of the command | user CPU (ms) |"
                          " system CPU (ms) | minor page faults |"), "|---|---:|---:|---:|---:|---:|"]
            for what, this, before in parts:
                diff = this if before is None else [a - b for a, b in zip(this, before)]
                rows.append(f"| {what} | {diff[0]:.1f} | {100 * diff[0] / med['command'][0]:.0f}% |"
                            f" {diff[1]:.1f} | {diff[2]:.1f} | {diff[3]:.0f} |")
            rows.append("")
    if args.instructions:
        how = ("`python bench/startup_parts.py --instructions`: instructions of whole processes,"
               " counted once each (how each part is measured: the script's docstring).")
        title, section = "## Start-up: where a short command's instructions go", "startup_parts_instructions"
    else:
        how = (f"`python bench/startup_parts.py --repeat {args.repeat}`: medians of whole"
               " processes, the four of a round in random order (how each part is measured:"
               " the script's docstring).")
        title, section = "## Start-up: where a short command's time goes", "startup_parts"
    body = "\n".join([
        title, "", f"Machine: {machine()}; load average after the runs {load_average()}. {how}",
        "", *rows,
    ])
    print(body)
    write_section(section, body)


if __name__ == "__main__":
    main()
