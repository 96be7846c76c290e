"""Opening the store: ``.oloproof/store.sqlite`` beside ``oloproof.yaml``, or a team store.

Both ways in take a store's location (store/location.py): the path of the SQLite file,
as always, or a :class:`~oloproof.store.location.PostgresLocation`, which is handed to
store/postgres.py (imported then, and only then). What follows is the SQLite side; the
PostgreSQL one gives the same guarantees in its own terms (its module says how).

Two ways in:

* :func:`open_store`, for ``run`` and ``compare`` (they write): creates the
  store if needed (directory 0700, files 0600: a store holds inputs and
  outputs, often private), migrates it, and sets WAL and a busy timeout so
  two runs on one project can share the file. Before anything is changed the
  file is identified through a read-only look: a file that is not an
  Oloproof store, or one written by a newer Oloproof, is refused exactly as
  it was (not even switched to WAL).
* :func:`open_store_readonly`, for ``runs``, ``gate``, ``inspect`` and
  ``plan``: never creates, migrates or switches the journal, so a store in a
  read-only place (a CI artefact, a mounted volume) can be read. A store that
  exists but cannot be read raises :class:`StoreUnreadable` (exit 5: its
  evidence cannot be read).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator

from oloproof.errors import StoreError
from oloproof.store.dbapi import is_sqlite
from oloproof.store.location import STORE_DIR, STORE_FILE, PostgresLocation, store_path
from oloproof.store.schema import MIGRATIONS, OPTIONAL_TABLES, SCHEMA_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.store.dbapi import Connection
    from oloproof.store.location import StoreLocation

__all__ = [
    "STORE_DIR", "STORE_FILE", "StoreUnavailable", "StoreUnreadable", "claim_run", "connect",
    "has_table", "open_store", "open_store_readonly", "run_alive", "schema_version",
    "set_busy_timeout", "statements", "store_path",
]

BUSY_TIMEOUT_S = 30.0
DIR_MODE = 0o700
FILE_MODE = 0o600

_SQLITE_MAGIC = b"SQLite format 3\x00"
#: The files SQLite keeps beside the store: the write-ahead log and its index, and the
#: rollback journal (a store is in that mode until it is first switched to WAL).
SIDE_FILES = ("-wal", "-shm", "-journal")


class StoreUnreadable(StoreError):
    """The store exists but its evidence cannot be read (damaged, unreadable file): exit 5."""

    exit_code = 5


class StoreUnavailable(StoreError):
    """The store cannot take writes now (a full disk, a read-only place, a lock held past
    the timeout): nothing was stored or called; exit 5, like any store fault."""

    exit_code = 5


def _absent(path: str) -> bool:
    """Whether nothing is at ``path`` (oloproof._fs ``absent``: a path behind a folder that
    may not be searched is not absent); ``_fs`` is imported only when ``os.path.exists``
    says no, which it says of both (a store that is there needs no more on a command path)."""
    if os.path.exists(path):
        return False
    from oloproof._fs import absent

    return absent(path)


def _fault(path: str, exc: OSError | sqlite3.OperationalError) -> StoreUnavailable:
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StoreUnavailable(f"{path}: the store cannot be written ({why}); nothing was run")


@contextlib.contextmanager
def _private_umask() -> Iterator[None]:
    # SQLite creates -wal and -shm with the database file's mode; the umask
    # covers whatever else is created in the meantime (the journal of a
    # migration, the directory).
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _private_dir(directory: str) -> None:
    os.makedirs(directory, mode=DIR_MODE, exist_ok=True)
    gitignore = os.path.join(directory, ".gitignore")
    if not os.path.exists(gitignore):
        with open(gitignore, "w") as f:
            f.write("*\n")


def local_folder(project_root: str) -> None:
    """Make ``.oloproof/`` (0700, git-ignored) for what a project keeps beside a team store:
    the validated configuration's snapshots (project/_snapshot.py), never a store. Best
    effort: without it, the next command validates again."""
    with _private_umask(), contextlib.suppress(OSError):
        _private_dir(os.path.join(project_root, STORE_DIR))


def _tighten(path: str) -> None:
    """Take the group's and others' bits off ``path`` if it is ours (a store made by an
    older version, or opened up by hand). Only ever removes bits: a store its owner made
    read-only stays read-only."""
    try:
        st = os.stat(path)
        current = stat.S_IMODE(st.st_mode)
        if st.st_uid == os.geteuid() and current & 0o077:
            os.chmod(path, current & ~0o077)
    except OSError:
        pass


def _not_regular(path: str, mode: int) -> StoreError:
    kind = "a directory" if stat.S_ISDIR(mode) else "a pipe, a device or a socket"
    return StoreError(
        f"{path}: is not a regular file ({kind}); the store and the files SQLite keeps"
        " beside it must be files saved on disk. Move it away; nothing was read or written"
    )


def check_store_files(path: str | os.PathLike[str]) -> None:
    """Refuse a store whose file, or a file SQLite would open beside it (``-wal``,
    ``-shm``, ``-journal``), is not a regular file: SQLite would block for ever reading
    a named pipe, or fail on a device half-way; and a store folder that is not a folder
    (``run`` said "cannot be written (File exists)", the readers "no store").
    Checked without opening anything."""
    path = os.fspath(path)
    folder = os.path.dirname(path)
    try:
        folder_mode = os.stat(folder).st_mode
    except OSError:
        folder_mode = None  # none yet (a run makes it), or unreachable: opening it says why
    if folder_mode is not None and not stat.S_ISDIR(folder_mode):
        kind = "a file" if stat.S_ISREG(folder_mode) else "a pipe, a device or a socket"
        raise StoreError(
            f"{folder}: is not a folder ({kind}); the store is kept in the folder"
            f" {STORE_DIR}/ beside oloproof.yaml. Move it away; nothing was read or written"
        )
    for candidate in (path, *(f"{path}{side}" for side in SIDE_FILES)):
        try:
            mode = os.stat(candidate).st_mode
        except FileNotFoundError:
            continue  # absent
        except OSError as exc:
            from oloproof._fs import SYMLINK_LOOP, not_there  # only on the way to an error

            if not_there(exc):  # a symlink loop: for every command alike, not "no store"
                raise StoreError(
                    f"{candidate}: {SYMLINK_LOOP}; remove the link, or point it at"
                    " the store"
                ) from None
            continue  # unreachable: opening it says why
        if not stat.S_ISREG(mode):
            raise _not_regular(candidate, mode)


def _read_header(path: str) -> bytes:
    """The first 100 bytes of the store file, opened without blocking: a FIFO or a device
    put there between :func:`check_store_files` and this open is refused, not waited on."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        return os.read(fd, 100)
    finally:
        os.close(fd)


def _read_only(path: str) -> str | None:
    """Why the store must not be written, or ``None``: its owner took the write bit off
    the file or its directory. Root may write whatever the bits say, so they are read
    here instead of being left to the open."""
    parent = os.path.dirname(path)
    for p in (path, parent):
        try:
            st = os.stat(p)
        except OSError:
            continue
        if st.st_uid == os.geteuid() and not st.st_mode & stat.S_IWUSR:
            what = "directory" if p == parent else "file"
            return f"its {what} is read-only (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def open_store(path: StoreLocation, *, create: bool = True) -> Any:
    """Open the store at ``path`` for writing, creating and migrating it if needed.

    A :class:`PostgresLocation` is opened by store/postgres.py (psycopg). For the SQLite file,
    guarantees: a foreign SQLite file, a non-SQLite file or a store from a newer
    Oloproof raises :class:`StoreError` and is left byte for byte as it was; a
    new store's directory is 0700 and its files 0600.
    """
    if isinstance(path, PostgresLocation):
        from oloproof.store.pgshared import psycopg_store

        return psycopg_store(path, "writing a team store").open_store(path, create=create)
    path = os.fspath(path)
    check_store_files(path)
    with _private_umask():
        if _absent(path):
            if not create:
                raise StoreError(
                    f"no store at {path}: nothing has been run in this project yet"
                    " (run `oloproof run` first)"
                )
            try:
                _private_dir(os.path.dirname(path))
                with contextlib.suppress(FileExistsError):  # another run made it first
                    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
            except OSError as exc:
                raise _fault(path, exc) from exc
        _identify(path)
        read_only = _read_only(path)
        if read_only is not None:
            raise StoreUnavailable(
                f"{path}: the store cannot be written: {read_only}; nothing was run."
                " Give it back its write permission (chmod u+w) to run here"
            )
        # Only a file known to be a store (or a new one) is ours to make private.
        _tighten(os.path.dirname(path))
        _tighten(path)
        try:
            conn = connect(path)
            _migrate(conn, path)
        except sqlite3.OperationalError as exc:
            # The file is a store (_identify said so): full, read-only or locked is a
            # fault of where it lives, not of what it holds.
            raise _fault(path, exc) from exc
        except sqlite3.DatabaseError as exc:
            # A damaged store: its evidence cannot be read (exit 5, as for the readers).
            raise StoreUnreadable(
                f"{path}: cannot be read as an Oloproof store ({exc}); it was left as it is"
            ) from exc
    return conn


def _identify(path: str) -> None:
    """Refuse, before writing anything, a file that is not a store we may migrate."""
    try:
        header = _read_header(path)
    except OSError as exc:
        raise StoreUnreadable(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if not header:
        return  # a new, empty store
    if not header.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{path}: this file is not an Oloproof store; it was left untouched")
    try:
        conn = _identified(path, header)
    except sqlite3.DatabaseError as exc:
        raise StoreUnreadable(
            f"{path}: cannot be read as an Oloproof store ({exc}); it was left untouched"
        ) from exc
    conn.close()


def _identified(path: str, header: bytes) -> sqlite3.Connection:
    """A read-only connection to the store at ``path``, its identity checked, and its pages
    checked when a write-ahead log was left beside it (:func:`_check_left_log`)."""
    conn = _connect_readonly(path, header)
    try:
        current = _check_identity(conn, path)
        if current:
            _check_left_log(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_left_log(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a store whose write-ahead log was left by a process that is gone, if SQLite
    finds the two together damaged (``PRAGMA quick_check``).

    A log left beside the store (a run killed with ``kill -9``) is replayed over the file
    by the next connection. Put beside another copy of the file (a store restored from a
    backup, keeping the ``-wal``), its pages land on pages they were not written for: the
    store is malformed, but a run reading only some of its pages may not notice, and
    decided (and allowed) on cache hits read from it. The check reads every page (0.1 s for
    a store of 116 MB in the system's file cache, 2.4 s from a cold disk:
    docs/store-and-cache.md), so it is made only then: a log is there,
    and no run whose process still runs is writing it (a live run's log is its own, and
    the store beside it is the one it was written for). A store without a log, every
    store after a run that ended, is not checked."""
    if not _nonempty(f"{path}-wal") or _live_writer(conn):
        return
    problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(1)").fetchall()]
    if problems != ["ok"]:
        found = " ".join(" ".join(problems).split())  # one line
        raise sqlite3.DatabaseError(
            f"database disk image is malformed, with the write-ahead log left beside it"
            f" (PRAGMA quick_check: {found}). A store restored from a copy must be put back"
            f" without the {STORE_FILE}-wal and -shm of the one it replaces: move those two"
            " away to read the copy as it was saved"
        )


def _live_writer(conn: sqlite3.Connection) -> bool:
    """Whether a run stored as ``RUNNING`` is still run by its process (store/liveness.py)."""
    from oloproof.store.liveness import run_owner_alive

    owners = has_table(conn, "run_owners")
    sql = (
        "SELECT r.pid, o.owner, r.created_at FROM runs r"
        " LEFT JOIN run_owners o ON o.run_id = r.id WHERE r.status = 'RUNNING'"
        if owners else
        "SELECT pid, NULL, created_at FROM runs WHERE status = 'RUNNING'"
    )
    return any(run_owner_alive(pid, owner, str(created))
               for pid, owner, created in conn.execute(sql).fetchall())


def connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection to the store file at ``path``, set up as every writing connection is:
    autocommit (transactions are explicit), WAL, a busy timeout."""
    conn = sqlite3.connect(os.fspath(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    # Checkpoint the WAL into the database every 10,000 pages (40 MB) rather than
    # 1,000: a run of many cases checkpoints (and syncs) ten times less often.
    conn.execute("PRAGMA wal_autocheckpoint = 10000")
    return conn


def _lenient_text(data: bytes) -> str:
    # Text another tool (or a damaged page) stored as invalid UTF-8 reads back
    # with U+FFFD in place of the bad bytes instead of failing the whole query.
    return data.decode("utf-8", "replace")


# The bytes of a path that its ``file:`` URI keeps as they are: those ``Path.as_uri()``
# keeps (``urllib.parse.quote``'s, with ``/``); every other byte is written ``%HH``.
_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def file_uri(path: str) -> str:
    """The ``file:`` URI of ``path`` made absolute and resolved: the text
    ``Path(path).resolve().as_uri()`` gives, without ``pathlib``, which would bring
    ``urllib.parse`` and ``ipaddress`` to every ``gate`` (docs/design-notes.md, "What a
    short command must not import"). Bytes that are not UTF-8 are written ``%HH``, as
    there."""
    raw = os.fsencode(os.path.realpath(path))
    return "file://" + "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in raw)


def _uri_connect(path: str, query: str) -> sqlite3.Connection:
    conn = sqlite3.connect(
        f"{file_uri(path)}?{query}", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
    )
    conn.text_factory = _lenient_text
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def _nonempty(path: str) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def _connect_readonly(path: str, header: bytes) -> sqlite3.Connection:
    """A read-only connection that writes nothing, to the file or beside it.

    A file in WAL mode (byte 18 of its header is 2) with no log beside it has no
    writer connected (a writer in WAL mode always holds a log) and all of its
    content in the file: it is opened ``immutable=1``, because a ``mode=ro`` open
    would create an empty log and index beside it, and leave them there.

    Otherwise ``mode=ro``. A store in WAL mode needs its ``-shm`` file; where
    that cannot be created (a read-only directory) there is no live writer, and:

    * without a write-ahead log, ``immutable=1`` reads the file as it is;
    * with one (a run killed before it checkpointed), the file and its log are
      copied to a private temporary directory and read there, so that what the
      log holds is not silently missed.
    """
    wal = f"{path}-wal"
    if header[18:19] == b"\x02" and not os.path.exists(wal):
        try:
            return _uri_connect(path, "immutable=1")
        except sqlite3.OperationalError:
            pass  # a writer arrived meanwhile: read through the log after all
        # Any other DatabaseError (a malformed file) propagates: opening it again with
        # mode=ro would only leave an empty log and index beside a damaged store.
    try:
        return _uri_connect(path, "mode=ro")
    except sqlite3.OperationalError as first:
        if not _nonempty(wal):
            try:
                return _uri_connect(path, "immutable=1")
            except sqlite3.DatabaseError:
                raise first from None
        return _snapshot(path, wal)


def _snapshot(path: str, wal: str) -> sqlite3.Connection:
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="oloproof-store-")
    copy = os.path.join(tmp, STORE_FILE)
    try:
        with _private_umask():
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, f"{copy}-wal")
        # A read-write open of the copy replays the log into it; in rollback mode
        # the read-only connection then needs no side files at all.
        replay = sqlite3.connect(copy, isolation_level=None)
        try:
            replay.execute("PRAGMA journal_mode = DELETE")
        finally:
            replay.close()
        return _uri_connect(copy, "mode=ro")
    finally:
        # On Linux an open file survives its directory's removal.
        shutil.rmtree(tmp, ignore_errors=True)


def open_store_readonly(path: StoreLocation) -> Any:
    """Open the store at ``path`` for reading only (a :class:`PostgresLocation`: by
    store/pgshared.py, through the wire client of store/pgwire.py or psycopg, with the
    same guarantees).

    Guarantees: nothing is created, migrated or written (the journal mode is not
    touched); a missing store raises :class:`StoreError` (exit 2); a file that is
    not an Oloproof store, or a newer one, raises :class:`StoreError` (exit 2);
    a store that exists but cannot be read raises :class:`StoreUnreadable` (exit 5).
    A store at an older schema version is read as it is.
    """
    if isinstance(path, PostgresLocation):
        from oloproof.store import pgshared

        return pgshared.open_store_readonly(path)
    path = os.fspath(path)
    check_store_files(path)
    if _absent(path):  # a folder on the way that may not be searched: cannot be read
        raise StoreError(
            f"no store at {path}: nothing has been run in this project yet"
            " (run `oloproof run` first)"
        )
    try:
        header = _read_header(path)
    except OSError as exc:
        raise StoreUnreadable(f"{path}: the store cannot be read ({exc.strerror or exc})") from exc
    if not header:
        # An empty file: a store that a run is making this moment (open_store creates the
        # file, then SQLite writes its first page). It holds no run yet: read as an empty
        # store, in memory, since a connection to the file could meet that first page
        # half-way ("file is not a database", seen with readers racing a run).
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.text_factory = _lenient_text
        return conn
    if not header.startswith(_SQLITE_MAGIC):
        raise StoreUnreadable(
            f"{path}: the store cannot be read (it is not an SQLite database, or it is damaged)"
        )
    try:
        return _identified(path, header)
    except sqlite3.DatabaseError as exc:
        raise StoreUnreadable(f"{path}: the store cannot be read ({exc})") from exc


def has_table(conn: Connection, name: str) -> bool:
    """Whether the store has table ``name`` (an older store may lack the newer ones)."""
    if not is_sqlite(conn):
        return bool(conn.has_table(name))  # type: ignore[attr-defined]
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


def schema_version(conn: Connection) -> int:
    if not is_sqlite(conn):
        from oloproof.store import pgshared

        return max(0, pgshared.schema_version(conn))  # type: ignore[arg-type]
    if not has_table(conn, "meta"):
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return _version_number(row[0]) if row else 0


def _version_number(value: object) -> int:
    """The stored schema version, a whole number (written as text by :func:`_step_up`);
    anything else (``'4x'``, NULL, ``'3.5'``) is a damaged store, not an internal error."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    shown = "NULL" if value is None else repr(value)
    raise StoreUnreadable(
        f"the store cannot be read (its schema_version in table meta is {shown}, not a"
        " whole number: the store is damaged); it was left untouched"
    )


def _check_identity(conn: sqlite3.Connection, path: str) -> int:
    """The store's schema version; refuses a foreign file or a newer store.

    Its reads are one read transaction: each statement of an autocommit connection sees
    the store as it is then, and a run creating this store between "no meta table" and
    "how many tables" made a reader call its own store foreign (1 reader in ~12 racing
    a run)."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        return _identity(conn, path)
    finally:
        if own and conn.in_transaction:
            conn.execute("COMMIT")


def _identity(conn: sqlite3.Connection, path: str) -> int:
    try:
        current = schema_version(conn)
    except StoreUnreadable as exc:
        raise StoreUnreadable(f"{path}: {exc}") from None
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: this store was written by a newer Oloproof (schema {current};"
            f" this version reads up to {SCHEMA_VERSION}). Upgrade oloproof to use it;"
            " the store was left untouched."
        )
    if current == 0:
        tables = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
        ).fetchone()[0]
        if tables:
            raise StoreError(
                f"{path}: this SQLite file is not an Oloproof store; it was left untouched"
            )
    return current


def _migrate(conn: sqlite3.Connection, path: str) -> None:
    current = _check_identity(conn, path)
    if current != SCHEMA_VERSION:
        _step_up(conn)
    for name, ddl in OPTIONAL_TABLES.items():
        if not has_table(conn, name):
            conn.execute(ddl)


def _step_up(conn: sqlite3.Connection) -> None:
    begin_write(conn)
    try:
        # Another process may have migrated while we waited for the lock.
        current = schema_version(conn)
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(version),),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def statements(script: str) -> list[str]:
    """Split a migration into statements (executescript would commit on its own)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


# -- what differs between the two backends, asked of either ------------------------------


def set_busy_timeout(conn: Connection, seconds: float) -> None:
    """How long a statement waits for another writer's lock before it fails: SQLite's busy
    timeout, PostgreSQL's ``lock_timeout``."""
    if is_sqlite(conn):
        conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
    else:
        conn.set_lock_timeout(seconds)  # type: ignore[attr-defined]


#: How long SQLite waits for another writer's lock in one go, in :func:`begin_write`.
LOCK_WAIT_SLICE_MS = 100
_SQLITE_BUSY = 5


def begin_write(conn: Connection, *, give_up: Callable[[], bool] | None = None) -> bool:
    """``BEGIN IMMEDIATE``: the write lock, waited for up to the connection's busy timeout.

    SQLite waits for another writer's lock inside one C call, where no Python signal
    handler runs: a run's commit that waited for a lock held elsewhere held off every
    Ctrl-C (the second too, which exits at once) for the whole busy timeout, 30 s by
    default and up to an hour. On SQLite the wait is made in slices of
    :data:`LOCK_WAIT_SLICE_MS`, between which the handlers run; the same lock, the same
    total wait, the same "database is locked" at its end. Every transaction that writes
    begins here (``merge``, ``compare`` and a matrix's document as well as a run): a
    Ctrl-C raises KeyboardInterrupt between two slices, before anything is written.

    ``give_up``, asked between slices (a signal handler that only records a stop, as
    ``run``'s does): once it says so, the wait ends without the lock and ``False`` is
    returned; ``True`` once the transaction is begun."""
    if not is_sqlite(conn):
        conn.execute("BEGIN IMMEDIATE")
        return True
    total_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    if total_ms <= LOCK_WAIT_SLICE_MS:
        conn.execute("BEGIN IMMEDIATE")
        return True
    conn.execute(f"PRAGMA busy_timeout = {LOCK_WAIT_SLICE_MS}")
    try:
        deadline = time.monotonic() + total_ms / 1000
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return True
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", None) == _SQLITE_BUSY
                if not busy or time.monotonic() >= deadline:
                    raise
            if give_up is not None and give_up():
                return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {total_ms}")


def claim_run(conn: Connection, run_id: str) -> str | None:
    """The owner token of a run this process starts (store/liveness.py): the process's
    identity on SQLite; on PostgreSQL, the run's advisory lock, taken on ``conn``."""
    if is_sqlite(conn):
        from oloproof.store.liveness import owner_token

        return owner_token()
    return str(conn.claim_run(run_id))  # type: ignore[attr-defined]


def run_alive(conn: Connection, pid: int | None, owner: str | None, created_at: str) -> bool:
    """Whether the process that started a ``RUNNING`` run still runs it."""
    if is_sqlite(conn):
        from oloproof.store.liveness import run_owner_alive

        return run_owner_alive(pid, owner, created_at)
    return bool(conn.run_alive(owner))  # type: ignore[attr-defined]


def in_a_statement(conn: Connection) -> bool:
    """Whether the thread that uses ``conn`` is inside one of its statements: a signal
    handler that interrupted it there must ask nothing of ``conn``. An SQLite statement is
    one C call, which no Python signal handler interrupts; a PostgreSQL one is not
    (:attr:`~oloproof.store.postgres.PgConnection.in_a_statement`)."""
    if is_sqlite(conn):
        return False
    return bool(conn.in_a_statement)  # type: ignore[attr-defined]


def connect_quickly(location: StoreLocation, timeout_s: float) -> Connection:
    """A connection of its own that waits at most ``timeout_s`` for a lock (the record of a
    hard stop, from a signal handler)."""
    if isinstance(location, PostgresLocation):
        from oloproof.store.pgshared import psycopg_store

        conn = psycopg_store(location, "writing a team store").connect(location)
        conn.set_lock_timeout(timeout_s)
        return conn  # type: ignore[no-any-return]
    return sqlite3.connect(str(location), timeout=timeout_s, isolation_level=None)
