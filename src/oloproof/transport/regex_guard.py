"""Regular expressions matched in a child process, under a time limit.

CPython's ``re`` holds the GIL for a whole match, so a catastrophic pattern
(``(a+)+$`` on a long output) in a worker thread would freeze every thread of
the run, signal handlers included. The only way to bound it is another
process: :class:`GuardedPattern` sends each search to a small child Python
(started on first use, one per pattern set, reused across cases) and kills it
when a search takes longer than ``timeout_s``; the next search starts a new one.
The cost is one pipe round trip per search (tens of microseconds).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

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
        self._child: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        # -I: isolated (no user site, no PYTHON* variables); -S: no site import.
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _CHILD],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            close_fds=True,
        )

    def search(self, text: str) -> Found | None:
        request = (
            json.dumps({"p": self.pattern, "f": self.flags, "t": text}) + "\n"
        ).encode("ascii")
        with self._lock:
            child = self._child
            if child is None or child.poll() is not None:
                child = self._child = self._start()
            assert child.stdin is not None and child.stdout is not None
            deadline = time.monotonic() + self.timeout_s
            try:
                child.stdin.write(request)
                child.stdin.flush()
                line = self._read_line(child, deadline)
            except (OSError, RegexTimeout):
                self._kill()
                raise
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

    def _kill(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            child.wait()

    def close(self) -> None:
        with self._lock:
            self._kill()
