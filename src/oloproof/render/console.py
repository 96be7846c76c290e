"""Consoles: rich in a terminal, plain text at natural width elsewhere.

rich is imported when a console is made, not with this module, so that a
command imports it only once it has something to show.
"""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

# Wide enough that no table is ever wrapped or truncated outside a terminal.
_PLAIN_WIDTH = 100_000


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def make_console(stream: IO[str], *, terminal: bool | None = None) -> Console:
    """A console for ``stream``: styled when it is a terminal, plain otherwise.

    Outside a terminal no cursor or colour codes are written and tables keep
    their natural width, so a log can be searched for a row.
    """
    from rich.console import Console

    tty = is_terminal(stream) if terminal is None else terminal
    if tty:
        return Console(file=stream, stderr=False, highlight=False)
    return Console(
        file=stream,
        force_terminal=False,
        no_color=True,
        color_system=None,
        highlight=False,
        width=_PLAIN_WIDTH,
        soft_wrap=False,
        emoji=False,
        legacy_windows=False,
        force_jupyter=False,
        force_interactive=False,
        _environ={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
    )


def print_to(stream: IO[str], renderable: object, *, terminal: bool | None = None) -> None:
    """Print ``renderable`` to ``stream``; outside a terminal, without trailing spaces."""
    console = make_console(stream, terminal=terminal)
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as capture:
        console.print(renderable)
    text = "\n".join(line.rstrip() for line in capture.get().splitlines())
    stream.write(text + "\n")
