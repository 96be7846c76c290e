"""The CLI on the API: subsets from the command line, and a cheap ``import oloproof``."""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import OLOPROOF, events, labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="t", version="1")
def answer(case_input):
    return {"label": "ok"}
"""
RELEASE = "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n"


def test_import_oloproof_does_not_load_the_api() -> None:
    code = (
        "import sys, oloproof\n"
        "heavy = [m for m in ('oloproof.api', 'oloproof.runner', 'pydantic', 'rich') if m in sys.modules]\n"
        "print(heavy)\n"
        "oloproof.run\n"
        "print('oloproof.api' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_run_a_subset_from_the_command_line(project_dir: Path) -> None:
    cases = [
        {**c, "metadata": {"lang": "fr" if i % 2 else "en"}}
        for i, c in enumerate(labelled_cases(30))
    ]
    write_project(project_dir, app=APP, cases=cases, release=RELEASE)
    r = run_cli("run", "--limit", "10", cwd=project_dir)
    assert r.code == 5, r.text
    assert "[DECIDED/SUBSET]" in r.out
    assert "Subset: 10 of 30 cases (the first 10)" in r.out
    assert "never allows a release" in r.out
    r = run_cli("run", "--json", "--where", 'metadata.lang == "fr"', "--case", "q001",
                "--case", "q002", cwd=project_dir)
    finished = events(r.out)[-1]
    assert (finished["type"], finished["completeness"], finished["exit_code"]) == (
        "run_finished", "SUBSET", 5)
    assert [e["scenario_id"] for e in events(r.out) if e["type"] == "case_executed"] == ["q001"]
    r = run_cli("run", "--limit", "4", "--sample", "--seed", "5", "--json", cwd=project_dir)
    first = [e["scenario_id"] for e in events(r.out) if e["type"] == "case_executed"]
    r = run_cli("run", "--limit", "4", "--sample", "--seed", "5", "--json", cwd=project_dir)
    assert sorted(first) == sorted(e["scenario_id"] for e in events(r.out) if e["type"] == "case_executed")
    runs = run_cli("runs", cwd=project_dir)
    assert runs.out.count("DECIDED/SUBSET") == 4
    gate = run_cli("gate", "latest", cwd=project_dir)
    assert gate.code == 5 and "Subset: 4 of 30 cases" in gate.out
    plan = run_cli("plan", "latest", "--run", cwd=project_dir)
    assert plan.code == 0, plan.text
    full = run_cli("run", cwd=project_dir)
    assert full.code == 0 and "[DECIDED/COMPLETE]" in full.out


def test_bad_subset_arguments_are_one_line_exit_2(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=labelled_cases(6), release=RELEASE)
    for args, message in [
        (["--where", "lang = fr"], "--where 'lang = fr': cannot be read"),
        (["--case", "zzz"], "no such case in the suite: 'zzz'"),
        (["--limit", "0"], "expected a whole number of cases, 1 or more, got '0'"),
        (["--sample"], "needs its size"),
    ]:
        r = run_cli("run", *args, cwd=project_dir)
        assert r.code == 2, r.text
        assert message in r.err and "Traceback" not in r.err
    assert not (project_dir / ".oloproof" / "store.sqlite").exists()


def test_kept_top_level_help_is_argparse_s_own(tmp_path: Path) -> None:
    """`oloproof --help` at the default width prints cli/_help.py without argparse; it must
    be what argparse prints (regenerate: python -m oloproof.cli._parser > src/oloproof/cli/_help.py)."""
    from oloproof.cli import _help
    from oloproof.cli._parser import HELP_WIDTH, build_parser, help_module

    assert _help.WIDTH == HELP_WIDTH
    parser = build_parser()
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=HELP_WIDTH)
    assert _help.TOP_HELP == parser.format_help()
    assert Path(_help.__file__).read_text(encoding="utf-8") == help_module()
    env = {**os.environ, "COLUMNS": ""}
    for args, code in ((["--help"], 0), (["-h"], 0), ([], 2)):
        out = subprocess.run([*OLOPROOF, *args], cwd=tmp_path, capture_output=True, text=True,
                             env=env, check=False, timeout=60)
        assert (out.returncode, out.stdout, out.stderr) == (code, _help.TOP_HELP, "")
    wide = subprocess.run([*OLOPROOF, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "140"}, check=False, timeout=60)
    assert wide.returncode == 0 and wide.stdout != _help.TOP_HELP
    assert "exact interval behind every metric, and decide release rules." in wide.stdout


def _modules_after(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    """The modules a command left loaded, run in a process of its own."""
    probe = (
        "import sys\n"
        "from oloproof.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *args], cwd=cwd, capture_output=True, check=False,
                         text=True, timeout=120, env={**os.environ, **(env or {})})
    return set(out.stderr.rsplit("MODULES ", 1)[1].split())


# pathlib imports urllib.parse and ipaddress (before Python 3.13): a tenth of `gate`'s
# instructions. The command paths handle paths as strings (docs/design-notes.md).
_PATHLIB = ("pathlib", "urllib.parse", "ipaddress")
# A team store's modules (PostgreSQL): never on a SQLite store's paths (a rerun imported
# store/pgshared.py, for the team store's key checks, and zlib behind it).
_TEAM_STORE = ("psycopg", "oloproof.store.postgres", "oloproof.store.pgwire",
               "oloproof.store.pgshared")


def test_short_commands_import_only_what_they_use(tmp_path: Path) -> None:
    """Start-up (issue 16): --help needs the standard library and the package's errors;
    listing runs needs the store, not the configuration's models, the statistics or rich."""
    write_project(tmp_path, app=APP, cases=labelled_cases(6), release=RELEASE)
    assert run_cli("run", cwd=tmp_path).code in (0, 3)

    helped = _modules_after(["--help"], tmp_path, env={"COLUMNS": ""})
    assert not {"typing", "shutil", "argparse", "oloproof.api", "oloproof.project", "pydantic",
                "rich", "hashlib"} & helped
    narrow = _modules_after(["--help"], tmp_path, env={"COLUMNS": "60"})
    assert "argparse" in narrow  # another width: argparse formats it
    assert not {"shutil", "oloproof.api", "oloproof.project", "pydantic", "rich"} & narrow
    listed = _modules_after(["runs", "--json"], tmp_path)
    assert "oloproof.store.reader" in listed  # it did read the store
    # Nor OpenSSL: listing runs makes no digest (hashlib is imported where one is made).
    assert not {"pydantic", "yaml", "rich", "oloproof.project", "oloproof.policy.decide",
                "oloproof.stats.intervals", "asyncio", "hashlib", *_PATHLIB, *_TEAM_STORE} & listed
    gated = _modules_after(["gate", "latest"], tmp_path)
    assert "oloproof.policy.decide" in gated
    assert not {"oloproof.analysis.plan", "oloproof.analysis.compare", "httpx", "jsonschema",
                "asyncio", "threading", *_PATHLIB, *_TEAM_STORE} & gated
    # The stored policy's records only: not the project's (project/policies.py).
    assert "oloproof.project.policies" in gated and "oloproof.project.config" not in gated
    # A run from the cache makes no call: no event loop, no thread, nor their modules.
    rerun = _modules_after(["run"], tmp_path)
    assert "oloproof.engine.pipeline" in rerun
    assert not {"threading", "asyncio", "pydantic", "yaml", "httpx", "jsonschema", "shlex",
                *_PATHLIB, *_TEAM_STORE} & rerun
    # Nor typing (with what it imports, 4% of an unchanged rerun's instructions): the
    # rerun's modules take typing's names for the type checker only (docs/design-notes.md,
    # "Imports: one rule", item 4).
    assert "typing" not in rerun


# Bytecode written, as a user's Python does (an empty value unsets it).
_BYTECODE = {"PYTHONDONTWRITEBYTECODE": ""}


def _strings_compiled(args: list[str], cwd: Path) -> list[str]:
    """What a command gave the built-in ``compile()`` that was not a file's source (a
    file's is compiled only when its bytecode is missing)."""
    probe = (
        "import builtins, sys\n"
        "seen = []\n"
        "real = builtins.compile\n"
        "def compile(source, filename, *a, **k):\n"
        "    if not str(filename).endswith('.py'):\n"
        "        seen.append(repr(source)[:80])\n"
        "    return real(source, filename, *a, **k)\n"
        "builtins.compile = compile\n"
        "from oloproof.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write('\\nCOMPILED ' + repr(seen) + '\\n')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *args], cwd=cwd, capture_output=True,
                         check=False, text=True, timeout=120, env={**os.environ, **_BYTECODE})
    seen: list[str] = ast.literal_eval(out.stderr.rsplit("COMPILED ", 1)[1])
    return seen


def test_short_commands_call_no_compile(tmp_path: Path) -> None:
    """The first ``compile()`` of a process builds Python's AST classes (a tenth of
    ``gate``'s instructions on top of the interpreter's): typing calls it for an annotation
    given as a string (a NamedTuple's field, a TypeVar's bound), and so would a record's
    ``__init__`` that is not kept yet. A reading command and an unchanged rerun call it
    for nothing (docs/performance.md)."""
    write_project(tmp_path, app=APP, cases=labelled_cases(6), release=RELEASE)
    assert run_cli("run", cwd=tmp_path, env=_BYTECODE).code in (0, 3)
    assert run_cli("run", cwd=tmp_path, env=_BYTECODE).code in (0, 3)  # __init__s kept
    assert _strings_compiled(["run"], tmp_path) == []
    assert _strings_compiled(["gate", "latest"], tmp_path) == []


def test_main_in_someone_elses_process_returns_whatever_threads_remain(tmp_path: Path) -> None:
    """cli/run.py ends the command's own process with os._exit when threads linger (a
    stuck call); main() called in another process (this test, a notebook) must return."""
    import threading

    from oloproof.cli.main import main

    write_project(tmp_path, app=APP, cases=labelled_cases(6), release=RELEASE)
    lingering = threading.Event()
    thread = threading.Thread(target=lingering.wait, args=(30,), name="lingering")
    thread.start()
    try:
        code = main(["run", "--no-cache", "--config", str(tmp_path / "oloproof.yaml")])
        assert code in (0, 3)
        assert thread.is_alive()  # still there: and we are still here
    finally:
        lingering.set()
        thread.join()
