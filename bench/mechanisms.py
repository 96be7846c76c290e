"""What each start-up mechanism buys: every short command with the mechanism, and without it.

    python bench/mechanisms.py [--repeat N] [--only NAME ...]

Oloproof keeps a few mechanisms of its own for start-up (docs/performance.md, "What each
mechanism buys"). Each is switched off in turn by bench/_off/sitecustomize.py (it replaces,
after import, the one function or value that makes the mechanism), and the commands it
serves are timed with it and without it, in alternating order, on the seed load of
bench/startup.py (120 cases, all in the cache), each pair after a `python -c pass` (the
floor). The gain is the median of the paired differences, in wall and in CPU time, and the
CPU gain as a multiple of the floor's CPU time (the figure that moves least with the
machine's load). Before timing, each switch is checked to be reached by its command.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    OLOPROOF,
    PY,
    Measure,
    compile_sources,
    load_average,
    machine,
    measure,
    record,
    repeat,
    write_project,
    write_section,
)

OFF = Path(__file__).resolve().parent / "_off"

APP = """from oloproof import system

@system(name="seed", version="1")
def answer(case_input):
    return {"label": "ok"}
"""

COMMANDS = {
    "help": ["--help"], "runs": ["runs"], "gate": ["gate", "latest"], "rerun": ["run"],
}
# mechanism: (what it is, the commands it serves)
MECHANISMS = {
    "snapshot": ("the configuration validated once, kept in .oloproof/snapshots/",
                 ["rerun", "gate"]),
    "plain": ("outside a terminal, render/plain.py instead of rich", ["gate", "runs"]),
    "records": ("oloproof._records instead of dataclasses", ["rerun", "gate"]),
    "cached-loop": ("an all-cached run without an event loop (no asyncio)", ["rerun"]),
    "inits": ("the records' compiled __init__ kept between processes", ["rerun", "gate"]),
    "lazy-init": ("a record's __init__ made when first needed", ["rerun", "gate"]),
    "code-stamp": ("a snapshot's code digest skipped while its stamp holds", ["rerun", "gate"]),
    "fast-args": ("the usual command line read without argparse", ["gate", "rerun"]),
    "freeze": ("no cyclic collection during imports, then gc.freeze()", ["rerun", "gate"]),
    "help-text": ("--help printed from cli/_help.py, without argparse", ["help"]),
    "no-typing": ("the --help path's modules without typing (TYPE_CHECKING = False)",
                  ["help"]),
}


def _check_reached(root: Path, name: str, command: str) -> None:
    """The switch is reached by the command: else it would time nothing and call it 0 ms."""
    with tempfile.TemporaryDirectory() as tmp:
        seen = Path(tmp) / "seen"
        measure([*OLOPROOF, *COMMANDS[command]], root,
                {"PYTHONPATH": str(OFF), "OLOPROOF_BENCH_OFF": name,
                 "OLOPROOF_BENCH_SEEN": str(seen)})
        if not seen.exists() or name not in seen.read_text().split():
            raise SystemExit(f"bench/mechanisms.py: switching off {name!r} does not reach"
                             f" `oloproof {' '.join(COMMANDS[command])}`")


def _paired(n: int, args: list[str], root: Path, off: str) -> tuple[list[Measure], ...]:
    """``n`` rounds of: the floor, the command as it is, the command without ``off``
    (the order of the last two alternating from round to round)."""
    floor: list[Measure] = []
    on: list[Measure] = []
    without: list[Measure] = []
    env_on = {"PYTHONPATH": str(OFF)}
    env_off = {"PYTHONPATH": str(OFF), "OLOPROOF_BENCH_OFF": off}
    for i in range(n):
        floor.append(measure([PY, "-c", "pass"], root))
        pair = [(on, env_on), (without, env_off)]
        for into, env in pair if i % 2 == 0 else pair[::-1]:
            into.append(measure([*OLOPROOF, *args], root, env))
    return floor, on, without


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--only", nargs="*", choices=sorted(MECHANISMS))
    args = ap.parse_args()
    compile_sources()
    rows, figures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = write_project(Path(tmp) / "seed", n=120, app=APP, system=16)
        repeat(2, [*OLOPROOF, "run"], root)  # stored, cached, snapshot kept, bytecode written
        names = args.only or list(MECHANISMS)
        for name in names:
            for command in MECHANISMS[name][1]:
                _check_reached(root, name, command)
        repeat(1, [*OLOPROOF, "run"], root)  # the snapshot again, were it dropped above
        for name in names:
            what, commands = MECHANISMS[name]
            for command in commands:
                floor, on, without = _paired(args.repeat, COMMANDS[command], root, name)
                f = statistics.median(m.wall for m in floor)
                fc = statistics.median(m.cpu for m in floor)
                a = statistics.median(m.wall for m in on)
                wall = statistics.median(b.wall - a_.wall for a_, b in zip(on, without))
                cpu = statistics.median(b.cpu - a_.cpu for a_, b in zip(on, without))
                rows.append(
                    f"| {what} (`{name}`) | `oloproof {' '.join(COMMANDS[command])}` |"
                    f" {a * 1000:.0f} ms | {wall * 1000:+.1f} ms | {cpu * 1000:+.1f} ms |"
                    f" {cpu / fc:+.2f}× | {f * 1000:.0f} ms / {fc * 1000:.0f} ms |"
                )
                figures.append({"name": f"without {name}, {command}: added CPU", "value": cpu,
                                "unit": "s"})
                print(rows[-1], flush=True)
    body = "\n".join([
        (f"Machine: {machine()}; load average after the runs {load_average()}."
         f" `python bench/mechanisms.py`: the seed load of bench/startup.py (120 cases, all in"
         f" the cache; `gate latest` decides its run), each command as it is and with one"
         f" mechanism switched off (bench/_off/sitecustomize.py, which first checks that its"
         f" switch is reached), in alternating order, with `python -c pass` (the floor) before"
         f" each pair; {args.repeat} rounds. \"It saves\" is the median over the rounds of"
         " what switching the mechanism off added to the whole process, in wall time and in"
         " CPU time (user + system of the process). On a shared machine the CPU time moves"
         " far less with the load than the wall time, and the CPU time of `python -c pass`"
         " moves with it: the gain in CPU as a multiple of the floor's CPU (\"in floors\")"
         " is the figure to compare between runs (the start-up targets are multiples of the"
         " floor too; 5 ms on a quiet machine, where the floor is about 11 ms, is about 0.45"
         " floors)."),
        "",
        "| mechanism | command | with it (wall) | it saves (wall) | it saves (CPU) | CPU saved, in floors | floor (wall / CPU) |",
        "|---|---|---:|---:|---:|---:|---:|",
        *rows,
    ])
    write_section("mechanisms", body)
    record("mechanisms", figures)


if __name__ == "__main__":
    main()
