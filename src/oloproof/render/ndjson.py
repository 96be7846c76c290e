"""The ``--json`` writer: one event per line on standard output, flushed per line."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import IO

from oloproof.events import Event


class NdjsonWriter:
    """Writes each event as a JSON line; a reader that goes away stops the run.

    ``on_closed`` is called once when standard output is closed by its reader
    (``| head -3``); from then on nothing more is written.
    """

    def __init__(self, stream: IO[str] | None = None, on_closed: Callable[[str], None] | None = None) -> None:
        self.stream = stream or sys.stdout
        self.on_closed = on_closed
        self.closed = False

    def __call__(self, event: Event) -> None:
        if self.closed:
            return
        try:
            self.stream.write(event.to_line() + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            self.closed = True
            self._silence()
            if self.on_closed is not None:
                self.on_closed("standard output was closed by its reader")

    def _silence(self) -> None:
        # Point fd 1 at /dev/null so that the interpreter's last flush is quiet.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass
