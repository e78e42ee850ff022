"""fit_table's tables printed without rich's layout engine where nothing needs it.

A table from report/table.py `fit_table` has every column at a width it computed (`fitted_columns`)
and plain text in every cell. On a console without colours (a pipe, a file, CI: what scripts and
`show > file` see) such a table is a few lines of box characters and padded cells; rich's engine
measures, wraps and splits every cell into styled segments to print the same characters, ~30 ms of
a pinned `show` (issue 29). `FittedTable` prints those lines itself when it can prove they are
rich's: every cell and the title and caption fit their widths on one line, no text that rich would
read as markup or emoji, no wide characters, the table within the width offered, the default box
in Unicode; otherwise (and on any colour terminal) rich renders it as before.
tests/test_plain_table.py checks the lines against rich's own rendering."""

from __future__ import annotations

import re

from rich.table import Table

# rich's HEAVY_HEAD box (the Table default): top, header row, header separator, rows, bottom
_TOP, _HEAD, _RULE, _ROW, _BOTTOM = "┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "└─┴┘"
_MARKUP_OR_EMOJI = re.compile(r"\[|:\S*:")  # what console.render_str would read in a str title


def _plain(text: str) -> bool:
    """One line of text that rich prints as it is, one cell per character."""
    from rich.cells import cell_len

    return text.isprintable() and text == text.strip() and cell_len(text) == len(text)


class FittedTable(Table):
    """A rich Table built by fit_table; `fixed` holds its columns' widths and cells as text."""

    fixed: tuple[list[int], list[str], list[list[str]]] | None = None  # widths, justify, rows

    def plain_lines(self, max_width: int) -> list[str] | None:
        """The table's lines as rich prints them without colours, or None where that is not certain."""
        if self.fixed is None or self.box is None or self.box.ascii or not self.show_header or self.show_lines:
            return None
        widths, justify, rows = self.fixed
        headers = [str(c.header) for c in self.columns]
        total = sum(widths) + 3 * len(widths) + 1
        if not widths or total > max_width or self.width is not None or self.show_footer:
            return None
        title, caption = self.title or "", self.caption or ""
        if not isinstance(title, str) or not isinstance(caption, str):
            return None
        for text in (title, caption):
            if text and (not _plain(text) or len(text) > total or _MARKUP_OR_EMOJI.search(text)):
                return None
        if any(_MARKUP_OR_EMOJI.search(h) for h in headers):
            return None
        for row in [headers, *rows]:
            if any((cell and not _plain(cell)) or len(cell) > w for cell, w in zip(row, widths)):
                return None

        def line(cells: list[str], edge: str) -> str:
            padded = [c.rjust(w) if j == "right" else c.ljust(w) for c, w, j in zip(cells, widths, justify)]
            return edge[0] + edge[1] + f"{edge[1]}{edge[2]}{edge[1]}".join(padded) + edge[1] + edge[3]

        def rule(edge: str) -> str:
            return edge[0] + edge[2].join(edge[1] * (w + 2) for w in widths) + edge[3]

        def centred(text: str) -> str:
            left = (total - len(text)) // 2
            return " " * left + text + " " * (total - len(text) - left)

        out = [centred(title)] if title else []
        out += [rule(_TOP), line(headers, _HEAD), rule(_RULE)]
        out += [line(r, _ROW) for r in rows]
        out.append(rule(_BOTTOM))
        if caption:
            out.append(centred(caption))
        return out

    def __rich_console__(self, console, options):
        from rich import box

        lines = None
        if console.color_system is None and not options.ascii_only and not options.legacy_windows:
            lines = self.plain_lines(options.max_width) if self.box is box.HEAVY_HEAD else None
        if lines is None:
            yield from super().__rich_console__(console, options)
            return
        from rich.segment import Segment

        yield Segment("\n".join(lines) + "\n")
