"""What is at a path that cannot be opened: nothing, a symlink loop, or a symlink to nothing.

``os.path.exists`` is False for all three, and a message that says "not found" of a
symlink loop sends the user looking for a file that is there. Every "not found" refusal
of a file the user names says which it is, in the same words, through :func:`missing`.
It is a bottom layer: it imports nothing of Oloproof's, and is imported on the way to an
error only.
"""

from __future__ import annotations

import errno
import os

__all__ = ["SYMLINK_LOOP", "missing", "not_there"]

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
