"""Shared test helpers: real projects in temporary directories, the real CLI in subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

OLOPROOF = [sys.executable, "-m", "oloproof.cli.main"]

# Test tiers by cost (issue 31): a test is `slow`, left out of `make test-fast`, when it
# starts a process or a server, which is what costs: its own code, a helper it calls (of its
# module or of tests/), or a fixture it uses (at any depth) names one of _SPAWNING (the real
# CLI through run_cli, or tests/trust/_support.py's `cli`; subprocess; pexpect; the fake
# provider's servers, FakeServer and tests/fakes/chat.py's ScriptedChat; tests/pgserver.py's
# PostgreSQL). In-process tests stay fast whatever
# their module imports; `backend`'s PostgreSQL half is marked where its parameter is
# declared. A test that is slow for another reason (it waits on real time, or computes for
# seconds) says so itself with @pytest.mark.slow; `make test-fast` must stay under a minute.
_SPAWNING = frozenset({"run_cli", "cli", "subprocess", "Popen", "pexpect", "FakeServer",
                       "OLOPROOF", "pgserver", "ScriptedChat"})


def _names(code: types.CodeType) -> set[str]:
    """The global and attribute names ``code`` uses, its nested functions' included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _spawns(function: object, seen: set[object]) -> bool:
    """Whether ``function``, or a function of its own module it calls, names a way to start
    a process (:data:`_SPAWNING`)."""
    wrapped = getattr(function, "__wrapped__", None)  # a decorated helper: its own code too
    if wrapped is not None and _spawns(wrapped, seen):
        return True
    code = getattr(function, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    names = _names(code)
    if names & _SPAWNING:
        return True
    module = getattr(function, "__module__", None)
    scope = getattr(function, "__globals__", {})
    return any(
        _spawns(helper, seen) for name in names
        if isinstance(helper := scope.get(name), types.FunctionType)
        and (helper.__module__ == module or helper.__module__.startswith("tests."))
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that start processes or servers (themselves or through a fixture) as
    ``slow``."""
    slow = pytest.mark.slow
    seen: dict[object, bool] = {}

    def spawns(function: object) -> bool:
        if function not in seen:
            seen[function] = _spawns(function, set())
        return seen[function]

    for item in items:
        fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        functions = [getattr(item, "function", None),
                     *(d.func for defs in fixtures.values() for d in defs)]
        if any(spawns(f) for f in functions if f is not None):
            item.add_marker(slow)


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    full_env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    full_env["PYTHONUNBUFFERED"] = "1"
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [*OLOPROOF, *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def write_project(
    root: Path,
    *,
    app: str,
    cases: list[dict[str, Any]],
    evaluators: str | None = None,
    release: str | None = None,
    system_extra: str = "",
    concurrency: tuple[int, int] = (8, 4),
    version: str = "1",
    extra_files: dict[str, str] | None = None,
    policy: str | None = None,
) -> Path:
    """A real project on disk: app.py, oloproof.yaml, release.yaml, data/cases.jsonl.

    Without ``release`` (and ``policy``) the project declares ``policy: none`` (no release
    rules, on purpose): a project with no policy at all is refused by ``run``, and so is a
    release.yaml without rules. ``policy`` is written as ``policy:`` in oloproof.yaml
    (after ``dataset:``).
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "app.py").write_text(textwrap.dedent(app))
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases)
    )
    if evaluators is None:
        evaluators = """
          - type: exact_match
            criterion: exact_label
            field: label
        """
    lines = [
        "version: 1",
        "project: test-project",
        "dataset: data/cases.jsonl",
        "system:",
        "  name: test-system",
        f'  version: "{version}"',
        "  callable: app:answer",
        *["  " + line for line in textwrap.dedent(system_extra).strip().splitlines()],
        "concurrency:",
        f"  system: {concurrency[0]}",
        f"  judge: {concurrency[1]}",
        "evaluators:",
        *["  " + line for line in textwrap.dedent(evaluators).strip("\n").splitlines()],
    ]
    if policy is None and release is None:
        # A project must have a release policy (a missing one is exit 2, and so is one
        # without rules): by default, the declaration that it has none.
        policy = "none"
    if policy is not None:
        lines.insert(3, f"policy: {policy}")
    config = "\n".join(lines) + "\n"
    (root / "oloproof.yaml").write_text(config)
    if release is not None:
        (root / "release.yaml").write_text(textwrap.dedent(release))
    for name, content in (extra_files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content))
    return root


#: A release policy of one rule, ``floor``: ``exact_label`` at least 50% (its lower bound).
RELEASE_FLOOR = """
version: 1
rules:
  - id: floor
    metric: exact_label
    min: 0.5
"""


def labelled_cases(n: int, prefix: str = "q") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
        for i in range(n)
    ]


def events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    return tmp_path / "proj"


@contextlib.contextmanager
def mounted_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A real file system of ``size`` (``"2m"``) mounted at ``mount`` (created here) for a
    test: a disk that really fills. Skips the test where mounting is not allowed."""
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
        capture_output=True, check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


# -- the two store backends ------------------------------------------------------------
# The store tests run on both: SQLite (the default store, a file in .oloproof/) and
# PostgreSQL (the team store, on a real server these tests start: tests/pgserver.py).
# `backend` is the parametrised fixture; for PostgreSQL it sets OLOPROOF_STORE to a
# database of the test's own, which oloproof.run() in this process and the CLI in a
# subprocess (run_cli passes the environment on) both read.


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    from tests import pgserver

    try:
        import psycopg  # noqa: F401
    except ImportError:
        _pg_unavailable("psycopg is not installed (pip install 'oloproof[postgres]')")
    try:
        server = pgserver.start()
    except pgserver.Unavailable as exc:
        _pg_unavailable(str(exc))
    yield server
    server.stop()


def _pg_unavailable(why: str) -> None:
    from tests.pgserver import REQUIRED_ENV, required

    if required():
        pytest.fail(f"PostgreSQL is required here ({REQUIRED_ENV}) and cannot be started: {why}")
    pytest.skip(f"PostgreSQL cannot be started here ({why}); set {REQUIRED_ENV}=required"
                " to make this a failure")


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """The URL of a database of this test's own (over the server's Unix socket)."""
    name = pg_server.create_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)


@dataclass
class Backend:
    """The store a parametrised test runs on, and a way to look into it with SQL."""

    name: str  # sqlite | postgresql
    url: str | None = None

    @property
    def is_pg(self) -> bool:
        return self.name == "postgresql"

    def location(self, root: Path, project: str = "test-project") -> Any:
        from oloproof.store.location import PostgresLocation, store_path

        return store_path(root) if self.url is None else PostgresLocation(self.url, project)

    def connect(self, root: Path, project: str = "test-project") -> Any:
        """A plain connection to the store (``?`` placeholders on both): for the tests' own
        SQL, which neither creates nor migrates anything."""
        import sqlite3

        if self.url is None:
            return sqlite3.connect(root / ".oloproof" / "store.sqlite", isolation_level=None)
        from oloproof.store.postgres import connect

        return connect(self.location(root, project))

    def count(self, root: Path, table: str, where: str = "1 = 1", params: tuple[Any, ...] = ()) -> int:
        conn = self.connect(root)
        try:
            return int(conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0])
        finally:
            conn.close()

    def tables(self, conn: Any) -> set[str]:
        if self.url is None:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}

    def script(self, conn: Any, script: str) -> None:
        """Run a script of the store's schema (SQLite's DDL; translated for PostgreSQL)."""
        from oloproof.store.db import statements

        if self.url is None:
            conn.executescript(script)
            return
        from oloproof.store.postgres import ddl

        for statement in statements(script):
            conn.execute(ddl(statement))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """Each store backend in turn (OLOPROOF_STORE set for PostgreSQL)."""
    if request.param == "sqlite":
        monkeypatch.delenv("OLOPROOF_STORE", raising=False)
        return Backend("sqlite")
    url = request.getfixturevalue("pg_url")
    monkeypatch.setenv("OLOPROOF_STORE", url)
    return Backend("postgresql", url)
