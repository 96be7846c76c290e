"""What a command prints, as plain data: lines of styled text, tables, and groups of both.

Each table is defined once, as one of these (``render/tables.py``, ``cli/runs.py``), and
drawn one of two ways:

- in a terminal, by rich: every object here is a rich renderable through rich's
  ``__rich__`` protocol, which turns it into the ``Text``, the fitted ``Table``
  (``render/fit.py``) or the ``Group`` it stood for before, so colours, the stacked
  layout of a narrow terminal and the live view are unchanged;
- anywhere else (a pipe, a file, CI), by ``render/plain.py``, in Oloproof's own plain
  format, importing nothing of rich (``render/console.py`` picks).

Every piece of text is made printable (``oloproof.textsafe.printable``) when it is put
in a :class:`Line`, as ``render.console.text`` does for rich: a case id, a reason or an
error cannot restyle the output or drive the terminal it is shown on, whichever way it
is drawn. This module imports nothing of rich.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from oloproof._records import dataclass, field
from oloproof.textsafe import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    from rich.console import Group
    from rich.text import Text

    from oloproof.render.fit import Fitted

__all__ = ["Blocks", "Column", "Line", "Table", "assemble", "line", "system_label"]


@dataclass(frozen=True, slots=True)
class Line:
    """Text of one or more pieces, each with a rich style (``""``: none); it may hold
    newlines. Outside a terminal the styles are not shown. ``whole``: a terminal never
    wraps it (a command to copy, such as a suggested ``oloproof plan``), even when it is
    wider than the terminal."""

    spans: tuple[tuple[str, str], ...]
    whole: bool = False

    @property
    def plain(self) -> str:
        return "".join(piece for piece, _ in self.spans)

    def __rich__(self) -> Text:
        from rich.text import Text

        if len(self.spans) == 1:
            piece, style = self.spans[0]
            made = Text(piece, style=style)
        else:
            made = Text.assemble(*(Text(piece, style=style) for piece, style in self.spans))
        if self.whole:
            made.no_wrap, made.overflow = True, "ignore"
        return made


def line(value: object, style: str = "", *, whole: bool = False) -> Line:
    """``value`` as literal text: never read as markup, nothing unprintable in it."""
    return Line(((printable("" if value is None else str(value)), style),), whole)


def system_label(system: Mapping[str, Any]) -> str:
    """A run's system as every command names it: ``support-bot keywords-v2``, and for a
    model system (which has no version) of a matrix, ``support-triage [fewshot/fake-large]``."""
    label = f"{system.get('name') or ''} {system.get('version') or ''}".strip()
    if system.get("variant"):
        label += f" [{system['variant']}]"  # a variant of a matrix (run --matrix)
    return label


def assemble(*parts: Line) -> Line:
    """One line of the pieces of ``parts``, each keeping its style."""
    return Line(tuple(span for part in parts for span in part.spans))


@dataclass(frozen=True, slots=True)
class Column:
    """A column as rich's ``Table.add_column`` takes it; only what our tables use.

    ``no_wrap``, ``min_width`` and ``overflow`` (rich's default, ``"ellipsis"``, unless
    given) matter only where a table is narrower than its natural width: in a narrow
    terminal. Outside a terminal a table is always drawn at its natural width.
    """

    header: str  # our own words: unlike a Line's text, not made printable
    no_wrap: bool = False
    min_width: int | None = None
    overflow: Literal["fold", "crop", "ellipsis", "ignore"] = "ellipsis"


@dataclass(slots=True)
class Table:
    """A table: its title above it at the left (none when empty), a header row, one
    :class:`Line` a cell. rich draws it in a terminal, ``render/plain.py`` elsewhere."""

    title: Line
    columns: tuple[Column, ...]
    rows: list[tuple[Line, ...]] = field(default_factory=list)

    def add_row(self, *cells: Line) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(cells)

    def __rich__(self) -> Fitted:
        """The rich table, wrapped by :func:`oloproof.render.fit.fit`."""
        from rich.table import Table as RichTable

        from oloproof.render.fit import fit

        title = self.title.__rich__() if self.title.plain else None
        table = RichTable(title=title, title_justify="left")
        for column in self.columns:
            table.add_column(
                column.header, no_wrap=column.no_wrap, min_width=column.min_width,
                overflow=column.overflow,
            )
        for row in self.rows:
            table.add_row(*(cell.__rich__() for cell in row))
        return fit(table)


@dataclass(frozen=True, slots=True)
class Blocks:
    """Lines and tables printed one after the other (rich's ``Group``)."""

    items: Sequence[Line | Table]

    def __rich__(self) -> Group:
        from rich.console import Group

        return Group(*(item.__rich__() for item in self.items))
