"""What a record class costs at import: ``oloproof._records`` against ``dataclasses``.

    python bench/records.py [--repeat N] [--classes N] [--module NAME]

Each figure comes from a fresh process (the median of ``--repeat`` of them): the time of
importing the module (after ``import oloproof``, which every command pays anyway), then of
making ``--classes`` classes of each shape below with its decorator, less the same classes
made without a decorator (the class body's own cost), per class. ``--module`` adds another
module with the same names (``dataclass``, ``field``), imported by name, e.g. a variant
of ``_records`` under study on ``PYTHONPATH``.

The shapes are those of Oloproof's records: plain, frozen, ``slots=True`` (events),
frozen with slots, with ``default_factory`` fields, and a slotted subclass of a slotted
base with a ``kw_only`` field (events.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_env, compile_sources

SHAPES: dict[str, tuple[str, tuple[str, ...]]] = {
    # name: (decorator arguments, fields)
    "plain, 8 fields": ("", ("a: int", "b: str", "c: float = 0.0", "d: int = 1", "e: str = ''",
                             "f: object = None", "g: int = 0", "h: int = 0")),
    "frozen, 8 fields": ("frozen=True", ("a: int", "b: str", "c: float = 0.0", "d: int = 1",
                                         "e: str = ''", "f: object = None", "g: int = 0",
                                         "h: int = 0")),
    "slots, 6 fields": ("slots=True", ("a: int", "b: str", "c: float | None", "d: int = 0",
                                       "e: str = ''", "f: object = None")),
    "frozen + slots, 3 fields": ("frozen=True, slots=True", ("a: int", "b: list", "c: str")),
    "default_factory, 4 fields": ("", ("a: int", "b: list = field(default_factory=list)",
                                       "c: dict = field(default_factory=dict)", "d: int = 0")),
    "slots subclass, 1 + 4 fields": ("slots=True", ("c: int", "d: str", "e: int = 0",
                                                    "f: int = 0")),
}

CHILD = r"""
import json, sys, time
import oloproof
mod_name, n, shapes = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
t0 = time.perf_counter()
mod = __import__(mod_name, fromlist=["dataclass"])
t1 = time.perf_counter()
out = {"import": t1 - t0}
def noop(cls=None, /, **kw):
    return (lambda c: c) if cls is None else cls
base_src = "@dec(slots=True)\nclass Base:\n run_id: str\n timestamp: str = field(default='', kw_only=True)\n"
for shape, (args, lines) in shapes.items():
    body = "".join(f" {line}\n" for line in lines)
    costs = []
    for dec in (noop, mod.dataclass):
        env = {"dec": dec, "field": mod.field}
        parent = "object"
        if "subclass" in shape:
            exec(base_src, env)
            parent = "Base"
        src = "".join(
            f"@dec({args})\nclass C{i}({parent}):\n{body}" for i in range(n)
        )
        code = compile(src, "<shapes>", "exec")
        t = time.perf_counter()
        exec(code, env)
        costs.append(time.perf_counter() - t)
    out[shape] = (costs[1] - costs[0]) / n
print(json.dumps(out))
"""


def measure(module: str, repeat: int, classes: int) -> dict[str, float]:
    runs: dict[str, list[float]] = {}
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, module, str(classes), json.dumps(SHAPES)],
            check=True, capture_output=True, text=True, env=bench_env(),
        )
        for key, value in json.loads(out.stdout).items():
            runs.setdefault(key, []).append(value)
    return {key: statistics.median(values) for key, values in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--classes", type=int, default=40)
    ap.add_argument("--module", action="append", default=[])
    args = ap.parse_args()
    modules = ["dataclasses", "oloproof._records", *args.module]
    compile_sources()  # imports read the bytecode cache, as from an installed wheel
    got = {m: measure(m, args.repeat, args.classes) for m in modules}
    print(f"Median of {args.repeat} fresh processes; per class: {args.classes} classes of each"
          " shape, less the same classes undecorated.\n")
    print("| | " + " | ".join(f"`{m}`" for m in modules) + " |")
    print("|---|" + "---:|" * len(modules))
    print("| import (ms) | " + " | ".join(f"{got[m]['import'] * 1e3:.2f}" for m in modules) + " |")
    for shape in SHAPES:
        print(f"| {shape} (ms per class) | "
              + " | ".join(f"{got[m][shape] * 1e3:.3f}" for m in modules) + " |")


if __name__ == "__main__":
    main()
