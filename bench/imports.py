"""Import-time budget: what the start-up of short commands spends importing, by package,
from ``python -X importtime``.

    python bench/imports.py [--repeat N]

For each command (``--help``; ``runs``; ``gate latest``; and ``run`` of the support_bot
example with every execution and judgment in the cache and its configuration unchanged) it
runs the process ``--repeat`` times with ``-X importtime``, takes each module's self time,
sums it per top-level package (``oloproof`` split by its subpackages), and reports the fastest
of the runs per package (load on a shared machine only ever adds time, and a regression shows
in the fastest run too) beside a budget, and the whole beside a budget for the command. Two kinds of
regression show by name: a package over its budget, and a package that a command must not
import at all (:data:`ABSENT`: the configuration's validation, the event loop, the HTTP
client, the JSON Schema validator on an unchanged rerun). The process exits 1 when anything
is over (issue 16).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import OLOPROOF, PY, bench_env, machine, record, write_section

# Milliseconds of self time per package (2-core machine): what was measured when the
# budget was last lowered, plus about a third for noise. Anything not listed: 8 ms.
BUDGET_MS = {
    "oloproof.project": 12, "oloproof.runner": 6, "oloproof.engine": 6, "oloproof.api": 12,
    "oloproof.store": 12, "oloproof.policy": 10, "oloproof.render": 10, "oloproof.cli": 8,
    "oloproof.events": 8, "rich": 30,
}
DEFAULT_BUDGET_MS = 8.0

# Packages a command must not import at all.
_VALIDATION = ("pydantic", "pydantic_core", "yaml", "annotated_types", "typing_inspection")
_HEAVY = ("jsonschema", "referencing", "httpx", "httpcore", "jinja2", "asyncio", "ssl",
          "inspect", "dataclasses", "rich")
# argparse reads only what cli/_args.py's fast parser leaves to it.
_PARSING = ("argparse", "gettext", "locale")
# The PostgreSQL driver: only for a team store (store/postgres.py), never on SQLite's path.
_TEAM_STORE = ("psycopg", "psycopg_binary")
# Ray: only for `executor: ray` once a call is to be made (runner/ray_executor.py).
_RAY = ("ray",)
# pathlib, with urllib.parse and ipaddress behind it (before Python 3.13): the command paths
# handle paths as strings, with os.path (docs/design-notes.md).
_PATHLIB = ("pathlib", "urllib", "ipaddress")
_RERUN = "oloproof run (unchanged rerun, all cache)"
_RERUN_RAY = "oloproof run (unchanged rerun, all cache, executor: ray)"
_LOCAL_RUN = "oloproof run --no-cache (local executor)"
# The reading commands that decide a stored run under its stored policy, as gate does: they
# read the policy's snapshot (issue 31), so they never validate with pydantic.
_INSPECT = "oloproof inspect latest"
_PLAN = "oloproof plan latest --run"
_REPORT = "oloproof report latest"
# The same reading commands on a team store (a PostgreSQL server this script starts): they
# read through the wire client (store/pgwire.py), never psycopg, nor the event loop it
# imports.
_TEAM_RUNS = "oloproof runs (team store)"
_TEAM_GATE = "oloproof gate latest (team store)"
# A record's generated __init__ shows its source from a file kept beside its code: no
# linecache (with tokenize) where Python keeps bytecode (_records.py, _init_code).
_SOURCE_LOOKUP = ("linecache", "tokenize")
ABSENT = {
    # typing (with re and enum behind it) would double --help's time: the two modules it
    # imports write TYPE_CHECKING = False (docs/performance.md).
    "oloproof --help": (*_VALIDATION, *_HEAVY, *_PARSING, *_TEAM_STORE, *_RAY, "sqlite3",
                        "typing", "hashlib"),
    # Listing runs makes no digest: OpenSSL (hashlib) is loaded where one is made.
    "oloproof runs": (*_VALIDATION, *_HEAVY, *_PARSING, *_TEAM_STORE, *_RAY, *_SOURCE_LOOKUP,
                      *_PATHLIB, "hashlib"),
    "oloproof gate latest": (*_VALIDATION, *_HEAVY, *_PARSING, *_TEAM_STORE, *_RAY,
                             *_SOURCE_LOOKUP, *_PATHLIB, "threading"),
    # (threading stays: support_bot's regex evaluator builds its guard, which holds a lock.
    # A rerun with no regex imports none: tests/api/test_api_cli.py.)
    # Nor typing: the rerun's modules take its names for the type checker only.
    _RERUN: (*_VALIDATION, *_HEAVY, *_PARSING, *_TEAM_STORE, *_RAY, *_SOURCE_LOOKUP, *_PATHLIB,
             "typing"),
    # A project that chose Ray, with nothing to call: Ray is not even imported.
    _RERUN_RAY: (*_VALIDATION, *_HEAVY, *_PARSING, *_TEAM_STORE, *_RAY),
    # A run that calls everything afresh in this process: the event loop and the rest are
    # its own, but never Ray (nor the PostgreSQL driver on SQLite).
    _LOCAL_RUN: (*_TEAM_STORE, *_RAY),
    _INSPECT: (*_VALIDATION, *_TEAM_STORE, *_RAY, "httpx", "asyncio", "jsonschema"),
    _PLAN: (*_VALIDATION, *_TEAM_STORE, *_RAY, "httpx", "asyncio", "jsonschema"),
    _REPORT: (*_VALIDATION, *_TEAM_STORE, *_RAY, "httpx", "asyncio", "jsonschema"),
    _TEAM_RUNS: (*_VALIDATION, *_PARSING, *_TEAM_STORE, *_RAY, "asyncio", "httpx",
                 "jsonschema", "ssl"),
    _TEAM_GATE: (*_VALIDATION, *_PARSING, *_TEAM_STORE, *_RAY, "asyncio", "httpx",
                 "jsonschema", "ssl"),
}
# Milliseconds of self time for all of a command's imports together (--help's is nearly all
# the interpreter's own start: encodings, site, collections, functools).
TOTAL_MS = {
    "oloproof --help": 16, "oloproof runs": 36, "oloproof gate latest": 46, _RERUN: 60,
    _RERUN_RAY: 60,
}
# Commands held to ABSENT only (no budget per package or in all): a run that calls, and the
# reading commands that draw tables or pages (inspect, plan, report).
_UNBUDGETED = frozenset({_LOCAL_RUN, _INSPECT, _PLAN, _REPORT, _TEAM_RUNS, _TEAM_GATE})


def _package(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "oloproof" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def importtime(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """Self import time per package, in ms, of one process running ``args``."""
    done = subprocess.run(
        [PY, "-X", "importtime", *args], cwd=cwd, capture_output=True, text=True,
        env=bench_env(env), check=False,
    )
    per: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.split(":", 1)[1].split("|")
        per[_package(name.strip())] += int(self_us) / 1000.0
    return dict(per)


def measure(args: list[str], cwd: Path, repeat: int,
            env: dict[str, str] | None = None) -> dict[str, float]:
    runs = [importtime(args, cwd, env) for _ in range(repeat)]
    names = set().union(*runs)
    return {n: min(r.get(n, 0.0) for r in runs) for n in names}


def _team_store(project: Path) -> tuple[Any, dict[str, str]] | None:
    """A PostgreSQL server of this script's own holding the project's two runs, and the
    environment that names it; ``None`` where no server can be started here."""
    from tests import pgserver

    try:
        server = pgserver.start()
    except pgserver.Unavailable as exc:
        print(f"team store: not measured ({exc})")
        return None
    env = {"OLOPROOF_STORE": server.url(server.create_database())}
    for _ in range(2):
        subprocess.run([*OLOPROOF, "run"], cwd=project, capture_output=True, check=False,
                       env=bench_env(env))
    return server, env


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    opts = parser.parse_args()
    main_module = ["-m", "oloproof.cli.main"]
    sections = []
    figures = []
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "bot"
        subprocess.run([*OLOPROOF, "init", str(project), "--example", "support_bot"],
                       check=True, capture_output=True)
        for _ in range(2):  # the second run keeps the configuration's snapshot
            subprocess.run([*OLOPROOF, "run"], cwd=project, capture_output=True, check=False)
        # The same project choosing Ray: everything is in the cache (the executor is not
        # part of any identity), so its rerun calls nothing.
        with_ray = project / "oloproof-ray.yaml"
        with_ray.write_text((project / "oloproof.yaml").read_text() + "executor: ray\n")
        for _ in range(2):
            subprocess.run([*OLOPROOF, "run", "--config", with_ray.name], cwd=project,
                           capture_output=True, check=False)
        commands = (("oloproof --help", ["--help"]), ("oloproof runs", ["runs"]),
                    ("oloproof gate latest", ["gate", "latest"]),
                    (_RERUN, ["run"]), (_RERUN_RAY, ["run", "--config", with_ray.name]),
                    (_LOCAL_RUN, ["run", "--no-cache"]), (_INSPECT, ["inspect", "latest"]),
                    (_PLAN, ["plan", "latest", "--run"]),
                    (_REPORT, ["report", "latest", "-o", str(Path(tmp) / "report.html")]))
        team = _team_store(project)
        if team is not None:
            commands += ((_TEAM_RUNS, ["runs"]), (_TEAM_GATE, ["gate", "latest"]))
        for label, args in commands:
            env = team[1] if team is not None and label in (_TEAM_RUNS, _TEAM_GATE) else None
            per = measure([*main_module, *args], project, opts.repeat, env)
            total = sum(per.values())
            top = sorted(per.items(), key=lambda kv: -kv[1])[:15]
            budgeted = label not in _UNBUDGETED
            over = [(n, ms) for n, ms in per.items()
                    if budgeted and ms > BUDGET_MS.get(n, DEFAULT_BUDGET_MS)]
            present = [n for n in ABSENT[label] if n in per]
            total_over = budgeted and total > TOTAL_MS[label]
            failed = failed or bool(over or present or total_over)
            rows = [f"| `{n}` | {ms:.1f} ms |"
                    f" {BUDGET_MS.get(n, DEFAULT_BUDGET_MS):.0f} ms |" if budgeted
                    else f"| `{n}` | {ms:.1f} ms | (none) |" for n, ms in top]
            rows = [f"{row} {'over' if budgeted and (n, ms) in over else ''} |"
                    for row, (n, ms) in zip(rows, top, strict=True)]
            verdict = []
            if over:
                verdict.append("Over budget: " + ", ".join(f"`{n}` ({ms:.1f} ms)" for n, ms in over)
                               + ".")
            if present:
                verdict.append("Imported, and must not be: " + ", ".join(f"`{n}`" for n in present)
                               + ".")
            if total_over:
                verdict.append(f"All imports together are over the command's {TOTAL_MS[label]} ms.")
            sections.append("\n".join([
                f"### {label}", "",
                (f"All imports together: **{total:.0f} ms** of self time (fastest of"
                 f" {opts.repeat}; "
                 + (f"budget {TOTAL_MS[label]} ms" if budgeted else "held to what it must not"
                    " import only") + "). Never imported:"
                 f" {', '.join(f'`{n}`' for n in ABSENT[label])}. The largest packages:"), "",
                "| package | self time | budget | |", "|---|---:|---:|---|", *rows, "",
                " ".join(verdict) if verdict else "Every package is within its budget, and none"
                " of the packages it must not import is imported.",
            ]))
            figures.append({"name": f"import time, {label}", "value": total / 1000.0,
                            "unit": "s"})
        if team is not None:
            team[0].stop()
        else:
            sections.append("The team-store commands were not measured: no PostgreSQL server"
                            " could be started here (tests/pgserver.py).")
            print(f"{label}: {total:.0f} ms;", ", ".join(f"{n} {ms:.0f}" for n, ms in top[:8]),
                  *(["OVER: " + " ".join(verdict)] if verdict else []))
    body = "\n".join([
        "## Import-time budget", "",
        (f"Machine: {machine()}. `python bench/imports.py --repeat {opts.repeat}`: `python -X"
         " importtime`, each module's self time summed per package (Oloproof's by subpackage),"
         " the fastest of the runs per package (load only adds time). Budgets are in"
         " `bench/imports.py`."), "",
        *sections,
    ])
    write_section("import-budget", body)
    record("imports", figures)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
