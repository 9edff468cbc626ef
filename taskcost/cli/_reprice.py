"""`taskcost reprice`: price stored calls again after a price, book or clusters change (through the running
server, which owns the file, or in the file itself when no server runs).

Through a server, the server's pricing configuration is used (the one it was started with: it prices new calls
with it too). The command says so, and warns when this environment's configuration differs from it (another price
book, clusters file, price data, cluster window or pricing attributes): a ``TASKCOST_PRICE_BOOK_FILE`` given to the
command alone does not reach the server."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from taskcost.cli._common import app, err, fail, out, settings_or_exit
from taskcost.cli._options import (
    AdminOption,
    DbOption,
    SinceOption,
    StoreOption,
    UntilOption,
    UrlOption,
    opened,
    parse_time,
    reporting_failures,
)
from taskcost.cli._target import PricingServer, server_for, shown_store
from taskcost.pricing import format_usd
from taskcost.settings import Settings

if TYPE_CHECKING:
    from taskcost.pricing import ClusterWindowCost, Pricer, RepriceReport

__all__ = ["cluster_windows", "config_differences", "reprice"]

# what a pricing configuration is compared by: the key of /api/pricing/status, and its name for a user
_COMPARED = (
    ("prices", "price data"),
    ("book", "price book"),
    ("clusters", "clusters file"),
    ("cluster_window_s", "cluster window (s)"),
    ("pricing_attributes", "pricing attributes"),
)


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def cluster_windows(
    settings: Settings, since: datetime | None, until: datetime | None, cluster: str | None
) -> list[ClusterWindowCost]:
    """The clusters' allocated windows: from the running server (admin), else from the file."""
    from taskcost.pricing import ClusterWindowCost, epoch_ns

    server = _admin_server(settings)
    if server is not None:
        with opened(lambda: server) as asked:
            docs = asked.get("/api/admin/clusters", since=_iso(since), until=_iso(until), cluster=cluster)
        return [ClusterWindowCost.from_json(d) for d in docs]
    with opened(lambda: _local(settings, read_only=True)) as store:
        return store.cluster_costs(
            since_ns=None if since is None else epoch_ns(since),
            until_ns=None if until is None else epoch_ns(until),
            cluster_id=cluster,
        )


def _local(settings: Settings, *, read_only: bool) -> Any:
    """The store itself when no server runs: the ClickHouse store ``store`` names, else the DuckDB file."""
    if settings.store:
        from taskcost.store.clickhouse import ClickHouseStore

        return ClickHouseStore.open(settings.store, read_only=read_only)
    from taskcost.store import DuckDBStore

    return DuckDBStore.open(settings.db, read_only=read_only)


def _admin_server(settings: Settings) -> PricingServer | None:
    with reporting_failures(ValueError):
        return server_for(settings, admin=True)


def _labels(pricer: Pricer) -> dict[str, Any]:
    """A pricer's configuration as /api/pricing/status shows a server's."""
    return {
        "prices": pricer.data.label,
        "book": pricer.book_version,
        "clusters": None if pricer.clusters is None else pricer.clusters.label,
        "cluster_window_s": pricer.window_s,
        "pricing_attributes": dict(pricer.attributes),
    }


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} -> {v}" for k, v in value.items()) or "none"
    return "none" if value is None else str(value)


def config_differences(here: dict[str, Any], server: dict[str, Any]) -> list[str]:
    """How this environment's pricing configuration (``_labels``) differs from a server's (its /api/pricing/status),
    one line per difference (what an older server does not report is not compared)."""
    return [
        f"{name}: here {_shown(here[key])}; on the server {_shown(server[key])}"
        for key, name in _COMPARED
        if key in server and here[key] != server[key]
    ]


def _say_whose(settings: Settings, server: PricingServer, status: dict[str, Any]) -> None:
    """Which configuration the server re-prices with, and a warning when this environment's differs from it."""
    err.print(
        f"re-pricing with the pricing configuration of the server at {server.url} (the one it was started with): "
        f"{status['prices']}; book {status['book'] or 'none'}; clusters {status['clusters'] or 'none'}",
        highlight=False,
    )
    try:
        here = _labels(settings.pricing_config().build())
    except ValueError as exc:
        err.print(
            f"[bold yellow]warning:[/] this environment's pricing configuration does not load, and the server's is "
            f"used: {exc}",
            highlight=False,
        )
        return
    differences = config_differences(here, status)
    if differences:
        err.print(
            "[bold yellow]warning:[/] this environment's pricing configuration differs from the server's, and the "
            "server's is used:\n  "
            + "\n  ".join(differences)
            + "\n  To re-price with yours, start the server with it (TASKCOST_* variables or its taskcost.toml), or "
            "stop the server and run `taskcost reprice` on the file.",
            highlight=False,
        )


def print_report(r: RepriceReport, whose: str = "") -> None:
    """What a re-price did; ``whose``: which configuration it used (the server's, this environment's)."""
    scope = "all history" if r.since_ns is None and r.until_ns is None else "the calls in the range"
    head = "dry run, nothing changed: " if r.dry_run else ""
    config = f"{r.prices}; book {r.book or 'none'}; clusters {r.clusters or 'none'}"
    out.print(f"{head}re-priced {scope} with {whose}{config}", highlight=False)
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
    store: StoreOption = None,
) -> None:
    """Price stored calls again (all history, or calls that started in [--since, --until)) with the current
    price data, price book and clusters file, page by page; report what changed. With a server running, the
    server's configuration is used (a warning says how this environment's differs from it)."""
    from taskcost.pricing import RepriceReport, epoch_ns

    settings = settings_or_exit(db=db, url=url, admin_token=admin_token, store=store)
    start, end = parse_time(since, "--since"), parse_time(until, "--until")
    if start is not None and end is not None and start >= end:
        raise fail(f"--since ({since}) must be before --until ({until})", code=2)
    server = _admin_server(settings)
    if server is not None:
        with opened(lambda: server) as asked:
            _say_whose(settings, asked, asked.get("/api/pricing/status"))
            err.print(f"asking the server at {server.url} to re-price ...", highlight=False)
            doc = asked.post("/api/admin/reprice", {"since": _iso(start), "until": _iso(end), "dry_run": dry_run})
        print_report(RepriceReport.from_json(doc), "the server's configuration: ")
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        pricer = settings.pricing_config().build()
    except ValueError as exc:
        raise fail(f"the prices do not load, nothing was re-priced: {exc}") from None
    where = f"the ClickHouse store {shown_store(settings.store)}" if settings.store else "the file"
    err.print(
        f"no server runs on {settings.db}: re-pricing {where} with this environment's pricing configuration",
        highlight=False,
    )
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with (
        opened(lambda: _local(settings, read_only=False)) as target,
        Progress(*columns, console=err, transient=True) as bar,
    ):
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(f"re-pricing {phase}", total=total)
            bar.update(tasks[phase], completed=done, total=total)

        report = target.reprice(
            pricer,
            since_ns=None if start is None else epoch_ns(start),
            until_ns=None if end is None else epoch_ns(end),
            dry_run=dry_run,
            progress=progress,
        )
    print_report(report, "this environment's configuration: ")
