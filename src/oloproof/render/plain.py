"""Oloproof's plain text: every report written for a pipe, a file or a CI log.

Outside a terminal, what a command prints is written here from its
:mod:`oloproof.render.doc` description, without rich (rich is for the terminal: its
import is about four times the interpreter's own start-up). The format is ours, and
``tests/render/golden/`` holds it, file by file:

- A :class:`~oloproof.render.doc.Line` is printed as it is, one output line per line of
  its text, never wrapped (a log can be searched for it).
- A :class:`~oloproof.render.doc.Table` is its title on a line of its own, then the table
  drawn with box characters (a heavy rule under the header), one space of padding on each
  side of a cell, each column as wide as its widest cell (or its ``min_width``). A cell
  of several lines makes its row taller: the header's lines sit at the bottom of the
  header row, the other cells' at the top of their row. Nothing is cut or wrapped.
- With a ``width`` (``COLUMNS``, when it is set: :mod:`oloproof.render.console`), a table
  wider than that is printed one block per row instead, as a narrow terminal shows it
  (``render/fit.py``): the row's first cell, then ``  Header  value`` for each other cell
  that is not empty. Every id, interval and state stays whole on its line: a value longer
  than the line is left long rather than broken.
- No line ends in a space. Widths are counted in terminal cells: two for an East Asian
  wide or fullwidth character, none for a combining mark or a zero-width one, one for
  anything else; a tab is expanded to the next multiple of eight.
- On a stream whose encoding has no box-drawing characters the boxes are ASCII
  (``+``, ``-``, ``=``, ``|``); a character the encoding cannot write (``·`` to ASCII) is
  written as a ``\\uXXXX`` escape, measured as such, so the columns still line up.
"""

from __future__ import annotations

from collections.abc import Iterator

from oloproof._records import dataclass
from oloproof.render.doc import Blocks, Line, Table
from oloproof.render.out import ESCAPE, register, writes_all

__all__ = ["cell_width", "render"]

# Characters of our own tables that are one cell wide: counted without unicodedata.
_ONE_CELL = frozenset("·…–—−×≤≥→←↑↓✓✗•″′°±┏━┳┓┡╇┩└─┴┘┃│")


def cell_width(text: str) -> int:
    """The cells ``text`` (one line, tabs expanded) takes in a terminal."""
    if text.isascii():
        return len(text)
    total = 0
    for char in text:
        if char.isascii() or char in _ONE_CELL:
            total += 1
        else:
            total += _wide(char)
    return total


def _wide(char: str) -> int:
    """The cells of a character outside ASCII and :data:`_ONE_CELL`."""
    import unicodedata  # only for such characters

    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _lines(text: str, encoding: str | None = None) -> list[tuple[str, int]]:
    """Each line of ``text`` with its width in cells, trailing spaces dropped; with an
    ``encoding`` (one that cannot write every character), what it cannot write is
    escaped first, so the escape is what is measured (render/out.py)."""
    if encoding is not None and not text.isascii():
        text = text.encode(encoding, ESCAPE).decode(encoding)
    out = []
    for part in text.split("\n"):
        part = part.expandtabs(8).rstrip()
        out.append((part, cell_width(part)))
    return out


@dataclass(frozen=True, slots=True)
class _Box:
    """(left, horizontal, cross, right) of each rule; the bars of the header, other rows."""

    top: tuple[str, str, str, str]
    head: tuple[str, str, str, str]
    bottom: tuple[str, str, str, str]
    head_bar: str
    bar: str


_UNICODE_BOX = _Box(("┏", "━", "┳", "┓"), ("┡", "━", "╇", "┩"), ("└", "─", "┴", "┘"), "┃", "│")
_ASCII_BOX = _Box(("+", "-", "+", "+"), ("+", "=", "+", "+"), ("+", "-", "+", "+"), "|", "|")
_BOX_CHARS = "┏━┳┓┡╇┩└─┴┘┃│"


def _rule(chars: tuple[str, str, str, str], widths: list[int]) -> str:
    left, horizontal, cross, right = chars
    return left + cross.join(horizontal * width for width in widths) + right


def _natural(table: Table, box: _Box, enc: str | None) -> Iterator[str]:
    header = [_lines(column.header, enc) for column in table.columns]
    rows = [[_lines(cell.plain, enc) for cell in row] for row in table.rows]
    widths = [
        max(max(cells for cell in [header[i], *(row[i] for row in rows)] for _, cells in cell),
            column.min_width or 0) + 2
        for i, column in enumerate(table.columns)
    ]
    yield _rule(box.top, widths)
    for number, row in enumerate([header, *rows]):
        height = max(len(cell) for cell in row)
        drawn = []
        for cell, width in zip(row, widths, strict=True):
            blank = [("", 0)] * (height - len(cell))
            lines = blank + cell if number == 0 else cell + blank
            drawn.append([f" {text}{' ' * (width - 2 - cells)} " for text, cells in lines])
        bar = box.head_bar if number == 0 else box.bar
        for at in range(height):
            yield bar + bar.join(cell[at] for cell in drawn) + bar
        if number == 0:
            yield _rule(box.head, widths)
    yield _rule(box.bottom, widths)


def _stacked(table: Table, enc: str | None) -> Iterator[str]:
    """One block per row: its first cell, then ``  Header  value`` for the others."""
    headers = [" ".join(text for text, _ in _lines(column.header, enc))
               for column in table.columns[1:]]
    label = max((cell_width(h) for h in headers), default=0)
    for row in table.rows:
        yield from (text for text, _ in _lines(row[0].plain, enc)) if row else ()
        for header, cell in zip(headers, row[1:], strict=True):
            values = _lines(cell.plain, enc)
            if not any(text for text, _ in values):
                continue
            pad = " " * (label - cell_width(header))
            yield f"  {header}{pad}  {values[0][0]}".rstrip()
            for text, _ in values[1:]:
                yield (" " * (label + 4) + text).rstrip()


def _table(table: Table, width: int | None, box: _Box, enc: str | None) -> Iterator[str]:
    if table.title.plain:
        yield from (text for text, _ in _lines(table.title.plain, enc))
    if not table.columns:
        return
    natural = list(_natural(table, box, enc))
    if width is not None and cell_width(natural[0]) > width:
        yield from _stacked(table, enc)
    else:
        yield from natural


def _blocks(
    item: Line | Table | Blocks, width: int | None, box: _Box, enc: str | None
) -> Iterator[str]:
    if isinstance(item, Blocks):
        for part in item.items:
            yield from _blocks(part, width, box, enc)
    elif isinstance(item, Table):
        yield from _table(item, width, box, enc)
    else:
        yield from (text for text, _ in _lines(item.plain, enc))


def render(item: Line | Table | Blocks, *, width: int | None = None, encoding: str = "utf-8") -> str:
    """``item`` as plain text, every line ending in a newline. ``width``: the columns to
    keep tables within (None: natural width); ``encoding``: the stream's (box characters
    only where it can write them; any other character it cannot write is escaped)."""
    try:
        _BOX_CHARS.encode(encoding)
        box = _UNICODE_BOX
    except (UnicodeEncodeError, LookupError):
        box = _ASCII_BOX
    enc = None if writes_all(encoding) else encoding
    if enc is not None:
        register()
    return "".join(text + "\n" for text in _blocks(item, width, box, enc))
