"""Whether this process is the ``oloproof`` command's own (set by ``cli.main.entry``).

Kept in a module of its own: ``python -m oloproof.cli.main`` runs the entry point as
``__main__``, a second copy of ``cli.main`` whose globals other modules do not see.
Only the command's own process tunes the garbage collector (cli/main.py), may end with
``os._exit`` (cli/run.py) and turns the ``os._exit`` of the code under test into exit 5
(:func:`guard_exit`); ``main()`` called in someone else's process (a test, a notebook)
leaves the collector and ``os._exit`` alone and returns.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported on --help's path (cli/main.py)
if TYPE_CHECKING:
    from typing import NoReturn

OURS = False

#: ``os._exit`` itself, kept before :func:`guard_exit` replaces it: the command's own ends
#: (:func:`exit_now`, a second signal) call this one.
real_exit = os._exit

#: The exit code of a process that the code under test ended with ``os._exit``: the run
#: did not finish, so it is incomplete (SPEC §5), whatever code it asked for.
EXIT_CUT_SHORT = 5


def exit_now(code: int) -> None:
    """End the process with ``code`` at once (``os._exit``), the standard streams flushed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    real_exit(code)


def guard_exit() -> None:
    """From now on, ``os._exit`` called in this process by code that is not ours (a system
    or a custom evaluator, at import or in a call) still ends it at once, but with exit code
    5 and one line on standard error saying so: ``os._exit(0)`` in one case used to end
    ``oloproof run`` with exit 0 and no output, which CI read as a pass. A child forked from
    this process (multiprocessing's fork, ``os.fork``) is another process id: its
    ``os._exit`` is the real one, with the code it asks for. (docs/refusals.md)"""
    pid = os.getpid()

    def cut_short(status: int) -> NoReturn:
        if os.getpid() != pid:
            real_exit(status)
        import operator

        code = operator.index(status)  # a TypeError, as os._exit gives, for a code not whole
        message = (
            f"oloproof: the code under test called os._exit({code}) in Oloproof's own"
            f" process: the run cannot finish, so the command ends with exit"
            f" {EXIT_CUT_SHORT} (incomplete), never a pass\n"
        )
        try:
            os.write(2, message.encode())
        except OSError:
            pass
        exit_now(EXIT_CUT_SHORT)
        raise AssertionError("unreachable")  # for the type checker: real_exit returned

    os._exit = cut_short


#: How long the end of a run waits for its other threads to end on their own.
LINGER_S = 0.5


def threads_left(wait_s: float = LINGER_S) -> bool:
    """Whether a thread other than this one is still running after waiting up to ``wait_s``
    for all of them to end.

    The run's own threads (the worker threads' timer, a closing pool's, the async host's) end
    just after the run does; on a loaded machine, a moment after. Only a thread still there
    then (a call stuck in user code) makes the command end with :func:`exit_now`, which skips
    the interpreter's teardown: the user's ``atexit`` handlers and finalizers with it.
    """
    if "threading" not in sys.modules:
        # Never imported, so no thread was started through it: importing it now would
        # only list this one (a run from the cache starts none).
        return False
    import threading
    import time

    end = time.monotonic() + wait_s
    me = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not me:
            thread.join(max(0.0, end - time.monotonic()))
    return threading.active_count() > 1
