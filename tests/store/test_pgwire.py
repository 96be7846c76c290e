"""The wire client of the team store (store/pgwire.py) against real PostgreSQL servers
(tests/pgserver.py): every reading command (and every page of the viewer) answers the same
through it as through psycopg;
it authenticates by SCRAM-SHA-256, MD5 and password (from the URL, PGPASSWORD, a .pgpass
file) and refuses a wrong password in one line; it speaks TLS as libpq's ``prefer`` and
``require`` do; and what it does not speak goes to psycopg."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from tests.conftest import OLOPROOF, run_cli, write_project
from tests.report._viewer import routes, running_viewer

from oloproof.errors import StoreError
from oloproof.store.location import PostgresLocation

APP = """
from oloproof import system

@system(name="bot", version="1")
def answer(case_input):
    q = case_input["q"]
    return {"label": "yes" if q % 4 else "no"}
"""
EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
  group_by: [lang]
"""
RELEASE = """
version: 1
rules:
  - id: floor
    metric: exact_label
    min: 0.6
  - id: french
    metric: exact_label
    min: 0.5
    group: {lang: fr}
  - id: every-lang
    metric: exact_label
    max_failures: 6
    each_group: true
"""
FAILING = RELEASE.replace("min: 0.6", "min: 0.97")
COMPARE = """
version: 1
rules:
  - id: no-regression
    kind: non_inferiority
    metric: exact_label
    margin: 0.1
"""
CASES = [{"id": f"c{i:02d}", "input": {"q": i}, "expected": {"label": "yes"},
          "metadata": {"lang": "fr" if i % 3 else "en"}} for i in range(30)]
PSYCOPG = {"OLOPROOF_PG_DRIVER": "psycopg"}
# What differs between two runs of one command whatever the client: a new comparison's id
# and the moment it was made.
_VOLATILE = re.compile(r"cmp_[0-9A-Z]{26}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")


def _steady(text: str) -> str:
    return _VOLATILE.sub("…", text)


def test_every_reading_command_answers_the_same_through_either_client(
    tmp_path: Path, pg_url: str
) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=CASES, evaluators=EVALUATORS,
                         release=RELEASE, extra_files={"compare.yaml": COMPARE})
    env = {"OLOPROOF_STORE": pg_url}
    codes = []
    first = run_cli("run", cwd=root, env=env)  # decided
    codes.append(first.code)
    (root / "release.yaml").write_text(FAILING)
    codes.append(run_cli("run", cwd=root, env=env).code)  # a FAIL
    (root / "release.yaml").write_text(RELEASE)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "trials: 3\n")
    codes.append(run_cli("run", cwd=root, env=env).code)  # trials
    assert 1 in codes and len(codes) == 3, codes
    runs = json.loads(run_cli("runs", "--json", cwd=root, env=env).out)
    ids = [r["id"] if "id" in r else r["run_id"] for r in runs]
    assert len(ids) == 3
    compared = run_cli("compare", ids[0], ids[2], "--json", cwd=root, env=env)
    assert compared.code in (0, 1, 3), compared.text
    cmp_id = re.search(r"cmp_[0-9A-Z]{26}", compared.out)
    assert cmp_id is not None

    commands: list[list[str]] = [
        ["runs"], ["runs", "--json"],
        ["gate", "latest"], ["gate", "latest", "--json"], ["gate", ids[1], "--json"],
        ["gate", ids[2], "--policy", "release.yaml", "--json"],
        ["inspect", "latest"], ["inspect", "latest", "--json"],
        ["inspect", ids[1], "--failures", "--json"], ["inspect", ids[2], "--case", "c04"],
        ["plan", ids[0], "--run"], ["plan", ids[0], "--run", "--json"],
        ["plan", cmp_id.group(0), "--json"],
        ["compare", ids[0], ids[2], "--json"],
        ["report", ids[1], "-o", "report.html"],
        ["gate", "run_nosuchrun"], ["inspect", "latest", "--case", "nope"],
    ]
    for args in commands:
        wire = run_cli(*args, cwd=root, env=env)
        report_wire = (root / "report.html").read_text() if args[0] == "report" else ""
        psy = run_cli(*args, cwd=root, env={**env, **PSYCOPG})
        report_psy = (root / "report.html").read_text() if args[0] == "report" else ""
        assert wire.code == psy.code, (args, wire.text, psy.text)
        assert _steady(wire.out) == _steady(psy.out), args
        assert _steady(wire.err) == _steady(psy.err), args
        assert _steady(report_wire) == _steady(report_psy), args
        assert wire.code != 2 or args[1] in ("run_nosuchrun", "latest"), (args, wire.text)

    # The viewer's pages, route by route.
    pages = {}
    for driver in ("wire", "psycopg"):
        with running_viewer(root, env={**env, "OLOPROOF_PG_DRIVER": driver}) as viewer:
            got = {}
            for path in routes(ids[1], cmp_id.group(0), "c04"):
                if path.endswith("/events"):
                    continue  # a stream that follows a live run
                answer = httpx.get(viewer.base + path.lstrip("/"), headers=viewer.auth(),
                                   timeout=60)
                got[path] = (answer.status_code, _steady(
                    answer.text.replace(viewer.token, "TOKEN").replace(str(viewer.port), "PORT")))
            pages[driver] = got
    assert pages["wire"] == pages["psycopg"]
    assert pages["wire"][f"/runs/{ids[1]}"][0] == 200 and pages["wire"]["/"][0] == 200
    assert ids[1] in pages["wire"]["/"][1] and "c04" in pages["wire"][f"/runs/{ids[1]}/cases/c04"][1]

    # The reading commands on a team store import neither psycopg nor asyncio.
    for args in (["gate", "latest"], ["runs"]):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", *OLOPROOF[1:], *args], cwd=root,
            env={**_environ(), **env}, capture_output=True, text=True, check=False, timeout=120,
        )
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time:")}
        assert proc.returncode in (0, 1, 3), proc.stderr[-2000:]
        assert "oloproof.store.pgwire" in imported
        assert not {m for m in imported if m.split(".")[0] in ("psycopg", "psycopg_binary",
                                                              "asyncio")}, args


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}


# -- authentication and TLS, on a server of this module's own --------------------------------

USERS = {"olo_md5": ("md5", "Md5-pass:w@rd"), "olo_plain": ("password", "Plain-pass"),
         "olo_gss": ("gss", "Gss-pass")}


class AuthServer:
    def __init__(self, server: Any, database: str, tls: bool) -> None:
        self.server = server
        self.database = database
        self.tls = tls

    def url(self, user: str, password: str | None = None, query: str = "sslmode=disable") -> str:
        auth = user if password is None else f"{user}:{quote(password, safe='')}"
        return f"postgresql://{auth}@127.0.0.1:{self.server.port}/{self.database}?{query}"


@pytest.fixture(scope="module")
def auth_server(pg_server: Any) -> Iterator[AuthServer]:
    """A server whose pg_hba.conf has a role per method (scram-sha-256 for the secret role,
    md5, password, gss), and TLS on (a self-signed certificate made now) when openssl is
    here."""
    from tests import pgserver

    server = pgserver.start()
    try:
        server.sql("SET password_encryption = 'md5'; CREATE ROLE olo_md5 LOGIN PASSWORD"
                   f" '{USERS['olo_md5'][1]}'")
        for user in ("olo_plain", "olo_gss"):
            server.sql(f"CREATE ROLE {user} LOGIN PASSWORD '{USERS[user][1]}'")
        data = server.directory / "data"
        hba = data / "pg_hba.conf"
        lines = [f"host all {user} 127.0.0.1/32 {method}" for user, (method, _) in USERS.items()]
        tls = False
        openssl = shutil.which("openssl")
        if openssl:
            # A role that may only connect over TLS.
            server.sql("SET password_encryption = 'md5'; CREATE ROLE olo_tls LOGIN PASSWORD"
                       f" '{USERS['olo_md5'][1]}'")
            lines += ["hostssl all olo_tls 127.0.0.1/32 md5",
                      "hostnossl all olo_tls 127.0.0.1/32 reject"]
        hba.write_text("\n".join(lines) + "\n" + hba.read_text())
        if openssl:
            subprocess.run(
                [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                 "-subj", "/CN=localhost", "-keyout", str(data / "server.key"),
                 "-out", str(data / "server.crt")],
                check=True, capture_output=True, timeout=60,
            )
            (data / "server.key").chmod(0o600)
            if server.user:
                shutil.chown(data / "server.key", server.user, server.user)
                shutil.chown(data / "server.crt", server.user, server.user)
            server.sql("ALTER SYSTEM SET ssl = on")
            tls = True
        server.sql("SELECT pg_reload_conf()")
        database = server.create_database()
        from oloproof.store.postgres import open_store

        open_store(PostgresLocation(server.url(database), "p")).close()
        for user in [*USERS, *(["olo_tls"] if tls else [])]:
            server.sql(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {user}", database)
        server.sql(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {pgserver.SECRET_USER}",
                   database)
        _wait_for_reload(server, tls)
        yield AuthServer(server, database, tls)
    finally:
        server.stop()


def _wait_for_reload(server: Any, tls: bool) -> None:
    import time

    import psycopg

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            errors = conn.execute("SELECT count(*) FROM pg_hba_file_rules WHERE error IS NOT NULL"
                                  ).fetchone()
            ssl = conn.execute("SHOW ssl").fetchone()
        assert errors is not None and errors[0] == 0, "pg_hba.conf has errors"
        if ssl is not None and (ssl[0] == "on") == tls:
            return
        time.sleep(0.2)
    raise AssertionError("the server did not take its new settings")


def _read(url: str) -> Any:
    from oloproof.store.db import open_store_readonly

    return open_store_readonly(PostgresLocation(url, "p"))


def _who(conn: Any) -> tuple[str, bool]:
    row = conn.execute("SELECT current_user, (SELECT ssl FROM pg_stat_ssl"
                       " WHERE pid = pg_backend_pid())").fetchone()
    return row[0], row[1]


def test_each_password_method_through_the_url_pgpassword_and_pgpass(
    auth_server: AuthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.pgserver import SECRET_PASSWORD, SECRET_USER

    from oloproof.store.pgwire import WireConnection

    monkeypatch.delenv("OLOPROOF_PG_DRIVER", raising=False)
    accounts = {SECRET_USER: SECRET_PASSWORD, "olo_md5": USERS["olo_md5"][1],
                "olo_plain": USERS["olo_plain"][1]}
    for user, password in accounts.items():
        conn = _read(auth_server.url(user, password))  # in the URL
        try:
            assert isinstance(conn, WireConnection) and _who(conn) == (user, False)
        finally:
            conn.close()
        monkeypatch.setenv("PGPASSWORD", password)
        conn = _read(auth_server.url(user))
        assert isinstance(conn, WireConnection) and _who(conn)[0] == user
        conn.close()
        monkeypatch.delenv("PGPASSWORD")
        passfile = tmp_path / f"pgpass-{user}"
        escaped = password.replace("\\", "\\\\").replace(":", "\\:")
        passfile.write_text(f"127.0.0.1:{auth_server.server.port}:*:{user}:{escaped}\n")
        passfile.chmod(0o600)
        monkeypatch.setenv("PGPASSFILE", str(passfile))
        conn = _read(auth_server.url(user))
        assert isinstance(conn, WireConnection) and _who(conn)[0] == user
        conn.close()
        monkeypatch.delenv("PGPASSFILE")

        # A wrong password: one line, exit 5, the password nowhere.
        from oloproof.store.db import StoreUnreadable

        with pytest.raises(StoreUnreadable) as caught:
            _read(auth_server.url(user, password + "x"))
        message = str(caught.value)
        assert "password authentication failed" in message and "\n" not in message
        assert password not in message and quote(password, safe="") not in message
        monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
        with pytest.raises(StoreUnreadable, match="no password supplied"):
            _read(auth_server.url(user))
        monkeypatch.delenv("PGPASSFILE")


def test_a_wrong_password_from_the_cli(auth_server: AuthServer, tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=CASES)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("project: test-project", "project: p"))
    password = USERS["olo_md5"][1]
    good = run_cli("runs", cwd=root, env={"OLOPROOF_STORE": auth_server.url("olo_md5", password)})
    assert good.code == 0, good.text
    bad = run_cli("runs", cwd=root,
                  env={"OLOPROOF_STORE": auth_server.url("olo_md5", password + "!")})
    assert bad.code == 5 and len(bad.err.strip().splitlines()) == 1, bad.text
    assert "olo_md5:***@127.0.0.1" in bad.err and "password authentication failed" in bad.err
    assert password not in bad.text and quote(password, safe="") not in bad.text


def test_what_the_wire_client_does_not_speak_goes_to_psycopg(
    auth_server: AuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oloproof.store import pgwire
    from oloproof.store.db import StoreUnreadable
    from oloproof.store.postgres import PgConnection

    monkeypatch.delenv("OLOPROOF_PG_DRIVER", raising=False)
    # A parameter it does not know: psycopg connects, and says why it was its turn.
    url = auth_server.url("olo_md5", USERS["olo_md5"][1],
                          "sslmode=disable&options=-cstatement_timeout%3D0")
    conn = _read(url)
    try:
        assert isinstance(conn, PgConnection) and "options" in str(conn.fallback_reason)
        assert conn.execute("SELECT current_user").fetchone()[0] == "olo_md5"
    finally:
        conn.close()
    # A server that asks for GSSAPI: the wire client leaves, libpq tries (and fails here,
    # with no Kerberos), and its message is the one shown.
    gss = auth_server.url("olo_gss", USERS["olo_gss"][1])
    with pytest.raises(pgwire.Unsupported, match="request 7"):
        pgwire.connect(PostgresLocation(gss, "p"))
    with pytest.raises(StoreUnreadable, match="GSSAPI"):
        _read(gss)
    monkeypatch.setenv("OLOPROOF_PG_DRIVER", "wire")
    with pytest.raises(StoreError, match="wire client cannot read this store"):
        _read(gss)
    monkeypatch.setenv("OLOPROOF_PG_DRIVER", "libpq")
    from oloproof.errors import ConfigError

    with pytest.raises(ConfigError, match="accepted: auto, psycopg, wire"):
        _read(gss)


def test_tls_as_libpqs_prefer_and_require(
    auth_server: AuthServer, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oloproof.store.db import StoreUnreadable
    from oloproof.store.pgwire import WireConnection
    from oloproof.store.postgres import PgConnection

    if not auth_server.tls:
        pytest.skip("openssl is not installed: no certificate for a TLS server")
    monkeypatch.delenv("OLOPROOF_PG_DRIVER", raising=False)
    password = USERS["olo_md5"][1]
    for query, tls in (("sslmode=require", True), ("sslmode=prefer", True), ("", True),
                       ("sslmode=disable", False), ("sslmode=allow", False)):
        conn = _read(auth_server.url("olo_md5", password, query))
        try:
            assert isinstance(conn, WireConnection), query
            assert _who(conn) == ("olo_md5", tls), query
        finally:
            conn.close()
    # SCRAM over TLS: libpq binds the channel (SCRAM-SHA-256-PLUS); psycopg does it.
    from tests.pgserver import SECRET_PASSWORD, SECRET_USER

    conn = _read(auth_server.url(SECRET_USER, SECRET_PASSWORD, "sslmode=require"))
    try:
        assert isinstance(conn, PgConnection) and "channel" in str(conn.fallback_reason)
        assert _who(conn) == (SECRET_USER, True)
    finally:
        conn.close()
    # allow begins without TLS; a server that refuses that sends the connection to psycopg,
    # whose libpq tries again with TLS (and is let in).
    conn = _read(auth_server.url("olo_tls", password, "sslmode=allow"))
    try:
        assert isinstance(conn, PgConnection)
        assert "without TLS" in str(conn.fallback_reason)
        assert _who(conn) == ("olo_tls", True)
    finally:
        conn.close()
    conn = _read(auth_server.url("olo_tls", password, "sslmode=require"))
    try:
        assert isinstance(conn, WireConnection) and _who(conn) == ("olo_tls", True)
    finally:
        conn.close()
    # require, from a server without TLS: refused as libpq refuses it.
    database = pg_server.create_database()
    try:
        url = pg_server.tcp_url(database) + "?sslmode=require"
        with pytest.raises(StoreUnreadable, match="server does not support SSL"):
            _read(url)
    finally:
        pg_server.drop_database(database)
