"""Data health: how spans arrive (the stored spans' receive times), what the server refused, skipped or holds in its
queue and spool, which prices it prices with, and which models have no price. Stored figures are the read key's
project; the server's counters are the whole server's (every project), as ``/metrics`` shows them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import dash
import dash_mantine_components as dmc
import plotly.graph_objects as go
from dash import Dash, Input, Output, dcc, html

from dashboards._context import PageContext
from dashboards._ui import empty_state, page, safe_callback, stat
from taskcost.analytics import (
    QUESTIONS,
    Filters,
    IngestActivity,
    format_usd,
    ingest_activity,
    missing_prices,
    price_sources,
)

__all__ = ["register"]

NAME = "health"
REFRESH_MS = 15_000


def _n(v: Any) -> str:
    return "—" if v is None else f"{int(v):,}"


def _ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "never"
    s = max(0.0, (now - at).total_seconds())
    if s < 90:
        return f"{s:.0f} s ago"
    if s < 90 * 60:
        return f"{s / 60:.0f} min ago"
    if s < 48 * 3600:
        return f"{s / 3600:.1f} h ago"
    return f"{s / 86400:.1f} days ago"


def _when(at: datetime | None) -> str:
    return "—" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _reasons(by: dict[str, int]) -> str | None:
    parts = [f"{k or 'all'}: {v:,}" for k, v in sorted(by.items()) if v]
    return ", ".join(parts) if parts else None


def _section(title: str, *body: Any, note: str | None = None) -> Any:
    head: list[Any] = [dmc.Title(title, order=4)]
    if note:
        head.append(dmc.Text(note, size="xs", c="dimmed"))
    return dmc.Stack([*head, *body], gap="xs")


def _grid(*cards: Any) -> Any:
    return dmc.SimpleGrid(list(cards), cols={"base": 1, "sm": 2, "lg": 4}, spacing="sm")


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, datetime):  # the views' times are UTC wall times
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


def _table(columns: list[str], rows: list[list[Any]], *, id: str) -> Any:
    head = dmc.TableThead(dmc.TableTr([dmc.TableTh(c) for c in columns]))
    body = dmc.TableTbody([dmc.TableTr([dmc.TableTd(_cell(v)) for v in r]) for r in rows])
    return dmc.TableScrollContainer(
        dmc.Table([head, body], striped=True, withTableBorder=True, fz="sm", id=id), minWidth=500
    )


def _ingest(act: IngestActivity) -> Any:
    if not act.spans:
        return empty_state("No spans stored yet", filtered=False)
    rate = act.rate_per_s
    lag = (
        "—"
        if act.lag_p50_s is None
        else f"{act.lag_p50_s:.2f} s / {act.lag_p95_s:.2f} s"
        if act.lag_p95_s is not None
        else f"{act.lag_p50_s:.2f} s"
    )
    cards = _grid(
        stat("Stored spans", f"{act.spans:,}", f"first received {_when(act.first_received)}", id="health-spans"),
        stat(
            "Ingest rate",
            f"{rate:,.2f} spans/s",
            f"last {act.recent_s // 60} minutes: {act.recent_spans:,} spans",
            id="health-rate",
        ),
        stat("Last span received", _ago(act.last_received, act.now), _when(act.last_received), id="health-last"),
        stat("Arrival lag p50 / p95", lag, "received minus span end, over the chart's hour", id="health-lag"),
    )
    xs = [b for b, _ in act.buckets]
    ys = [n / act.bucket_s for _, n in act.buckets]
    fig = go.Figure(
        go.Bar(
            x=xs,
            y=ys,
            customdata=[n for _, n in act.buckets],
            hovertemplate="%{x}<br>%{customdata} spans<extra></extra>",
        )
    )
    title = (
        "spans/s received, per minute, last hour"
        if act.window_is_now
        else f"spans/s received, per minute: none in the last hour; the hour up to {_when(act.window_end)}"
    )
    fig.update_layout(
        template="plotly_white",
        height=260,
        margin={"l": 50, "r": 20, "t": 36, "b": 40},
        title={"text": title, "font": {"size": 13}},
        yaxis_title="spans/s",
        bargap=0.1,
    )
    return dmc.Stack([cards, dcc.Graph(id="health-ingest-chart", figure=fig, config={"displaylogo": False})], gap="xs")


def _server(h: dict[str, Any]) -> Any:
    spans, req, writer, spool = h["spans"], h["requests"], h["writer"], h["spool"]
    refused = sum(req["refused_by_reason"].values())
    invalid = sum(req["invalid_by_status"].values())
    throttled = sum(req["throttled_by_reason"].values())
    intake = _grid(
        stat("Spans received", _n(spans["received"]), "in well-formed requests", id="health-received"),
        stat("Spans accepted (new)", _n(spans["accepted"]), "committed to the store", id="health-accepted"),
        stat(
            "Spans deduplicated",
            _n(spans["deduplicated"]),
            "re-sent and skipped: already stored",
            id="health-deduplicated",
        ),
        stat(
            "Spans rejected",
            _n(spans["rejected"]),
            _reasons(spans["rejected_by_reason"]) or "invalid spans (partial success)",
            id="health-rejected",
        ),
        stat(
            "Requests refused (503)",
            _n(refused),
            _reasons(req["refused_by_reason"]) or "queue full, too many in flight, store failure",
            id="health-refused",
        ),
        stat(
            "Requests invalid (4xx)",
            _n(invalid),
            _reasons(req["invalid_by_status"]) or "bad bodies, unknown keys",
            id="health-invalid",
        ),
        stat(
            "Requests throttled",
            _n(throttled),
            _reasons(req["throttled_by_reason"]) or "waited for a decoding slot or queue room",
        ),
        stat(
            "Attribute values ignored",
            _n(spans["attribute_values_ignored"]),
            "read as absent (not a number, out of range)",
        ),
    )
    alive = writer["alive"]
    queue = _grid(
        stat(
            "Write queue",
            f"{writer['queued_spans']:,} / {writer['queue_limit_spans']:,}",
            "spans waiting for the writer / the most it takes now"
            + ("" if alive else " — THE WRITER IS NOT RUNNING (see the server log)"),
            id="health-queue",
        ),
        stat(
            "Spool backlog",
            f"{spool['backlog_spans']:,} spans" if spool["enabled"] else "spool off",
            f"acknowledged, not yet committed; {spool['bytes'] / 1e6:,.1f} MB on disk"
            if spool["enabled"]
            else "intake is acknowledged after the commit",
            id="health-spool",
        ),
        stat(
            "Set-aside records",
            _n(spool["set_aside_records"]),
            "acknowledged batches the writer could not commit: `taskcost spool retry`",
            id="health-set-aside",
        ),
        stat("SQL queries refused (429)", _n(req["sql_refused"]), "every query slot and queue place taken"),
    )
    warn = (
        [dmc.Alert("The store's writer is not running: nothing is committed.", color="red", className="tc-error")]
        if not alive
        else []
    )
    return dmc.Stack([*warn, intake, queue], gap="sm")


def _allocation(a: dict[str, Any] | None) -> Any:
    """The server's own sharing-out of each cluster window's GPU-hours (self-hosted calls get their price then)."""
    if a is None:
        return stat("GPU-hour allocation", "unknown", "this server does not report it", id="health-allocation")
    if a.get("error"):
        sub = f"failed {_when(_parse(a.get('error_at')))}: {a['error']}"
    elif a.get("allocated_through"):
        sub = f"{_n(a.get('windows_allocated'))} windows, through {_when(_parse(a['allocated_through']))}"
        if a.get("next_due_at"):
            sub += f"; next due {_when(_parse(a['next_due_at']))}"
    else:
        sub = "no window allocated yet" if a.get("enabled") else "off: run `taskcost reprice` to allocate"
    return stat("GPU-hour allocation", str(a.get("state", "unknown")), sub, id="health-allocation")


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _clusters_sub(configured: str | None, priced_with: list[str]) -> str:
    """Which clusters file the stored self-hosted calls were priced with (their ``price_source``), beside the one
    configured now (a file that changed since, e.g. a cluster handed back, has another hash)."""
    if not priced_with:
        return "configured now; no stored call was priced with a clusters file"
    text = "stored self-hosted calls priced with " + ", ".join(priced_with)
    return text if configured in priced_with else f"configured now (no stored call priced with it); {text}"


def _prices(h: dict[str, Any] | None, store: Any) -> Any:
    parts: list[Any] = []
    uses = price_sources(store)
    priced_with = list(dict.fromkeys(u.price_source for u in uses if (u.price_source or "").startswith("clusters ")))
    if h is not None:
        p = h["prices"]
        parts.append(
            _grid(
                stat(
                    "Price data",
                    p["data"],
                    f"{_n(p['providers'])} providers, {_n(p['models'])} models"
                    + (f"; from {p['origin']}" if p.get("origin") else ""),
                    id="health-price-data",
                ),
                stat("Price book", p["book"] or "none", "custom models, discounts, fees", id="health-price-book"),
                stat(
                    "Clusters file",
                    p["clusters"] or "none",
                    _clusters_sub(p["clusters"], [str(u) for u in priced_with]),
                    id="health-clusters",
                ),
                _allocation(h.get("cluster_allocation")),
            )
        )
        if p.get("error"):
            parts.append(
                dmc.Alert(
                    f"The price files changed and do not load; the previous prices stay in use: {p['error']}",
                    title="Price reload failed",
                    color="red",
                    className="tc-error",
                )
            )
    if uses:
        parts.append(dmc.Text("Stored LLM calls were priced with", size="sm", fw=600))
        parts.append(
            _table(
                ["price source", "price book", "calls", "last priced (UTC)"],
                [[u.price_source or "(unpriced)", u.price_book_version, f"{u.calls:,}", u.last_priced] for u in uses],
                id="health-price-sources",
            )
        )
    return dmc.Stack(parts, gap="xs")


def _unpriced(store: Any) -> Any:
    mp = missing_prices(store)
    cov = mp.coverage
    if not cov.calls:
        return dmc.Text("No LLM calls stored yet.", size="sm", c="dimmed", id="health-unpriced")
    if not mp.rows:
        return dmc.Alert(
            f"Every stored LLM call is priced ({cov.calls:,} call attempts).",
            color="green",
            id="health-unpriced",
        )
    rows = [
        [r.provider, r.model, r.reason, f"{r.calls:,}", f"{r.input_tokens:,}", f"{r.output_tokens:,}", r.last_seen]
        for r in mp.rows
    ]
    return dmc.Stack(
        [
            dmc.Text(cov.sentence(), size="sm", c="orange"),
            _table(
                ["provider", "model", "why unpriced", "calls", "input tokens", "output tokens", "last seen (UTC)"],
                rows,
                id="health-unpriced",
            ),
            dmc.Text(
                "Unpriced is not $0: these calls are left out of every cost. Add the model to the price book, or "
                "update the price data (`taskcost prices update`), then `taskcost reprice`.",
                size="xs",
                c="dimmed",
            ),
        ],
        gap="xs",
    )


RECONCILE_DAYS = 30


def _reconcile(store: Any, now: datetime) -> Any:
    """Does every dollar add up: the last ``RECONCILE_DAYS`` days' reconciliation (``taskcost reconcile``), its
    headline and its lines. The check to run before trusting any other page."""
    q = QUESTIONS["reconcile"]
    since = (now - timedelta(days=RECONCILE_DAYS)).replace(minute=0, second=0, microsecond=0)
    ans = q.run(store, Filters.model_validate({"since": since}), q.options.model_validate({}))
    s = ans.summary()
    closes = bool(s.get("closes")) and bool(s.get("bills_balance", True))
    head = dmc.Alert(s["headline"], color="green" if closes else "orange", id="health-reconcile")
    lines = ans.tables()[0].frame
    rows = [
        [
            r["kind"],
            r["name"],
            _n(r["calls"]),
            _n(r["unpriced_calls"]),
            format_usd(r["usd"], none="—" if r["calls"] is None else "unpriced"),
        ]
        for r in lines.iter_rows(named=True)
    ]
    body: list[Any] = [head]
    if rows:
        body.append(_table(["line", "provider / cluster / tool", "calls", "unpriced", "paid"], rows, id="health-lines"))
    body += [dmc.Text(n, size="xs", c="dimmed") for n in ans.notes]
    return dmc.Stack(body, gap="xs")


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        return page(
            NAME,
            "Data health",
            query,
            ctx.store,
            html.Div(id=f"{NAME}-body"),
            dcc.Interval(id=f"{NAME}-tick", interval=REFRESH_MS),
            filters=False,
        )

    dash.register_page(NAME, path="/health", name="Data health", layout=layout)

    @app.callback(
        Output(f"{NAME}-body", "children"), Input(f"{NAME}-query", "data"), Input(f"{NAME}-tick", "n_intervals")
    )
    @safe_callback()
    def refresh(_query: dict[str, str] | None, _tick: int | None) -> Any:
        now = datetime.now(UTC)
        h = ctx.health() if ctx.health is not None else None
        act = ingest_activity(ctx.store, now=now)
        if h is None:
            server: Any = dmc.Alert(
                "The server's own figures are not available: these dashboards run without a server.",
                color="gray",
            )
            scope = "Stored figures are this read key's project."
        else:
            server = _server(h)
            scope = (
                "Stored figures (spans, ingest rate, prices used, unpriced models) are this read key's project. The "
                "server's counters are the whole server's, every project, since it started at "
                f"{_when(h['started_at'])}, as /metrics shows them."
            )
        return dmc.Stack(
            [
                dmc.Text(
                    [scope, f" Refreshed {now.strftime('%H:%M:%S')} UTC, every {REFRESH_MS // 1000} s."],
                    size="sm",
                    c="dimmed",
                    id="health-scope",
                ),
                _section(
                    "Does every dollar add up",
                    _reconcile(ctx.store, now),
                    note=f"The last {RECONCILE_DAYS} days: API + GPU attributed + GPU idle + tools = what was paid "
                    "(taskcost reconcile).",
                ),
                _section("Stored spans", _ingest(act), note="From the spans' receive times in the store."),
                _section("Server intake", server, note="Every project, since the server started (as /metrics)."),
                _section("Prices", _prices(h, ctx.store)),
                _section("Unpriced models", _unpriced(ctx.store), note="Stored LLM calls without a price."),
            ],
            gap="lg",
        )
