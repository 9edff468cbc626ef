"""`taskcost sql` and `taskcost tasks`: answers from the server that owns the file, or the file. ``tasks`` answers
per project: the file and the admin token see every project (``default`` holds what was sent before the first
key), a read key its own."""

from __future__ import annotations

import csv
import io
import json
import sys
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from taskcost._internal.jsonable import json_value
from taskcost.cli._common import app, err, out, settings_or_exit
from taskcost.cli._options import DbOption, KeyOption, StoreOption, UrlOption, opened
from taskcost.cli._render import print_rows
from taskcost.pricing import format_usd
from taskcost.store import QueryResult, ReadStore

if TYPE_CHECKING:
    from taskcost.analytics import OutcomeRow, TaskSummary

__all__ = ["project_summaries", "sql", "tasks"]


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
        print_rows(out, list(res.columns), [["NULL" if v is None else str(v) for v in r] for r in rows])
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
    store: StoreOption = None,
) -> None:
    """Query the views (llm_calls, tool_calls, tasks), through the running server or the file."""
    from taskcost.cli._target import open_target

    settings = settings_or_exit(db=db, url=url, key=key, store=store)
    with opened(lambda: open_target(settings.db, settings.url, settings.key, settings.store)) as target:
        res = target.query(query, max_rows=max_rows or settings.sql_max_rows, timeout_s=settings.sql_timeout_s)
    _render(res, fmt)


_BY_PROJECT = """
SELECT project, coalesce(outcome, 'in_progress') AS outcome,
       count(*) AS tasks,
       sum(llm_calls)::BIGINT AS llm_calls,
       sum(attempts)::BIGINT AS attempts,
       sum(cost_usd) AS cost_usd,
       sum(unpriced_calls)::BIGINT AS unpriced_calls
FROM tasks {where} GROUP BY 1, 2 ORDER BY 1, 2
"""


def project_summaries(target: ReadStore, project: str | None = None) -> dict[str, TaskSummary]:
    """Tasks by outcome and the cost per completed task, per project (only ``project``'s, when given): projects
    are never added together. A read key's server answers for its own project only."""
    from taskcost.analytics import OutcomeRow, summarise_outcomes

    where, params = ("WHERE project = ?", [project]) if project is not None else ("", [])
    by: dict[str, list[OutcomeRow]] = {}
    for r in target.query(_BY_PROJECT.format(where=where), params).dicts():
        by.setdefault(str(r["project"]), []).append(
            OutcomeRow(
                outcome=r["outcome"],
                tasks=int(r["tasks"]),
                llm_calls=int(r["llm_calls"] or 0),
                attempts=int(r["attempts"] or 0),
                cost_usd=None if r["cost_usd"] is None else Decimal(r["cost_usd"]),
                unpriced_calls=int(r["unpriced_calls"] or 0),
            )
        )
    return {name: summarise_outcomes(rows) for name, rows in by.items()}


@app.command()
def tasks(
    db: DbOption = None,
    url: UrlOption = None,
    key: KeyOption = None,
    project: Annotated[
        str | None, typer.Option("--project", help="This project only (a read key sees its own only)")
    ] = None,
    store: StoreOption = None,
) -> None:
    """Tasks by outcome and the cost per completed task, per project (never added together)."""
    from taskcost.cli._target import open_target

    settings = settings_or_exit(db=db, url=url, key=key, store=store)
    with opened(lambda: open_target(settings.db, settings.url, settings.key, settings.store)) as target:
        summaries = project_summaries(target, project)
    if not summaries:
        where = "" if project is None else f" in project {project!r}"
        seen = " visible to this key (a read key sees its own project's only)" if settings.key else ""
        out.print(f"no tasks{where}{seen}", highlight=False)
        return
    table = Table("project", "outcome", "tasks", "llm calls", "attempts", "cost (USD)", "unpriced calls")
    for name, s in summaries.items():
        for r in s.by_outcome:
            cost = format_usd(r.cost_usd)
            table.add_row(name, r.outcome, str(r.tasks), str(r.llm_calls), str(r.attempts), cost, str(r.unpriced_calls))
    out.print(table)
    for name, s in summaries.items():
        per = format_usd(s.cost_per_completed_task_usd, none="n/a (no completed task or no priced call)")
        out.print(f"project {name}", highlight=False)
        out.print(f"  tasks: {s.tasks}, completed: {s.completed}", highlight=False)
        out.print(f"  total cost: {format_usd(s.total_cost_usd, none='n/a')}", highlight=False)
        out.print(f"  cost per completed task (all spend / completed tasks): {per}", highlight=False)
        if s.attempts:
            out.print(
                f"  coverage: {s.attempts - s.unpriced_calls} of {s.attempts} call attempts priced"
                + (" (unpriced calls are excluded from the totals)" if s.unpriced_calls else ""),
                highlight=False,
            )
    if len(summaries) > 1:
        err.print(
            f"{len(summaries)} projects, each with its own cost per completed task (--project P: one of them)",
            highlight=False,
        )
