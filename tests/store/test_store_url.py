"""A team store's URL read once, as libpq reads it, and refused (exit 2) before anything
connects when libpq would refuse it or read it otherwise than as written (storeurl.py)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import labelled_cases, run_cli, write_project

from oloproof.errors import ConfigError
from oloproof.store.pgwire import Unsupported, parse_url
from oloproof.storeurl import masked, scrub, store_setting

RELEASE = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"label": "ok"}
"""

# Pieces of URLs: every delimiter libpq's URI parser looks at, percent-encodings good and
# bad, parameter names it knows and one it does not.
_PIECES = st.sampled_from([
    "a", "b", "ana", ":", "@", "/", "?", "&", "=", "[", "]", ",", "%", "%4", "%41", "%00",
    "%zz", "%2C", "%3D", "%40", "%2F", "%C3%A9", "%e9", "é", "#", "5432", "::1", ".",
    "host=", "port=", "dbname=", "user=", "password=", "sslmode=", "ssl=true", "sslmdoe=",
    "pass%77ord=",
])


@settings(max_examples=3000, deadline=None)
@given(scheme=st.sampled_from(["postgresql://", "postgres://"]),
       pieces=st.lists(_PIECES, max_size=12))
def test_the_url_is_read_once_as_libpq_reads_it(scheme: str, pieces: list[str]) -> None:
    """libpq's parser (through psycopg) is the reference: a URL it refuses is refused by the
    setting, and Oloproof's own reading client reads every other one as it does (or leaves
    it to psycopg). The wire client read ``%zz`` as three characters of a password where
    libpq refuses the URL."""
    conninfo = pytest.importorskip("psycopg.conninfo")
    url = scheme + "".join(pieces)
    try:
        libpq: dict[str, str] | None = conninfo.conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - any refusal (psycopg raises ProgrammingError, or
        libpq = None  # UnicodeDecodeError for what is not UTF-8 once decoded)
    if libpq is None:
        with pytest.raises(ConfigError, match="the postgresql:// URL cannot be used"):
            store_setting(url, "OLOPROOF_STORE")
        with pytest.raises(Unsupported):
            parse_url(url)
        return
    try:
        wire = parse_url(url)
    except Unsupported:
        return  # psycopg connects instead
    assert wire == {k: v for k, v in libpq.items() if v}, url


@pytest.mark.parametrize(("url", "part"), [
    ("postgresql://ana:hun ter2@127.0.0.1:PORT/evals", "the password holds a space"),
    ("postgresql://ana: hunter2@127.0.0.1:PORT/evals", "the password holds a space"),
    ("postgresql://ana:hun\tter2@127.0.0.1:PORT/evals", "the password holds a control"),
    ("postgresql://ana@127.0.0.1:PORT/evals?password=hun ter2", "'password' holds a space"),
    ("postgresql://ana:hun%zzter2@127.0.0.1:PORT/evals", "the password holds a '%'"),
    ("postgresql://ana:hun%00ter2@127.0.0.1:PORT/evals", "the password holds %00"),
    ("postgresql://ana:hunter2@127.0.0.1:99999/evals", "the port '99999' is not a number"),
    ("postgresql://ana:hunter2@127.0.0.1:54x/evals", "the port is not a number"),
    ("postgresql://ana:hunter2@[::1/evals", "the host is an IPv6 address without its closing"),
    ("postgresql://ana:hunter2@127.0.0.1:PORT/evals?sslmode=requir", "sslmode is 'requir'"),
    ("postgresql://ana:hunter2@127.0.0.1:PORT/evals?sslmdoe=require", "'sslmdoe' is not a"),
    ("postgresql://ana:hunter2@127.0.0.1:PORT/evals?sslmode", "parameter 1 has no '='"),
    # The rest of a password libpq does not read as one (it is never shown).
    ("postgresql://ana:hun/ter2@127.0.0.1:PORT/evals", "the database name holds an '@'"),
    ("postgresql://ana:hun@ter2@127.0.0.1:PORT/evals", "the host holds an '@'"),
    ("postgresql://ana@127.0.0.1:PORT/evals?password=hun&ter2", "parameter 2 has no '='"),
    ("postgresql://ana@127.0.0.1:PORT/evals?password=hun&ter2=x", "parameter 2 is not a"),
    ("postgresql://ana:hunter2@127.0.0.1:PORT/evals?target_session_attrs=", "target_session"),
    ("postgresql://ana:hunter2@127.0.0.1:PORT/evals?connect_timeout=10s", "connect_timeout"),
])
def test_a_malformed_url_exits_2_before_anything_connects(
    tmp_path: Path, listener: tuple[int, list[Any]], url: str, part: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each was a store error (exit 5: "the team store cannot be reached", libpq's words),
    and the reading commands' own client connected with some of them (a password holding
    a space or ``%zz``) where psycopg refused them. Now: one line naming the part, exit 2,
    from every place a URL enters, and no connection."""
    port, accepted = listener
    url = url.replace("PORT", str(port))
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(8), release=RELEASE)
    results = [run_cli("runs", cwd=root, env={"OLOPROOF_STORE": url})]
    if url.startswith("postgresql://ana:hun ter2@"):  # the others enter the same way
        results.append(run_cli("gate", "latest", cwd=root, env={"OLOPROOF_STORE": url}))
        results.append(run_cli("run", cwd=root, env={"OLOPROOF_STORE": url}))
        results.append(run_cli("merge", url, cwd=root, env={"OLOPROOF_STORE": "sqlite"}))
        config = root / "oloproof.yaml"
        config.write_text(config.read_text() + f"store: '{url}'\n")
        results.append(run_cli("store", "push", cwd=root, env={"OLOPROOF_STORE": ""}))
        results.append(run_cli("run", cwd=root, env={"OLOPROOF_STORE": ""}))
        import oloproof

        monkeypatch.setenv("OLOPROOF_STORE", url)
        with pytest.raises(ConfigError) as caught:
            oloproof.run(root)
        assert part in str(caught.value) and "ter2" not in str(caught.value)
    for result in results:
        assert result.code == 2, result.text
        assert part in result.err and "nothing was connected to" in result.err, result.err
        assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.text
        assert "hun" not in result.text and "ter2" not in result.text, result.text
    assert accepted == []
    assert not (root / ".oloproof").exists()


@pytest.fixture
def listener() -> Iterator[tuple[int, list[Any]]]:
    """A TCP port on 127.0.0.1 that records every connection made to it (and closes it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[Any] = []

    def serve() -> None:
        while True:
            try:
                conn, peer = server.accept()
            except OSError:
                return
            accepted.append(peer)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        server.close()
        thread.join(timeout=5)


def test_a_space_in_a_password_is_refused_by_every_command(
    tmp_path: Path, pg_server: Any, pg_url: str
) -> None:
    """A role whose password is ``two words``: written unencoded, the reading commands (the
    wire client) logged in with it while ``run`` (psycopg's libpq 18) refused the URL
    ("unexpected spaces found", exit 5); an older libpq logged in with it too. Now both
    refuse it, exit 2; written ``%20`` both use it."""
    import uuid
    from urllib.parse import quote

    role, password = f"olo_{uuid.uuid4().hex[:8]}", "two words"
    pg_server.sql(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{password}'")
    database = pg_url.split("/")[3].split("?")[0]
    written = f"postgresql://{role}:{password}@127.0.0.1:{pg_server.port}/{database}"
    encoded = written.replace(password, quote(password))
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(8), release=RELEASE)
    assert run_cli("run", cwd=root, env={"OLOPROOF_STORE": encoded}).code == 0
    for args in (["runs"], ["gate", "latest"], ["run"]):
        result = run_cli(*args, cwd=root, env={"OLOPROOF_STORE": written})
        assert result.code == 2, (args, result.text)
        assert "the password holds a space: write it percent-encoded (%20)" in result.err
        assert "words" not in result.text
        assert run_cli(*args, cwd=root, env={"OLOPROOF_STORE": encoded}).code == 0, args


def test_a_scram_key_in_the_url_is_never_shown(tmp_path: Path) -> None:
    """libpq 18's ``scram_client_key`` (and ``scram_server_key``) log in without the
    password: it was shown as written wherever the store was, in every error that names
    it."""
    key = "c2NyYW0tY2xpZW50LWtleQ"
    url = f"postgresql://ana@127.0.0.1:1/evals?scram_client_key={key}&scram_server_key={key}2"
    assert masked(url) == (
        "postgresql://ana@127.0.0.1:1/evals?scram_client_key=***&scram_server_key=***")
    assert key not in scrub(f"bad key {key}2 ({key})", url)
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(8), release=RELEASE)
    result = run_cli("runs", cwd=root, env={"OLOPROOF_STORE": url})
    assert result.code == 5 and "scram_client_key=***" in result.err, result.text
    assert key not in result.text


def test_the_urls_connect_timeout_is_the_one_both_clients_use(
    pg_server: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``?connect_timeout=60`` (a server that takes 20 s to wake) was replaced by
    Oloproof's 15 s on every connection, psycopg's and the wire client's alike, and so was
    ``PGCONNECT_TIMEOUT``: the docs list it among the parameters a URL may give."""
    from oloproof.store.location import PostgresLocation
    from oloproof.store.pgwire import resolve
    from oloproof.store.postgres import connect

    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)

    def timeouts(url: str) -> tuple[str, float]:
        conn = connect(PostgresLocation(url, "p"))
        try:
            used = conn.raw.info.get_parameters()["connect_timeout"]
        finally:
            conn.close()
        return used, resolve(url).timeout

    assert timeouts(pg_url) == ("15", 15)  # Oloproof's, without one
    assert timeouts(pg_url + "&connect_timeout=60") == ("60", 60)
    assert timeouts(pg_url + "&connect_timeout=1") == ("2", 2)  # libpq's least
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "45")
    assert timeouts(pg_url) == ("45", 45)
    assert timeouts(pg_url + "&connect_timeout=30") == ("30", 30)  # the URL wins


def test_a_role_that_may_not_create_the_store_is_told_so(tmp_path: Path, pg_server: Any) -> None:
    """A database whose schema the URL's role may not create tables in (PostgreSQL 15's
    default for ``public``), a search_path naming no schema, a read-only session (a
    standby, or default_transaction_read_only in the URL): the error named no store
    and quoted the statement ("the store cannot be used: permission denied for schema
    public LINE 1: CREATE TABLE IF NOT EXISTS meta ( ^"). It names the store, masked,
    and what to do; exit 5, nothing run."""
    import uuid

    role, password = f"olo_{uuid.uuid4().hex[:8]}", "no-create-pw"
    pg_server.sql(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    database = pg_server.create_database()  # public: CREATE for its owner only
    try:
        url = f"postgresql://{role}:{password}@127.0.0.1:{pg_server.port}/{database}"
        root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(8), release=RELEASE)
        for given, hint in ((url, "grant it CREATE on the schema"),
                            (url + "?options=-csearch_path%3Dnosuch", "search_path names no"),
                            (url + "?options=-cdefault_transaction_read_only%3Don",
                             "the session is read-only")):
            result = run_cli("run", cwd=root, env={"OLOPROOF_STORE": given})
            assert result.code == 5, result.text
            assert f"{role}:***@127.0.0.1" in result.err and hint in result.err, result.err
            assert "LINE 1" not in result.err and password not in result.text
            assert len(result.err.strip().splitlines()) == 1
    finally:
        pg_server.drop_database(database)


@pytest.mark.parametrize("value", [
    "jdbc:postgresql://db/evals?user=ana&password=hun ter2",  # a JDBC URL pasted
    "host=db password=hun\\ ter2 dbname=evals",  # libpq's key=value form, space escaped
    "host=db password=hun ter2",
    "mysql://root@db/x?password=hun ter2",
])
def test_a_store_that_is_not_one_never_shows_the_rest_of_its_password(
    tmp_path: Path, value: str
) -> None:
    """The setting is refused (exit 2) with the value masked, and the mask ended a password
    at its first space: 'jdbc:…&password=*** ter2'."""
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(8), release=RELEASE)
    result = run_cli("runs", cwd=root, env={"OLOPROOF_STORE": value})
    assert result.code == 2 and "is not a store Oloproof can use" in result.err, result.text
    assert "password=***" in result.err
    assert "hun" not in result.text and "ter2" not in result.text, result.err


def test_a_nul_character_in_a_url_is_refused_as_libpq_refuses_it() -> None:
    """store: "postgresql://u:p\\0w@h/d" (YAML's escape): the message said to write it %00,
    which libpq refuses too."""
    with pytest.raises(ConfigError, match="the password holds a NUL character") as caught:
        store_setting("postgresql://u:p\x00w@h/d", "oloproof.yaml")
    assert "%00" not in str(caught.value)


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("PGSSLMODE", "requried", "sslmode is 'requried'"),
    ("PGPORT", "54x", "the port is not a number"),
    ("PGPORT", "5432,5433", "gives 2 ports for 1 host"),
    ("PGTARGETSESSIONATTRS", "rw", "target_session_attrs is 'rw'"),
    ("PGCONNECT_TIMEOUT", "1.5", "not a whole number"),
])
def test_a_pg_variable_libpq_would_refuse_exits_2_naming_it(
    tmp_path: Path, listener: tuple[int, list[Any]], variable: str, value: str, said: str
) -> None:
    """libpq reads PGSSLMODE, PGPORT... for what the URL does not set, and refused a wrong
    one only when connecting: 'the team store cannot be reached (connection is bad: invalid
    sslmode value: "requried")', exit 5. Now exit 2 naming the variable, nothing
    connected; a URL that sets the parameter itself is not refused for the variable."""
    port, accepted = listener
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(8), release=RELEASE)
    url = "postgresql://ana@127.0.0.1/evals"
    result = run_cli("runs", cwd=root, env={"OLOPROOF_STORE": url, variable: value})
    assert result.code == 2, result.text
    assert result.err.startswith(f"oloproof runs: error: {variable}: ") and said in result.err
    assert "nothing was connected to" in result.err and "Traceback" not in result.text
    option = {"PGSSLMODE": "sslmode=disable", "PGPORT": f"port={port}",
              "PGTARGETSESSIONATTRS": "target_session_attrs=any",
              "PGCONNECT_TIMEOUT": "connect_timeout=5"}[variable]
    given = f"postgresql://ana@127.0.0.1:{port}/evals?{option}".replace(
        f":{port}/evals?port=", "/evals?port=")
    result = run_cli("runs", cwd=root, env={"OLOPROOF_STORE": given, variable: value})
    assert result.code == 5 and "cannot be reached" in result.err, result.text
    assert accepted  # it did connect: the URL's own value won


def test_every_parameter_this_libpq_knows_is_accepted() -> None:
    """The URL's check refuses a parameter libpq does not know; a newer libpq (psycopg's)
    with one more must make this fail, not make a good URL exit 2."""
    pq = pytest.importorskip("psycopg.pq")
    from oloproof.storeurl import ENVIRONMENT, KEYWORDS

    known = {o.keyword.decode() for o in pq.Conninfo.get_defaults()}
    assert known <= KEYWORDS, sorted(known - KEYWORDS)
    variables = {o.envvar.decode(): o.keyword.decode()
                 for o in pq.Conninfo.get_defaults() if o.envvar}
    assert {k: variables.get(k) for k in ENVIRONMENT} == ENVIRONMENT
