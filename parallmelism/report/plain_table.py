"""fit_table's tables printed without rich's layout engine where nothing needs it.

A table from report/table.py `fit_table` has every column at a width it computed (`fitted_columns`)
and plain text in every cell. On a console without colours (a pipe, a file, CI: what scripts and
`show > file` see) such a table is a few lines of box characters and padded cells; rich's engine
measures, wraps and splits every cell into styled segments to print the same characters, ~30 ms of
a pinned `show` (issue 29). `FittedTable` prints those lines itself when it can prove they are
rich's: every cell on one line of its width or wrapped between words as rich wraps it (the title
and caption too), no text that rich would read as markup or emoji, no wide characters, the table
within the width offered, the default box in Unicode; otherwise (and on any colour terminal) rich
renders it as before. Building the rich Table waits until rich prints it, so a plain console
(cli/console.py PlainConsole) prints one without importing rich's table.
tests/test_plain_table.py checks the lines against rich's own rendering."""

from __future__ import annotations

import re

# rich's HEAVY_HEAD box (the Table default): top, header row, header separator, rows, bottom
_TOP, _HEAD, _RULE, _ROW, _BOTTOM = "┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "└─┴┘"
_MARKUP_OR_EMOJI = re.compile(r"\[|:\S*:")  # what console.render_str would read in a str title


def _plain(text: str) -> bool:
    """One line of text that rich prints as it is, one cell per character."""
    from rich.cells import cell_len

    return text.isprintable() and text == text.strip() and cell_len(text) == len(text)


def _wrapped(text: str, width: int) -> list[str] | None:
    """A plain one-line text over lines of `width` as rich wraps a table's title or caption (rich.text
    Text.wrap, rich._wrap divide_line): greedily, each word with the spaces after it, a line's end
    stripped; None for a word wider than the line (rich folds it)."""
    lines, line = [], ""
    for word in re.findall(r"\s*\S+\s*", text):
        if len(word.rstrip()) > width:
            return None
        if line and len(line) + len(word.rstrip()) > width:
            lines.append(line.rstrip())
            line = word
        else:
            line += word
    return [*lines, line.rstrip()]


class FittedTable:
    """A table built by fit_table: its title, caption, columns (header, justify, rich's column
    options) and cells as text; `fixed` holds the columns' widths, justify and rows when every
    column is at a width fit_table computed. rich prints it as the rich Table it stands for
    (`table()`, built on first use) or as its plain lines; a plain console (cli/console.py) prints
    the lines without importing rich's table."""

    def __init__(self, title, caption, columns: list[tuple[str, dict]], rows: list[list[str]], fixed) -> None:
        self.title, self.caption, self.header_options, self.rows = title, caption, columns, rows
        self.fixed: tuple[list[int], list[str], list[list[str]]] | None = fixed
        self._table = None

    def table(self):
        """The rich Table (columns as fit_table declared them, cells as rich Text)."""
        if self._table is None:
            from rich.table import Table
            from rich.text import Text

            table = Table(title=self.title, show_lines=False, caption=self.caption)
            for header, options in self.header_options:
                table.add_column(header, **options)
            for row in self.rows:
                table.add_row(*(Text(cell) for cell in row))
            self._table = table
        return self._table

    @property
    def columns(self):
        """The rich Table's columns (their headers, widths, justify), as a Table's callers read them."""
        return self.table().columns

    def plain_lines(self, max_width: int) -> list[str] | None:
        """The table's lines as rich prints them without colours, or None where that is not certain."""
        if self.fixed is None:
            return None
        widths, justify, rows = self.fixed
        headers = [header for header, _ in self.header_options]
        total = sum(widths) + 3 * len(widths) + 1
        if not widths or total > max_width:
            return None
        title, caption = self.title or "", self.caption or ""
        if not isinstance(title, str) or not isinstance(caption, str):
            return None
        for text in (title, caption):
            if text and (not _plain(text) or _MARKUP_OR_EMOJI.search(text) or _wrapped(text, total) is None):
                return None
        if any(_MARKUP_OR_EMOJI.search(h) for h in headers):
            return None
        if any((h and not _plain(h)) or len(h) > w for h, w in zip(headers, widths)):
            return None
        wraps = [not options.get("no_wrap") for _, options in self.header_options]  # text columns
        lines_of_rows = []  # a row whose text wraps is several lines, the other cells blank below
        for row in rows:
            cells = []
            for cell, w, wrap in zip(row, widths, wraps):
                if cell and not _plain(cell):
                    return None
                lines = [cell] if len(cell) <= w else _wrapped(cell, w) if wrap else None
                if lines is None:
                    return None
                cells.append(lines)
            height = max((len(c) for c in cells), default=1)
            lines_of_rows += [[c[k] if k < len(c) else "" for c in cells] for k in range(height)]

        def line(cells: list[str], edge: str) -> str:
            padded = [c.rjust(w) if j == "right" else c.ljust(w) for c, w, j in zip(cells, widths, justify)]
            return edge[0] + edge[1] + f"{edge[1]}{edge[2]}{edge[1]}".join(padded) + edge[1] + edge[3]

        def rule(edge: str) -> str:
            return edge[0] + edge[2].join(edge[1] * (w + 2) for w in widths) + edge[3]

        def centred(text: str) -> str:
            left = (total - len(text)) // 2
            return " " * left + text + " " * (total - len(text) - left)

        out = [centred(t) for t in _wrapped(title, total) or []] if title else []
        out += [rule(_TOP), line(headers, _HEAD), rule(_RULE)]
        out += [line(r, _ROW) for r in lines_of_rows]
        out.append(rule(_BOTTOM))
        if caption:
            out += [centred(t) for t in _wrapped(caption, total) or []]
        return out

    def __rich_console__(self, console, options):
        lines = None
        if console.color_system is None and not options.ascii_only and not options.legacy_windows:
            lines = self.plain_lines(options.max_width)
        if lines is None:
            yield self.table()
            return
        from rich.segment import Segment

        yield Segment("\n".join(lines) + "\n")

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        return Measurement.get(console, options, self.table())
