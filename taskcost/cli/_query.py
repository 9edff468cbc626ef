"""`taskcost sql` and `taskcost tasks`: answers from the server that owns the file, or the file."""

from __future__ import annotations

import csv
import io
import json
import sys
from enum import StrEnum
from typing import Annotated

import typer
from rich.table import Table

from taskcost._internal.jsonable import json_value
from taskcost.cli._common import app, err, out, settings_or_exit
from taskcost.cli._options import DbOption, KeyOption, UrlOption, opened
from taskcost.pricing import format_usd
from taskcost.store import QueryResult

__all__ = ["sql", "tasks"]


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _render(res: QueryResult, fmt: Format) -> None:
    rows = [[json_value(v) for v in r] for r in res.rows]
    if fmt is Format.json:
        sys.stdout.write(json.dumps([dict(zip(res.columns, r, strict=True)) for r in rows], indent=2) + "\n")
    elif fmt is Format.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(res.columns)
        w.writerows(["" if v is None else v for v in r] for r in rows)
        sys.stdout.write(buf.getvalue())
    else:
        table = Table(*res.columns, show_lines=False)
        for r in rows:
            table.add_row(*["NULL" if v is None else str(v) for v in r])
        out.print(table)
        err.print(f"{len(rows)} row(s){' (truncated)' if res.truncated else ''}", highlight=False)
    if res.truncated and fmt is not Format.table:
        err.print(f"warning: output truncated to {len(rows)} rows", highlight=False)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="One read-only SELECT statement")],
    db: DbOption = None,
    url: UrlOption = None,
    key: KeyOption = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format")] = Format.table,
    max_rows: Annotated[int | None, typer.Option(help="Row limit [default: sql_max_rows]")] = None,
) -> None:
    """Query the views (llm_calls, tool_calls, tasks), through the running server or the file."""
    from taskcost.cli._target import open_target

    settings = settings_or_exit(db=db, url=url, key=key)
    with opened(lambda: open_target(settings.db, settings.url, settings.key)) as target:
        res = target.query(query, max_rows=max_rows or settings.sql_max_rows, timeout_s=settings.sql_timeout_s)
    _render(res, fmt)


@app.command()
def tasks(db: DbOption = None, url: UrlOption = None, key: KeyOption = None) -> None:
    """A short summary: tasks by outcome, and the cost per completed task."""
    from taskcost.analytics import task_summary
    from taskcost.cli._target import open_target

    settings = settings_or_exit(db=db, url=url, key=key)
    with opened(lambda: open_target(settings.db, settings.url, settings.key)) as target:
        s = task_summary(target)
    table = Table("outcome", "tasks", "llm calls", "attempts", "cost (USD)", "unpriced calls")
    for r in s.by_outcome:
        cost = format_usd(r.cost_usd)
        table.add_row(r.outcome, str(r.tasks), str(r.llm_calls), str(r.attempts), cost, str(r.unpriced_calls))
    out.print(table)
    per = format_usd(s.cost_per_completed_task_usd, none="n/a (no completed task or no priced call)")
    out.print(f"tasks: {s.tasks}, completed: {s.completed}", highlight=False)
    out.print(f"total cost: {format_usd(s.total_cost_usd, none='n/a')}", highlight=False)
    out.print(f"cost per completed task (all spend / completed tasks): {per}", highlight=False)
    if s.attempts:
        out.print(
            f"coverage: {s.attempts - s.unpriced_calls} of {s.attempts} call attempts priced"
            + (" (unpriced calls are excluded from the totals)" if s.unpriced_calls else ""),
            highlight=False,
        )
