"""The store's connection: what every reader and writer may ask of one (the seam between the
store's SQL and its two backends).

A connection is DB-API 2 shaped, and the SQLite one is Python's own
``sqlite3.Connection``, untouched: today's code path, at no cost. The PostgreSQL one
(store/postgres.py, only imported when a team store is configured) answers the same calls:

* ``execute(sql, params)`` and ``executemany(sql, rows)`` with ``?`` placeholders, in the
  SQL both databases understand (``INSERT ... ON CONFLICT``, ``substr``, ``CASE``, no
  ``INSERT OR REPLACE``, no ``PRAGMA``: those go through the helpers of store/db.py);
  ``BEGIN IMMEDIATE``, ``COMMIT`` and ``ROLLBACK`` as statements;
* a cursor with ``fetchone``, ``fetchall`` and iteration;
* ``in_transaction`` and ``close()``.

Errors: SQLite raises ``sqlite3`` errors; the PostgreSQL connection raises the classes
below (never psycopg's, so that nothing above the store imports the driver). Catch
:data:`ERRORS`, :data:`DATABASE_ERRORS` or :data:`OPERATIONAL_ERRORS`, which hold both.
"""

from __future__ import annotations

import sqlite3

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from typing import Any, Protocol

__all__ = [
    "DATABASE_ERRORS",
    "ERRORS",
    "OPERATIONAL_ERRORS",
    "DatabaseError",
    "OperationalError",
    "RetryableError",
    "is_damaged",
    "is_sqlite",
]


# Structural, for the type checker only (typing's Protocol stays off the run path).
if TYPE_CHECKING:

    class Cursor(Protocol):
        def fetchone(self) -> Any: ...

        def fetchall(self) -> list[Any]: ...

        def __iter__(self) -> Iterator[Any]: ...

    class Connection(Protocol):
        """What the store's code asks of a connection (``sqlite3.Connection`` is one)."""

        def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

        def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...

        @property
        def in_transaction(self) -> bool: ...

        def close(self) -> None: ...


class DatabaseError(Exception):
    """A PostgreSQL store's error (what ``sqlite3.DatabaseError`` is for SQLite); its message
    never holds the store's password. ``sqlstate``: the server's SQLSTATE, when the server
    answered with one (``42P01``: no such table)."""

    sqlstate: str | None = None


class OperationalError(DatabaseError):
    """The PostgreSQL server could not do what was asked now (unreachable, a lock past its
    timeout, a full disk): a fault of where the store is, not of what it holds."""


class RetryableError(OperationalError):
    """A transaction PostgreSQL gave up to let another one through (a deadlock, a
    serialisation failure): the same transaction may be tried again."""


ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, DatabaseError)
DATABASE_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError, DatabaseError)
OPERATIONAL_ERRORS: tuple[type[Exception], ...] = (sqlite3.OperationalError, OperationalError)


def is_sqlite(conn: object) -> bool:
    return isinstance(conn, sqlite3.Connection)


#: SQLite's primary result codes for a file that is not a sound database.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


def is_damaged(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying the store file itself is damaged ("database disk
    image is malformed", "file is not a database"): what it holds cannot be trusted, and
    nothing more may be written into it. A full disk, a lock or an I/O error is not."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
