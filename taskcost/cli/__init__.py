"""The `taskcost` command: thin commands over the collector, store and analytics."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import sys
from collections.abc import AsyncIterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from taskcost._internal.jsonable import json_value
from taskcost.settings import load_settings
from taskcost.store import QueryError, QueryResult, StoreUnavailableError

__all__ = ["app", "main"]

app = typer.Typer(
    name="taskcost",
    help="Task-cost accounting for LLM agents: serve the collector, query the data.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB file [env TASKCOST_DB; default taskcost.duckdb]", show_default=False),
]
UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="Query this running server instead [env TASKCOST_URL]", show_default=False),
]


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def _settings(**given: Any):
    try:
        return load_settings(**given)
    except ValueError as exc:
        raise _fail(f"bad configuration: {exc}") from None


@app.command()
def serve(
    db: DbOption = None,
    port: Annotated[int | None, typer.Option(help="Port [env TASKCOST_PORT; default 4318]")] = None,
    host: Annotated[str | None, typer.Option(help="Bind address [env TASKCOST_HOST; default 127.0.0.1]")] = None,
    dashboards: Annotated[bool, typer.Option(help="Serve the dashboards under /dash/")] = True,
) -> None:
    """Run the collector: OTLP/HTTP on /v1/traces, the SQL API on /api/sql, dashboards on /dash/."""
    import uvicorn

    from taskcost.cli._target import write_server_info
    from taskcost.collector import create_app
    from taskcost.store import DuckDBStore

    settings = _settings(db=db, port=port, host=host)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        store = DuckDBStore.open(settings.db, max_batch_spans=settings.writer_max_batch_spans)
    except StoreUnavailableError as exc:
        raise _fail(str(exc)) from None
    shown_host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    url = f"http://{shown_host}:{settings.port}"
    info = write_server_info(settings.db, url)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield
        # runs on SIGTERM/SIGINT too, after in-flight requests finished: drain the writer, release the file
        store.close()
        info.unlink(missing_ok=True)
        err.print(f"taskcost stopped; {store.committed_spans} spans committed this run", highlight=False)

    try:
        application = create_app(settings, store, dashboards=dashboards, lifespan=lifespan)
        err.print(
            f"taskcost serving {settings.db} on {url}  (OTLP/HTTP {url}/v1/traces, SQL {url}/api/sql"
            + (f", dashboards {url}/dash/" if dashboards else "")
            + ")",
            highlight=False,
        )
        uvicorn.run(application, host=settings.host, port=settings.port, log_level="warning")
    finally:
        store.close()  # no-op when the lifespan already closed it (e.g. the port was taken)
        info.unlink(missing_ok=True)


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
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format")] = Format.table,
    max_rows: Annotated[int | None, typer.Option(help="Row limit [default: sql_max_rows]")] = None,
) -> None:
    """Query the views (llm_calls, tool_calls, tasks), through the running server or the file."""
    from taskcost.cli._target import open_target

    settings = _settings(db=db, url=url)
    try:
        target = open_target(settings.db, settings.url)
        try:
            res = target.query(query, max_rows=max_rows or settings.sql_max_rows, timeout_s=settings.sql_timeout_s)
        finally:
            target.close()
    except (QueryError, StoreUnavailableError) as exc:
        raise _fail(str(exc)) from None
    _render(res, fmt)


@app.command()
def tasks(db: DbOption = None, url: UrlOption = None) -> None:
    """A short summary: tasks by outcome, and the cost per completed task."""
    from taskcost.analytics import task_summary
    from taskcost.cli._target import open_target

    settings = _settings(db=db, url=url)
    try:
        target = open_target(settings.db, settings.url)
        try:
            s = task_summary(target)
        finally:
            target.close()
    except (QueryError, StoreUnavailableError) as exc:
        raise _fail(str(exc)) from None
    table = Table("outcome", "tasks", "llm calls", "attempts", "cost (USD)", "unpriced calls")
    for r in s.by_outcome:
        cost = "-" if r.cost_usd is None else f"{r.cost_usd:.6f}"
        table.add_row(r.outcome, str(r.tasks), str(r.llm_calls), str(r.attempts), cost, str(r.unpriced_calls))
    out.print(table)
    per = "n/a (no completed task or no priced call)"
    if s.cost_per_completed_task_usd is not None:
        per = f"${s.cost_per_completed_task_usd:.6f}"
    out.print(f"tasks: {s.tasks}, completed: {s.completed}", highlight=False)
    out.print(f"total cost: {'n/a' if s.total_cost_usd is None else f'${s.total_cost_usd:.6f}'}", highlight=False)
    out.print(f"cost per completed task (all spend / completed tasks): {per}", highlight=False)
    if s.attempts:
        out.print(
            f"coverage: {s.attempts - s.unpriced_calls} of {s.attempts} call attempts priced"
            + (" (unpriced calls are excluded from the totals)" if s.unpriced_calls else ""),
            highlight=False,
        )


def main() -> None:
    app()
