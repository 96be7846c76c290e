"""Tables and lines as plain text, byte for byte what rich's plain console prints.

Outside a terminal ``render/console.py`` used to print every report through a rich
console of width 100,000 without colour, so importing rich (about four times the
interpreter's own start-up) was a third of a short command's time. :func:`render`
writes the same characters from a :mod:`oloproof.render.doc` description, importing
nothing of rich: the tables at their natural width in rich's default box
(``HEAVY_HEAD``), one space of padding on each side of a cell, a multi-line cell
growing its row (the header aligned to the bottom, the others to the top), each title
above its table padded with spaces to the table's width, and every line of text as
it is. Widths are counted in terminal cells, as rich counts them (a CJK character
takes two, a combining mark none).

It handles only what it can vouch for, and answers ``None`` for anything else, so that
the caller prints through rich as before: a character outside :data:`_WIDTHS` (emoji,
whose width depends on the Unicode version rich is told to use; tabs, which rich measures
and draws at different widths; the line and paragraph separators, which split a line
when it is stripped), a line wider than rich's plain console (it would wrap there), a
title wider than its table (rich wraps it) and an output stream whose encoding is not
UTF (rich draws ASCII boxes then). ``tests/trust/test_render_plain.py`` checks both
writers against each other on real reports and on hostile text.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator

from oloproof.render.doc import Blocks, Line, Table

__all__ = ["WIDTH", "cell_width", "render"]

# The width of render.console's plain console: a line wider than this would wrap there.
WIDTH = 100_000

# (first, last, cells) for the characters whose width rich gives the same under every
# Unicode version it knows (4.1 to 17, chosen by its UNICODE_VERSION variable), and in
# rich 13.7, the oldest release we accept: tests/trust/test_render_plain.py checks each
# against rich. Assigned characters only: a later Unicode version may give an unassigned
# one any width. ASCII is counted apart (a printable ASCII character is one cell).
_WIDTHS: tuple[tuple[int, int, int], ...] = (
    (0x00A0, 0x00AC, 1),  # Latin-1 (not the soft hyphen: rich 13.7 gave it 0, later 1)
    (0x00AE, 0x02FF, 1),  # Latin-1, Latin Extended-A and -B, IPA, spacing modifiers
    (0x0300, 0x036F, 0),  # combining diacritical marks
    (0x0370, 0x0377, 1),  # Greek and Coptic
    (0x037A, 0x037F, 1),
    (0x0384, 0x038A, 1),
    (0x038C, 0x038C, 1),
    (0x038E, 0x03A1, 1),
    (0x03A3, 0x0482, 1),  # Greek, Cyrillic
    (0x0483, 0x0486, 0),  # combining Cyrillic marks
    (0x0488, 0x0489, 0),
    (0x048A, 0x052F, 1),  # Cyrillic, Cyrillic Supplement
    (0x2010, 0x2027, 1),  # dashes, quotation marks, bullets, the ellipsis
    (0x2030, 0x205E, 1),  # per mille, primes, other punctuation
    (0x2070, 0x2071, 1),  # superscripts and subscripts
    (0x2074, 0x208E, 1),
    (0x2090, 0x209C, 1),
    (0x20A0, 0x20BF, 1),  # currency symbols
    (0x2100, 0x218B, 1),  # letterlike symbols, number forms
    (0x2190, 0x22FF, 1),  # arrows, mathematical operators
    (0x2500, 0x25FC, 1),  # box drawing, block elements, geometric shapes
    (0x2710, 0x2727, 1),  # dingbats: check marks, crosses, stars (not the emoji ones)
    (0x2800, 0x28FF, 1),  # Braille
    (0x3000, 0x3029, 2),  # CJK symbols and punctuation
    (0x302A, 0x302F, 0),  # their combining tone marks
    (0x3030, 0x303E, 2),
    (0x3041, 0x3096, 2),  # Hiragana
    (0x3099, 0x309A, 0),  # combining (semi-)voiced sound marks
    (0x309B, 0x30FF, 2),  # Katakana
    (0x4E00, 0x9FBB, 2),  # CJK unified ideographs (those of Unicode 4.1)
    (0xAC00, 0xD7A3, 2),  # Hangul syllables
    (0xFF01, 0xFF60, 2),  # fullwidth forms
    (0xFF61, 0xFF9F, 1),  # halfwidth forms
    (0xFFE0, 0xFFE6, 2),  # fullwidth signs
)
_FIRSTS = [first for first, _, _ in _WIDTHS]


def _char_width(char: str) -> int | None:
    code = ord(char)
    at = bisect_right(_FIRSTS, code) - 1
    if at >= 0:
        _, last, cells = _WIDTHS[at]
        if code <= last:
            return cells
    return None


def cell_width(text: str) -> int | None:
    """The cells ``text`` (one line) takes in a terminal as rich counts them, or ``None``
    when a character of it is not one :func:`render` vouches for (a control character,
    a tab, a newline, an emoji, a script not in :data:`_WIDTHS`)."""
    if text.isascii():
        return len(text) if text.isprintable() else None
    total = 0
    for char in text:
        if char.isascii():
            if not char.isprintable():
                return None
            total += 1
            continue
        cells = _char_width(char)
        if cells is None:
            return None
        total += cells
    return total


class _Unsure(Exception):
    """Something :func:`render` does not draw as rich would be sure to."""


def _lines(text: str) -> list[tuple[str, int]]:
    """Each line of ``text`` (rich splits a text at every newline, an empty last line
    included) with its width in cells."""
    out = []
    for part in text.split("\n"):
        cells = cell_width(part)
        if cells is None or cells > WIDTH or len(part) > WIDTH:
            raise _Unsure  # rich would wrap it, or crop spaces at its end (_check_end)
        out.append((part, cells))
    return out


_TRAILING_SPACE = re.compile(r"\s+$")  # rich.text's _re_whitespace


def _check_end(text: str, width: int) -> None:
    """rich's ``Text.rstrip_end(width)``: a line of more *characters* than ``width`` (a
    combining mark takes no cell) loses as many of its trailing whitespace characters,
    then is padded with spaces. rich 13 does it to every line of a cell or a title, rich
    14 and later only where the line may wrap: such a line is left to rich."""
    if len(text) > width and _TRAILING_SPACE.search(text):
        raise _Unsure


# rich's box.HEAVY_HEAD, the box of a rich Table by default: (left, horizontal, cross, right).
_TOP = ("┏", "━", "┳", "┓")
_HEAD_ROW = ("┡", "━", "╇", "┩")  # under the header
_BOTTOM = ("└", "─", "┴", "┘")
_HEAD_BAR, _ROW_BAR = "┃", "│"  # the edges and dividers of the header row, of the others


def _rule(chars: tuple[str, str, str, str], widths: list[int]) -> str:
    left, horizontal, cross, right = chars
    return left + cross.join(horizontal * width for width in widths) + right


def _table(table: Table) -> Iterator[str]:
    header = [_lines(column.header) for column in table.columns]
    rows = [[_lines(cell.plain) for cell in row] for row in table.rows]
    widths = []
    for index, column in enumerate(table.columns):
        widest = max(cells for cell in [header[index], *(row[index] for row in rows)]
                     for _, cells in cell)
        widths.append(max(widest, column.min_width or 0) + 2)
    edges = len(widths) + 1
    if not widths or sum(widths) + edges > WIDTH:
        raise _Unsure  # rich would draw no table, or squeeze this one
    table_width = sum(widths) + edges
    for text, cells in _lines(table.title.plain) if table.title.plain else []:
        _check_end(text, table_width)
        if cells > table_width:
            raise _Unsure  # rich would wrap the title
        yield text + " " * (table_width - cells)
    yield _rule(_TOP, widths)
    for number, cells_of_row in enumerate([header, *rows]):
        # rich draws nothing of a cell with no room inside its padding (every cell of its
        # column is empty): blank lines only, as many as the row's other cells need.
        cells_of_row = [cell if width > 2 else [] for cell, width in zip(cells_of_row, widths)]
        for cell, width in zip(cells_of_row, widths, strict=True):
            for text, _ in cell:
                _check_end(text, width - 2)
        height = max(1, *(len(cell) for cell in cells_of_row))
        drawn = []
        for cell, width in zip(cells_of_row, widths, strict=True):
            blank = [("", 0)] * (height - len(cell))
            # A header cell is aligned to the bottom of its row, the others to the top.
            lines = blank + cell if number == 0 else cell + blank
            drawn.append([f" {text}{' ' * (width - 2 - cells)} " for text, cells in lines])
        bar = _HEAD_BAR if number == 0 else _ROW_BAR
        for at in range(height):
            yield bar + bar.join(cell[at] for cell in drawn) + bar
        if number == 0:
            yield _rule(_HEAD_ROW, widths)
    yield _rule(_BOTTOM, widths)


def _blocks(item: Line | Table | Blocks) -> Iterator[str]:
    if isinstance(item, Blocks):
        for part in item.items:
            yield from _blocks(part)
    elif isinstance(item, Table):
        yield from _table(item)
    else:
        for text, _ in _lines(item.plain):
            yield text


def render(item: Line | Table | Blocks, *, encoding: str = "utf-8") -> str | None:
    """What rich's plain console prints for ``item`` on a stream of ``encoding`` (every
    line ending in a newline, trailing spaces kept), or ``None`` when this writer cannot
    vouch for the bytes: then print through rich."""
    if not encoding.lower().startswith("utf"):
        return None
    try:
        return "".join(text + "\n" for text in _blocks(item))
    except _Unsure:
        return None
