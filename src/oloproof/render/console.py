"""Consoles: rich in a terminal, plain text at natural width elsewhere; and safe text.

rich is imported when a console is made, not with this module, so that a
command imports it only once it has something to show.

Everything a user or a model supplied (case ids, outputs, reasons, error
messages, rule ids, metric names) reaches rich through :func:`text`, never
as a plain ``str``: rich reads a ``str`` as markup, so an id like ``[/x]``
would crash the render and ``[bold red]`` would restyle it. :func:`text`
also escapes control characters and ANSI sequences (``oloproof.textsafe``),
so a model's output cannot drive the terminal it is shown on.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

from oloproof.textsafe import printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# Wide enough that no table is ever wrapped or truncated outside a terminal; the
# height only has to be given so that rich takes neither from the environment.
_PLAIN_WIDTH = 100_000
_PLAIN_HEIGHT = 10_000


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def text(value: object, style: str = "") -> Text:
    """``value`` as literal text for rich: never read as markup, nothing unprintable in it."""
    from rich.text import Text

    return Text(printable("" if value is None else str(value)), style=style)


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


def print_to(stream: IO[str], renderable: object, *, terminal: bool | None = None) -> None:
    """Print ``renderable`` to ``stream``; outside a terminal, without trailing spaces.

    A ``str`` is printed as literal text (through :func:`text`), never as markup.
    """
    if isinstance(renderable, str):
        renderable = text(renderable)
    console = make_console(stream, terminal=terminal)
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as capture:
        console.print(renderable)
    out = "\n".join(line.rstrip() for line in capture.get().splitlines())
    stream.write(out + "\n")
