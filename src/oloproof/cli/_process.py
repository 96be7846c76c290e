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
