"""Cache look-ups: finished executions and judgments, by key.

Only successes are ever written (store/writer.py), so a failure is never
replayed: the next run calls again.

On SQLite a look-up is a read of a local file, a few microseconds: during a run, keys are
looked up one by one, as the run needs them. On PostgreSQL each look-up is a round trip to
the server (about 0.1 ms), which a run of 10,000 cases would pay 20,000 times on its event
loop; so a PostgreSQL cache (:attr:`Cache.bulk`) is looked up in bulk instead: the run's
execution keys, and the judgment keys of the outputs already cached, in a few queries
before it starts (:meth:`Cache.preload`), and the judgment keys of fresh outputs in one
query per turn of the event loop (:meth:`Cache.load_judgments`).

The check before a run that every result is cached (engine/pipeline.py ``all_cached``)
preloads on SQLite too: one query per 500 keys instead of one read transaction per key
(each takes and drops SQLite's shared lock) takes the check from 2.6–2.9 to 2.3 ms on an
unchanged rerun of 120 cases. What it found is dropped again when the check ends (:meth:`Cache.remember`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from oloproof._json import loads_bounded
from oloproof._records import dataclass
from oloproof.store.dbapi import is_sqlite
from oloproof.usage import Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any

    from oloproof.store.dbapi import Connection

#: Keys per query of a bulk look-up: one array parameter on PostgreSQL, one parameter
#: each on SQLite (whose builds before 3.32 allow 999).
BULK_KEYS = 1000
SQLITE_BULK_KEYS = 500

_EXEC_COLUMNS = "output_json, latency_ms, usage_json, attempts"
_JUDGE_COLUMNS = "status, passed, score, reason, latency_ms, attempts, usage_json"


@dataclass(slots=True)
class CachedExecution:
    output: Any
    latency_ms: float | None
    usage: Usage | None
    attempts: int


@dataclass(slots=True)
class CachedJudgment:
    status: str
    passed: bool | None
    score: float | None
    reason: str | None
    latency_ms: float | None
    attempts: int
    usage: Usage | None


def _execution(row: Any) -> CachedExecution | None:
    try:
        usage = Usage.from_json(loads_bounded(row[2])) if row[2] else None
        return CachedExecution(loads_bounded(row[0]), row[1], usage, row[3])
    except (ValueError, TypeError, AttributeError):
        # A row that cannot be read back (damaged, or nested past the one depth limit):
        # a miss; the call made afresh replaces it.
        return None


def _judgment(row: Any) -> CachedJudgment | None:
    try:
        usage = Usage.from_json(loads_bounded(row[6])) if row[6] else None
    except (ValueError, TypeError, AttributeError):
        return None  # as for an execution: a miss
    passed = None if row[1] is None else bool(row[1])
    return CachedJudgment(row[0], passed, row[2], row[3], row[4], row[5], usage)


class Cache:
    def __init__(self, conn: Connection, *, enabled: bool = True) -> None:
        self.conn = conn
        self.enabled = enabled
        # Hits kept in memory while :meth:`remember` is on (engine/pipeline.py looks a
        # run's keys up once to see whether everything is cached, then reads them here).
        self._held: dict[str, CachedExecution | CachedJudgment] | None = None
        #: Look up in bulk (a PostgreSQL store): see the module's docstring.
        self.bulk = not is_sqlite(conn)
        # What bulk look-ups found, and every key they looked up (found or not).
        self._found: dict[str, CachedExecution | CachedJudgment | None] = {}
        self._looked: set[str] = set()
        self._pending: set[str] = set()
        self._batch: asyncio.Future[None] | None = None

    def remember(self, on: bool) -> None:
        """Keep every hit in memory (``on``), or forget them all (and, on SQLite, what
        :meth:`preload` found: look-ups there are cheap enough to make again)."""
        self._held = {} if on else None
        if not (on or self.bulk):
            self._found.clear()
            self._looked.clear()

    # -- bulk look-ups (PostgreSQL; on SQLite, the all-cached check) ---------------------
    def _load(self, table: str, keys: Iterable[str]) -> None:
        todo = [k for k in dict.fromkeys(keys) if k not in self._looked]
        columns, make = (
            (_EXEC_COLUMNS, _execution) if table == "exec_cache" else (_JUDGE_COLUMNS, _judgment)
        )
        size = BULK_KEYS if self.bulk else SQLITE_BULK_KEYS
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            params: Sequence[Any]
            if self.bulk:
                sql, params = f"SELECT key, {columns} FROM {table} WHERE key = ANY(?)", (chunk,)
            else:
                marks = ",".join("?" * len(chunk))
                sql, params = f"SELECT key, {columns} FROM {table} WHERE key IN ({marks})", chunk
            for row in self.conn.execute(sql, params).fetchall():
                self._found[row[0]] = make(row[1:])
            self._looked.update(chunk)

    def preload(self, executions: Iterable[str] = (), judgments: Iterable[str] = ()) -> None:
        """Look these keys up in bulk now; :meth:`execution` and :meth:`judgment` then
        answer them from memory (on SQLite, until :meth:`remember` is turned off)."""
        if not self.enabled:
            return
        self._load("exec_cache", executions)
        self._load("judge_cache", judgments)

    async def load_judgments(self, keys: Iterable[str]) -> None:
        """Look these judgment keys up together with those the other cases of this turn of
        the event loop ask for (one query for all). Nothing on a store that is not
        :attr:`bulk`."""
        if not (self.bulk and self.enabled):
            return
        import asyncio

        todo = [k for k in keys if k not in self._looked]
        if not todo:
            return
        self._pending.update(todo)
        if self._batch is None:
            loop = asyncio.get_running_loop()
            self._batch = loop.create_future()
            loop.call_soon(self._flush_batch)
        await asyncio.shield(self._batch)

    def _flush_batch(self) -> None:
        batch, self._batch = self._batch, None
        pending, self._pending = self._pending, set()
        assert batch is not None
        try:
            self._load("judge_cache", pending)
        except Exception as exc:  # noqa: BLE001 - a store fault: every waiting case sees it
            if not batch.done():
                batch.set_exception(exc)
            return
        if not batch.done():
            batch.set_result(None)

    # -- one key at a time -------------------------------------------------------------
    def execution(self, key: str) -> CachedExecution | None:
        if not self.enabled:
            return None
        held = self._held
        if held is not None:
            found = held.get(key)
            if isinstance(found, CachedExecution):
                return found
        if key in self._looked:
            hit = self._found.get(key)
            return hit if isinstance(hit, CachedExecution) else None
        row = self.conn.execute(
            f"SELECT {_EXEC_COLUMNS} FROM exec_cache WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        result = _execution(row)
        if held is not None and result is not None:
            held[key] = result
        return result

    def judgment(self, key: str) -> CachedJudgment | None:
        if not self.enabled:
            return None
        held = self._held
        if held is not None:
            found = held.get(key)
            if isinstance(found, CachedJudgment):
                return found
        if key in self._looked:
            hit = self._found.get(key)
            return hit if isinstance(hit, CachedJudgment) else None
        row = self.conn.execute(
            f"SELECT {_JUDGE_COLUMNS} FROM judge_cache WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        result = _judgment(row)
        if held is not None and result is not None:
            held[key] = result
        return result
