"""The ``--json`` writer: one event per line on standard output (SPEC §6).

The lines follow ``schemas/events.schema.json``. Each line is written whole,
never split across writes, and nothing is left waiting in a buffer: lines
emitted during one step of the event loop are written together, with one
system call, as soon as that step ends (a few milliseconds at most), and at
once when no loop is running. One write per line would cost a system call per
event, and with it a hand-over of the GIL to the system's worker threads: on
10,000 instant cases that alone made ``--json`` a quarter slower
(docs/performance.md, "Event stream overhead").

A reader that goes away (``oloproof run --json | head -3``) is a request to
stop the run, not an error: on the broken pipe the writer calls ``on_closed``
once, points the file descriptor at ``/dev/null`` so that nothing complains
at exit, and writes nothing more.
"""

from __future__ import annotations

import json
import os
import select
import sys
from collections.abc import Callable
from typing import IO, Any

from oloproof._loop import running_loop
from oloproof.events import Event
from oloproof.textsafe import escape_separators, json_safe

CLOSED_REASON = "standard output was closed by its reader"

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
        self, stream: IO[str] | None = None, on_closed: Callable[[str], None] | None = None
    ) -> None:
        self.stream = stream or sys.stdout
        self.on_closed = on_closed
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
                data = memoryview(text.encode("utf-8", "backslashreplace"))
                while data:
                    try:
                        data = data[os.write(self._fd, data) :]
                    except BlockingIOError:  # a non-blocking stdout: wait until it drains
                        select.select([], [self._fd], [])
        except (OSError, ValueError):
            self._reader_gone()
            return
        self.lines += count

    def _reader_gone(self) -> None:
        self.closed = True
        self._silence()
        if self.on_closed is not None:
            self.on_closed(CLOSED_REASON)

    def _silence(self) -> None:
        # Anything still bound for the closed pipe would fail again at interpreter
        # exit and print "Exception ignored ... BrokenPipeError"; send it nowhere.
        try:
            fd = self._fd if self._fd is not None else self.stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass
