"""Room on the disk for a run's end: a file set aside while the run runs.

A run that fills the disk must still record how it ended: its row says RUNNING
until the end is written, and that last transaction needs a few pages of the
write-ahead log like any other. When the disk fills exactly at a commit boundary
(the last commit succeeded and took the last free block), there is no room left
for it, and the run would read back as "ended without finishing" instead of
"stopped: the disk is full".

So each run sets aside a file of its own beside the store, ``reserve-<run id>``,
allocated for real (``posix_fallocate``, zeros where that is not supported) when the
run's row is created, and deletes it just before it writes its end: the space it
frees is what that transaction needs. A run whose process is killed leaves its file
behind; the next run in the project deletes the files of runs that are no longer
running (``sweep``).

Its size: :data:`RESERVE_MIN_BYTES`, plus twice the text of the run's row (its
system, metrics and policy): ending a run rewrites that row, and the policy of a
large project may be most of it. A disk too full for the reserve when the run starts
gets none; the run goes on, as it did before there was one.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable

__all__ = ["RESERVE_MIN_BYTES", "Reserve", "reserve_path", "sweep"]

RESERVE_MIN_BYTES = 1 << 20
_PREFIX = "reserve-"
_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0))


def reserve_path(store_dir: str | os.PathLike[str], run_id: str) -> str:
    return os.path.join(store_dir, f"{_PREFIX}{run_id}")


class Reserve:
    """The reserve of one run; :meth:`release` deletes it (at most once, never raises)."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    @classmethod
    def make(cls, store_dir: str | os.PathLike[str], run_id: str, row_bytes: int = 0) -> Reserve:
        """Allocate the run's reserve; an empty :class:`Reserve` when the disk has no room."""
        path = reserve_path(store_dir, run_id)
        size = RESERVE_MIN_BYTES + 2 * max(0, row_bytes)
        try:
            # A new file or nothing: never one put there before (a named pipe would block
            # the open, a link would have another file truncated).
            fd = os.open(path, _NEW_FILE, 0o600)
        except OSError:
            return cls(None)
        try:
            _allocate(fd, size)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(path)
            return cls(None)
        os.close(fd)
        return cls(path)

    def release(self) -> None:
        path, self.path = self.path, None
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _allocate(fd: int, size: int) -> None:
    """Give the file ``size`` bytes of real blocks; ``OSError`` (ENOSPC) when there is no room."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except AttributeError:  # not on this platform
        pass
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise  # writing would find no room either
        # EINVAL, EOPNOTSUPP: this file system cannot preallocate.
    block = b"\0" * 65536
    left = size
    while left > 0:
        left -= os.write(fd, block[: min(left, len(block))])


def sweep(store_dir: str | os.PathLike[str], running: Callable[[str], bool]) -> int:
    """Delete the reserves of runs that are not running any more (``running(run_id)``
    false: ended, killed, or unknown); how many were deleted. Best effort."""
    deleted = 0
    try:
        names = os.listdir(store_dir)
    except OSError:
        return 0
    for name in names:
        run_id = _run_id(name)
        if run_id is None:
            continue
        try:
            alive = running(run_id)
        except Exception:  # noqa: BLE001, S112 - a store we cannot read: leave the file alone
            continue
        if not alive:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(store_dir, name))
                deleted += 1
    return deleted


def _run_id(name: str) -> str | None:
    """The run id of a reserve's file name; ``None`` for any other name (not ours). Run ids
    are ``run_`` and a ULID (oloproof.ids)."""
    if not name.startswith(_PREFIX + "run_"):
        return None
    run_id = name[len(_PREFIX):]
    tail = run_id[4:]
    return run_id if 0 < len(tail) <= 64 and tail.isascii() and tail.isalnum() else None
