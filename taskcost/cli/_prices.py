"""`taskcost prices ...` (price data, book, coverage, GPU catalogue, cluster costs) and `taskcost explain-cost`."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from taskcost.cli._common import app, err, fail, out, settings_or_exit
from taskcost.cli._options import (
    AdminOption,
    DbOption,
    KeyOption,
    SinceOption,
    StoreOption,
    UntilOption,
    UrlOption,
    opened,
    parse_time,
    reporting_failures,
)
from taskcost.pricing import format_usd

if TYPE_CHECKING:
    from taskcost.pricing import ClusterWindowCost, PricingConfig

__all__ = ["explain_cost", "prices_app"]

prices_app = typer.Typer(
    help="Prices: the price data in use and offline updates, the price book, unpriced calls, GPU rates, "
    "self-hosted clusters' costs."
)
app.add_typer(prices_app, name="prices")


@prices_app.command("update")
def update(
    source: Annotated[str, typer.Option("--from", help="A genai-prices data.json: a file, or a URL on your network")],
    db: DbOption = None,
    prices_dir: Annotated[
        Path | None, typer.Option(help="Keep it here [env TASKCOST_PRICES_DIR; default <db>.prices/]")
    ] = None,
) -> None:
    """Load newer price data offline: validate it, keep it beside the database, and use it for new calls."""
    from taskcost.pricing import DataFileError, bundled_data, install_data

    settings = settings_or_exit(db=db, prices_dir=prices_dir)
    target = settings.pricing_config().prices_dir
    assert target is not None
    try:
        data = install_data(source, target)
    except DataFileError as exc:
        raise fail(f"not loaded, nothing changed: {exc}") from None
    out.print(f"loaded {data.providers} providers, {data.models} models from {source}", highlight=False)
    out.print(f"in use from now on: {data.label}  (kept in {target})", highlight=False)
    bundled = bundled_data()
    if data.providers < bundled.providers:
        err.print(
            f"warning: this file has {data.providers} providers, the bundled data {bundled.providers}: calls to "
            "providers it lacks will be unpriced",
            highlight=False,
        )
    err.print(
        "new calls are priced with it (a running server picks it up within a second); "
        "run `taskcost reprice` to re-price stored calls",
        highlight=False,
    )


@prices_app.command("reset")
def reset(
    db: DbOption = None, prices_dir: Annotated[Path | None, typer.Option(help="The prices directory")] = None
) -> None:
    """Go back to the price data bundled with genai-prices (loaded files are kept, for the record)."""
    from taskcost.pricing import bundled_data, reset_data

    settings = settings_or_exit(db=db, prices_dir=prices_dir)
    target = settings.pricing_config().prices_dir
    assert target is not None
    changed = reset_data(target)
    out.print(f"using the bundled data: {bundled_data().label}" + ("" if changed else " (already)"), highlight=False)


@prices_app.command("check")
def check(db: DbOption = None) -> None:
    """Validate the price data, the price book and the clusters file; errors give the file, line and field."""
    settings = settings_or_exit(db=db)
    config = settings.pricing_config()
    try:
        pricer = config.build()
    except ValueError as exc:
        raise fail(str(exc)) from None
    _print_pricer(pricer, config)
    out.print("ok", highlight=False)


def _print_pricer(pricer: Any, config: PricingConfig) -> None:
    data = pricer.data
    out.print(
        f"price data: {data.label} ({data.providers} providers, {data.models} models"
        + (f"; from {data.origin}" if data.origin else "; bundled")
        + ")",
        highlight=False,
    )
    book = pricer.book
    if book is None:
        out.print("price book: none", highlight=False)
    else:
        where = config.book_file or "[price_book] in the configuration"
        out.print(
            f"price book: {book.label} from {where}: {len(book.discounts)} discount(s), {len(book.models)} custom "
            f"model(s), {len(book.overrides)} override(s), {len(book.fees)} fee(s), {len(book.tools)} tool price(s)",
            highlight=False,
        )
    clusters = pricer.clusters
    if clusters is None:
        out.print("clusters: none", highlight=False)
    else:
        ids = sorted({c.id for c in clusters.clusters})
        out.print(
            f"clusters: {clusters.label} from {config.clusters_file}: {', '.join(ids) or 'none'}", highlight=False
        )


@prices_app.command("status")
def status(db: DbOption = None, url: UrlOption = None, key: KeyOption = None) -> None:
    """Which prices are in use: this configuration's, and the running server's when one runs."""
    from taskcost.cli._target import server_for

    settings = settings_or_exit(db=db, url=url, key=key)
    config = settings.pricing_config()
    try:
        _print_pricer(config.build(), config)
    except ValueError as exc:
        err.print(f"[bold red]the configured prices do not load:[/] {exc}", highlight=False)
    with reporting_failures(ValueError):
        server = server_for(settings, admin=False)
    if server is not None:
        with opened(lambda: server) as asked:
            doc = asked.get("/api/pricing/status")
        out.print(
            f"server {server.url}: {doc['prices']}; book {doc['book'] or 'none'}; clusters {doc['clusters'] or 'none'}",
            highlight=False,
        )
        if doc.get("error"):
            err.print(f"[bold red]the server kept its previous prices:[/] {doc['error']}", highlight=False)


@prices_app.command("missing")
def missing(
    db: DbOption = None,
    url: UrlOption = None,
    key: KeyOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
) -> None:
    """Calls without a price (unknown models, ...): call counts and token volumes, and the cost coverage."""
    from taskcost.analytics import missing_prices
    from taskcost.cli._target import open_target

    settings = settings_or_exit(db=db, url=url, key=key)
    start, end = parse_time(since, "--since"), parse_time(until, "--until")
    with opened(lambda: open_target(settings.db, settings.url, settings.key, settings.store)) as target:
        found = missing_prices(target, start, end)
    table = Table("provider", "model", "calls", "input tokens", "output tokens", "first seen", "last seen", "reason")
    for r in found.rows:
        table.add_row(
            str(r.provider),
            str(r.model),
            str(r.calls),
            f"{r.input_tokens:,}",
            f"{r.output_tokens:,}",
            str(r.first_seen),
            str(r.last_seen),
            str(r.reason),
        )
    if found.rows:
        out.print(table)
    else:
        out.print("every call is priced", highlight=False)
    cov = found.coverage
    out.print(f"total cost of priced calls: {format_usd(cov.cost_usd)}", highlight=False)
    out.print(cov.sentence(), highlight=False)
    if found.rows:
        err.print(
            "price them with a custom model in the price book, or newer price data (taskcost prices update), "
            "then `taskcost reprice`",
            highlight=False,
        )


@prices_app.command("gpus")
def gpus() -> None:
    """The shipped catalogue of public GPU hourly prices (for clusters with no contract price)."""
    from taskcost.pricing import gpu_catalogue

    table = Table("id", "GPU", "$/GPU-hour", "offer", "source", "checked")
    for r in gpu_catalogue().values():
        table.add_row(r.id, r.gpu_type, str(r.usd_per_gpu_hour), r.offer, r.source, r.checked.isoformat())
    out.print(table)
    err.print(
        "list prices move; reserved, committed and marketplace prices are often far lower. "
        'Put your own rate in the clusters file (usd_per_gpu_hour), or name an offer (catalogue = "<id>").',
        highlight=False,
    )


@prices_app.command("clusters")
def clusters(
    db: DbOption = None,
    url: UrlOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    cluster: Annotated[str | None, typer.Option(help="Only this cluster id")] = None,
    admin_token: AdminOption = None,
    store: StoreOption = None,
) -> None:
    """Self-hosted clusters' bills per window, as last allocated (by the server, or `taskcost reprice`): attributed
    and idle."""
    from taskcost.cli._reprice import cluster_windows

    settings = settings_or_exit(db=db, url=url, admin_token=admin_token, store=store)
    rows = cluster_windows(settings, parse_time(since, "--since"), parse_time(until, "--until"), cluster)
    _print_windows(rows)


def _print_windows(rows: list[ClusterWindowCost]) -> None:
    if not rows:
        out.print(
            "no allocated cluster windows (configure clusters_file: the server allocates each window once it has "
            "ended; or run `taskcost reprice`)"
        )
        return
    table = Table("cluster", "window (UTC)", "GPUs", "$/GPU-h", "bill", "attributed", "idle", "busy", "calls")
    totals: dict[str, list[Decimal]] = {}
    for w in rows:
        start = datetime.fromtimestamp(w.window_start_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M")
        end = datetime.fromtimestamp(w.window_end_ns / 1e9, tz=UTC).strftime("%H:%M")
        table.add_row(
            w.cluster_id,
            f"{start}-{end}",
            f"{w.gpu_count} {w.gpu_type or ''}".strip(),
            str(w.usd_per_gpu_hour.normalize()),
            format_usd(w.bill_usd),
            format_usd(w.attributed_usd),
            format_usd(w.idle_usd),
            f"{w.busy_s / ((w.window_end_ns - w.window_start_ns) / 1e9):.1%}",
            str(w.calls),
        )
        t = totals.setdefault(w.cluster_id, [Decimal(0), Decimal(0), Decimal(0)])
        t[0] += w.bill_usd
        t[1] += w.attributed_usd
        t[2] += w.idle_usd
    out.print(table)
    for cid, (bill, attributed, idle) in totals.items():
        share = f" ({idle / bill:.1%} idle)" if bill else ""
        out.print(
            f"{cid}: bill {format_usd(bill)} = attributed to calls {format_usd(attributed)} "
            f"+ idle {format_usd(idle)}{share}",
            highlight=False,
        )


@app.command("explain-cost")
def explain_cost(
    span_id: Annotated[str, typer.Argument(help="The call's span id (hex), as in llm_calls.span_id")],
    trace_id: Annotated[str | None, typer.Option("--trace", help="Its trace id, when span ids repeat")] = None,
    db: DbOption = None,
    url: UrlOption = None,
    key: KeyOption = None,
) -> None:
    """Show how one call's cost was computed: the rates, the token counts, discounts and fees, the source."""
    from taskcost.analytics import explain_call
    from taskcost.cli._target import open_target

    settings = settings_or_exit(db=db, url=url, key=key)
    with opened(lambda: open_target(settings.db, settings.url, settings.key, settings.store)) as target:
        lines = explain_call(target, span_id, trace_id)  # the same lines as the dashboards' explain-cost
    if not lines:
        raise fail(f"no call with span id {span_id}" + (f" in trace {trace_id}" if trace_id else ""))
    for line in lines:
        out.print(line, highlight=False, markup=False)
