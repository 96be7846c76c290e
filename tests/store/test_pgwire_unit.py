"""The wire client of the team store (store/pgwire.py) without a server: where it connects
(URL, environment, ~/.pgpass, and when it leaves the connection to psycopg), the array
parser, the placeholders, SCRAM's arithmetic against RFC 7677's example, and the framing of
messages against malformed and huge input, over a socket pair. In the fast tier, on every
Python CI runs (no psycopg needed)."""

from __future__ import annotations

import math
import os
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from oloproof.store import pgwire
from oloproof.store.dbapi import DatabaseError, OperationalError, RetryableError
from oloproof.store.location import PostgresLocation
from oloproof.store.pgwire import (
    MAX_MESSAGE,
    Unsupported,
    WireConnection,
    parse_array,
    parse_url,
    pgpass_password,
    resolve,
    to_dollar,
)

# -- the URL and the environment ---------------------------------------------------------


def test_the_url_is_read_as_libpq_reads_it() -> None:
    assert parse_url("postgresql://ana:S3cr%40t%3Ax@db.example:6543/evals?sslmode=require") == {
        "user": "ana", "password": "S3cr@t:x", "host": "db.example", "port": "6543",
        "dbname": "evals", "sslmode": "require"}
    # A socket directory, percent-encoded in the host or as ?host=; postgres:// too.
    assert parse_url("postgres://%2Fvar%2Frun%2Fpg:5433/d") == {
        "host": "/var/run/pg", "port": "5433", "dbname": "d"}
    assert parse_url("postgresql://u@/d?host=%2Ftmp%2Fx&port=55432") == {
        "user": "u", "dbname": "d", "host": "/tmp/x", "port": "55432"}
    assert parse_url("postgresql://[::1]:5999/d") == {"host": "::1", "port": "5999", "dbname": "d"}
    # The query string's values win over the URL's parts, as in libpq.
    assert parse_url("postgresql://a@h/d?user=b&dbname=e")["user"] == "b"
    # An empty user or password is no user or password.
    assert parse_url("postgresql://:@h/d") == {"host": "h", "dbname": "d"}
    # A password may hold '@' once percent-encoded; libpq splits at the first '@'.
    assert parse_url("postgresql://u:p%40ss@h")["password"] == "p@ss"


@pytest.mark.parametrize("url", [
    "postgresql://h1,h2/d",                          # several hosts
    "postgresql://h/d?service=prod",                 # a service file
    "postgresql://h/d?sslrootcert=/ca.pem",          # a certificate
    "postgresql://h/d?options=-csearch_path%3Dx",    # anything else
    "postgresql://h/d?target_session_attrs=any",
    "postgresql://h/d?passfile=/p",
    "postgresql://h/d?sslmode",                      # a parameter without a value
    "postgresql://h/d#frag",
    "mysql://h/d",
])
def test_what_the_url_does_not_say_plainly_goes_to_psycopg(url: str) -> None:
    with pytest.raises(Unsupported):
        parse_url(url)


def test_the_environment_fills_what_the_url_leaves_out() -> None:
    env = {"PGHOST": "/run/sock", "PGPORT": "6000", "PGUSER": "envuser",
           "PGPASSWORD": "envpw", "PGDATABASE": "envdb", "PGDATA": "/var/lib/pg"}
    p = resolve("postgresql://", env)
    assert (p.host, p.port, p.user, p.dbname, p.password, p.sslmode) == (
        "/run/sock", "6000", "envuser", "envdb", "envpw", "prefer")
    assert p.unix and p.socket_path == "/run/sock/.s.PGSQL.6000"
    # The URL wins; the database defaults to the user's name.
    p = resolve("postgresql://me:pw@/?host=/d", {"PGUSER": "envuser", "PGPASSWORD": "x"})
    assert (p.user, p.dbname, p.password) == ("me", "me", "pw")
    assert "pw" not in repr(p)
    # Without a user anywhere: the process's own, as libpq.
    import pwd

    assert resolve("postgresql:///db?host=/d", {}).user == pwd.getpwuid(os.geteuid()).pw_name


@pytest.mark.parametrize(("url", "env", "why"), [
    ("postgresql:///db", {}, "no host"),
    ("postgresql://u@/db", {"PGHOST": ""}, "no host"),
    ("postgresql://h/db", {"PGSERVICE": "prod"}, "PGSERVICE"),
    ("postgresql://h/db", {"PGSSLROOTCERT": "/ca"}, "PGSSLROOTCERT"),
    ("postgresql://h/db", {"PGOPTIONS": "-c x=y"}, "PGOPTIONS"),
    ("postgresql://h/db", {"PGCLIENTENCODING": "LATIN1"}, "PGCLIENTENCODING"),
    ("postgresql://h/db?sslmode=verify-full", {}, "sslmode=verify-full"),
    ("postgresql://h/db?sslmode=verify-ca", {}, "sslmode=verify-ca"),
    ("postgresql://h/db", {"PGSSLMODE": "verify-full"}, "sslmode=verify-full"),
    ("postgresql://h:99999/db", {}, "port"),
    ("postgresql:///db", {"PGHOST": "/a,/b"}, "several values of host"),
    ("postgresql://u@/db?host=/a,/b", {}, "several values of host"),
    ("postgresql://h/db", {"PGPORT": "5432,5433"}, "several values of port"),
    ("postgresql://h/a%3Db", {}, "connection string"),
    ("postgresql://h/db?sslmode=disable", {"KRB5CCNAME": "FILE:/tmp/x"}, "Kerberos"),
    ("postgresql://h/db?sslmode=disable", {"KRB5_CLIENT_KTNAME": "/k"}, "Kerberos"),
])
def test_the_fallback_decision(url: str, env: dict[str, str], why: str) -> None:
    with pytest.raises(Unsupported, match=why):
        resolve(url, env)


def test_a_root_certificate_in_the_home_directory_goes_to_psycopg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # libpq's sslmode=require checks the server's certificate when ~/.postgresql/root.crt
    # exists, and sends ~/.postgresql/postgresql.crt: neither is this client's to do.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(pgwire, "_passwd_home", lambda: str(tmp_path))
    assert resolve("postgresql://h/db?sslmode=require", {}).sslmode == "require"
    assert resolve("postgresql://h/db?sslmode=allow", {}).sslmode == "allow"
    (tmp_path / ".postgresql").mkdir()
    for name in ("root.crt", "postgresql.crt"):
        (tmp_path / ".postgresql" / name).write_text("x")
        with pytest.raises(Unsupported, match=name):
            resolve("postgresql://h/db?sslmode=require", {})
        # A Unix socket never uses TLS, sslmode=disable does not either, and allow does not
        # begin with it.
        resolve("postgresql://h/db?sslmode=disable", {})
        resolve("postgresql://h/db?sslmode=allow", {})
        resolve("postgresql:///db?host=/sock", {})
        (tmp_path / ".postgresql" / name).unlink()
    # $HOME elsewhere than the user's home: libpq's versions differ on which they read.
    monkeypatch.setattr(pgwire, "_passwd_home", lambda: "/nonexistent-home")
    with pytest.raises(Unsupported, match="HOME"):
        resolve("postgresql://h/db", {})


# -- ~/.pgpass -----------------------------------------------------------------------------


def _pgpass(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "pgpass"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_pgpass_matches_as_libpq_does(tmp_path: Path) -> None:
    path = _pgpass(tmp_path, "\n".join([  # noqa: FLY002 - one line per entry
        "# a comment",
        "other:5432:*:ana:wrong-host",
        r"db.example:5432:ev\:als:ana:colon-db",  # an escaped ':' in the database
        "db.example:*:evals:*:wildcards",
        r"db.example:5432:evals:ana:never-reached",
        r"*:*:*:bob:back\\slash\:colon",
        "",
    ]))
    def password(host: str, port: str, db: str, user: str) -> str | None:
        env = {"PGPASSFILE": str(path), "PGSSLMODE": "disable"}
        p = resolve(f"postgresql://{user}@{host}:{port}/{db}", env)
        return pgpass_password(p)

    assert password("db.example", "5432", "evals", "ana") == "wildcards"  # the first match
    assert password("db.example", "5432", "ev%3Aals", "ana") == "colon-db"
    assert password("anywhere", "1", "x", "bob") == "back\\slash:colon"
    assert password("other", "5433", "x", "ana") is None
    # A socket directory is matched as written.
    _pgpass(tmp_path, "/sock/dir:5432:d:u:socketpw\n")
    assert pgpass_password(resolve("postgresql://u@/d?host=/sock/dir", {"PGPASSFILE": str(path)})) == "socketpw"


def test_a_pgpass_others_can_read_is_ignored_with_libpqs_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _pgpass(tmp_path, "*:*:*:*:secret\n", mode=0o644)
    p = resolve("postgresql://u@h/d?sslmode=disable", {"PGPASSFILE": str(path)})
    assert pgpass_password(p) is None
    assert "has group or world access" in capsys.readouterr().err
    path.chmod(0o600)
    assert pgpass_password(p) == "secret"
    assert pgpass_password(
        resolve("postgresql://u@h/d?sslmode=disable", {"PGPASSFILE": str(tmp_path)})) is None


def test_a_pgpass_localhost_line_for_a_maybe_default_socket_goes_to_psycopg(tmp_path: Path) -> None:
    # libpq matches "localhost" for its default socket directory, which depends on its build.
    path = _pgpass(tmp_path, "localhost:5432:d:u:pw\n")
    p = resolve("postgresql://u@/d?host=/tmp", {"PGPASSFILE": str(path)})
    with pytest.raises(Unsupported):
        pgpass_password(p)
    p = resolve("postgresql://u@/d?host=/srv/pg", {"PGPASSFILE": str(path)})
    assert pgpass_password(p) is None


# -- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("{}", []),
    ("{a,b}", ["a", "b"]),
    ('{"a b","c,d",NULL,"NULL",null}', ["a b", "c,d", None, "NULL", None]),
    (r'{"x\"y","\\",""}', ['x"y', "\\", ""]),
    ("{runs,meta,run_owners}", ["runs", "meta", "run_owners"]),
    ('{"{braces}","é ü"}', ["{braces}", "é ü"]),
])
def test_arrays(text: str, expected: list[Any]) -> None:
    assert parse_array(text) == expected


@pytest.mark.parametrize("text", [
    "{{a,b},{c,d}}", "[0:1]={a,b}", "a,b", "{a,}", '{"a}', '{"a"b}', "{a\\}", "{,a}",
])
def test_arrays_this_client_does_not_read_are_errors(text: str) -> None:
    with pytest.raises(DatabaseError):
        parse_array(text)


def test_a_list_parameter_is_written_as_the_parser_reads_it() -> None:
    values = ["plain", "with space", 'quote"', "back\\slash", "NULL", "", "{}", None, "é"]
    oid, text = pgwire._param(values)
    assert oid == 1009 and text is not None
    assert parse_array(text.decode()) == values
    assert pgwire._param([1, 2, None]) == (1016, b"{1,2,NULL}")


def test_parameters_take_psycopgs_types() -> None:
    assert pgwire._param(5) == (21, b"5")
    assert pgwire._param(1 << 20) == (23, str(1 << 20).encode())
    assert pgwire._param(1 << 40) == (20, str(1 << 40).encode())
    assert pgwire._param(1 << 70)[0] == 1700
    assert pgwire._param(0.1) == (701, b"0.1")
    assert pgwire._param(float("nan")) == (701, b"NaN")
    assert pgwire._param(float("-inf")) == (701, b"-Infinity")
    assert pgwire._param("text") == (0, b"text")
    assert pgwire._param(None) == (0, None)
    with pytest.raises(DatabaseError, match="bytes"):
        pgwire._param(b"raw")


def test_placeholders_become_numbered_outside_quotes() -> None:
    assert to_dollar("SELECT a FROM t WHERE b = ? AND c = '?' AND \"d?\" = ? LIMIT ?") == (
        "SELECT a FROM t WHERE b = $1 AND c = '?' AND \"d?\" = $2 LIMIT $3")
    assert to_dollar("SELECT 'it''s ?', ?") == "SELECT 'it''s ?', $1"
    assert to_dollar("BEGIN IMMEDIATE") == "BEGIN"


# -- SCRAM ------------------------------------------------------------------------------------


def test_scram_against_rfc_7677s_example() -> None:
    # RFC 7677, section 3: user "user", password "pencil".
    scram = pgwire._Scram("pencil", user="user", nonce="rOprNGfwEbeRWgbNEkqO")
    assert scram.first().endswith(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    final = scram.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final[5:] == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    scram.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(OperationalError, match="signature is wrong"):
        scram.verify(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(OperationalError):
        scram.verify(b"e=invalid-proof")


def test_scram_refuses_a_server_nonce_that_does_not_extend_ours() -> None:
    scram = pgwire._Scram("pencil", nonce="abc")
    with pytest.raises(OperationalError, match="nonce"):
        scram.final(b"r=xyzdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(OperationalError, match="nonce"):
        scram.final(b"r=abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(OperationalError, match="malformed"):
        scram.final(b"garbage")
    with pytest.raises(OperationalError, match="extension"):
        scram.final(b"m=ext,r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(Unsupported):
        pgwire._Scram("pässword")


# -- framing, over a socket pair ------------------------------------------------------------------

URL = "postgresql://ana:Hunter2-secret@db.example/evals"


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _description(*columns: tuple[str, int]) -> bytes:
    body = struct.pack("!h", len(columns))
    for name, oid in columns:
        body += name.encode() + b"\x00" + struct.pack("!ihihih", 0, 0, oid, -1, -1, 0)
    return _msg(b"T", body)


def _data(*values: bytes | None) -> bytes:
    body = struct.pack("!h", len(values))
    for v in values:
        body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    return _msg(b"D", body)


READY = _msg(b"Z", b"I")
HEAD = _msg(b"1", b"") + _msg(b"2", b"")


def _error(code: str, message: str) -> bytes:
    return _msg(b"E", b"SERROR\x00C" + code.encode() + b"\x00M" + message.encode() + b"\x00\x00")


@pytest.fixture
def pair() -> Any:
    a, b = socket.socketpair()
    a.settimeout(10)
    conn = WireConnection(a, PostgresLocation(URL, "p"))
    yield conn, b
    conn.close()
    b.close()


def test_many_rows_across_reads(pair: Any) -> None:
    """Rows that arrive in pieces (a row cut between two reads) are read whole."""
    import threading

    conn, server = pair
    answer = HEAD + _description(("i", 23), ("t", 25)) + b"".join(
        _data(str(i).encode(), ("x" * (i % 50)).encode()) for i in range(5000)
    ) + _msg(b"C", b"SELECT 5000\x00") + READY

    def send() -> None:
        for start in range(0, len(answer), 777):
            server.sendall(answer[start:start + 777])

    sender = threading.Thread(target=send)
    sender.start()
    rows = conn.execute("SELECT i, t FROM t").fetchall()
    sender.join()
    assert rows == [(i, "x" * (i % 50)) for i in range(5000)]


def test_rows_are_converted_by_type(pair: Any) -> None:
    conn, server = pair
    server.sendall(HEAD + _description(
        ("i", 23), ("big", 20), ("f", 701), ("t", 25), ("b", 16), ("n", 1700), ("a", 1009),
        ("v", 1043), ("o", 26),
    ) + _data(b"7", b"-9000000000", b"0.5", "é\u2603".encode(), b"t", b"1.50",
              b'{x,"y z",NULL}', b"v", b"42")
      + _data(None, None, b"NaN", b"", b"f", None, b"{}", None, None)
      + _msg(b"C", b"SELECT 2\x00") + READY)
    cur = conn.execute("SELECT ?", (1,))
    from decimal import Decimal

    rows = cur.fetchall()
    assert rows[0] == (7, -9000000000, 0.5, "é\u2603", True, Decimal("1.50"), ["x", "y z", None],
                       "v", 42)
    assert rows[1][0] is None and math.isnan(rows[1][2]) and rows[1][3:5] == ("", False)
    assert cur.rowcount == 2 and [d[0] for d in cur.description][:2] == ["i", "big"]
    assert not conn.in_transaction
    # What the client sent: Parse, Bind, Describe, Execute, Sync, with $1 and its value.
    sent = server.recv(65536)
    assert sent.startswith(b"P") and b"SELECT $1\x00" in sent and sent.endswith(_msg(b"S", b""))


def test_an_unknown_type_is_an_error_naming_it_and_the_connection_goes_on(pair: Any) -> None:
    conn, server = pair
    server.sendall(HEAD + _description(("ts", 1184)) + _data(b"2026-01-01 00:00:00+00")
                   + _msg(b"C", b"SELECT 1\x00") + READY)
    with pytest.raises(DatabaseError, match="OID 1184"):
        conn.execute("SELECT now()")
    server.sendall(HEAD + _description(("one", 23)) + _data(b"1") + _msg(b"C", b"SELECT 1\x00")
                   + _msg(b"Z", b"T"))
    assert conn.execute("SELECT 1").fetchone() == (1,)
    assert conn.in_transaction  # ReadyForQuery said 'T'


@pytest.mark.parametrize(("code", "kind"), [
    ("42P01", DatabaseError), ("40P01", RetryableError), ("40001", RetryableError),
    ("57P01", OperationalError), ("08006", OperationalError), ("55P03", OperationalError),
])
def test_server_errors_keep_their_sqlstate(pair: Any, code: str, kind: type[Exception]) -> None:
    conn, server = pair
    server.sendall(_error(code, "boom for ana:Hunter2-secret") + READY)
    with pytest.raises(kind) as caught:
        conn.execute("SELECT 1")
    assert caught.value.sqlstate == code  # type: ignore[attr-defined]
    assert "Hunter2-secret" not in str(caught.value) and "boom" in str(caught.value)
    assert not conn.closed


@pytest.mark.parametrize("answer", [
    b"D" + struct.pack("!i", MAX_MESSAGE + 5),                         # a huge message
    b"D" + struct.pack("!i", 2),                                       # a length under 4
    HEAD + _description(("a", 23)) + _data(b"1", b"2"),                # columns do not match
    HEAD + _description(("a", 23)) + _msg(b"D", struct.pack("!hi", 1, 50) + b"12"),  # overrun
    HEAD + _description(("a", 23)) + _msg(b"D", struct.pack("!hi", 1, -2)),
    HEAD + _msg(b"T", struct.pack("!h", 1) + b"name-without-end"),
    HEAD + _msg(b"Q", b""),                                            # not a message of a query
    HEAD + _msg(b"Z", b"II"),
    # The same faults in a row after the first (read by the loop over the buffer).
    HEAD + _description(("a", 23)) + _data(b"1") + _data(b"1", b"2"),
    HEAD + _description(("a", 23)) + _data(b"1") + _msg(b"D", struct.pack("!hi", 1, 50) + b"12"),
    HEAD + _description(("a", 23), ("b", 25)) + _data(b"1", b"x") + _data(b"2", b"y")
    + _msg(b"D", struct.pack("!hi", 2, 1) + b"3"),  # the second column's length is missing
    HEAD + _description(("a", 23)) + _data(b"1") + _msg(b"D", struct.pack("!hi", 1, 1) + b"12"),
])
def test_a_malformed_answer_closes_the_connection(pair: Any, answer: bytes) -> None:
    conn, server = pair
    server.sendall(answer)
    with pytest.raises(DatabaseError, match="malformed"):
        conn.execute("SELECT 1")
    assert conn.closed
    with pytest.raises(OperationalError, match="closed"):
        conn.execute("SELECT 1")


def test_a_server_that_hangs_up_mid_answer(pair: Any) -> None:
    conn, server = pair
    server.sendall(HEAD + _description(("a", 23)) + _data(b"1")[:5])
    server.shutdown(socket.SHUT_WR)
    with pytest.raises(OperationalError, match="closed the connection"):
        conn.execute("SELECT 1")
    assert conn.closed


def test_a_server_that_says_why_before_it_hangs_up(pair: Any) -> None:
    conn, server = pair
    server.sendall(HEAD + _error("57P01", "terminating connection due to administrator command"))
    server.shutdown(socket.SHUT_WR)
    with pytest.raises(OperationalError, match="administrator command") as caught:
        conn.execute("SELECT 1")
    assert caught.value.sqlstate == "57P01" and conn.closed


@pytest.mark.parametrize("rows", [[b"x1"], [b"1", b"2", b"x3", b"4"]])
def test_a_value_that_does_not_read_as_its_type(pair: Any, rows: list[bytes]) -> None:
    conn, server = pair
    server.sendall(HEAD + _description(("a", 23)) + b"".join(_data(r) for r in rows)
                   + _msg(b"C", b"SELECT 1\x00") + READY)
    with pytest.raises(DatabaseError, match="cannot read"):
        conn.execute("SELECT 1")
    assert not conn.closed  # the answer was read to its end: the connection goes on
    server.sendall(HEAD + _description(("a", 23)) + _data(b"2") + _msg(b"C", b"SELECT 1\x00")
                   + READY)
    assert conn.execute("SELECT 2").fetchall() == [(2,)]


# -- a fake server on 127.0.0.1 that does not know the password ----------------------------------


def _fake_scram_server(final: str) -> tuple[socket.socket, list[BaseException]]:
    """A server that asks for SCRAM-SHA-256 and answers the client's proof with ``final``:
    ``forged`` (a signature made without the password), ``skip`` (AuthenticationOk with no
    signature at all), ``nonce`` (a nonce that does not extend the client's)."""
    import base64
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    errors: list[BaseException] = []

    def read(conn: socket.socket) -> bytes:
        head = b""
        while len(head) < 5:
            head += conn.recv(5 - len(head))
        (n,) = struct.unpack("!i", head[1:])
        body = b""
        while len(body) < n - 4:
            body += conn.recv(n - 4 - len(body))
        return body

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with conn:
                head = conn.recv(4)
                (n,) = struct.unpack("!i", head)
                conn.recv(n - 4)  # the startup message
                conn.sendall(_msg(b"R", struct.pack("!i", 10) + b"SCRAM-SHA-256\x00\x00"))
                first = read(conn)
                nonce = first.split(b"r=", 1)[1].decode()
                server_nonce = ("other" if final == "nonce" else nonce) + "server-part"
                salt = base64.b64encode(b"salt-of-16-bytes").decode()
                conn.sendall(_msg(b"R", struct.pack("!i", 11)
                                  + f"r={server_nonce},s={salt},i=4096".encode()))
                if final == "nonce":
                    conn.recv(1)  # the client hangs up
                    return
                read(conn)  # the client's proof
                if final == "forged":
                    forged = base64.b64encode(os.urandom(32)).decode()
                    conn.sendall(_msg(b"R", struct.pack("!i", 12) + f"v={forged}".encode()))
                conn.sendall(_msg(b"R", struct.pack("!i", 0)) + _msg(b"Z", b"I"))
                conn.recv(1)
        except OSError as exc:  # the client hung up: what it should do
            errors.append(exc)
        finally:
            listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener, errors


@pytest.mark.parametrize(("final", "why"), [
    ("forged", "signature is wrong"),
    ("skip", "without proving"),
    ("nonce", "nonce does not extend"),
])
def test_a_server_that_cannot_prove_it_knows_the_password_is_refused(final: str, why: str) -> None:
    from oloproof.store.db import StoreUnreadable

    listener, _ = _fake_scram_server(final)
    port = listener.getsockname()[1]
    location = PostgresLocation(f"postgresql://ana:Hunter2-secret@127.0.0.1:{port}/evals"
                                "?sslmode=disable", "p")
    with pytest.raises(StoreUnreadable) as caught:
        pgwire.connect(location)
    message = str(caught.value)
    assert why in message and "Hunter2-secret" not in message
    assert message.startswith("postgresql://ana:***@127.0.0.1")


def test_without_psycopg_what_needs_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reading commands need no psycopg where the wire client connects; where they
    would fall back to it, and for every writer, a missing `postgres` extra is one line
    saying what to install (it was a traceback)."""
    import sys

    import oloproof.store
    from oloproof.errors import StoreError
    from oloproof.store import pgshared
    from oloproof.store.db import open_store

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where the extra is not installed
    monkeypatch.delitem(sys.modules, "oloproof.store.postgres", raising=False)
    monkeypatch.delattr(oloproof.store, "postgres", raising=False)
    location = PostgresLocation("postgresql://ana:Hunter2-secret@db.example/evals"
                                "?options=-cx%3Dy", "p")
    with pytest.raises(StoreError) as caught:
        pgshared.connect_readonly(location)
    message = str(caught.value)
    assert "the URL parameter 'options'" in message and "Hunter2" not in message
    assert "pip install 'oloproof[postgres]'" in message
    with pytest.raises(StoreError, match="writing a team store needs psycopg"):
        open_store(location)
