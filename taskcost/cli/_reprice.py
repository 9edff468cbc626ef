"""`taskcost reprice`: price stored calls again after a price, book or clusters change (through the running
server, which owns the file, or in the file itself when no server runs)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from taskcost.cli._common import app, err, fail, out, settings_or_exit
from taskcost.cli._options import (
    AdminOption,
    DbOption,
    SinceOption,
    UntilOption,
    UrlOption,
    opened,
    parse_time,
    reporting_failures,
)
from taskcost.cli._target import PricingServer, server_for
from taskcost.pricing import ClusterWindowCost, RepriceReport, epoch_ns, format_usd
from taskcost.settings import Settings

__all__ = ["cluster_windows", "reprice"]


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def cluster_windows(
    settings: Settings, since: datetime | None, until: datetime | None, cluster: str | None
) -> list[ClusterWindowCost]:
    """The clusters' allocated windows: from the running server (admin), else from the file."""
    from taskcost.store import DuckDBStore

    server = _admin_server(settings)
    if server is not None:
        with opened(lambda: server) as asked:
            docs = asked.get("/api/admin/clusters", since=_iso(since), until=_iso(until), cluster=cluster)
        return [ClusterWindowCost.from_json(d) for d in docs]
    with opened(lambda: DuckDBStore.open(settings.db, read_only=True)) as store:
        return store.cluster_costs(
            since_ns=None if since is None else epoch_ns(since),
            until_ns=None if until is None else epoch_ns(until),
            cluster_id=cluster,
        )


def _admin_server(settings: Settings) -> PricingServer | None:
    with reporting_failures(ValueError):
        return server_for(settings, admin=True)


def print_report(r: RepriceReport) -> None:
    scope = "all history" if r.since_ns is None and r.until_ns is None else "the calls in the range"
    head = "dry run, nothing changed: " if r.dry_run else ""
    out.print(f"{head}re-priced {scope} with {r.prices}; book {r.book or 'none'}", highlight=False)
    out.print(
        f"calls: {r.calls} examined, {r.changed} with a new cost ({r.newly_priced} newly priced, "
        f"{r.newly_unpriced} newly unpriced), {r.updated} updated in all, {r.unpriced_after} unpriced",
        highlight=False,
    )
    delta = r.after_usd - r.before_usd
    out.print(
        f"API calls total: before {format_usd(r.before_usd)}, after {format_usd(r.after_usd)} "
        f"({format_usd(delta, sign=True)})",
        highlight=False,
    )
    changes = [m for m in r.by_model if m.calls]
    if changes:
        table = Table("provider", "model", "calls changed", "before", "after")
        for m in changes[:15]:
            table.add_row(
                str(m.provider), str(m.model), str(m.calls), format_usd(m.before_usd), format_usd(m.after_usd)
            )
        out.print(table)
    if r.tool_calls:
        out.print(
            f"tool calls priced by the book: {r.tool_calls}, {r.tools_changed} changed; "
            f"before {format_usd(r.tool_before_usd)}, after {format_usd(r.tool_after_usd)}",
            highlight=False,
        )
    if r.clusters:
        out.print(
            f"self-hosted ({r.clusters}): {r.windows} window(s), bill {format_usd(r.bill_usd)} = attributed "
            f"{format_usd(r.attributed_usd)} + idle {format_usd(r.idle_usd)}; {r.self_hosted_calls} call(s), "
            f"{r.self_hosted_changed} changed",
            highlight=False,
        )
    if r.caught_up:
        out.print(f"{r.caught_up} call(s) that arrived during the re-price were priced again", highlight=False)
    err.print(f"took {r.seconds:.2f} s", highlight=False)


@app.command()
def reprice(
    since: SinceOption = None,
    until: UntilOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would change; change nothing")] = False,
    db: DbOption = None,
    url: UrlOption = None,
    admin_token: AdminOption = None,
) -> None:
    """Price stored calls again (all history, or calls that started in [--since, --until)) with the current
    price data, price book and clusters file, page by page; report what changed."""
    settings = settings_or_exit(db=db, url=url, admin_token=admin_token)
    start, end = parse_time(since, "--since"), parse_time(until, "--until")
    server = _admin_server(settings)
    if server is not None:
        err.print(f"asking the server at {server.url} to re-price ...", highlight=False)
        with opened(lambda: server) as asked:
            doc = asked.post("/api/admin/reprice", {"since": _iso(start), "until": _iso(end), "dry_run": dry_run})
        print_report(RepriceReport.from_json(doc))
        return
    from taskcost.store import DuckDBStore

    try:
        pricer = settings.pricing_config().build()
    except ValueError as exc:
        raise fail(f"the prices do not load, nothing was re-priced: {exc}") from None
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with opened(lambda: DuckDBStore.open(settings.db)) as store, Progress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(f"re-pricing {phase}", total=total)
            bar.update(tasks[phase], completed=done, total=total)

        report = store.reprice(
            pricer,
            since_ns=None if start is None else epoch_ns(start),
            until_ns=None if end is None else epoch_ns(end),
            dry_run=dry_run,
            progress=progress,
        )
    print_report(report)
