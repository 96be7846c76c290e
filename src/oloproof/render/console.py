"""Consoles: rich in a terminal, plain text at natural width elsewhere; and safe text.

rich is imported when a console is made, not with this module, so that a
command imports it only once it has something to show. What is described with
``render/doc.py`` (the run report, the tables of ``runs``) is printed outside a
terminal by ``render/plain.py`` without importing rich at all, in the bytes rich's
plain console would print; only what that writer cannot vouch for goes through rich.

Everything a user or a model supplied (case ids, outputs, reasons, error
messages, rule ids, metric names) reaches rich through :func:`text` (or
:func:`oloproof.render.doc.line`, which it calls), never as a plain ``str``: rich reads a ``str`` as markup, so an id like ``[/x]``
would crash the render and ``[bold red]`` would restyle it. :func:`text`
also escapes control characters and ANSI sequences (``oloproof.textsafe``),
so a model's output cannot drive the terminal it is shown on.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from oloproof.render import plain
from oloproof.render.doc import Blocks, Line, Table, line

if TYPE_CHECKING:
    from typing import IO

    from rich.console import Console
    from rich.text import Text

# Wide enough that no table is ever wrapped or truncated outside a terminal; the
# height only has to be given so that rich takes neither from the environment.
_PLAIN_WIDTH = plain.WIDTH
_PLAIN_HEIGHT = 10_000


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def text(value: object, style: str = "") -> Text:
    """``value`` as literal text for rich: never read as markup, nothing unprintable in it."""
    return line(value, style).__rich__()


def make_console(stream: IO[str], *, terminal: bool | None = None) -> Console:
    """A console for ``stream``: styled when it is a terminal, plain otherwise.

    Outside a terminal no cursor or colour codes are written and tables keep
    their natural width, so a log can be searched for a row. The width and
    height are given explicitly, so ``COLUMNS``/``LINES`` (set by many CI
    shells) cannot narrow the output, and ``force_terminal``/``no_color``
    overrule ``FORCE_COLOR``/``TTY_COMPATIBLE``.
    """
    from rich.console import Console

    tty = is_terminal(stream) if terminal is None else terminal
    if tty:
        return Console(file=stream, stderr=False, highlight=False, markup=False, emoji=False)
    return Console(
        file=stream,
        force_terminal=False,
        no_color=True,
        color_system=None,
        highlight=False,
        markup=False,
        width=_PLAIN_WIDTH,
        height=_PLAIN_HEIGHT,
        soft_wrap=False,
        emoji=False,
        legacy_windows=False,
        force_jupyter=False,
        force_interactive=False,
    )


def _plain(stream: IO[str], renderable: object, terminal: bool | None) -> str | None:
    """What the plain console of :func:`make_console` would print for ``renderable``,
    written without rich; ``None`` in a terminal, or when rich has to do it."""
    if not isinstance(renderable, Line | Table | Blocks):
        return None
    if is_terminal(stream) if terminal is None else terminal:
        return None
    # The encoding rich's Console takes from the stream (it draws ASCII boxes unless UTF).
    return plain.render(renderable, encoding=(getattr(stream, "encoding", "utf-8") or "utf-8"))


def print_to(stream: IO[str], renderable: object, *, terminal: bool | None = None) -> None:
    """Print ``renderable`` to ``stream``; outside a terminal, without trailing spaces.

    A ``str`` is printed as literal text (through :func:`oloproof.render.doc.line`),
    never as markup.
    """
    if isinstance(renderable, str):
        renderable = line(renderable)
    captured = _plain(stream, renderable, terminal)
    if captured is None:
        console = make_console(stream, terminal=terminal)
        if console.is_terminal:
            console.print(renderable)
            return
        with console.capture() as capture:
            console.print(renderable)
        captured = capture.get()
    out = "\n".join(each.rstrip() for each in captured.splitlines())
    stream.write(out + "\n")


def console_print(stream: IO[str], renderable: object) -> None:
    """``make_console(stream).print(renderable)``, trailing spaces and all; outside a
    terminal without rich when :mod:`oloproof.render.plain` can write it.

    Like rich's console it flushes the stream, and a reader that went away ends the
    command as rich's ``Console.on_broken_pipe`` does (exit code 1, standard output
    sent to ``/dev/null`` so that exit does not complain again).
    """
    out = _plain(stream, renderable, None)
    if out is None:
        make_console(stream).print(renderable)
        return
    try:
        stream.write(out)
        stream.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(1) from None
