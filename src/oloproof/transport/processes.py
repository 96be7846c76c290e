"""Worker processes for user code that burns CPU (``concurrency.evaluator_processes``).

A custom evaluator that runs generated code, parses big documents or scores with a model
in pure Python holds the GIL: in worker threads, two such calls never run at once, and
while they run the event loop that sends the system's HTTP calls waits for the GIL too.
:class:`ProcessPool` runs such calls in child processes instead, one call per child at a
time, and the parent's threads only wait on a pipe.

How a child is made, and why (docs/scaling.md has the measurements):

- **spawned, never forked**: ``subprocess.Popen`` of this interpreter, which imports this
  module and then the user's module. The run has threads (the event loop's helpers, the
  worker threads, a judge's HTTP pool) and forking a threaded process copies locks held
  by threads that do not exist in the child. We did not use ``multiprocessing``'s spawn
  or forkserver either: both import the script that started the run (``__main__``) again
  in the child (or in the fork server), and a notebook or a script without an
  ``if __name__ == "__main__"`` guard would start its run again there.
- **in a session of its own**, so that Ctrl-C in a terminal (sent to the whole foreground
  process group) reaches only the run, which then stops its children itself; and so that
  a child that times out is killed with everything it started (``killpg``).
- **bound to its parent**: a thread in the child ends it when the parent is gone (a
  SIGKILLed run leaves no child behind burning a core).

A call that does not answer within its time limit is killed with its process group, and
the next call starts a new child; a child that dies (``os._exit``, a segfault, the OOM
killer) fails the call it was running with :class:`ProcessEnded`, and is replaced the
same way. Messages are pickles over a socket pair (``multiprocessing.connection``'s
framing); a reply that cannot be pickled is the handler's to report (evaluators/custom.py).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess
    from multiprocessing.connection import Connection
    from typing import Any

__all__ = ["ProcessEnded", "ProcessPool", "ReplyError", "serve"]

#: How long a child may take to start (the interpreter, this module, the user's module):
#: not counted in a call's own time limit, which starts when the call is sent.
START_TIMEOUT_S = 60.0

_READY = "ready"
_FAILED = "failed"


class ProcessEnded(Exception):
    """The child running a call ended before it answered (or could not be started)."""


class ReplyError(Exception):
    """The child could not give a reply: the handler failed, or its reply cannot be
    pickled (the message says which)."""


class _Unsendable:
    """Sent in place of a reply the child could not give: what went wrong, in words."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Unsendable, (self.text,))


class _Child:
    __slots__ = ("_closing", "_reaping", "conn", "proc")

    def __init__(self, proc: subprocess.Popen[bytes], conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self._closing = threading.Lock()
        self._reaping = threading.Lock()

    def stop(self) -> None:
        """Kill the child and whatever it started (its own session), and reap it; its
        pipe stays open for the thread that is using it (which sees the end of it).

        A child already reaped is not signalled: its PID is free once reaped, and may
        already lead another process's group (close() reaps a busy child, and the thread
        whose call that ended used to kill its group again). Checked and signalled under
        the lock every reaping of it here holds."""
        with self._reaping:
            if self.proc.returncode is not None:
                return
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    self.proc.kill()
                except ProcessLookupError:
                    pass
            self.proc.wait()

    def poll(self) -> int | None:
        """The child's exit code once it has ended (it is then reaped), else ``None``."""
        with self._reaping:
            return self.proc.poll()

    def kill(self) -> None:
        """:meth:`stop`, and close the pipe. Safe from two threads at once: a pipe
        closed twice at the same moment once closed a descriptor number already given
        to something else (EBADF in CI)."""
        self.stop()
        self._close_pipe()

    def _close_pipe(self) -> None:
        with self._closing:
            self.conn.close()  # a closed Connection's close() does nothing

    def ended(self) -> str:
        """How the child ended, in words (it has ended, or is killed now); its pipe is
        closed."""
        code = self.poll()
        if code is None:
            self.stop()
            code = self.proc.returncode
        self._close_pipe()
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name}"
        return f"exit code {code}"


class ProcessPool:
    """At most ``size`` child processes, each set up once by ``setup`` and then answering
    one call at a time. :meth:`call` is blocking and thread-safe: the engine calls it from
    its worker threads, at most ``size`` at once (transport.threads.Workers' limit).

    ``setup`` is ``(module, function, args)``: the child imports ``module`` and calls
    ``function(*args)``, which returns the handler every call's message is given to (its
    return value is the reply). Children start on the first call (a run whose results are
    all cached starts none), or in the background once :meth:`warm` is called (the engine
    does when it starts calling the system, so that starting them overlaps the first
    calls); a child whose call timed out or who died is replaced on the next call.
    """

    def __init__(self, size: int, setup: tuple[str, str, tuple[Any, ...]],
                 *, name: str = "oloproof-process") -> None:
        self.size = max(1, size)
        self._setup = setup
        self._name = name
        self._lock = threading.Lock()
        self._idle: list[_Child] = []
        self._all: set[_Child] = set()
        self._closed = False
        #: Children :meth:`warm` is starting; a call waits for one rather than start more.
        self._starting = 0
        self._ready = threading.Condition(self._lock)
        #: PIDs of every child started, in order (tests and benchmarks read them).
        self.started: list[int] = []

    # -- the parent's side ------------------------------------------------------------
    def call(self, message: Any, timeout_s: float) -> Any:
        """Send ``message`` to an idle child and return its reply; :class:`TimeoutError`
        when it takes longer than ``timeout_s`` (the child is killed), :class:`ProcessEnded`
        when the child dies first."""
        child = self._checkout()
        conn = child.conn
        timed_out = False
        try:
            conn.send(message)
            deadline = time.monotonic() + timeout_s
            while not conn.poll(max(0.0, min(1.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
            else:
                reply = conn.recv()
        except (EOFError, OSError) as exc:
            self._drop(child)
            if self._closed:
                child.kill()
                raise ProcessEnded("the run stopped its evaluator processes") from None
            raise ProcessEnded(f"its process ended before it answered ({child.ended()})") from exc
        if timed_out:
            self._drop(child)
            child.kill()
            raise TimeoutError(f"no answer within {timeout_s:g}s")
        self._checkin(child)
        if isinstance(reply, _Unsendable):
            raise ReplyError(reply.text)
        return reply

    def warm(self) -> None:
        """Start the children still missing now, each from a thread of its own, without
        waiting for them: they are ready (or being started) when the first calls come."""
        with self._lock:
            missing = 0 if self._closed else self.size - len(self._all) - self._starting
            self._starting += max(0, missing)
        for _ in range(missing):
            threading.Thread(target=self._warm_one, name=f"{self._name}-start",
                             daemon=True).start()

    def _warm_one(self) -> None:
        child: _Child | None = None
        try:
            child = self._start()
        except Exception:  # noqa: BLE001, S110 - a call starts its own, and says why it could not
            pass
        finally:
            # Whatever ended the start: a call waits for this thread's child while it is
            # counted (_checkout), and a start that died uncounted kept every call waiting.
            with self._lock:
                self._starting -= 1
                if child is not None and not self._closed:
                    self._idle.append(child)
                    child = None
                self._ready.notify_all()
        if child is not None:
            child.kill()

    def _checkout(self) -> _Child:
        with self._lock:
            while True:
                if self._closed:
                    raise ProcessEnded("the run stopped its evaluator processes")
                while self._idle:
                    child = self._idle.pop()
                    if child.poll() is None:
                        return child
                    self._all.discard(child)
                    child.kill()  # reaped already: its pipe is closed
                if not self._starting:
                    break
                self._ready.wait(1.0)  # a child warm() started is on its way
        return self._start()

    def _checkin(self, child: _Child) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(child)
                self._ready.notify()
                return
        child.kill()

    def _drop(self, child: _Child) -> None:
        with self._lock:
            self._all.discard(child)

    def _start(self) -> _Child:
        import socket
        import subprocess
        from multiprocessing.connection import Connection

        try:
            ours, theirs = socket.socketpair()
        except OSError as exc:  # too many open files
            raise ProcessEnded(f"its process could not be started ({exc})") from None
        # Found at the end of the child's path if nothing earlier provides it (a run from a
        # source checkout); an installed oloproof is found first, as in the parent.
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
        code = (
            f"import sys; sys.path.append({package_parent!r});"
            " from oloproof.transport.processes import serve;"
            f" serve({theirs.fileno()}, {os.getpid()})"
        )
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            ours.close()
            raise ProcessEnded(f"its process could not be started ({exc})") from None
        finally:
            theirs.close()
        conn = Connection(ours.detach())
        child = _Child(proc, conn)
        with self._lock:
            self._all.add(child)
            self.started.append(proc.pid)
            closed = self._closed
        if closed:
            child.kill()
            raise ProcessEnded("the run stopped its evaluator processes")
        try:
            conn.send((self._setup, list(sys.path)))
            if not conn.poll(START_TIMEOUT_S):
                self._drop(child)
                child.kill()
                raise ProcessEnded(f"its process did not start within {START_TIMEOUT_S:g}s")
            status, detail = conn.recv()
        except (EOFError, OSError):
            self._drop(child)
            raise ProcessEnded(f"its process ended while starting ({child.ended()})") from None
        if status != _READY:
            self._drop(child)
            child.kill()
            raise ProcessEnded(f"its process could not be set up: {detail}")
        return child

    def close(self) -> None:
        """Kill every child (idle or in a call) and reap them; calls in flight fail with
        :class:`ProcessEnded`. Never waits for a call."""
        with self._lock:
            self._closed = True
            children, idle = list(self._all), set(self._idle)
            self._all, self._idle = set(), []
            self._ready.notify_all()
        for child in children:
            # An idle child is the pool's: closed here. Any other is in the hands of a
            # thread (a call, a start) reading its pipe: it is killed and reaped here,
            # and that thread, woken by the end of the pipe, closes it.
            if child in idle:
                child.kill()
            else:
                child.stop()


# -- the child's side -----------------------------------------------------------------
def serve(fd: int, parent: int) -> None:
    """The child's main loop: set up, then answer every message until the parent goes."""
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run stops its children itself
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    conn = Connection(fd)
    try:
        (module_name, function, args), path = conn.recv()
    except EOFError:
        return
    sys.path[:] = path  # what the parent imported the user's code with
    try:
        import importlib

        handler = getattr(importlib.import_module(module_name), function)(*args)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the call
        conn.send((_FAILED, f"{type(exc).__name__}: {exc}"))
        return
    conn.send((_READY, None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        except Exception as exc:  # noqa: BLE001 - a message this child cannot unpickle
            reply: Any = _Unsendable(f"the call could not be read: {type(exc).__name__}: {exc}")
        else:
            try:
                reply = handler(message)
            except BaseException as exc:  # noqa: BLE001 - the handler's own failure
                reply = _Unsendable(f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return
        except Exception as exc:  # noqa: BLE001 - pickling refused it: nothing was sent
            conn.send(_Unsendable(f"{type(exc).__name__}: {exc}"))


def _watch_parent(parent: int) -> None:
    """End this process once the parent is gone (it was killed; nothing will ask again)."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)
