"""Whether an event loop runs here, without importing asyncio.

A run whose every result is in the cache never starts an event loop, and asyncio (with
ssl, socket and concurrent.futures behind it) is a fifth of such a run's start-up. A
process that has not imported asyncio runs no loop, so asking needs no import.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio

__all__ = ["running_loop"]


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread, or ``None``."""
    module = sys.modules.get("asyncio")
    if module is None:
        return None
    try:
        loop: asyncio.AbstractEventLoop = module.get_running_loop()
    except RuntimeError:
        return None
    return loop
