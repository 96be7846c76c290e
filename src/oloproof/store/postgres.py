"""The team store on PostgreSQL (``pip install 'oloproof[postgres]'``): psycopg 3 behind the
connection of store/dbapi.py.

Imported only when a PostgreSQL store is configured (store/location.py), never on the
SQLite path. What it maps, so that the store's code above it is the same for both:

* **SQL**: the store's statements are written in the SQL both databases share, with
  ``?`` placeholders; :func:`translate` turns ``?`` into psycopg's ``%s`` (and a literal
  ``%`` into ``%%``) and ``BEGIN IMMEDIATE`` into ``BEGIN``, once per statement text.
* **Types**: the schema's DDL is SQLite's, translated by :func:`ddl`: ``REAL`` is
  ``DOUBLE PRECISION`` (PostgreSQL's ``REAL`` has 24 bits), ``INTEGER`` is ``BIGINT``,
  ``TEXT`` compares byte by byte (``COLLATE "C"``, as SQLite's ``BINARY``: ids and
  timestamps sort the same way on both, whatever the database's locale). A parameter
  ``True``/``False`` is sent as ``1``/``0`` (SQLite's integers); a NUL character, which
  PostgreSQL's text cannot hold, is stored as U+FFFD.
* **Transactions**: the connection is in autocommit mode and the store opens its own
  transactions (``BEGIN`` ... ``COMMIT``), at PostgreSQL's default READ COMMITTED. Writers
  of different runs touch different rows, except the caches, which a writer updates in
  key order (store/writer.py) so that two writers never wait on each other in a cycle; a
  deadlock or serialisation failure all the same is :class:`RetryableError`, and the
  writer tries the transaction again.
* **Liveness**: a run's process holds a session-level advisory lock on the run, on the
  connection that writes it, for as long as the run runs; the server releases it when
  that connection ends, however the process ended. A ``RUNNING`` run whose lock nobody
  holds ended without finishing (what /proc tells for SQLite, store/liveness.py).
* **Errors**: psycopg's exceptions become :class:`~oloproof.store.dbapi.DatabaseError` and
  its subclasses, with the password scrubbed from the message.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from oloproof.errors import StoreError
from oloproof.store.dbapi import DatabaseError, OperationalError, RetryableError
from oloproof.storeurl import scrub

if TYPE_CHECKING:
    from typing import Any

    from oloproof.store.location import PostgresLocation

__all__ = ["PgConnection", "connect", "ddl", "translate"]

CONNECT_TIMEOUT_S = 15
# The advisory locks of runs: (namespace, 32 bits of the run id's CRC), PostgreSQL's
# two-key form, so that they do not collide with another application's one-key locks.
LOCK_NAMESPACE = 0x4F4C4F50  # "OLOP"
MIGRATION_LOCK = 0  # the second key while a store is created or migrated

_SQL: dict[str, str] = {}


def translate(sql: str) -> str:
    """The store's SQL (SQLite's placeholders) as psycopg takes it."""
    done = _SQL.get(sql)
    if done is not None:
        return done
    stripped = sql.strip()
    if stripped.upper() == "BEGIN IMMEDIATE":
        done = "BEGIN"
    else:
        out: list[str] = []
        quoted = False
        for ch in sql:
            if ch == "'":
                quoted = not quoted
                out.append(ch)
            elif ch == "%":
                out.append("%%")
            elif ch == "?" and not quoted:
                out.append("%s")
            else:
                out.append(ch)
        done = "".join(out)
    if len(_SQL) < 4096:
        _SQL[sql] = done
    return done


_TYPES = (
    (re.compile(r"\bWITHOUT ROWID\b"), ""),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bTEXT\b"), 'TEXT COLLATE "C"'),
)


def ddl(statement: str) -> str:
    """A statement of the SQLite schema (store/schema.py) in PostgreSQL's types."""
    for pattern, replacement in _TYPES:
        statement = pattern.sub(replacement, statement)
    return statement


def _value(v: Any) -> Any:
    if v is True or v is False:
        return int(v)
    if type(v) is str and "\x00" in v:
        return v.replace("\x00", "\ufffd")
    return v


def _params(params: Sequence[Any]) -> Sequence[Any]:
    return [_value(v) for v in params]


def run_lock_key(run_id: str) -> int:
    """The second key of a run's advisory lock (a signed 32-bit int, as PostgreSQL takes)."""
    key = zlib.crc32(run_id.encode("utf-8"))
    return key - (1 << 32) if key >= (1 << 31) else key


class PgConnection:
    """A psycopg connection that answers the store's calls (store/dbapi.py's Connection).

    ``project`` is the project key the store is read and written for: every run a reader
    lists or resolves is one of that project's (store/reader.py)."""

    backend = "postgresql"

    def __init__(self, raw: psycopg.Connection[Any], location: PostgresLocation) -> None:
        self.raw = raw
        self.location = location
        self.project = location.project
        self._tables: set[str] = set()

    # -- errors --------------------------------------------------------------
    def _error(self, exc: Exception) -> DatabaseError:
        text = scrub(" ".join(str(exc).split()) or type(exc).__name__, self.location.url)
        if isinstance(exc, (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)):
            return RetryableError(text)
        if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            return OperationalError(text)
        return DatabaseError(text)

    # -- the DB-API calls --------------------------------------------------------
    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        try:
            # Always a list, even empty: psycopg then reads '%%' in the statement as '%'.
            return self.raw.execute(translate(sql), _params(parameters))
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any:
        cur = self.raw.cursor()
        try:
            cur.executemany(translate(sql), [_params(p) for p in parameters])
        except psycopg.Error as exc:
            raise self._error(exc) from None
        return cur

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.info.transaction_status != TransactionStatus.IDLE)

    def close(self) -> None:
        try:
            self.raw.close()
        except psycopg.Error:
            pass

    # -- what the store asks of PostgreSQL alone -----------------------------------
    def has_table(self, name: str) -> bool:
        if name in self._tables:
            return True
        row = self.execute("SELECT to_regclass(?) IS NOT NULL", (name,)).fetchone()
        if row[0]:
            self._tables.add(name)
        return bool(row[0])

    def set_lock_timeout(self, seconds: float) -> None:
        self.execute(f"SET lock_timeout = {max(1, int(seconds * 1000))}")

    def claim_run(self, run_id: str) -> str:
        """Hold the run's advisory lock on this connection while it lives; the token that
        :meth:`run_alive` checks."""
        key = run_lock_key(run_id)
        self.execute("SELECT pg_advisory_lock(?::int, ?::int)", (LOCK_NAMESPACE, key))
        return f"pg-lock:{key}"

    def run_alive(self, owner: str | None) -> bool:
        """Whether some session holds the lock of the run whose owner token is ``owner``."""
        if not owner or not owner.startswith("pg-lock:"):
            return False
        try:
            key = int(owner.split(":", 1)[1])
        except ValueError:
            return False
        row = self.execute(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = ?::bigint::oid AND objid = ?::bigint::oid AND objsubid = 2 LIMIT 1",
            (LOCK_NAMESPACE, key & 0xFFFFFFFF),
        ).fetchone()
        return row is not None


def connect(location: PostgresLocation, *, readonly: bool = False) -> PgConnection:
    """A connection to the team store at ``location``; :class:`StoreError`-derived errors
    (exit 5, the password never shown) when it cannot be reached."""
    from oloproof.store.db import StoreUnavailable, StoreUnreadable

    try:
        raw = psycopg.connect(
            location.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
            application_name="oloproof",
        )
    except psycopg.Error as exc:
        why = scrub(" ".join(str(exc).split()), location.url)
        fault = StoreUnreadable if readonly else StoreUnavailable
        raise fault(f"{location.display}: the team store cannot be reached ({why})") from None
    except (ValueError, TypeError) as exc:  # a URL libpq's parser refused
        why = scrub(str(exc), location.url)
        raise StoreError(f"{location.display}: not a store URL psycopg accepts ({why})") from None
    conn = PgConnection(raw, location)
    if readonly:
        conn.execute("SET default_transaction_read_only = on")
    return conn


# -- the schema -----------------------------------------------------------------------

# What PostgreSQL adds to each version of the schema: a team store lists the runs of one
# project among many, so runs and comparisons are indexed by project.
EXTRA: dict[int, tuple[str, ...]] = {
    1: ("CREATE INDEX IF NOT EXISTS runs_project ON runs(project, created_at)",),
    2: ("CREATE INDEX IF NOT EXISTS comparisons_project ON comparisons(project, created_at)",),
}


def schema_version(conn: PgConnection) -> int:
    if not conn.has_table("meta"):
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else -1


def check_identity(conn: PgConnection) -> int:
    """The store's schema version (0: none yet); refuses a newer store, or a database whose
    tables of our names are not an Oloproof store's."""
    from oloproof.store.schema import SCHEMA_VERSION

    where = conn.location.display
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: this store was written by a newer Oloproof (schema {current};"
            f" this version reads up to {SCHEMA_VERSION}). Upgrade oloproof to use it;"
            " the store was left untouched."
        )
    if current < 0 or (current == 0 and conn.has_table("runs")):
        raise StoreError(
            f"{where}: this database has tables named as Oloproof's (meta, runs) that are"
            " not an Oloproof store; it was left untouched (give Oloproof a database or"
            " schema of its own: docs/team-store.md)"
        )
    return current


def migrate(conn: PgConnection) -> None:
    """Create the store, or bring it up to this version's schema, in one transaction under
    an advisory lock (two runs that start together migrate once)."""
    from oloproof.store.db import statements
    from oloproof.store.schema import MIGRATIONS, OPTIONAL_TABLES, SCHEMA_VERSION

    if check_identity(conn) == SCHEMA_VERSION and all(
        conn.has_table(name) for name in OPTIONAL_TABLES
    ):
        return
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(?::int, ?::int)", (LOCK_NAMESPACE, MIGRATION_LOCK))
        conn._tables.clear()
        current = check_identity(conn)
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in statements(MIGRATIONS[version]):
                conn.execute(ddl(statement))
            for statement in EXTRA.get(version, ()):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(version),),
            )
        for ddl_text in OPTIONAL_TABLES.values():
            conn.execute(ddl(ddl_text))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn._tables.clear()


def open_store(location: PostgresLocation, *, create: bool = True) -> PgConnection:
    """The team store for writing: created or migrated if needed (see :func:`migrate`)."""
    from oloproof.store.db import StoreUnavailable

    conn = connect(location)
    try:
        if not create and check_identity(conn) == 0:
            raise StoreError(
                f"no runs in the team store {location.display} yet"
                " (run `oloproof run` first)"
            )
        migrate(conn)
        # A commit does not wait for the server's disk: a crash of the server's machine may
        # lose the last commits, never corrupt what was committed before. The guarantee of
        # SQLite's store (WAL with synchronous = NORMAL), and what makes a commit a round
        # trip rather than a disk flush.
        conn.execute("SET synchronous_commit = off")
    except OperationalError as exc:
        conn.close()
        raise StoreUnavailable(f"{location.display}: the store cannot be written ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn


def open_store_readonly(location: PostgresLocation) -> PgConnection:
    """The team store for reading: never created or migrated; an older schema is read as
    it is, a newer one refused."""
    from oloproof.store.db import StoreUnreadable

    conn = connect(location, readonly=True)
    try:
        if check_identity(conn) == 0:
            raise StoreError(
                f"no runs in the team store {location.display} yet"
                " (run `oloproof run` first)"
            )
    except DatabaseError as exc:
        conn.close()
        raise StoreUnreadable(f"{location.display}: the store cannot be read ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn
