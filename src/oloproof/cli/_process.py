"""Whether this process is the ``oloproof`` command's own (set by ``cli.main.entry``).

Kept in a module of its own: ``python -m oloproof.cli.main`` runs the entry point as
``__main__``, a second copy of ``cli.main`` whose globals other modules do not see.
Only the command's own process tunes the garbage collector (cli/main.py) and may end with
``os._exit`` (cli/run.py); ``main()`` called in someone else's process (a test, a
notebook) leaves the collector alone and returns.
"""

import os
import sys

OURS = False


def exit_now(code: int) -> None:
    """End the process with ``code`` at once (``os._exit``), the standard streams flushed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


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
