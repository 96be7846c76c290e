"""The ``--json`` writer: one event per line on standard output (SPEC §6).

The lines follow ``schemas/events.schema.json``. Nothing is left waiting in a
buffer: lines emitted during one step of the event loop are written together,
with one system call to a file (to a pipe, in pieces of whole lines; see
below), as soon as that step ends (a few milliseconds at most), and at once
when no loop is running. One write per line would cost a system call per
event, and with it a hand-over of the GIL to the system's worker threads: on
10,000 instant cases that alone made ``--json`` a quarter slower
(docs/performance.md, "Event stream overhead").

A reader that goes away (``oloproof run --json | head -3``) is a request to
stop the run, not an error: on the broken pipe the writer calls ``on_closed``
once, points the file descriptor at ``/dev/null`` so that nothing complains
at exit, and writes nothing more.

A reader that stays but stops reading (a pipe nobody drains) must not hold a
stop: a write to a full pipe blocks the run's loop, and a Ctrl-C or SIGTERM
then did nothing until a second one. So to a pipe or a socket the writer
writes only what the other end can take without blocking (``select`` says it
can take ``PIPE_BUF`` bytes: pieces of whole lines up to that size), waiting
for room a tenth of a second at a time; once ``stopping()`` says a stop was
asked for (the CLI: a signal, not a stop the run makes itself, which waits for
the reader as before), a reader that makes no room within ``STUCK_READER_S``
is given up (the rest is dropped; ``on_closed`` is not called: the run is
already stopping).
"""

from __future__ import annotations

import json
import os
import select
import stat
import sys
from collections.abc import Callable
from typing import IO, Any

from oloproof._loop import running_loop
from oloproof.events import Event
from oloproof.render.out import send_nowhere
from oloproof.textsafe import escape_separators, json_safe

CLOSED_REASON = "standard output was closed by its reader"

#: Once a stop was asked for, how long a reader that takes nothing is waited for.
STUCK_READER_S = 1.0
_WAIT_S = 0.1

# One encoder for every line; json.dumps with options builds a new one per call.
# allow_nan=False: the stream is strict JSON (a NaN or an infinity is written as null).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def encode_line(data: dict[str, Any]) -> str:
    """One event as one line of strict JSON, encodable as UTF-8.

    The common case costs one encode; only an event holding NaN, an infinity or a
    lone surrogate (from a model's output or an error message) takes the slower
    path through ``oloproof.textsafe``.
    """
    try:
        line = _encode(data)
        if not line.isascii():
            line.encode("utf-8")  # raises on a lone surrogate
    except (ValueError, UnicodeEncodeError):
        line = _encode(json_safe(data))
    # A case id or an error holding U+2028 or U+0085 was two lines to str.splitlines().
    return escape_separators(line) + "\n"


class NdjsonWriter:
    """A sink of run events that writes each as one JSON line.

    Guarantees: every line is one whole event in strict JSON (``encode_line``);
    lines reach the stream in the order the events were emitted; a closed reader
    stops the writing, once, and is reported through ``on_closed``.
    """

    def __init__(
        self, stream: IO[str] | None = None, on_closed: Callable[[str], None] | None = None,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        self.stream = stream or sys.stdout
        self.on_closed = on_closed
        self._stopping = stopping  # whether a stop was asked for
        self._pipe = False  # a pipe or a socket: a write can wait for the reader
        self.closed = False
        self.lines = 0
        self._pending: list[str] = []
        self._scheduled = False
        self._fd: int | None = None
        try:
            # Whatever the stream holds goes first; from here on, write to the fd
            # directly, whatever buffering the stream has (PYTHONUNBUFFERED or not).
            self.stream.flush()
            self._fd = self.stream.fileno()
            mode = os.fstat(self._fd).st_mode
            self._pipe = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        except (OSError, ValueError, AttributeError):
            self._fd = None

    def __call__(self, event: Event) -> None:
        if self.closed:
            return
        self._pending.append(encode_line(event.to_json()))
        loop = running_loop()
        if loop is None:
            self.flush()
            return
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write every pending line now."""
        self._scheduled = False
        if self.closed or not self._pending:
            self._pending.clear()
            return
        text = "".join(self._pending)
        count = len(self._pending)
        self._pending.clear()
        try:
            if self._fd is None:
                self.stream.write(text)
                self.stream.flush()
            else:
                # encode_line has already replaced lone surrogates; the error handler is a
                # last guard so that no write can fail on one.
                data = text.encode("utf-8", "backslashreplace")
                if self._pipe and self._stopping is not None:
                    if not self._write_to_pipe(self._fd, data, self._stopping):
                        self.closed = True  # a reader that takes nothing: given up
                        self._silence()
                        return
                else:
                    view = memoryview(data)
                    while view:
                        try:
                            view = view[os.write(self._fd, view) :]
                        except BlockingIOError:  # a non-blocking stdout: wait until it drains
                            select.select([], [self._fd], [])
        except (OSError, ValueError) as exc:
            self._reader_gone(exc)
            return
        self.lines += count

    @staticmethod
    def _write_to_pipe(fd: int, data: bytes, stopping: Callable[[], bool]) -> bool:
        """Write ``data`` in pieces the pipe can take without blocking; ``False`` when a
        stop was asked for and the reader took nothing for ``STUCK_READER_S``."""
        start = 0
        while start < len(data):
            while not select.select([], [fd], [], _WAIT_S)[1]:
                if stopping() and not select.select([], [fd], [], STUCK_READER_S)[1]:
                    return False
            end = start + select.PIPE_BUF
            if end < len(data):
                cut = data.rfind(b"\n", start, end)
                end = cut + 1 if cut >= start else end  # whole lines, when one fits
            try:
                start += os.write(fd, data[start:end])
            except BlockingIOError:  # a non-blocking stdout: select again
                pass
        return True

    def _reader_gone(self, exc: Exception) -> None:
        self.closed = True
        self._silence()
        if self.on_closed is not None:
            # A pipe whose reader went away, or a closed descriptor: the usual case. A file
            # on a full disk (ENOSPC) or an I/O error is said as what it is.
            failed = isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError)
            reason = exc.strerror if isinstance(exc, OSError) else None
            self.on_closed(f"standard output cannot be written ({reason})"
                           if failed and reason else CLOSED_REASON)

    def _silence(self) -> None:
        # Anything still bound for the closed pipe would fail again at interpreter
        # exit and print "Exception ignored ... BrokenPipeError"; send it nowhere.
        try:
            send_nowhere(self._fd if self._fd is not None else self.stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass
