"""Writing a command's output to a stream that may not take it.

Imports nothing but ``os`` and ``sys``: ``runs --json`` and the other commands
that write a JSON document use it without the renderers.

- :func:`write_text`: a report that cannot be written (its reader went away, the disk is
  full, the descriptor was closed under us) is dropped, and the stream sent to
  ``/dev/null`` so exit does not complain again; the command's exit code stays its own
  (a gate's decision is known before its report is printed; exit 70 or 1 would hide it).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

__all__ = ["unwritable", "write_text"]


def write_text(stream: IO[str], text: str) -> None:
    """Write ``text`` (already made printable) to ``stream`` and flush it; a stream that
    cannot take it is given up (:func:`unwritable`), never an error of the command."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError) as exc:
        unwritable(stream, exc)


def unwritable(stream: IO[str], exc: Exception) -> None:
    """``stream`` failed: send what is left of it nowhere and, unless its reader simply
    went away (``| head``), say so once on standard error when that is another stream."""
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # closed, or not a file: nothing more will reach it anyway
    if isinstance(exc, BrokenPipeError) or stream is sys.stderr:
        return
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    try:
        sys.stderr.write(f"oloproof: warning: the report could not be written ({reason});"
                         " the exit code is the command's as always\n")
    except (OSError, ValueError):
        pass
