"""Where a report goes: rich in a terminal, Oloproof's plain text everywhere else.

Every report is described once with :mod:`oloproof.render.doc`. In a terminal rich draws
it (colours, tables fitted to the width, the live view); anywhere else (a pipe, a file,
CI) :mod:`oloproof.render.plain` writes it, without importing rich, at its natural width
or, when ``COLUMNS`` is set, within that many columns (SPEC §10).

Everything a user or a model supplied (case ids, outputs, reasons, error messages, rule
ids, metric names) is made printable where it is put in a :class:`~oloproof.render.doc.Line`
(:func:`oloproof.render.doc.line`, or :func:`text` for rich's own ``Text``): rich never
reads it as markup, and an escape sequence in it cannot drive the terminal.
"""

from __future__ import annotations

import os

from oloproof.render import plain
from oloproof.render.doc import Blocks, Line, Table, line
from oloproof.render.out import unwritable, write_text
from oloproof.textsafe import inert_commands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

    from rich.console import Console
    from rich.text import Text

__all__ = ["columns", "is_terminal", "make_console", "print_to", "text", "write_text"]


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def columns() -> int | None:
    """``COLUMNS`` when it is a positive whole number: the width plain output keeps its
    tables within (a wider table is printed one block per row); ``None`` otherwise."""
    try:
        width = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return width if width > 0 else None


def text(value: object, style: str = "") -> Text:
    """``value`` as literal text for rich: never read as markup, nothing unprintable in it."""
    return line(value, style).__rich__()


def make_console(stream: IO[str]) -> Console:
    """rich's console for ``stream``, a terminal: no markup, emoji codes or highlighting
    read into what it prints."""
    from rich.console import Console

    return Console(file=stream, stderr=False, highlight=False, markup=False, emoji=False,
                   width=_zero_columns_width(stream))


def _zero_columns_width(stream: IO[str]) -> int | None:
    """rich reads ``COLUMNS`` itself, and took ``COLUMNS=0`` as a width of 0: the report,
    decisions and gate line included, was not printed at all. For that value, the
    terminal's own width (80 when it reports none); ``None`` (rich decides) otherwise."""
    value = os.environ.get("COLUMNS", "")
    if not (value.isdigit() and int(value) == 0):
        return None
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def _plain_text(stream: IO[str], item: Line | Table | Blocks) -> str:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return plain.render(item, width=columns(), encoding=encoding)


def print_to(
    stream: IO[str], item: Line | Table | Blocks | str, *, terminal: bool | None = None
) -> None:
    """Print ``item`` to ``stream``: through rich in a terminal, as plain text elsewhere.
    A ``str`` is literal text (made printable), never markup.

    A report that cannot be written (its reader went away, the disk is full, the
    descriptor was closed under us) is dropped, and the stream sent to ``/dev/null``
    so exit does not complain again: the command's exit code stays its own (a run's
    decision is stored before its report is printed; exit 1 would read as a FAIL)."""
    if isinstance(item, str):
        item = line(item)
    if is_terminal(stream) if terminal is None else terminal:
        try:
            # Not cropped: a line that may not wrap (a command to copy) is written whole, and
            # the terminal folds it, rather than cut at the width.
            make_console(stream).print(item, crop=False)
        except (OSError, ValueError) as exc:  # the terminal hung up under us
            unwritable(stream, exc)
        return
    # A CI log: no line of a report may act as a workflow command (textsafe.py).
    write_text(stream, inert_commands(_plain_text(stream, item)))
