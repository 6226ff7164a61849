"""What a command prints: lines on stdout (a closed pipe handed to main()), and tables.

A command that prints a table fills a :class:`_Table` (title, columns, rows of text and numbers) and hands it to
:func:`_print_table` with its ``--format``: auto (a drawn table when stdout is a terminal it fits, else Markdown),
table, markdown, json or csv.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from whitevec.preflight import check_output


def _check_json_file(path: Path | None) -> None:
    """--json FILE, when given, can be written: checked before the work whose report it will hold."""
    if path is not None:
        check_output(path, "--json file")


def _save_json(report: Any, path: Path | None) -> None:
    if path is not None:
        report.save_json(path)
        typer.echo(f"wrote {path}", err=True)


class _StdoutClosedError(Exception):
    """stdout's reader went away (``whitevec search ... | head``); main() exits quietly."""


@contextlib.contextmanager
def _writing_stdout() -> Iterator[None]:
    """Around writes to stdout: a broken pipe there is the reader leaving, for main() to handle. (Caught inside a
    command, so typer's own handler, which exits 1, never sees it.)"""
    try:
        yield
    except BrokenPipeError:
        raise _StdoutClosedError from None


def _print(text: str) -> None:
    """``text`` and a newline on stdout, as it is: click strips ANSI escapes from output that is not a terminal,
    which would change the documents' own texts in CSV or Markdown (``color=True`` keeps them)."""
    with _writing_stdout():
        typer.echo(text, color=True)


def _console() -> Any:
    """A rich console on stdout whose broken pipe goes to main() (rich's own handler exits 1). It writes no ANSI
    codes to a pipe, nor with NO_COLOR set (rich alone would still write bold and italics)."""
    from rich.console import Console

    class StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            raise _StdoutClosedError from None

    return StdoutConsole(color_system=None if os.environ.get("NO_COLOR") else "auto")


# ---- tables ----------------------------------------------------------------------------------------------
class TableFormat(StrEnum):
    """How a command prints its table (``--format``)."""

    auto = "auto"
    table = "table"
    markdown = "markdown"
    json = "json"
    csv = "csv"


FormatOpt = Annotated[
    TableFormat,
    typer.Option(
        "--format",
        case_sensitive=False,
        help="How the table prints: auto (a drawn table on a terminal it fits, else Markdown), table, markdown, "
        "json or csv (the rows alone on stdout; the lines around the table then go to stderr).",
    ),
]
Cell = str | int | float | None


def _cell(value: Any) -> Cell:
    """A table cell: a numpy number as Python's (json refuses numpy integers); NaN or an infinity as None, not
    measured (neither is a JSON number)."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


@dataclass
class _Table:
    """What a command prints as a table: a title, columns, and rows of cells (text, a number, or None for a figure
    not measured, shown "-"). json and csv keep the numbers; ``formats`` (column -> format spec, e.g. ".2f") say
    how the drawn table and Markdown show them. Columns in ``text`` are left-aligned, the others right-aligned."""

    title: str
    columns: Sequence[str]
    text: Collection[str] = ()
    formats: dict[str, str] = field(default_factory=dict)
    rows: list[list[Cell]] = field(default_factory=list)

    def add_row(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([_cell(cell) for cell in cells])

    def shown(self) -> list[list[str]]:
        """The cells as the drawn table and Markdown show them."""

        def show(cell: Cell, spec: str) -> str:
            if cell is None:
                return "-"
            return cell if isinstance(cell, str) else format(cell, spec)

        return [
            [show(cell, self.formats.get(c, "")) for c, cell in zip(self.columns, row, strict=True)]
            for row in self.rows
        ]


def _drawn(table: _Table) -> Any:
    """A rich table. Cells that do not fit wrap (fold), never cut to '…': a number is never lost."""
    from rich.table import Table

    drawn = Table(title=table.title)
    for column in table.columns:
        drawn.add_column(column, justify="left" if column in table.text else "right", overflow="fold")
    for row in table.shown():
        drawn.add_row(*row)
    return drawn


def _markdown(table: _Table) -> str:
    """The title, a blank line, a Markdown (GitHub) table, no width limit, no cell cut, and a blank line that ends
    it (a line after it would read as one more row)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(" ".join(cell.split()).replace("|", "\\|") for cell in cells) + " |"

    rule = [":---" if column in table.text else "---:" for column in table.columns]
    return "\n".join([table.title, "", line(table.columns), line(rule), *(line(row) for row in table.shown()), ""])


def _json(table: _Table) -> str:
    """``{"title", "columns", "rows": [{column: value}]}``; numbers as numbers, None as null."""
    import json

    rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    document = {"title": table.title, "columns": list(table.columns), "rows": rows}
    return json.dumps(document, indent=2, ensure_ascii=False)


def _csv(table: _Table) -> str:
    """A header of the columns, then the rows; numbers in full (no thousands separators), None empty."""
    import csv
    import io

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(["" if cell is None else cell for cell in row] for row in table.rows)
    return text.getvalue().rstrip("\n")


def _print_table(table: _Table, table_format: TableFormat) -> None:
    """``table`` on stdout in ``table_format``. auto: the drawn table when stdout is a terminal that fits it
    whole, else Markdown (a pipe, a log, a narrow terminal)."""
    if table_format in (TableFormat.auto, TableFormat.table):
        console = _console()
        drawn = _drawn(table)
        # Its natural width: measured within the console's width, a table is never wider than that.
        natural = console.measure(drawn, options=console.options.update_width(1_000_000)).maximum
        if table_format is TableFormat.table or (sys.stdout.isatty() and natural <= console.width):
            console.print(drawn)
            return
        table_format = TableFormat.markdown
    _print({TableFormat.markdown: _markdown, TableFormat.json: _json, TableFormat.csv: _csv}[table_format](table))


def _say(table_format: TableFormat, text: str) -> None:
    """A line that goes with a table: on stdout beside a table or Markdown; on stderr beside json or csv, which
    stdout then holds alone."""
    if table_format in (TableFormat.json, TableFormat.csv):
        typer.echo(text, err=True)
    else:
        _print(text)
