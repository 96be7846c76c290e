"""The team store's side of PostgreSQL that does not depend on the driver.

Two clients speak to a team store: psycopg 3 (store/postgres.py) for every connection that
writes, and for reading where the fast path cannot be sure to connect as libpq would; and
the read-only client of store/pgwire.py, standard library only, for the reading commands
(``gate``, ``runs``, ``inspect``, ``plan``, ``compare``, ``report``, ``view``), which would
otherwise pay psycopg's import (about 0.18 s of wall time, more than SQLite's whole ``gate``).
What both connections answer the same way lives here, once: the survey of the schema and
the session's settings in one round trip, which tables exist, whether a run's process
still holds its lock, the identity check of a store, and :func:`open_store_readonly`,
which chooses the client (docs/team-store.md, "Which client reads").

A driver's connection subclasses :class:`PgBase` and provides ``execute``,
``in_transaction``, ``close`` and :meth:`PgBase._row` (one row of a statement in the
store's SQL, with ``?`` placeholders, sent as it is); its errors are
:class:`~oloproof.store.dbapi.DatabaseError` and its subclasses, with the server's
SQLSTATE in ``sqlstate``.
"""

from __future__ import annotations

import os
import zlib
from typing import TYPE_CHECKING

from oloproof.errors import ConfigError, StoreError
from oloproof.store.dbapi import DatabaseError
from oloproof.textsafe import printable

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from oloproof.store.location import PostgresLocation

__all__ = [
    "DRIVER_ENV", "KEY_TEXT_BYTES", "LOCK_NAMESPACE", "MIGRATION_LOCK", "PgBase",
    "check_identity", "check_keys", "connect_timeout", "open_store_readonly", "psycopg_store",
    "run_lock_key", "schema_version", "store_params", "store_tables", "store_value",
]

#: Which client reads a team store: ``auto`` (the default: the wire client where it can be
#: sure to connect as libpq would, else psycopg), ``psycopg`` (always psycopg), ``wire``
#: (the wire client or an error saying why not: for tests and diagnosis).
DRIVER_ENV = "OLOPROOF_PG_DRIVER"
DRIVERS = ("auto", "psycopg", "wire")

#: How long connecting (authentication included) may take when neither the URL's
#: ``connect_timeout`` nor ``PGCONNECT_TIMEOUT`` says.
CONNECT_TIMEOUT_S = 15
#: What psycopg waits where libpq's ``connect_timeout`` is 0 or less ("no limit").
NO_LIMIT_CONNECT_TIMEOUT_S = 130
# The advisory locks of runs: (namespace, 32 bits of the run id's CRC), PostgreSQL's
# two-key form, so that they do not collide with another application's one-key locks.
LOCK_NAMESPACE = 0x4F4C4F50  # "OLOP"
MIGRATION_LOCK = 0  # the second key while a store is created or migrated
MERGE_LOCK = 1  # the second key while shards are merged (one merged run per set)

UNDEFINED_TABLE = "42P01"


def store_value(v: Any) -> Any:
    """A parameter as the store sends it: ``True``/``False`` as ``1``/``0`` (SQLite's
    integers), a NUL character (which PostgreSQL's text cannot hold) as U+FFFD."""
    if v is True or v is False:
        return int(v)
    if type(v) is str and "\x00" in v:
        return v.replace("\x00", "\ufffd")
    return v


def store_params(params: Sequence[Any]) -> list[Any]:
    return [store_value(v) for v in params]


#: The most bytes (UTF-8) of text one row's key may hold in a team store beside its run id:
#: a case id with its criterion's name (``run_judgments``), a decision's rule id, the
#: project's name. PostgreSQL's B-tree refuses an index row over 2,704 bytes (a case id
#: of 2,645 random characters with a criterion of one, on PostgreSQL 15); what is left
#: is room for the row's headers and a judge panel's member names. SQLite has no limit.
KEY_TEXT_BYTES = 2400


def _shown(text: str) -> str:
    return "'" + printable(text if len(text) <= 40 else text[:40] + "…") + "'"


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_keys(
    location: PostgresLocation, *, project: str, case_ids: Iterable[str],
    criteria: Sequence[str], rule_ids: Iterable[str], refused: str = "nothing was run",
    instead: str = "run this project on the SQLite store",
) -> None:
    """Refuse, before anything is called, the keys a run would store that the team store
    cannot hold apart (:class:`StoreError`, exit 2): a case id or a decision's rule id
    (``floor[lang=…]``: a group's value is in it) too long for PostgreSQL's index, or two
    that differ only where one holds a NUL character and the other U+FFFD (PostgreSQL's
    text cannot hold a NUL, which the store writes as U+FFFD). Without this the run called
    every case, then could not store its cases or its end (RUN_ERROR, exit 5), where the
    same project on the SQLite store was decided. ``refused`` says what was not done,
    ``instead`` what can be done instead (a run's, by default; ``store push`` says its own)."""
    where = location.display
    limit = f"(PostgreSQL refuses an index row over 2,704 bytes); {refused}. Shorten it"
    sqlite = f", or {instead}"
    if _size(project) > KEY_TEXT_BYTES:
        raise StoreError(
            f"{where}: the project's name is {_size(project):,} bytes long, more than the"
            f" {KEY_TEXT_BYTES:,} a team store can index {limit}{sqlite}")
    criterion = max(criteria, key=len, default="")
    for what, texts, budget, beside in (
        ("case id", case_ids, KEY_TEXT_BYTES - len(criterion),
         f" beside the criterion '{criterion}'" if criterion else ""),
        ("rule id", rule_ids, KEY_TEXT_BYTES, ""),
    ):
        seen: dict[str, str] = {}
        for text in texts:
            if _size(text) > budget:
                group = " (a group's: the group's value is part of it)" if "[" in text else ""
                raise StoreError(
                    f"{where}: the {what} {_shown(text)}{group} is {_size(text):,} bytes long,"
                    f" more than the {budget:,} a team store can index{beside} {limit}{sqlite}")
            other = seen.setdefault(store_value(text), text)
            if other != text:
                raise StoreError(
                    f"{where}: the {what}s {_shown(other)} and {_shown(text)} would be one in"
                    " a team store: PostgreSQL's text cannot hold a NUL character (\\x00),"
                    f" which the store writes as U+FFFD; {refused}. Rename one of them"
                    f"{sqlite}")


_STORE_TABLES: list[str] = []


def store_tables() -> list[str]:
    """The names of every table of the store's schema (store/schema.py)."""
    if not _STORE_TABLES:
        import re

        from oloproof.store.schema import MIGRATIONS, OPTIONAL_TABLES

        found = re.findall(
            r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)",
            "\n".join([*MIGRATIONS.values(), *OPTIONAL_TABLES.values()]),
        )
        _STORE_TABLES.extend(dict.fromkeys(found))
    return _STORE_TABLES


def run_lock_key(run_id: str) -> int:
    """The second key of a run's advisory lock (a signed 32-bit int, as PostgreSQL takes)."""
    key = zlib.crc32(run_id.encode("utf-8"))
    return key - (1 << 32) if key >= (1 << 31) else key


class PgBase:
    """What a connection to a team store answers whatever its driver (store/dbapi.py's
    Connection, plus the PostgreSQL-only calls of store/db.py).

    ``project`` is the project key the store is read and written for: every run a reader
    lists or resolves is one of that project's (store/reader.py)."""

    backend = "postgresql"
    #: Why a reading command reads through psycopg and not the wire client (``None``: the
    #: wire client's connection, or one that writes; :func:`connect_readonly`).
    fallback_reason: str | None = None

    def __init__(self, location: PostgresLocation) -> None:
        self.location = location
        self.project = location.project
        self._tables: set[str] = set()
        # The session's settings, and those not yet sent: the next statement sets them.
        self.settings: list[tuple[str, str]] = []
        self.pending: list[tuple[str, str]] = []

    # -- what each driver provides ------------------------------------------------------
    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        raise NotImplementedError

    @property
    def in_transaction(self) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _row(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...]:
        """The one row of ``sql`` (the store's SQL, ``?`` placeholders), without the pending
        settings; a :class:`DatabaseError` with the server's SQLSTATE when it fails."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    def use_settings(self, settings: Sequence[tuple[str, str]]) -> None:
        """The session's settings (name, value), set with the next statement (no round
        trip of their own: see :meth:`survey`)."""
        self.settings = list(settings)
        self.pending = list(settings)

    def _settle(self) -> None:
        """Send the pending session settings on their own (what survey() would have
        folded into its query)."""
        settings, self.pending = self.pending, []
        for name, value in settings:
            self.execute("SELECT set_config(?, ?, false)", (name, value))

    def has_table(self, name: str) -> bool:
        if name in self._tables:
            return True
        row = self.execute("SELECT to_regclass(?) IS NOT NULL", (name,)).fetchone()
        if row[0]:
            self._tables.add(name)
        return bool(row[0])

    def survey(self) -> int:
        """The schema version (0: no ``meta`` table; -1: one without a version, or with one
        that is not a number), and which of the store's tables exist (remembered for
        :meth:`has_table`), with the pending session settings set by the same statement:
        one round trip where the store exists (the common case), two where it does not, or
        inside a transaction (where a failed statement would abort it, so ``meta`` is
        looked for before it is read)."""
        names = list(store_tables())
        settings, self.pending = self.pending, []
        head = "".join("set_config(?, ?, false), " for _ in settings)
        head_params: list[Any] = [v for pair in settings for v in pair]
        tables = "ARRAY(SELECT n FROM unnest(?::text[]) AS n WHERE to_regclass(n) IS NOT NULL)"
        version_sql = "(SELECT value FROM meta WHERE key = 'schema_version')"
        if self.in_transaction:
            present = self._row(f"SELECT {head}{tables}", [*head_params, names])[-1]
            value = None
            if "meta" in present:
                value = self._row(f"SELECT {version_sql}", [])[0]
        else:
            try:
                *_, value, present = self._row(
                    f"SELECT {head}{version_sql}, {tables}", [*head_params, names]
                )
            except DatabaseError as exc:  # no meta table (the settings undone too)
                if exc.sqlstate != UNDEFINED_TABLE:
                    raise
                value = None
                present = self._row(f"SELECT {head}{tables}", [*head_params, names])[-1]
                if "meta" in present:
                    # Another session created the store between the two statements: its
                    # version is read now, not taken as missing (a store without one).
                    value = self._row(f"SELECT {version_sql}", [])[0]
        self._tables = set(present)
        if "meta" not in self._tables:
            return 0
        try:
            return -1 if value is None else int(value)
        except ValueError:
            return -1

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


def schema_version(conn: PgBase) -> int:
    return conn.survey()


def check_identity(conn: PgBase) -> int:
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


def connect_timeout(value: str | None) -> int:
    """Seconds connecting may take, given the ``connect_timeout`` a URL (or, without one,
    ``PGCONNECT_TIMEOUT``) gives: read as psycopg reads it (0 or less: its 130 s; at least
    2, as libpq), or :data:`CONNECT_TIMEOUT_S` without one. The same for both clients: the
    wire client uses it, and psycopg is given it."""
    if value is None or not value.strip():
        return CONNECT_TIMEOUT_S
    try:
        seconds = int(float(value))
    except (ValueError, OverflowError):
        raise ConfigError(
            f"connect_timeout is '{printable(value)}', not a number of seconds",
            file="PGCONNECT_TIMEOUT",
        ) from None
    if seconds <= 0:
        return NO_LIMIT_CONNECT_TIMEOUT_S
    return max(seconds, 2)


def driver() -> str:
    """The reading client :data:`DRIVER_ENV` asks for (``auto`` when unset)."""
    value = os.environ.get(DRIVER_ENV, "").strip().lower() or "auto"
    if value not in DRIVERS:
        raise ConfigError(
            f"'{value}' is not a client Oloproof reads a team store with", file=DRIVER_ENV,
            accepted=", ".join(DRIVERS),
        )
    return value


def connect_readonly(location: PostgresLocation) -> PgBase:
    """A read-only connection (``default_transaction_read_only``, set with the first
    statement): the wire client's where it can be sure to connect as libpq would (and
    :data:`DRIVER_ENV` does not ask for psycopg), else psycopg's."""
    chosen = driver()
    reason = f"{DRIVER_ENV}=psycopg"
    if chosen != "psycopg":
        from oloproof.store import pgwire

        try:
            wire = pgwire.connect(location, readonly=True)
        except pgwire.Unsupported as exc:
            if chosen == "wire":
                raise StoreError(
                    f"{location.display}: the wire client cannot read this store"
                    f" ({exc}); {DRIVER_ENV}=wire asks for it alone"
                ) from None
            reason = str(exc)
        else:
            return wire
    postgres = psycopg_store(
        location, f"reading this store ({reason}: Oloproof's own client leaves it to psycopg)")
    conn: PgBase = postgres.connect(location, readonly=True)
    conn.fallback_reason = reason
    return conn


def psycopg_store(location: PostgresLocation, what: str) -> Any:
    """store/postgres.py, or a :class:`StoreError` saying that ``what`` needs psycopg
    where it is not installed (the ``postgres`` extra)."""
    try:
        from oloproof.store import postgres
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("psycopg", "psycopg_binary", "psycopg_c"):
            raise
        raise StoreError(
            f"{location.display}: {what} needs psycopg, which is not installed here"
            " (pip install 'oloproof[postgres]')"
        ) from None
    return postgres


def open_store_readonly(location: PostgresLocation) -> PgBase:
    """The team store for reading: never created or migrated; an older schema is read as
    it is, a newer one refused."""
    from oloproof.store.db import StoreUnreadable

    conn = connect_readonly(location)
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
