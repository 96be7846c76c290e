"""Start-up in instructions: what the short commands execute, counted by callgrind.

    python bench/instructions.py [REF ...]

bench/startup.py holds each command to a multiple of a bare interpreter's start in wall
time, and on a machine whose speed moves, one table's ratio moves by a tenth either way.
This benchmark counts instead: ``valgrind --tool=callgrind`` counts the instructions a
process executes in user space (not the kernel's work: file system, ``fdatasync``), the
same count run after run whatever else the machine does. So a change of a few percent can
be seen, and compared with other commits (``REF``: each one's ``src/`` exported, as
bench/startup_ab.py does).

Each side gets its own copy of the seed load of bench/startup.py (120 cases, all cached,
its configuration's snapshot and its records' kept code written by three runs); before each
counted command the project and its store are put back as they were, and
``PYTHONHASHSEED=0`` fixes the order of sets and dicts, so that each count is a function of
the code alone. The floor is ``python -c pass``, counted the same way.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PY, ROOT, bench_env, compile_sources, machine, write_project
from startup_ab import APP, COMMANDS, export


def count(args: list[str], cwd: Path, src: Path | None) -> int:
    """The instructions of one run of ``args`` (callgrind's total)."""
    env = bench_env({"PYTHONHASHSEED": "0", **({"PYTHONPATH": str(src)} if src else {})})
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip().replace(",", ""))
    raise RuntimeError(f"callgrind counted nothing for {args}:\n{out.stderr[-2000:]}")


def _copy_checkout(into: Path) -> Path:
    """This checkout's ``src/``, without its compiled files, compiled in ``into``."""
    shutil.copytree(ROOT / "src", into / "src", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([PY, "-m", "compileall", "-q", str(into / "src")], check=True)
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("refs", nargs="*", help="commits to compare with this checkout")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench/instructions.py needs valgrind (Debian's package valgrind)")
    compile_sources()
    with tempfile.TemporaryDirectory() as tmp:
        sides: dict[str, Path] = {ref: export(ref, Path(tmp) / f"ref{i}")
                                  for i, ref in enumerate(args.refs)}
        # The checkout's src/ copied without its __pycache__ (compiled afresh, as each ref's
        # export is): a development tree's kept record __init__s grow with every test run,
        # and a 250 KB file of them read at each start counted +1.1% on the rerun.
        sides["this checkout"] = _copy_checkout(Path(tmp) / "this")
        floor = count([PY, "-c", "pass"], Path(tmp), None)
        rows: dict[str, dict[str, int]] = {}
        for i, (name, src) in enumerate(sides.items()):
            root = write_project(Path(tmp) / f"project{i}", n=120, app=APP, system=16)
            run = [PY, "-m", "oloproof.cli.main", "run"]
            for _ in range(3):  # stored, cached, snapshot kept, bytecode and __init__s kept
                subprocess.run(run, cwd=root, env=bench_env({"PYTHONPATH": str(src)}),
                               capture_output=True, check=False)
            for _label, words in COMMANDS:  # each command's records' __init__s kept too:
                # one never run before compiles them, and its first compile() builds the
                # AST classes (9 million instructions), which no later run of it pays
                subprocess.run([PY, "-m", "oloproof.cli.main", *words], cwd=root,
                               env=bench_env({"PYTHONPATH": str(src)}), capture_output=True,
                               check=False)
            kept = Path(tmp) / f"kept{i}"
            shutil.copytree(root, kept, symlinks=True)
            rows[name] = {}
            for label, words in COMMANDS:
                shutil.rmtree(root)
                shutil.copytree(kept, root, symlinks=True)  # the same store, every time
                rows[name][label] = count([PY, "-m", "oloproof.cli.main", *words], root, src)
    names = list(sides)
    print(f"Machine: {machine()}. `python bench/instructions.py {' '.join(args.refs)}`:"
          " instructions of the whole process (callgrind), millions, and as a multiple of"
          f" `python -c pass` ({floor / 1e6:.1f}M).\n")
    print("| command | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, _ in COMMANDS:
        cells = []
        for name in names:
            n = rows[name][label]
            change = ""
            if name == names[-1] and len(names) > 1:
                first = rows[names[0]][label]
                change = f", {100 * (n - first) / first:+.1f}% on {names[0]}"
            cells.append(f"{n / 1e6:.1f}M ({n / floor:.2f}×{change})")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
