"""An answer's JSON as the terminal shows it: rich tables, one table as CSV, or the JSON itself.

Both doors of a question command print through here: the full command (``_analytics.py``) and the quick path
(``_quick.py``), which must not import typer or pydantic; rich loads only to draw tables.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from taskcost.pricing import format_usd

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["Format", "RenderError", "consoles", "print_rows", "render"]


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


class RenderError(ValueError):
    """The answer cannot be shown the way the options asked (a usage error: exit 2)."""


@functools.cache
def consoles() -> tuple[Console, Console]:
    """stdout and stderr. Piped output is not cut to 80 columns: ids and numbers stay whole for scripts."""
    from rich.console import Console

    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else 400), Console(stderr=True, soft_wrap=True)


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if column.endswith("_usd") or column.startswith("usd_per_") or "_usd_per_" in column:
        try:
            return format_usd(Decimal(str(value)))
        except ArithmeticError:
            return str(value)
    if isinstance(value, float) and (column.endswith(("_share", "_rate")) or "share_of" in column) and 0 <= value <= 1:
        return f"{value:.1%}"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def print_rows(out: Console, columns: list[str], rows: list[list[str]], title: str | None = None) -> None:
    """A table when it fits the terminal's width whole; else a record per row (``column  value`` lines), so that no
    cell is cut to ``$0.0…`` at 80 columns (a pipe is 400 wide: the table)."""
    from rich.measure import Measurement
    from rich.table import Table

    table = Table(*columns, title=title, title_justify="left")
    for row in rows:
        table.add_row(*row)
    natural = Measurement.get(out, out.options.update_width(1_000_000), table).maximum  # unsqueezed
    if natural <= out.width or not rows:
        out.print(table)
        return
    if title:
        out.print(f"[bold]{title}[/] (a record per row: the table is wider than the terminal)", highlight=False)
    label = max(len(c) for c in columns)
    for i, row in enumerate(rows, 1):
        out.print(f"[dim]-- {i} --[/]", highlight=False)
        for column, value in zip(columns, row, strict=True):
            out.print(f"  {column.ljust(label)}  {value}", highlight=False, overflow="fold")


def render(doc: dict[str, Any], fmt: Format, table: str | None = None) -> None:
    """Print an answer's JSON as rich tables (``table``), one of its tables as CSV, or the JSON itself."""
    tables: dict[str, Any] = doc.get("tables", {})
    if table is not None and table not in tables:
        raise RenderError(f"--table: no table {table!r} in this answer (it has: {', '.join(tables) or 'none'})")
    if fmt is Format.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    if fmt is Format.csv:
        name = table or next(iter(tables), None)
        if name is None:
            raise RenderError("this answer has no table to write as CSV; use --format json")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(tables[name]["columns"])
        w.writerows(["" if v is None else v for v in row] for row in tables[name]["rows"])
        sys.stdout.write(buf.getvalue())
        return
    _print_tables(doc, tables, table)


def _print_tables(doc: dict[str, Any], tables: dict[str, Any], table: str | None) -> None:
    out, err = consoles()
    filters = ", ".join(f"{k}={v}" for k, v in doc.get("filters", {}).items()) or "all data"
    out.print(f"[bold]{doc.get('question', '')}[/] ({filters})", highlight=False)
    summary = doc.get("summary", {})
    for key in doc.get("terminal_keys") or list(summary):
        value = summary.get(key)
        if key in summary and not isinstance(value, dict | list):
            out.print(f"  {key.replace('_', ' ')}: {_cell(key, value)}", highlight=False)
    for name, t in tables.items():
        if table is not None and name != table:
            continue
        shown = [c for c in t.get("display") or t["columns"] if c in t["columns"]]
        at = [t["columns"].index(c) for c in shown]
        cells = [[_cell(c, row[i]) for c, i in zip(shown, at, strict=True)] for row in t["rows"]]
        print_rows(out, shown, cells, t.get("title") or name)
        if len(shown) < len(t["columns"]):
            err.print(f"({len(t['columns']) - len(shown)} more columns: --format csv or json)", highlight=False)
    for note in doc.get("notes", []):
        err.print(f"note: {note}", highlight=False)
