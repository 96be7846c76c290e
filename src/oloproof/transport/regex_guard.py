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

:class:`GuardedSchema` does the same for a ``json_schema`` evaluator whose schema
holds regular expressions (``pattern``, ``patternProperties``): jsonschema matches
them with ``re``, so the whole validation runs in the child. Its child imports
jsonschema once (a tenth of a second or so), then validates case after case.

No child outlives its guard: :meth:`GuardedPattern.close` (the run's end, a stop included)
kills every child, those being started too, and a closed guard starts none. A child
also ends itself :data:`SELF_EXIT_S` after a search's limit, should nobody kill it (its
parent SIGKILLed, say): a child in a catastrophic match cannot read its pipe, and ``re``
holds the GIL, so it arms :func:`faulthandler.dump_traceback_later`, whose watchdog is a
thread of C that needs no GIL, before each search.
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading
import time

from oloproof._records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Any

__all__ = ["GuardedPattern", "GuardedSchema", "RegexTimeout", "has_patterns"]

# The child: read one JSON request per line, answer one JSON line.
_CHILD = r"""
import faulthandler, json, re, sys
sys.stdout.write("ready\n")
sys.stdout.flush()
cache = {}
for line in sys.stdin:
    req = json.loads(line)
    key = (req["p"], req["f"])
    pat = cache.get(key)
    if pat is None:
        pat = cache[key] = re.compile(req["p"], req["f"])
    faulthandler.dump_traceback_later(req["s"], exit=True)
    m = pat.search(req["t"])
    faulthandler.cancel_dump_traceback_later()
    sys.stdout.write(json.dumps({"m": None if m is None else m.group(0)}) + "\n")
    sys.stdout.flush()
"""


# The schema's child: a first line with the parent's import path and the schema, then
# one JSON instance per line in, one verdict per line out.
_SCHEMA_CHILD = r"""
import faulthandler, json, sys
setup = json.loads(sys.stdin.readline())
sys.path[:] = setup["path"]
import jsonschema
from referencing import Registry
from referencing.exceptions import NoSuchResource

def never_retrieve(uri):
    raise NoSuchResource(ref=uri)

schema = setup["schema"]
cls = jsonschema.validators.validator_for(schema)
validator = cls(schema, registry=Registry(retrieve=never_retrieve),
                format_checker=cls.FORMAT_CHECKER)
sys.stdout.write("ready\n")
sys.stdout.flush()
for line in sys.stdin:
    faulthandler.dump_traceback_later(setup["s"], exit=True)
    try:
        error = next(iter(validator.iter_errors(json.loads(line))), None)
        if error is None:
            reply = {"ok": True}
        else:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            reply = {"ok": False, "reason": f"{where}: {error.message}"}
    except Exception as exc:
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    faulthandler.cancel_dump_traceback_later()
    sys.stdout.write(json.dumps(reply) + "\n")
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
        # Children being started or in the middle of a search: killed by close() too (a
        # run that stops must not leave a catastrophic match burning a core after it).
        self._busy: set[subprocess.Popen[bytes]] = set()
        self._closed = False

    def _start(self) -> subprocess.Popen[bytes]:
        return self._started(_CHILD, b"", "the regular expression's process")

    def _started(self, code: str, setup: bytes, what: str) -> subprocess.Popen[bytes]:
        """A child running ``code``, once it said it is ready (``setup`` sent first).

        Starting a Python is not part of any case's time: the case's limit starts once
        the child is ready. On a loaded machine a start took longer than a 0.5 s limit,
        and searches that match at once timed out (START_S bounds the start itself)."""
        # -I: isolated (no user site, no PYTHON* variables); -S: no site import.
        import subprocess  # the first search starts the child (a run from the cache makes none)

        child = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", code],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        with self._lock:  # from now on close() kills it, even before it is ready
            closed = self._closed
            if not closed:
                self._busy.add(child)
        if closed:
            _kill(child)
            raise OSError(f"{what} was not started: the guard is closed")
        assert child.stdin is not None
        try:
            if setup:
                child.stdin.write(setup)
                child.stdin.flush()
            ready = self._read_line(child, time.monotonic() + START_S)
        except (OSError, RegexTimeout):
            self._drop(child)
            raise OSError(f"{what} could not start") from None
        if ready != b"ready\n":
            self._drop(child)
            raise OSError(f"{what} could not start")
        return child

    def _drop(self, child: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._busy.discard(child)
        _kill(child)

    def search(self, text: str) -> Found | None:
        request = (json.dumps({"p": self.pattern, "f": self.flags, "t": text,
                               "s": self.timeout_s + SELF_EXIT_S}) + "\n").encode("ascii")
        reply = json.loads(self._ask(request))
        found = reply.get("m")
        return None if found is None else Found(str(found))

    def _ask(self, request: bytes) -> bytes:
        """Send one request line to an idle child (or a new one); its reply line, read
        within ``timeout_s`` (the child is killed past it: :class:`RegexTimeout`)."""
        child = None
        with self._lock:
            if self._closed:
                raise OSError("the guard is closed: the run is ending")
            while self._idle and child is None:
                candidate = self._idle.pop()
                if candidate.poll() is None:
                    child = candidate
                    self._busy.add(child)
        if child is None:
            child = self._start()  # in _busy once started
        assert child.stdin is not None and child.stdout is not None
        deadline = time.monotonic() + self.timeout_s
        try:
            child.stdin.write(request)
            child.stdin.flush()
            line = self._read_line(child, deadline)
        except (OSError, RegexTimeout):
            self._drop(child)
            raise
        with self._lock:
            self._busy.discard(child)
            closed = self._closed
            if not closed:
                self._idle.append(child)
        if closed:  # closed during the search: its answer is moot, the child goes
            _kill(child)
            raise OSError("the guard is closed: the run is ending")
        return line

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
        """Kill every child (idle, searching, or being started); start none after."""
        with self._lock:
            self._closed = True
            children = [*self._idle, *self._busy]
            self._idle, self._busy = [], set()
        for child in children:
            _kill(child)


def _kill(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait()


def has_patterns(schema: Any) -> bool:
    """Whether a JSON schema holds regular expressions (``pattern``, ``patternProperties``)
    anywhere, ``$defs`` included; walked without recursion."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "pattern" in node or "patternProperties" in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


#: The longest a child may take to start (a Python; for a schema, importing jsonschema and
#: building the validator): not counted in any case's limit.
START_S = 60.0
#: How long past a search's limit a child that nobody killed ends itself.
SELF_EXIT_S = 5.0


class GuardedSchema(GuardedPattern):
    """A JSON schema's validation in a child process, at most ``timeout_s`` per instance
    (see the module's docstring): :meth:`validate` gives ``None`` for a valid instance,
    else the reason it is not."""

    def __init__(self, schema: Any, timeout_s: float) -> None:
        super().__init__("", 0, timeout_s)
        self._setup = (json.dumps({"path": sys.path, "schema": schema,
                                   "s": timeout_s + SELF_EXIT_S}) + "\n").encode("utf-8")

    def _start(self) -> subprocess.Popen[bytes]:
        return self._started(_SCHEMA_CHILD, self._setup, "the schema's process")

    def validate(self, instance: Any) -> str | None:
        reply = json.loads(self._ask((json.dumps(instance) + "\n").encode("utf-8")))
        if "error" in reply:
            raise ValueError(f"the schema could not be checked: {reply['error']}")
        return None if reply.get("ok") else str(reply.get("reason"))
