"""What is at a path that cannot be opened: nothing, a symlink loop, or a symlink to nothing.

``os.path.exists`` is False for all three, and a message that says "not found" of a
symlink loop sends the user looking for a file that is there. Every "not found" refusal
of a file the user names says which it is, in the same words, through :func:`missing`.
A path behind a folder that may not be searched is neither: :func:`absent` and
:func:`not_a_file` say it cannot be read, where ``pathlib`` raises ``PermissionError``.
It is a bottom layer: it imports nothing of Oloproof's, and is imported on the way to an
error only.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["SYMLINK_LOOP", "absent", "missing", "not_a_file", "not_there"]

#: A path whose symlinks lead back to themselves (``open`` fails with ELOOP).
SYMLINK_LOOP = "symlink loop (ELOOP: too many levels of symbolic links)"


def not_there(exc: OSError) -> bool:
    """``exc`` (from opening a path) says nothing can be opened there: no file, a dangling
    symlink or a symlink loop (:func:`missing` says which)."""
    return isinstance(exc, FileNotFoundError) or exc.errno == errno.ELOOP


def missing(path: str | os.PathLike[str], absent: str = "file not found") -> str:
    """Why nothing can be opened at ``path``: ``absent`` when nothing is there;
    :data:`SYMLINK_LOOP`; or ``symlink to a missing file (TARGET)``."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return SYMLINK_LOOP
        if os.path.islink(path):
            return f"symlink to a missing file ({os.readlink(path)})"
    return absent


def _denied(exc: OSError) -> bool:
    return exc.errno in (errno.EACCES, errno.EPERM)


def absent(path: str | os.PathLike[str]) -> bool:
    """Whether nothing is at ``path``: what ``os.path.exists`` is False of (and
    ``pathlib.Path.exists`` too, where it does not raise), except a path that cannot be
    looked at because a folder on the way may not be searched (``chmod 000``). That one is
    not said to be missing: opening it says it cannot be read, and why."""
    try:
        os.stat(path)
    except OSError as exc:
        return not _denied(exc)
    except ValueError:  # a NUL in the path
        return True
    return False


def not_a_file(path: str | os.PathLike[str], absent: str = "file not found") -> str | None:
    """Why no regular file can be read at ``path`` (nothing there, a directory, a device,
    a pipe or a socket, a folder on the way that may not be searched), or None."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if _denied(exc):
            return f"cannot be read ({exc.strerror or exc})"
        return missing(path, absent)
    except ValueError:  # a NUL in the path
        return absent
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a device, a pipe or a socket)"
    return None
