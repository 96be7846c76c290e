"""Regular expressions matched in a child process, under a time limit.

CPython's ``re`` holds the GIL for a whole match, so a catastrophic pattern
(``(a+)+$`` on a long output) in a worker thread would freeze every thread of
the run, signal handlers included. The only way to bound it is another
process: :class:`GuardedPattern` sends each search to a small child Python
(started on first use, one per search in flight, kept for the next cases) and
kills it when a search takes longer than ``timeout_s``; the next search starts
a new one. Searches never queue behind each other, so one slow search cannot
push another past its limit.
The cost is one pipe round trip per search (tens of microseconds).
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading
import time
from typing import TYPE_CHECKING

from oloproof._records import dataclass

if TYPE_CHECKING:
    import subprocess

__all__ = ["GuardedPattern", "RegexTimeout"]

# The child: read one JSON request per line, answer one JSON line.
_CHILD = r"""
import json, re, sys
cache = {}
for line in sys.stdin:
    req = json.loads(line)
    key = (req["p"], req["f"])
    pat = cache.get(key)
    if pat is None:
        pat = cache[key] = re.compile(req["p"], req["f"])
    m = pat.search(req["t"])
    sys.stdout.write(json.dumps({"m": None if m is None else m.group(0)}) + "\n")
    sys.stdout.flush()
"""


class RegexTimeout(TimeoutError):
    """A search that did not finish within the time limit."""


@dataclass(frozen=True, slots=True)
class Found:
    """What a search found: the text of the match (``group(0)``)."""

    text: str

    def group(self, index: int = 0) -> str:
        if index != 0:
            raise IndexError("only group(0) is kept")
        return self.text


class GuardedPattern:
    """``re.compile(pattern, flags).search`` in a child process, at most ``timeout_s``."""

    def __init__(self, pattern: str, flags: int, timeout_s: float) -> None:
        self.pattern = pattern
        self.flags = flags
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._idle: list[subprocess.Popen[bytes]] = []

    def _start(self) -> subprocess.Popen[bytes]:
        # -I: isolated (no user site, no PYTHON* variables); -S: no site import.
        import subprocess  # the first search starts the child (a run from the cache makes none)

        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _CHILD],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            close_fds=True,
        )

    def search(self, text: str) -> Found | None:
        request = (
            json.dumps({"p": self.pattern, "f": self.flags, "t": text}) + "\n"
        ).encode("ascii")
        child = None
        with self._lock:
            while self._idle and child is None:
                candidate = self._idle.pop()
                if candidate.poll() is None:
                    child = candidate
        if child is None:
            child = self._start()
        assert child.stdin is not None and child.stdout is not None
        deadline = time.monotonic() + self.timeout_s
        try:
            child.stdin.write(request)
            child.stdin.flush()
            line = self._read_line(child, deadline)
        except (OSError, RegexTimeout):
            _kill(child)
            raise
        with self._lock:
            self._idle.append(child)
        reply = json.loads(line)
        found = reply.get("m")
        return None if found is None else Found(str(found))

    def _read_line(self, child: subprocess.Popen[bytes], deadline: float) -> bytes:
        assert child.stdout is not None
        fd = child.stdout.fileno()
        chunks: list[bytes] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RegexTimeout(
                    f"the regular expression took longer than {self.timeout_s:g}s"
                )
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise OSError("the regular expression process ended")
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            _kill(child)


def _kill(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait()
