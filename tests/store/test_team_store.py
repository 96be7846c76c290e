"""The team store on PostgreSQL, end to end, on a real server (tests/pgserver.py): what only
a shared store has to show (several projects, many writers, credentials, push, a schema
another Oloproof wrote). The store tests that both backends share are parametrised with
the `backend` fixture (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.pgserver import SECRET_PASSWORD

from oloproof.store.location import PostgresLocation

RELEASE = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"

SLOW = """
import time
from oloproof import system

@system(name="slow", version="1")
def answer(case_input):
    time.sleep(float(case_input.get("sleep", 0.01)))
    return {"label": "ok"}
"""


def _env(url: str) -> dict[str, str]:
    return {"OLOPROOF_STORE": url}


def _connect(url: str, project: str) -> Any:
    # psycopg (the postgres extra) is imported by the tests that reach a server only: the
    # fast tier collects this module on every Python CI runs, without that extra.
    from oloproof.store.postgres import connect

    return connect(PostgresLocation(url, project))


def _sql(url: str, sql: str, params: tuple[Any, ...] = (), project: str = "test-project") -> list[Any]:
    conn = _connect(url, project)
    try:
        cur = conn.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []
    finally:
        conn.close()


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_the_support_bot_example_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """Decided as on SQLite; an unchanged rerun is all cache; `runs` lists both runs; no
    SQLite file (nor anything else) is written beside the project."""
    local = tmp_path / "local"
    team = tmp_path / "team"
    for root in (local, team):
        assert run_cli("init", str(root), "--example", "support_bot", cwd=tmp_path).code == 0
    before = {p: p.read_bytes() for p in _files(team)}
    on_sqlite = run_cli("run", "--json", cwd=local)
    first = run_cli("run", "--json", cwd=team, env=_env(pg_url))
    assert first.code == on_sqlite.code == 3, first.text
    last = [json.loads(line) for line in first.out.splitlines()][-1]
    sqlite_last = [json.loads(line) for line in on_sqlite.out.splitlines()][-1]
    assert last["type"] == "run_finished" and last["status"] == "DECIDED"
    assert last["decisions"] == sqlite_last["decisions"]

    again = run_cli("run", cwd=team, env=_env(pg_url))
    assert again.code == 3, again.text
    assert "executions 18 hits · 0 misses" in again.out
    assert "judgments 54 hits · 0 misses" in again.out

    runs = run_cli("runs", "--json", cwd=team, env=_env(pg_url))
    assert runs.code == 0, runs.text
    assert [r["state"] if "state" in r else r["status"] for r in json.loads(runs.out)] == [
        "DECIDED", "DECIDED"]
    # No store beside the project: .oloproof/ holds only the validated configuration's
    # snapshots (project/_snapshot.py), which spare the next command a validation.
    written = {p for p in _files(team) if p not in before
               and "__pycache__" not in p.relative_to(team).parts}  # Python's, for app.py
    assert {p.relative_to(team).parts[:2] for p in written} <= {
        (".oloproof", "snapshots"), (".oloproof", ".gitignore")}
    assert not list(team.rglob("*.sqlite*"))
    assert {p: p.read_bytes() for p in before} == before  # the project's files untouched

    gate = run_cli("gate", "latest", "--json", cwd=team, env=_env(pg_url))
    assert gate.code == 3 and json.loads(gate.out)["decisions"] == last["decisions"]


def test_the_password_is_never_shown_nor_stored(
    tmp_path: Path, pg_server: Any, pg_url: str
) -> None:
    database = pg_url.split("/")[3].split("?")[0]
    url = pg_server.tcp_url(database)  # postgresql://olo_secret:<password>@127.0.0.1:PORT/db
    secrets = {SECRET_PASSWORD, quote(SECRET_PASSWORD, safe="")}
    root = tmp_path / "bot"
    assert run_cli("init", str(root), "--example", "support_bot", cwd=tmp_path).code == 0
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + f"store: {url}\n")
    outputs = []
    for args in (["run", "--json"], ["run"], ["runs"], ["runs", "--json"], ["gate", "latest"],
                 ["gate", "latest", "--json"], ["inspect", "latest"],
                 ["inspect", "latest", "--json"], ["plan", "latest", "--run"],
                 ["report", "latest", "-o", "report.html"], ["compare", "latest", "EARLIER"]):
        if "EARLIER" in args:  # the run before the latest (a run is not compared with itself)
            earlier = json.loads(run_cli("runs", "--json", cwd=root).out)[1]["id"]
            args = [earlier if a == "EARLIER" else a for a in args]
        result = run_cli(*args, cwd=root)
        assert result.code in (0, 3), (args, result.text)
        outputs.append(result.text)
    outputs.append((root / "report.html").read_text())
    # A wrong password, a database that does not exist: the error names the store, masked.
    for bad in (url.replace(quote(SECRET_PASSWORD, safe=""), quote(SECRET_PASSWORD + "x", safe="")),
                url.replace(f"/{database}", "/no_such_db")):
        result = run_cli("runs", cwd=root, env=_env(bad))
        assert result.code == 5, result.text
        assert "olo_secret:***@127.0.0.1" in result.err
        assert len(result.err.strip().splitlines()) == 1
        outputs.append(result.text)
    for text in outputs:
        for secret in secrets:
            assert secret not in text
    assert any("olo_secret:***@" in text for text in outputs[-2:])
    # Nothing stored in the database holds it, and no file beside the project either.
    conn = _connect(url, "support-bot-example")
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        assert "runs" in tables
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}").fetchall():
                text = repr(row)
                assert not any(secret in text for secret in secrets), table
    finally:
        conn.close()
    for path in _files(root):
        data = path.read_bytes()
        if path.name == "oloproof.yaml":
            continue  # where the user put it
        assert not any(secret.encode() in data for secret in secrets), path


def test_a_password_libpq_reads_unencoded_or_by_an_encoded_name_is_never_shown(
    tmp_path: Path, pg_server: Any, pg_url: str
) -> None:
    """libpq ends a URL's user part at its first '@' before a '/', so a password holding '?'
    or '#' needs no percent-encoding, and it decodes a parameter's name as its value
    (``?pass%77ord=`` is ``password=``). Both connected, and ``runs`` printed the password
    in its header (and any error quoted the store)."""
    import uuid

    role, password = f"olo_{uuid.uuid4().hex[:8]}", "Qx?v7#w9:z"
    pg_server.sql(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{password}'")
    database = pg_url.split("/")[3].split("?")[0]
    written = f"postgresql://{role}:{password}@127.0.0.1:{pg_server.port}/{database}"
    named = (f"postgresql://{role}@127.0.0.1:{pg_server.port}/{database}"
             f"?pass%77ord={quote(password, safe='')}")
    root = write_project(tmp_path / "p", app=SLOW, cases=labelled_cases(6), release=RELEASE)
    outputs = []
    for url in (written, named):
        for args in (["run"], ["runs"], ["gate", "latest"]):
            result = run_cli(*args, cwd=root, env=_env(url))
            assert result.code == 0, (url, args, result.text)
            outputs.append(result.text)
        # And an error that quotes the store: a database that does not exist.
        result = run_cli("runs", cwd=root, env=_env(url.replace(f"/{database}", "/no_such_db")))
        assert result.code == 5 and "no_such_db" in result.err, result.text
        outputs.append(result.text)
    assert f"{role}:***@127.0.0.1" in outputs[1] and "pass%77ord=***" in outputs[-1]
    for text in outputs:
        assert "Qx?v7" not in text and "Qx%3Fv7" not in text, text


def test_a_store_of_a_newer_schema_is_refused_in_one_line(tmp_path: Path, pg_url: str) -> None:
    root = write_project(tmp_path / "p", app=SLOW, cases=labelled_cases(12), release=RELEASE)
    assert run_cli("run", cwd=root, env=_env(pg_url)).code == 0
    _sql(pg_url, "UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    rows_before = _sql(pg_url, "SELECT count(*) FROM run_cases")
    for args in (["run"], ["runs"], ["gate", "latest"]):
        result = run_cli(*args, cwd=root, env=_env(pg_url))
        assert result.code == 2, result.text
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and "written by a newer Oloproof (schema 99" in lines[0], lines
    assert _sql(pg_url, "SELECT count(*) FROM run_cases") == rows_before
    assert _sql(pg_url, "SELECT value FROM meta WHERE key = 'schema_version'") == [("99",)]


def test_a_database_with_foreign_tables_of_our_names_is_refused(
    tmp_path: Path, pg_url: str
) -> None:
    _sql(pg_url, "CREATE TABLE runs (id int)")
    # 6 cases: the fewest a floor of 50% can fail on (fewer is refused before the store).
    root = write_project(tmp_path / "p", app=SLOW, cases=labelled_cases(6), release=RELEASE)
    result = run_cli("run", cwd=root, env=_env(pg_url))
    assert result.code == 2, result.text
    assert "not an Oloproof store" in result.err
    assert _sql(pg_url, "SELECT count(*) FROM runs") == [(0,)]


def test_projects_sharing_a_database_see_their_own_runs(tmp_path: Path, pg_url: str) -> None:
    roots = {}
    for name in ("alpha", "beta"):
        root = write_project(tmp_path / name, app=SLOW, cases=labelled_cases(12), release=RELEASE)
        config = root / "oloproof.yaml"
        config.write_text(config.read_text().replace("project: test-project", f"project: {name}"))
        roots[name] = root
    ids = {}
    for name, root in roots.items():
        for _ in range(2 if name == "alpha" else 1):
            assert run_cli("run", cwd=root, env=_env(pg_url)).code == 0
        ids[name] = [r["id"] for r in json.loads(
            run_cli("runs", "--json", cwd=root, env=_env(pg_url)).out)]
    assert len(ids["alpha"]) == 2 and len(ids["beta"]) == 1
    assert not set(ids["alpha"]) & set(ids["beta"])
    # `latest` is each project's own, and another project's run is not found.
    for name, root in roots.items():
        gate = run_cli("gate", "latest", "--json", cwd=root, env=_env(pg_url))
        assert json.loads(gate.out)["run_id"] == ids[name][0]
    other = run_cli("gate", ids["beta"][0], cwd=roots["alpha"], env=_env(pg_url))
    assert other.code == 2 and "no run" in other.err
    # The caches are shared: beta's system is the same code, and its cases the same ids.
    assert "executions 12 hits" in run_cli("run", cwd=roots["beta"], env=_env(pg_url)).out


def test_eight_runs_at_once_and_a_reader(tmp_path: Path, pg_url: str) -> None:
    """8 concurrent writers on one database (the same cache keys: --no-cache rewrites them
    all) and a reader listing runs meanwhile: no lock error, nothing lost, every run
    decided."""
    cases = labelled_cases(60)
    for c in cases:
        c["input"] = {**c["input"], "sleep": 0.01}
    root = write_project(tmp_path / "p", app=SLOW, cases=cases, release=RELEASE,
                         concurrency=(8, 4))
    assert run_cli("run", cwd=root, env=_env(pg_url)).code == 0  # the store, and a cache
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"} | _env(pg_url)
    procs = [
        subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=root, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        for _ in range(8)
    ]
    reads: list[subprocess.CompletedProcess[str]] = []
    while any(p.poll() is None for p in procs) and len(reads) < 50:
        reads.append(subprocess.run([*OLOPROOF, "runs", "--json"], cwd=root, env=env,
                                    capture_output=True, text=True, timeout=120, check=False))
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out + err
        assert "60 / 60 observed" in out
    assert reads and all(r.returncode == 0 for r in reads), [r.stderr for r in reads]
    for text in [o + e for o, e in outs] + [r.stderr for r in reads]:
        assert not re.search(r"(?i)deadlock|lock timeout|could not serialize", text)
    assert _sql(pg_url, "SELECT status, count(*) FROM runs GROUP BY status") == [("DECIDED", 9)]
    assert _sql(pg_url, "SELECT count(*) FROM run_cases") == [(9 * 60,)]
    assert _sql(pg_url, "SELECT count(*) FROM run_judgments") == [(9 * 60,)]
    assert _sql(pg_url, "SELECT count(*) FROM exec_cache") == [(60,)]


_OPEN_FOR_WRITING = """
import sys
from oloproof.store.db import open_store
from oloproof.store.location import PostgresLocation
location = PostgresLocation(sys.argv[1], "p")
sys.stdin.readline()  # the start line: every process opens the store at once
open_store(location).close()
print("opened")
"""


def test_writers_that_start_together_on_a_new_team_store_all_use_it(
    tmp_path: Path, pg_server: Any
) -> None:
    """The K shard jobs of a CI matrix (docs/scaling.md) starting at once on a team store
    nobody has written yet: one creates the tables, the others wait for it and use them.
    (A writer that had looked for the tables before it waited went on seeing some of them
    missing, in PostgreSQL's catalog cache, and took the new store for a database that is
    not one, or created a table again: most of the K jobs stopped, exit 5.)"""
    for _ in range(3):
        name = pg_server.create_database()
        try:
            procs = [
                subprocess.Popen([sys.executable, "-c", _OPEN_FOR_WRITING, pg_server.url(name)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, cwd=tmp_path)
                for _ in range(6)
            ]
            time.sleep(2)  # every process has imported what it needs
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            outs = [p.communicate(timeout=120) for p in procs]
            assert [out for out, _ in outs] == ["opened\n"] * 6, [err for _, err in outs]
        finally:
            pg_server.drop_database(name)


def _counts(url: str) -> dict[str, int]:
    tables = [r[0] for r in _sql(
        url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    return {t: _sql(url, f"SELECT count(*) FROM {t}")[0][0] for t in sorted(tables)}


def test_store_push_copies_runs_once(tmp_path: Path, pg_url: str) -> None:
    root = write_project(tmp_path / "p", app=SLOW, cases=labelled_cases(12), release=RELEASE)
    assert run_cli("run", cwd=root).code == 0  # on the local SQLite store
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "trials: 2\n")
    assert run_cli("run", cwd=root).code == 0
    local_runs = json.loads(run_cli("runs", "--json", cwd=root).out)

    first = run_cli("store", "push", "--json", cwd=root, env=_env(pg_url))
    assert first.code == 0, first.text
    doc = json.loads(first.out)
    assert doc["copied"] == 2 and doc["already_there"] == 0
    counts = _counts(pg_url)
    assert counts["runs"] == 2 and counts["run_cases"] == 24 and counts["trial_cases"] == 12
    assert counts["exec_cache"] == 24 and counts["run_owners"] == 0

    again = run_cli("store", "push", cwd=root, env=_env(pg_url))
    assert again.code == 0, again.text
    assert "Pushed 0 runs" in again.out and "(2 already there)" in again.out
    assert _counts(pg_url) == counts  # nothing new written
    # A prefix of the id (not its first 12 characters: two runs started within the same
    # second share those, and such a prefix names no one run).
    one = run_cli("store", "push", local_runs[0]["id"][:-3], cwd=root, env=_env(pg_url))
    assert one.code == 0 and "already there" in one.out
    assert _counts(pg_url) == counts

    # The team store reads the pushed runs as the local one did, and its cache serves them.
    team_runs = json.loads(run_cli("runs", "--json", cwd=root, env=_env(pg_url)).out)
    assert team_runs == local_runs
    for run in local_runs:
        here = json.loads(run_cli("gate", run["id"], "--json", cwd=root).out)
        there = json.loads(run_cli("gate", run["id"], "--json", cwd=root, env=_env(pg_url)).out)
        assert here == there
    rerun = run_cli("run", cwd=root, env=_env(pg_url))
    assert "executions 24 hits · 0 misses" in rerun.out, rerun.text


def test_store_push_needs_a_team_store(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=SLOW, cases=labelled_cases(2), release=RELEASE)
    result = run_cli("store", "push", cwd=root, env={"OLOPROOF_STORE": "sqlite"})
    assert result.code == 2 and "team store" in result.err


def test_a_live_run_reads_running_and_the_viewer_follows_it(
    tmp_path: Path, pg_url: str
) -> None:
    cases = labelled_cases(300)
    for c in cases:
        c["input"] = {**c["input"], "sleep": 0.05}
    root = write_project(tmp_path / "p", app=SLOW, cases=cases, release=RELEASE,
                         concurrency=(2, 1))
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"} | _env(pg_url)
    run = subprocess.Popen([*OLOPROOF, "run"], cwd=root, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    view = None
    try:
        deadline = time.monotonic() + 60
        while True:
            rows = _sql(pg_url, "SELECT count(*) FROM run_cases") if _has_store(pg_url) else [(0,)]
            if rows[0][0] >= 5:
                break
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.1)
        runs = json.loads(run_cli("runs", "--json", cwd=root, env=_env(pg_url)).out)
        assert runs[0]["status"] == "RUNNING"  # its process holds the run's lock
        view = subprocess.Popen([*OLOPROOF, "view", "--no-open", "--port", "0"], cwd=root,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, stdin=subprocess.DEVNULL)
        assert view.stdout is not None
        line = view.stdout.readline()
        address = re.search(r"(http://127\.0\.0\.1:\d+/\S*)", line)
        assert address, line + (view.stderr.read() if view.poll() is not None else "")
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        page = opener.open(address.group(1), timeout=30).read().decode()
        assert runs[0]["id"] in page
        base = address.group(1).split("?")[0].rstrip("/")
        seen: list[str] = []

        def follow() -> None:
            with opener.open(f"{base}/runs/{runs[0]['id']}/events", timeout=60) as stream:
                for raw in stream:
                    seen.append(raw.decode())
                    if sum(1 for s in seen if s.startswith("event: case_executed")) >= 3:
                        return

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert sum(1 for s in seen if s.startswith("event: case_executed")) >= 3, seen[:5]
    finally:
        run.kill()
        run.wait(timeout=30)
        if view is not None:
            view.terminate()
            view.wait(timeout=30)
    ended = json.loads(run_cli("runs", "--json", cwd=root, env=_env(pg_url)).out)
    assert ended[0]["status"] == "RUN_ERROR"
    assert ended[0]["stop_reason"] == "the process running it ended without finishing"
    _ = sys


def _has_store(url: str) -> bool:
    return bool(_sql(url, "SELECT to_regclass('run_cases') IS NOT NULL")[0][0])


def test_pushing_a_named_run_that_is_still_running_is_not_a_success(
    tmp_path: Path, pg_url: str
) -> None:
    cases = labelled_cases(60)
    for c in cases:
        c["input"] = {**c["input"], "sleep": 0.1}
    root = write_project(tmp_path / "p", app=SLOW, cases=cases, release=RELEASE,
                         concurrency=(1, 1))
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    env.pop("OLOPROOF_STORE", None)
    run = subprocess.Popen([*OLOPROOF, "run"], cwd=root, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not json.loads(run_cli("runs", "--json", cwd=root).out or "[]"):
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.1)
        named = run_cli("store", "push", "latest", cwd=root, env=_env(pg_url))
        assert named.code == 5, named.text  # asked for, and not pushed
        assert "not pushed, still running" in named.err, named.err
        every = run_cli("store", "push", cwd=root, env=_env(pg_url))
        assert every.code == 0, every.text  # everything that has finished was pushed
    finally:
        run.wait(timeout=120)
    done = run_cli("store", "push", "latest", cwd=root, env=_env(pg_url))
    assert done.code == 0 and "Pushed 1 run " in done.out, done.text


def test_cases_of_a_run_made_with_another_config_are_read_from_its_store(
    tmp_path: Path, pg_url: str
) -> None:
    """`RunResult.cases()` reads the store the run was made in: a run made with `ci.yaml`,
    whose `store:` is the team store, was looked for in the SQLite store of the
    directory's oloproof.yaml (no such run there)."""
    import oloproof

    root = write_project(tmp_path / "p", app=SLOW, cases=labelled_cases(8), release=RELEASE)
    (root / "ci.yaml").write_text((root / "oloproof.yaml").read_text() + f"store: {pg_url}\n")
    result = oloproof.run(root / "ci.yaml")
    assert result.allowed, result.stop_reason
    assert sorted(c.id for c in result.cases()) == sorted(c["id"] for c in labelled_cases(8))
    again = oloproof.read_run(result.run_id, root / "ci.yaml")
    assert len(list(again.cases())) == 8


def test_a_survey_that_straddles_the_creation_of_the_store_reads_the_new_store(
    pg_server: Any,
) -> None:
    """A writer looks for the store in two statements when it does not exist yet; another
    session that creates it between them made the second statement see `meta` and `runs`
    without the version the first could not read, and the store was refused as 'not an
    Oloproof store' (exit 5): the CI failure of the test above, made certain here by
    creating the store from another session right after the first statement failed."""
    from oloproof.store.location import PostgresLocation
    from oloproof.store.postgres import connect, migrate

    name = pg_server.create_database()
    try:
        location = PostgresLocation(pg_server.url(name), "p")
        conn, other = connect(location), connect(location)
        real_row = conn._row
        created: list[bool] = []

        def row(sql: str, params: Any) -> Any:
            try:
                return real_row(sql, params)
            except Exception:
                if not created:  # the first statement failed: no meta table yet
                    migrate(other)  # another writer creates the store and commits
                    created.append(True)
                raise

        conn._row = row  # type: ignore[method-assign]
        try:
            migrate(conn)  # refused the store before
            assert created and conn.has_table("runs")
        finally:
            conn.close()
            other.close()
    finally:
        pg_server.drop_database(name)
