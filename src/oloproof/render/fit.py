"""Tables that fit the terminal: never an id, an interval or a state cut.

A rich table squeezed below its natural width cuts cells (``exact-label-f…``,
``[46.5%…``) or folds them a few characters a line. :func:`fit` wraps a table so
that, at render time, it is drawn as it is when the console is wide enough for it,
and otherwise *stacked*: one block per row, the first column as its heading and
every other column as a ``name  value`` line whose value wraps under itself. Nothing
is cut: a value longer than the line wraps onto the next.

Plain output (a pipe, a file, CI) is written by ``render/plain.py``: at the table's natural
width, or stacked the same way when ``COLUMNS`` is set and narrower than the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.table import Table

__all__ = ["Fitted", "fit"]

#: The fewest columns a value is given beside its name in a stacked block.
_MIN_VALUE = 8


class Fitted:
    """A table drawn whole when it fits, stacked when it does not."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.measure import Measurement

        if self._needed(console, options, Measurement) <= options.max_width:
            yield self.table
            return
        yield from self._stacked(options.max_width)

    def _needed(self, console: Console, options: ConsoleOptions, measurement: Any) -> int:
        """The narrowest the table can be drawn without cutting anything: a column that
        must not wrap at its widest cell; a wrapping one at its ``min_width`` or its
        longest word, whichever is wider; plus padding and rules."""
        wide = options.update(width=10_000)
        table = self.table
        total = 0
        for column in table.columns:
            cells = [column.header, *column.cells]
            sizes = [measurement.get(console, wide, cell) for cell in cells]
            if column.no_wrap:
                total += max(size.maximum for size in sizes)
            else:
                total += max(column.min_width or 0, *(size.minimum for size in sizes))
        left, right = table.padding[3], table.padding[1]
        total += len(table.columns) * (left + right)
        if table.box is not None:
            total += len(table.columns) + 1 if table.show_edge else len(table.columns) - 1
        return total

    def _stacked(self, width: int) -> RenderResult:
        from rich.cells import cell_len
        from rich.padding import Padding
        from rich.table import Table
        from rich.text import Text

        table = self.table
        if table.title is not None:
            title = table.title if isinstance(table.title, Text) else Text(str(table.title))
            yield Text.assemble((title.plain, "bold"))
        columns = table.columns
        cells = [list(column.cells) for column in columns]
        headers = [c.header if isinstance(c.header, str) else str(c.header) for c in columns[1:]]
        # Beside its name, a value gets what the indent, the longest name and the gap leave;
        # in a terminal narrower than a few columns more, rich gave it none and the value
        # (a rule's state, a run's gate) vanished: there, each value goes under its name.
        beside = width - 4 - max((cell_len(h) for h in headers), default=0) >= _MIN_VALUE
        for index in range(table.row_count):
            yield cells[0][index] if columns else Text("")
            grid = Table.grid(padding=(0, 2, 0, 0))
            if beside:
                grid.add_column(no_wrap=True, style="dim")
            grid.add_column(overflow="fold")
            for header, column_cells in zip(headers, cells[1:], strict=True):
                value = column_cells[index]
                if isinstance(value, Text) and not value.plain:
                    continue
                if beside:
                    grid.add_row(header, value)
                else:
                    grid.add_row(Text(header, style="dim", overflow="fold"))
                    grid.add_row(value)
            yield Padding(grid, (0, 0, 0, 2 if width > 2 * _MIN_VALUE else 0))


def fit(table: Table) -> Fitted:
    """``table``, drawn whole when the console is wide enough, else one block per row."""
    return Fitted(table)
