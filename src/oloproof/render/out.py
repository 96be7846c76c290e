"""Writing a command's output to a stream that may not take it.

Imports nothing of Oloproof's: ``runs --json`` and the other commands that write a JSON
document use it without the renderers.

- :func:`write_text`: a report that cannot be written (its reader went away, the disk is
  full, the descriptor was closed under us) is dropped, and the stream sent to
  ``/dev/null`` so exit does not complain again; the command's exit code stays its own
  (a gate's decision is known before its report is printed; exit 70 or 1 would hide it).
- :data:`ESCAPE`: the error handler for a stream whose encoding cannot write every
  character (``PYTHONIOENCODING=ascii``, a non-UTF-8 locale). A character the encoding
  has no bytes for is written as a ``\\uXXXX`` escape (a pair of them above U+FFFF):
  in a ``--json`` document it can only stand inside a string, so every JSON parser reads
  the same value; in a report it is a visible escape, as unprintable text already is.
"""

from __future__ import annotations

import codecs
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

__all__ = ["ESCAPE", "escape_unencodable", "register", "unwritable", "write_text", "writes_all"]

ESCAPE = "oloproof-escape"


def _escape(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for char in exc.object[exc.start:exc.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), exc.end


def writes_all(encoding: str | None) -> bool:
    """Whether ``encoding`` (a stream's) can write every character: a UTF codec."""
    if not encoding:
        return True  # not a text stream of ours to judge: left alone
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return True


def register() -> None:
    """Make :data:`ESCAPE` known to ``codecs`` (idempotent)."""
    codecs.register_error(ESCAPE, _escape)


def escape_unencodable(stream: IO[str] | None) -> None:
    """Make ``stream`` (standard output or error) write a character its encoding has no
    bytes for as an escape (:data:`ESCAPE`) instead of raising ``UnicodeEncodeError``
    in the middle of a report, which ended the command as an internal error (exit 70)
    with the decision's exit code lost."""
    if stream is None or writes_all(getattr(stream, "encoding", None)):
        return
    register()
    try:
        stream.reconfigure(errors=ESCAPE)  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        pass  # not a TextIOWrapper, or closed: its writes are guarded anyway


def write_text(stream: IO[str], text: str) -> None:
    """Write ``text`` (already made printable) to ``stream`` and flush it; a stream that
    cannot take it is given up (:func:`unwritable`), never an error of the command."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError) as exc:
        unwritable(stream, exc)


def send_nowhere(fd: int) -> None:
    """Point the descriptor ``fd`` at the null device: what is still bound for a stream
    that failed (a closed pipe, a full disk) would fail again at the interpreter's exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def unwritable(stream: IO[str], exc: Exception) -> None:
    """``stream`` failed: send what is left of it nowhere and, unless its reader simply
    went away (``| head``), say so once on standard error when that is another stream."""
    try:
        send_nowhere(stream.fileno())
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
