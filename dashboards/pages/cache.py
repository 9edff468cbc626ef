"""Cache: how much input the prompt cache served (by any dimension and over time), what it saved and what it missed
(with coverage), whether hits bring the first token sooner, and which task kinds break their prompt prefix.

One callback, one question: ``cache`` of ``taskcost.analytics`` grouped by the URL's ``by`` and bucketed by its
``bucket``. Everything else here is presentation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import Dash, Input, Output, dcc, html

from dashboards._charts import (
    BUCKET_MS,
    BUCKETS,
    Fig,
    bucket_of,
    choices,
    graph,
    label_of,
    notes_list,
    num,
    page_bucket,
    pct,
    pretty,
    rows_of,
    section,
    time_axis,
    usd,
)
from dashboards._context import PageContext
from dashboards._ui import (
    answer_table,
    empty_state,
    filters_from_query,
    money,
    page,
    safe_callback,
    stat,
    url_id,
)
from taskcost.analytics import DIMENSIONS, QUESTIONS, format_usd

__all__ = ["register"]

NAME = "cache"
DEFAULT_BY = "kind"
TOP_GROUPS = 20  # bars per chart; the table lists every group
TOP_LINES = 10  # lines (and stacks) over time
MAX_BUCKETS = 200  # the latest buckets over time (as the cost question's time series)
OUTPUTS = ("headline", "groups", "time", "ttft", "prefix", "models")

SAVED, MISSED, HIT = "#2f9e44", "#e03131", "#1c7ed6"
PALETTE = ("#1c7ed6", "#f76707", "#2f9e44", "#ae3ec9", "#e03131", "#0ca678", "#f59f00", "#4263eb", "#d6336c", "#868e96")
HIT_BANDS = ("0%", "(0, 25%]", "(25, 50%]", "(50, 75%]", "(75, 100%]")


def _usd_text(value: Any) -> str:
    """Money as the answer gives it (a Decimal, or its JSON string)."""
    return format_usd(value, places=6, none="unknown")


def _coverage(unpriced_calls: int, calls: int, tokens: int, what: str) -> str:
    # "unpriced" alone read as "no price at all" (Data health's sense) for self-hosted calls, which are priced per
    # GPU-hour: here it is the per-token rate a cache token is priced at that is missing
    if not unpriced_calls:
        return f"all {calls:,} calls have a per-token price"
    return (
        f"{unpriced_calls:,} of {calls:,} calls have no per-token price (self-hosted, or unpriced): {tokens:,} "
        f"{what} tokens without dollars"
    )


# -- headline ----------------------------------------------------------------------------------------------------
def _headline(s: Mapping[str, Any]) -> Any:
    calls = int(s["calls"])
    sampled = int(s.get("measured_calls") or calls) < calls
    missed_sub = (
        f"{s['missed_tokens']:,} tokens of every selected call repeated a prompt prefix without being read from the "
        "cache (the Cost page's waste counts those of completed tasks' last attempts only)"
    )
    if sampled:
        missed_sub += f" (measured on {s['measured_calls']:,} of {calls:,} calls, scaled)"
    breaks = (
        f"{s['prefix_breaks']:,} of {s['prefix_compared_calls']:,} compared calls changed an earlier block"
        if s.get("prefix_compared_calls")
        else "no call carries the SDK's prompt fingerprint"
    )
    return dmc.Stack(
        [
            dmc.SimpleGrid(
                [
                    stat(
                        "Hit rate",
                        pct(s.get("hit_rate")),
                        f"{s['cache_read_tokens']:,} of {s['input_tokens']:,} input tokens read from the cache",
                        id="cache-hit-rate",
                    ),
                    stat(
                        "Saved",
                        money(
                            s.get("saved_usd"),
                            _coverage(s["unpriced_calls"], calls, s["unpriced_cache_read_tokens"], "cache-read"),
                        ),
                        f"cache reads at (input − cache-read rate), net of {_usd_text(s.get('write_premium_usd'))} "
                        "cache-write premium (writes at cache-write − input rate)",
                        id="cache-saved",
                    ),
                    stat(
                        "Missed (all calls)",
                        money(
                            s.get("missed_usd"),
                            _coverage(s["unpriced_calls"], calls, s["unpriced_missed_tokens"], "missed"),
                        ),
                        missed_sub,
                        id="cache-missed",
                    ),
                    stat(
                        "Prefix break rate",
                        pct(s.get("prefix_break_rate")),
                        breaks,
                        id="cache-break-rate",
                    ),
                ],
                cols={"base": 1, "sm": 2, "lg": 4},
                spacing="sm",
            ),
            dmc.Text(s.get("headline", ""), size="sm", id="cache-headline-text"),
        ],
        gap="xs",
    )


# -- by group ----------------------------------------------------------------------------------------------------
def _height(n: int) -> int:
    return max(260, 90 + 30 * n)


def _by_group(groups: list[dict[str, Any]], by: str) -> Any:
    top = groups[:TOP_GROUPS]
    names = [label_of(g[by]) for g in top]
    hit = Fig().add_bar(
        y=names,
        x=[g["hit_rate"] for g in top],
        orientation="h",
        marker={"color": HIT},
        text=[pct(g["hit_rate"]) for g in top],
        textposition="outside",
        cliponaxis=False,
        customdata=[[g["cache_read_tokens"], g["input_tokens"], g["calls"]] for g in top],
        hovertemplate=(
            "<b>%{y}</b><br>hit rate %{text}<br>%{customdata[0]:,} of %{customdata[1]:,} input tokens"
            "<br>%{customdata[2]:,} calls<extra></extra>"
        ),
    )
    hit.update_layout(title=f"Hit rate by {by}", yaxis={"autorange": "reversed"})
    hit.update_xaxes(tickformat=".0%", range=[0, 1.15])
    money_fig = Fig()
    for col, tokens, label, color in (
        ("saved_usd", "unpriced_cache_read_tokens", "saved", SAVED),
        ("missed_usd", "unpriced_missed_tokens", "missed", MISSED),
    ):
        money_fig.add_bar(
            y=names,
            x=[num(g[col]) for g in top],
            orientation="h",
            name=label,
            marker={"color": color},
            customdata=[[usd(g[col]), g["unpriced_calls"], g[tokens]] for g in top],
            hovertemplate=(
                f"<b>%{{y}}</b><br>{label}: %{{customdata[0]}}<br>unpriced: %{{customdata[1]:,}} calls, "
                "%{customdata[2]:,} tokens without dollars<extra></extra>"
            ),
        )
    money_fig.update_layout(barmode="group", title=f"Saved and missed by {by}", yaxis={"autorange": "reversed"})
    money_fig.update_xaxes(tickprefix="$")
    money_fig.update_yaxes(
        tickvals=names,
        ticktext=[
            f"{n} ({g['unpriced_calls']:,} unpriced)" if g["unpriced_calls"] else n
            for n, g in zip(names, top, strict=True)
        ],
    )
    h = _height(len(top))
    return dmc.SimpleGrid(
        [graph(hit, "cache-hit-by-group", h), graph(money_fig, "cache-money-by-group", h)],
        cols={"base": 1, "lg": 2},
        spacing="sm",
    )


GROUP_COLUMNS = (
    "calls",
    "input_tokens",
    "cache_read_tokens",
    "hit_rate",
    "saved_usd",
    "write_premium_usd",
    "missed_tokens",
    "missed_usd",
    "fingerprint_calls",
    "size_estimate_calls",
    "unpriced_calls",
    "unpriced_cache_read_tokens",
    "unpriced_missed_tokens",
)


# -- over time ---------------------------------------------------------------------------------------------------
def _over_time(rows: list[dict[str, Any]], groups: list[dict[str, Any]], by: str, bucket: str) -> Any:
    """Hit rate per bucket, one line per group (the ``TOP_LINES`` with the most input); saved (up) and missed (down)
    per bucket, stacked by group."""
    order = [g[by] for g in sorted(groups, key=lambda g: -(g["input_tokens"] or 0))][:TOP_LINES]
    buckets = sorted({r["bucket"] for r in rows})
    if not buckets:
        return None
    latest = buckets[-MAX_BUCKETS:]
    per: dict[Any, list[dict[str, Any]]] = {grp: [] for grp in order}
    for r in rows:
        if r[by] in per and r["bucket"] >= latest[0]:
            per[r[by]].append(r)
    hit, money_fig = Fig(), Fig()
    for i, grp in enumerate(order):
        mine = sorted(per[grp], key=lambda r: r["bucket"])
        x = [r["bucket"] for r in mine]
        color = PALETTE[i % len(PALETTE)]
        name = label_of(grp)
        hit.add_scatter(
            x=x,
            y=[r["hit_rate"] for r in mine],
            mode="lines+markers",
            name=name,
            line={"color": color},
            customdata=[[r["cache_read_tokens"], r["input_tokens"]] for r in mine],
            hovertemplate=(
                f"<b>{name}</b><br>%{{x}}<br>hit rate %{{y:.1%}}<br>%{{customdata[0]:,}} of %{{customdata[1]:,}} "
                "input tokens<extra></extra>"
            ),
        )
        money_fig.add_bar(
            x=x,
            y=[num(r["saved_usd"]) for r in mine],
            name=name,
            legendgroup=name,
            marker={"color": color},
            hovertemplate=f"<b>{name}</b><br>%{{x}}<br>saved %{{y:$.6f}}<extra></extra>",
        )
        money_fig.add_bar(
            x=x,
            y=[None if r["missed_usd"] is None else -float(r["missed_usd"]) for r in mine],
            name=f"{name} (missed)",
            legendgroup=name,
            showlegend=False,
            marker={"color": color, "opacity": 0.55, "pattern": {"shape": "/"}},
            customdata=[[usd(r["missed_usd"])] for r in mine],
            hovertemplate=f"<b>{name}</b><br>%{{x}}<br>missed %{{customdata[0]}}<extra></extra>",
        )
    more = f"; the {TOP_LINES} with the most input of {len(groups)}" if len(groups) > TOP_LINES else ""
    if len(buckets) > len(latest):
        more += f"; the latest {len(latest)} of {len(buckets)} {bucket}s (narrow the time range for the others)"
    hit.update_layout(title=f"Hit rate per {bucket}, by {by}" + (f"<br><sup>{more[2:]}</sup>" if more else ""))
    hit.update_yaxes(tickformat=".0%", rangemode="tozero")
    money_fig.update_layout(barmode="relative", title=f"Saved (above 0) and missed (below 0, hatched) per {bucket}")
    money_fig.update_yaxes(tickprefix="$")
    money_fig.update_traces(width=0.8 * BUCKET_MS[bucket])
    for fig in (hit, money_fig):
        time_axis(fig, latest, bucket)
    return dmc.SimpleGrid(
        [graph(hit, "cache-time-hit"), graph(money_fig, "cache-time-money")], cols={"base": 1, "lg": 2}, spacing="sm"
    )


# -- TTFT by hit rate --------------------------------------------------------------------------------------------
def _ttft(by_hit: list[dict[str, Any]], by_size: list[dict[str, Any]]) -> Any:
    fig = Fig()
    bands = [r["hit_rate_band"] for r in by_hit]
    fig.add_bar(
        x=bands,
        y=[r["median_ttft_s"] for r in by_hit],
        name="median, all calls",
        marker={"color": HIT},
        customdata=[[r["calls"], r["ttft_calls"], pct(r["hit_rate"])] for r in by_hit],
        hovertemplate=(
            "<b>hit rate %{x}</b><br>median TTFT %{y:.3f} s<br>%{customdata[1]:,} of %{customdata[0]:,} calls report a "
            "TTFT<br>band's hit rate %{customdata[2]}<extra></extra>"
        ),
    )
    fig.add_scatter(
        x=bands,
        y=[r["p95_ttft_s"] for r in by_hit],
        name="p95, all calls",
        mode="markers",
        marker={"symbol": "line-ew-open", "size": 26, "color": "#1864ab", "line": {"width": 2}},
        hovertemplate="<b>hit rate %{x}</b><br>p95 TTFT %{y:.3f} s<extra></extra>",
    )
    sizes: list[str] = []
    for r in by_size:
        if r["input_size_band"] not in sizes:
            sizes.append(r["input_size_band"])
    for i, size in enumerate(sizes):
        mine = {r["hit_rate_band"]: r for r in by_size if r["input_size_band"] == size}
        fig.add_scatter(
            x=list(HIT_BANDS),
            y=[mine[b]["median_ttft_s"] if b in mine else None for b in HIT_BANDS],
            name=f"median, input {size}",
            mode="lines+markers",
            connectgaps=True,
            line={"color": PALETTE[(i + 1) % len(PALETTE)], "dash": "dot"},
            customdata=[[mine[b]["ttft_calls"] if b in mine else 0] for b in HIT_BANDS],
            hovertemplate=(
                f"<b>input {size}</b>, hit rate %{{x}}<br>median TTFT %{{y:.3f}} s<br>%{{customdata[0]:,}} calls"
                "<extra></extra>"
            ),
        )
    fig.update_layout(
        title="Time to first token by the call's own hit rate (n: calls with a TTFT)",
        bargap=0.35,
        legend={"y": -0.25},
    )
    counts = {r["hit_rate_band"]: r["ttft_calls"] for r in by_hit}
    fig.update_xaxes(
        categoryorder="array",
        categoryarray=list(HIT_BANDS),
        tickvals=list(HIT_BANDS),
        ticktext=[f"{b}<br>n={counts.get(b, 0):,}" for b in HIT_BANDS],
    )
    fig.update_yaxes(title="seconds", rangemode="tozero")
    return graph(fig, "cache-ttft", 380)


# -- prefix stability --------------------------------------------------------------------------------------------
def _breaks(stability: list[dict[str, Any]]) -> Any:
    names = [label_of(r["kind"]) for r in stability]
    fig = Fig().add_bar(
        y=names,
        x=[r["break_rate"] for r in stability],
        orientation="h",
        marker={"color": MISSED},
        text=[
            f"{r['breaks']:,} of {r['compared_calls']:,}"
            + (f" · mostly {r['top_break_kind']} block {r['top_break_block']}" if r["top_break_kind"] else "")
            for r in stability
        ],
        textposition="outside",
        cliponaxis=False,
        customdata=[[pct(r["mean_stable_share"]), r["after_break_tokens"]] for r in stability],
        hovertemplate=(
            "<b>%{y}</b><br>break rate %{x:.1%} (%{text})<br>mean stable share of the prompt %{customdata[0]}"
            "<br>%{customdata[1]:,} tokens after the break<extra></extra>"
        ),
    )
    fig.update_layout(title="Which task kinds break their prompt prefix", yaxis={"autorange": "reversed"})
    fig.update_xaxes(tickformat=".0%", range=[0, 1.6], tickvals=[0, 0.25, 0.5, 0.75, 1])
    return graph(fig, "cache-breaks", _height(len(stability)))


def _breakers_table(table: Mapping[str, Any]) -> dict[str, Any]:
    """Where prefixes break: the block named in words."""
    t = pretty(
        table,
        ("kind", "break_kind", "breaks", "share_of_breaks", "after_break_tokens", "after_break_usd",
         "missed_tokens", "missed_usd", "unpriced_calls"),
        first="kind",
    )  # fmt: skip
    for row, raw in zip(t["rows"], rows_of(table), strict=True):
        row[1] = f"{raw['break_kind']} block {raw['break_block']}"
    t["columns"][1] = "where"
    return t


def _prefix(tables: Mapping[str, Any]) -> Any:
    stability = rows_of(tables["prefix_stability"])
    if not stability:
        return dmc.Alert(
            "No call carries the SDK's prompt fingerprint (prompt_chars), so where prefixes break is unknown. The "
            "taskcost SDK records it on every LLM call.",
            color="gray",
            id="cache-no-fingerprint",
        )
    return dmc.Stack(
        [
            dmc.SimpleGrid(
                [
                    _breaks(stability),
                    answer_table(_breakers_table(tables["prefix_breakers"]), id="cache-breakers-table"),
                ],
                cols=1,  # the table's nine columns need the card's width
                spacing="sm",
            ),
            answer_table(
                pretty(tables["prefix_stability"], tables["prefix_stability"]["display"], first="kind"),
                id="cache-stability-table",
            ),
        ],
        gap="sm",
    )


MODEL_COLUMNS = (  # what fits the page; the CLI's CSV and JSON carry the unpriced tokens too
    "provider",
    "model",
    "input_usd_per_mtok",
    "cache_read_usd_per_mtok",
    "cache_write_usd_per_mtok",
    "calls",
    "hit_rate",
    "saved_usd",
    "write_premium_usd",
    "missed_tokens",
    "missed_usd",
    "unpriced_calls",
)


# -- the page ----------------------------------------------------------------------------------------------------
def _by_control(query: Mapping[str, str]) -> Any:
    data, value = choices(DIMENSIONS, query.get("by") or None, DEFAULT_BY, lambda d: d.replace("_", " "))
    return dmc.Select(id=url_id("by"), data=data, value=value, allowDeselect=False, w=170, size="xs", label="group by")


def _bucket_control(query: Mapping[str, str], default: str) -> Any:
    data, value = choices(BUCKETS, query.get("bucket") or None, default)
    return dmc.SegmentedControl(id=url_id("bucket"), data=data, value=value, size="xs")


def _body(ans: Mapping[str, Any], by: str, bucket: str) -> tuple[Any, ...]:
    s, tables = ans["summary"], ans["tables"]
    groups = rows_of(tables["groups"])
    grouped = [
        _by_group(groups, by),
        answer_table(pretty(tables["groups"], (by, *GROUP_COLUMNS), first=by), id="cache-groups-table"),
    ]
    over_time = _over_time(rows_of(tables["over_time"]), groups, by, bucket) if "over_time" in tables else None
    ttft_rows = rows_of(tables["ttft_by_hit_rate"])
    ttft = (
        dmc.SimpleGrid(
            [
                _ttft(ttft_rows, rows_of(tables["ttft_by_input_size"])),
                answer_table(
                    pretty(tables["ttft_by_hit_rate"], tables["ttft_by_hit_rate"]["columns"]), id="cache-ttft-table"
                ),
            ],
            cols={"base": 1, "lg": 2},
            spacing="sm",
        )
        if any(r["ttft_calls"] for r in ttft_rows)
        else dmc.Alert(
            "No selected call reports a time to first token (streamed calls do).", color="gray", id="cache-no-ttft"
        )
    )
    models = [
        answer_table(pretty(tables["by_model"], MODEL_COLUMNS, first="model"), id="cache-models-table"),
        notes_list(ans["notes"], "cache-notes"),
    ]
    return _headline(s), grouped, over_time, ttft, _prefix(tables), models


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        by = query.get("by") or DEFAULT_BY
        bucket = page_bucket(ctx.store, query)  # its callbacks get it with the query (the URL keeps only a choice)
        return page(
            NAME,
            "Cache",
            {**query, "bucket": bucket},
            ctx.store,
            dcc.Loading(html.Div(id="cache-headline"), delay_show=300, type="dot"),
            section(
                f"By {by.replace('_', ' ')}",
                "Hit rate = cache-read tokens / input tokens. Saved: cache reads at (input rate − cache-read rate). "
                "Missed: input that repeated the previous call's prompt prefix but was not read from the cache, at the "
                "same rates. Unpriced calls (self-hosted, or a model without a known cache-read rate) count in the "
                "tokens, not in the dollars.",
                html.Div(id="cache-groups"),
                extra=_by_control(query),
            ),
            section(
                "Over time",
                "By each call's start (UTC; weeks start on Monday).",
                html.Div(id="cache-time"),
                extra=_bucket_control(query, bucket),
            ),
            section(
                "Time to first token vs hit rate",
                "Each call's own hit rate, in bands. Bigger prompts read more from the cache and also take longer: "
                "compare hit-rate bands within one input size (the dotted lines).",
                html.Div(id="cache-ttft"),
            ),
            section(
                "Prefix breakers",
                "Calls the SDK fingerprinted and compared with the previous call of their task: how often a block of "
                "the earlier prompt changed (a timestamp in the system prompt, a reordered tool list), and where. "
                "Tokens after the break are what the cache could no longer serve.",
                html.Div(id="cache-prefix"),
            ),
            section(
                "By model, at its rates",
                "The rates each model's dollars used (USD per million tokens), and what could not be priced.",
                html.Div(id="cache-models"),
            ),
        )

    dash.register_page(NAME, path="/cache", name="Cache", layout=layout)

    @app.callback(*(Output(f"cache-{o}", "children") for o in OUTPUTS), Input(f"{NAME}-query", "data"))
    @safe_callback(len(OUTPUTS))
    def refresh(query: dict[str, str] | None) -> Any:
        query = query or {}
        filters = filters_from_query(query)
        by = query.get("by") or DEFAULT_BY
        bucket = bucket_of(query)
        q = QUESTIONS["cache"]
        ans = q.run(ctx.store, filters, q.options(by=by, bucket=bucket)).to_json()
        if not ans["summary"].get("calls"):
            return (empty_state("No LLM calls yet"), *([None] * (len(OUTPUTS) - 1)))
        return _body(ans, by, bucket)
