"""The team store on PostgreSQL (``pip install 'oloproof[postgres]'``): psycopg 3 behind the
connection of store/dbapi.py.

Imported only when a PostgreSQL store is written (store/location.py), never on the SQLite
path; the reading commands read through the wire client of store/pgwire.py, and through
this module only where that client leaves the connection to psycopg (store/pgshared.py,
which also holds what both connections share). What it maps, so that the store's code
above it is the same for both:

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
* **Round trips**: each is a wait for another process, which a loaded machine makes long,
  so they are few. Opening a store is a connection and one query (:meth:`PgConnection.survey`:
  the schema version, which tables exist, and the session's settings, together); the
  writer's transaction is one round trip (:meth:`PgConnection.write_batch`: ``BEGIN``, one
  multi-row upsert per table, ``COMMIT``, in pipeline mode), on a thread of its own while
  a run's event loop goes on (store/writer.py); ``gate`` reads a run in six statements,
  however many cases it holds (store/reader.py ``get_run``: ``latest`` and its row in one).
* **Liveness**: a run's process holds a session-level advisory lock on the run, on the
  connection that writes it, for as long as the run runs; the server releases it when
  that connection ends, however the process ended. A ``RUNNING`` run whose lock nobody
  holds ended without finishing (what /proc tells for SQLite, store/liveness.py).
* **Errors**: psycopg's exceptions become :class:`~oloproof.store.dbapi.DatabaseError` and
  its subclasses, with the password scrubbed from the message.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from oloproof.errors import StoreError
from oloproof.store.dbapi import DatabaseError, OperationalError, RetryableError
from oloproof.store.pgshared import (
    LOCK_NAMESPACE,
    MIGRATION_LOCK,
    PgBase,
    check_identity,
    connect_timeout,
    run_lock_key,
    schema_version,
    store_params,
    store_tables,
)
from oloproof.storeurl import MalformedURL, scrub, url_options

if TYPE_CHECKING:
    from typing import Any

    from oloproof.store.location import PostgresLocation

__all__ = [
    "PgConnection", "Upsert", "check_identity", "column_types", "connect", "ddl",
    "run_lock_key", "schema_version", "store_tables", "translate",
]

# psycopg logs what it could not do while already failing ("error ignored terminating
# <psycopg.Pipeline [BAD]>: the connection is lost", when a server goes away in the middle of
# a commit): with no handler of the application's, Python's last resort printed it on
# stderr beside the one message that says what happened. A handler the application sets
# up (on "psycopg" or the root logger) still receives it.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

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


def _text(v: Any) -> Any:
    if v is None or type(v) is str:
        return v if v is None or "\x00" not in v else v.replace("\x00", "\ufffd")
    return str(int(v)) if v is True or v is False else str(v)


def _bigint(v: Any) -> Any:
    return None if v is None else int(v)


def _float8(v: Any) -> Any:
    return None if v is None else float(v)


# The schema's types (SQLite's names) as PostgreSQL arrays, and what makes a value of each.
_ARRAYS = {"TEXT": ("text[]", _text), "INTEGER": ("bigint[]", _bigint),
           "REAL": ("float8[]", _float8)}


def column_types(table: str) -> list[str]:
    """The types of ``table``'s columns in order (SQLite's names, as store/schema.py writes
    them: ``TEXT``, ``INTEGER``, ``REAL``)."""
    from oloproof.store.schema import MIGRATIONS, OPTIONAL_TABLES

    script = "\n".join([*MIGRATIONS.values(), *OPTIONAL_TABLES.values()])
    found = re.search(
        rf"CREATE TABLE (?:IF NOT EXISTS )?{re.escape(table)} \((.*?)\n\)", script, re.DOTALL
    )
    if found is None:
        raise KeyError(table)
    types = []
    for line in found.group(1).splitlines():
        words = line.split("--", 1)[0].replace(",", " ").split()
        if len(words) >= 2 and words[0].upper() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            types.append(words[1].upper())
    return types


class Upsert:
    """An ``INSERT ... ON CONFLICT`` of many rows in one statement whose text never
    changes: each column's values go as one array, and ``unnest`` makes the rows again
    (``INSERT INTO table SELECT * FROM unnest(%b::text[], %b::bigint[], ...)``, then
    ``tail``). One text per table: psycopg parses it once and the server prepares it once,
    where a ``VALUES`` list of each batch's length was a new statement to parse, on both
    sides, at every commit (2.8 s of a 10,000-case run's client time went to psycopg's
    parsing of those).

    The first ``key`` columns of a row are its conflict key: two rows of one batch with the
    same key (the same judgment's cache entry from two trials) would make PostgreSQL refuse
    the statement ("cannot affect row a second time"), so only the later one is sent, the
    row a run of single-row upserts would have left."""

    __slots__ = ("columns", "key", "sql")

    def __init__(self, table: str, width: int, key: int, tail: str) -> None:
        types = column_types(table)
        if len(types) != width:
            raise ValueError(f"{table} has {len(types)} columns, not {width}")
        arrays = [_ARRAYS[t] for t in types]
        self.columns = [make for _array, make in arrays]
        self.key = key
        # %b: the arrays travel in PostgreSQL's binary format, which psycopg writes ten
        # times faster than the text format (no quoting of each element).
        unnest = ", ".join(f"%b::{array}" for array, _make in arrays)
        self.sql = f"INSERT INTO {table} SELECT * FROM unnest({unnest}){translate(tail)}"

    def params(self, rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """One list per column of ``rows`` (the later of two rows with the same key)."""
        if len(rows) > 1:
            k = self.key
            latest = {tuple(r[:k]): r for r in rows}
            if len(latest) < len(rows):
                rows = list(latest.values())
        return [[make(r[i]) for r in rows] for i, make in enumerate(self.columns)]


class PgConnection(PgBase):
    """A psycopg connection that answers the store's calls (store/dbapi.py's Connection;
    what does not depend on the driver is :class:`~oloproof.store.pgshared.PgBase`'s)."""

    def __init__(self, raw: psycopg.Connection[Any], location: PostgresLocation) -> None:
        super().__init__(location)
        self.raw = raw

    # -- errors --------------------------------------------------------------
    def _error(self, exc: Exception) -> DatabaseError:
        text = scrub(" ".join(str(exc).split()) or type(exc).__name__, self.location.url)
        if self.raw.closed and "connection" not in text:
            # What the lost connection was doing when it went (write_batch).
            text = f"the connection to the server was lost: {text}"
        elif "pipeline mode while busy" in text and "connection" not in text:
            # A commit's round trip left unanswered (write_batch), the connection not yet
            # seen to be closed: on a loaded machine, a server that dropped it says no more.
            text = f"the connection to the server stopped answering in a commit: {text}"
        error: DatabaseError
        if isinstance(exc, (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)):
            error = RetryableError(text)
        elif isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            error = OperationalError(text)
        else:
            error = DatabaseError(text)
        error.sqlstate = getattr(exc, "sqlstate", None)
        return error

    def _row(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...]:
        try:
            row = self.raw.execute(translate(sql), store_params(params)).fetchone()
        except psycopg.Error as exc:
            raise self._error(exc) from None
        assert row is not None  # a SELECT without FROM: one row
        return tuple(row)

    # -- the DB-API calls --------------------------------------------------------
    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        if self.pending:
            self._settle()
        try:
            # Always a list, even empty: psycopg then reads '%%' in the statement as '%'.
            return self.raw.execute(translate(sql), store_params(parameters))
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any:
        if self.pending:
            self._settle()
        cur = self.raw.cursor()
        try:
            cur.executemany(translate(sql), [store_params(p) for p in parameters])
        except psycopg.Error as exc:
            raise self._error(exc) from None
        return cur

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.info.transaction_status != TransactionStatus.IDLE)

    @property
    def in_a_statement(self) -> bool:
        """Whether a statement is on its way on this connection: psycopg holds the
        connection's lock from before it sends one until its answer is read, and waits for
        the answer in Python, where a signal handler may run. Another statement asked of
        the connection from that handler would wait for that lock for ever."""
        return bool(self.raw.lock.locked())

    def close(self) -> None:
        try:
            self.raw.close()
        except psycopg.Error:
            pass

    def write_batch(self, statements: Sequence[tuple[Upsert, Sequence[Sequence[Any]]]]) -> None:
        """One transaction in one round trip: ``BEGIN``, one :class:`Upsert` statement per
        table with rows, ``COMMIT``, sent together in pipeline mode and answered together.
        What the store's writer commits (store/writer.py): the server plans and runs each
        statement once for all its rows, not once per row."""
        if self.pending:
            self._settle()
        raw = self.raw
        try:
            with raw.pipeline():
                raw.execute("BEGIN")
                for upsert, rows in statements:
                    raw.execute(upsert.sql, upsert.params(rows))
                raw.execute("COMMIT")
        except psycopg.Error as exc:
            self._rollback()
            if not self.raw.closed:
                # A connection lost under the pipeline may say only "cannot exit pipeline
                # mode while busy", and look open until it is used again: asked once more,
                # so that the run's stop says the connection was lost.
                with contextlib.suppress(psycopg.Error):
                    self.raw.execute("SELECT 1")
            # "cannot exit pipeline mode while busy" is raised on the way out of the block
            # and hides what went wrong inside it: that, when there is one, is the reason.
            inner = exc.__context__
            raise self._error(inner if isinstance(inner, psycopg.Error) else exc) from None
        except UnicodeEncodeError:  # a lone surrogate: the writer cleans the text, tries again
            self._rollback()
            raise
        except (ValueError, TypeError) as exc:  # a value its column's type cannot take
            self._rollback()
            raise DatabaseError(f"a row cannot be stored ({exc})") from None
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        try:
            if self.raw.info.transaction_status != TransactionStatus.IDLE:
                self.raw.execute("ROLLBACK")
        except psycopg.Error:
            pass

    def twin(self) -> PgConnection:
        """Another connection to the same store, with this one's session settings (the
        store writer's committer thread: store/writer.py)."""
        twin = connect(self.location, settings=self.settings)
        twin._tables = set(self._tables)
        return twin

    def set_lock_timeout(self, seconds: float) -> None:
        value = str(max(1, int(seconds * 1000)))
        self.execute("SELECT set_config('lock_timeout', ?, false)", (value,))
        self.settings = [(k, v) for k, v in self.settings if k != "lock_timeout"]
        self.settings.append(("lock_timeout", value))

    def claim_run(self, run_id: str) -> str:
        """Hold the run's advisory lock on this connection while it lives; the token that
        :meth:`run_alive` checks."""
        key = run_lock_key(run_id)
        self.execute("SELECT pg_advisory_lock(?::int, ?::int)", (LOCK_NAMESPACE, key))
        return f"pg-lock:{key}"


def connect(
    location: PostgresLocation, *, readonly: bool = False,
    settings: Sequence[tuple[str, str]] = (),
) -> PgConnection:
    """A connection to the team store at ``location``; :class:`StoreError`-derived errors
    (exit 5, the password never shown) when it cannot be reached. ``settings`` (name,
    value) are the session's, set with the connection's first statement (no round trip of
    their own; see :meth:`PgConnection.survey`); ``readonly`` adds
    ``default_transaction_read_only = on``. (Not in the connection request's ``options``:
    poolers such as PgBouncer refuse that parameter.)"""
    from oloproof.store.db import StoreUnavailable, StoreUnreadable

    if readonly:
        settings = (*settings, ("default_transaction_read_only", "on"))
    try:
        # The URL as this libpq reads it, before anything connects: one it refuses (a
        # parameter an older libpq does not know) is the user's to fix (exit 2), not a
        # store that cannot be reached (exit 5).
        conninfo_to_dict(location.url)
    except (psycopg.Error, ValueError, TypeError) as exc:
        why = scrub(" ".join(str(exc).split()), location.url)
        raise StoreError(f"{location.display}: not a store URL psycopg accepts ({why})") from None
    try:
        given = url_options(location.url).get("connect_timeout")
    except MalformedURL:
        given = None
    # The URL's connect_timeout, else PGCONNECT_TIMEOUT, else Oloproof's: as the wire
    # client reads them (psycopg's keyword would otherwise replace both).
    timeout = connect_timeout(given or os.environ.get("PGCONNECT_TIMEOUT"))
    try:
        raw = psycopg.connect(
            location.url, autocommit=True, connect_timeout=timeout,
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
    conn.use_settings(settings)
    return conn


# -- the schema -----------------------------------------------------------------------

# What PostgreSQL adds to each version of the schema: a team store lists the runs of one
# project among many, so runs and comparisons are indexed by project.
EXTRA: dict[int, tuple[str, ...]] = {
    1: ("CREATE INDEX IF NOT EXISTS runs_project ON runs(project, created_at)",),
    2: ("CREATE INDEX IF NOT EXISTS comparisons_project ON comparisons(project, created_at)",),
}


def migrate(conn: PgConnection) -> None:
    """Create the store, or bring it up to this version's schema, in one transaction under
    an advisory lock (two runs that start together migrate once)."""
    from oloproof.store.schema import OPTIONAL_TABLES, SCHEMA_VERSION

    # check_identity's survey leaves the tables that exist in conn._tables: nothing more to
    # ask when the store is up to date.
    try:
        if check_identity(conn) == SCHEMA_VERSION and all(
            conn.has_table(name) for name in OPTIONAL_TABLES
        ):
            return
    except StoreError:
        # Surveyed while another session created the store (its statements straddled that
        # commit), or not an Oloproof store: looked at again under the lock, in one
        # transaction, where what another session was creating is whole or absent.
        pass
    # The lock is taken before the transaction begins, not inside it: a session's catalog
    # cache (which to_regclass reads) takes in other sessions' DDL when a transaction
    # starts, not while one waits on an advisory lock. Locked inside, a run that waited
    # for another to create the store still saw some tables missing (the ones it had just
    # looked for) and took the new store for a database that is not one.
    lock = (LOCK_NAMESPACE, MIGRATION_LOCK)
    conn.execute("SELECT pg_advisory_lock(?::int, ?::int)", lock)
    try:
        _migrate_locked(conn)
    finally:
        with contextlib.suppress(DatabaseError):
            conn.execute("SELECT pg_advisory_unlock(?::int, ?::int)", lock)


def _migrate_locked(conn: PgConnection) -> None:
    from oloproof.store.db import statements
    from oloproof.store.schema import MIGRATIONS, OPTIONAL_TABLES, SCHEMA_VERSION

    conn.execute("BEGIN")
    try:
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

    # A commit does not wait for the server's disk: a crash of the server's machine may
    # lose the last commits, never corrupt what was committed before. The guarantee of
    # SQLite's store (WAL with synchronous = NORMAL), and what makes a commit a round trip
    # rather than a disk flush.
    conn = connect(location, settings=(("synchronous_commit", "off"),))
    try:
        if not create and check_identity(conn) == 0:
            raise StoreError(
                f"no runs in the team store {location.display} yet"
                " (run `oloproof run` first)"
            )
        migrate(conn)
    except OperationalError as exc:
        conn.close()
        raise StoreUnavailable(f"{location.display}: the store cannot be written ({exc})") from None
    except DatabaseError as exc:
        conn.close()
        hint = _CREATE_HINTS.get(exc.sqlstate or "")
        if hint is None:
            raise
        why = str(exc).split(" LINE ", 1)[0]  # not the statement libpq quotes after it
        raise StoreUnavailable(
            f"{location.display}: the store's tables cannot be created here ({why}): {hint};"
            " nothing was run") from None
    except BaseException:
        conn.close()
        raise
    return conn


#: Why a team store's tables cannot be created, by SQLSTATE, and what to do.
_CREATE_HINTS = {
    "42501": "the URL's role may not create tables in this schema; grant it CREATE on the"
             " schema, or create the store once with a role that may (runs then only write"
             " rows)",
    "3F000": "the session's search_path names no schema that exists; create the schema,"
             " or name one that exists in the URL's options",
    "25006": "the session is read-only (a standby server, or default_transaction_read_only"
             " in the URL's options or the role's settings); name the primary server",
}
