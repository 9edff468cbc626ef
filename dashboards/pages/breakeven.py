"""Breakeven: what renting GPUs would cost a month for the observed traffic, against per-token API prices, and the
volume at which renting starts to pay.

What-if controls (all in the URL) map one to one to the ``breakeven`` question's options: the GPU offer, $/GPU-hour,
GPUs per replica, throughput, utilisation, replicas always on, sizing, autoscale buffer, the API model self-hosted
traffic is priced at and the self-hosted model that measures throughput. An empty control means the question's
default (measured, or the catalogue's). The page shows the answer in plain words, the monthly cost of each option,
the cost curve against volume with the breakeven points marked, the ±30% sensitivity and the traffic it priced.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import Dash, Input, Output, dcc, html
from pydantic import ValidationError

from dashboards._charts import rows_of
from dashboards._context import PageContext
from dashboards._ui import (
    PageError,
    empty_state,
    filters_from_query,
    money,
    page,
    safe_callback,
    stat,
    url_id,
)
from taskcost.analytics import QUESTIONS, Options, ReadStore, UsageError, dimension_values, format_usd, gpu_offers

__all__ = ["register"]

NAME = "breakeven"
OPTION_KEYS = (
    "gpu",
    "usd_per_gpu_hour",
    "gpus_per_replica",
    "tokens_per_s",
    "utilisation",
    "min_replicas",
    "sizing",
    "autoscale_buffer",
    "api_model",
    "self_hosted_model",
)
"""The question's options the page sets (each a URL key of its own: none is a filter's name)."""
MODES = {  # curve column -> label, colour, line shape
    "api_usd": ("API (per token)", "#1c7ed6", "linear"),
    "always_on_usd": ("Rent, always on", "#e8590c", "hv"),
    "autoscaled_usd": ("Rent, autoscaled", "#2f9e44", "hv"),
    "hybrid_usd": ("Hybrid (N replicas + API)", "#7048e8", "linear"),  # dashed: the API line shows under it
}
NOWRAP = {"whiteSpace": "nowrap"}


def options_from_query(query: Mapping[str, Any]) -> Options:
    """The question's options from the URL (empty ones: the question's defaults); a bad value is a ``PageError``."""
    q = QUESTIONS[NAME]
    given = {k: query[k] for k in OPTION_KEYS if query.get(k) not in (None, "")}
    try:
        return q.options.model_validate(given)
    except ValidationError as exc:
        bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise PageError(f"bad what-if value: {bad}") from None


# -- the controls -------------------------------------------------------------------------------------------------
def _number(key: str, label: str, query: Mapping[str, str], placeholder: str, **kw: Any) -> Any:
    value = query.get(key)
    return dmc.NumberInput(
        id=url_id(key),
        label=label,
        value=value if value not in (None, "") else None,
        placeholder=placeholder,
        debounce=True,  # the URL (and the page) follow on Enter or when the field loses focus, not on each key
        hideControls=False,
        w=kw.pop("w", 150),
        **kw,
    )


def controls(store: ReadStore, query: Mapping[str, str]) -> Any:
    offers = [
        {"value": o.id, "label": f"{o.id} · {o.gpu_type} · ${o.usd_per_gpu_hour:.2f}/GPU-h"} for o in gpu_offers()
    ]
    if query.get("gpu") and query["gpu"] not in {o["value"] for o in offers}:  # a GPU type: the cheapest offer
        offers.insert(0, {"value": query["gpu"], "label": query["gpu"]})
    try:
        models = dimension_values(store, ["model"])["model"]
    except Exception:  # an unreadable store: the body says what went wrong
        models = []
    for key in ("api_model", "self_hosted_model"):
        if query.get(key) and query[key] not in models:
            models = [query[key], *models]
    return dmc.Paper(
        dmc.Stack(
            [
                dmc.Text("What if: renting", fw=600, size="sm"),
                dmc.Group(
                    [
                        dmc.Select(
                            id=url_id("gpu"),
                            label="GPU offer",
                            data=offers,
                            value=query.get("gpu") or None,
                            placeholder="the measured calls' rate",
                            clearable=True,
                            searchable=True,
                            w=330,
                        ),
                        _number(
                            "usd_per_gpu_hour", "$ per GPU-hour", query, "the offer's", min=0.01, step=0.1, prefix="$"
                        ),
                        _number("gpus_per_replica", "GPUs per replica", query, "measured", min=1, step=1, w=130),
                        _number("tokens_per_s", "Tokens/s per replica", query, "measured", min=1, step=100, w=160),
                        _number("utilisation", "Utilisation planned", query, "0.9", min=0.05, max=1, step=0.05, w=140),
                    ],
                    gap="sm",
                    align="flex-end",
                ),
                dmc.Group(
                    [
                        _number("min_replicas", "Replicas always on", query, "1", min=0, step=1, w=140),
                        dmc.Stack(
                            [
                                dmc.Text("Always-on sized for", size="sm", fw=500),
                                dmc.SegmentedControl(
                                    id=url_id("sizing"),
                                    data=[
                                        {"value": "peak", "label": "peak hour"},
                                        {"value": "p95", "label": "p95 hour"},
                                    ],
                                    value=query.get("sizing") or "peak",
                                ),
                            ],
                            gap=2,
                        ),
                        _number("autoscale_buffer", "Autoscale buffer", query, "0.1", min=0, max=10, step=0.05, w=140),
                        dmc.Select(
                            id=url_id("api_model"),
                            label="Self-hosted traffic priced as",
                            data=models,
                            value=query.get("api_model") or None,
                            placeholder="the same model's API",
                            clearable=True,
                            searchable=True,
                            w=240,
                        ),
                        dmc.Select(
                            id=url_id("self_hosted_model"),
                            label="Throughput measured on",
                            data=models,
                            value=query.get("self_hosted_model") or None,
                            placeholder="every self-hosted call",
                            clearable=True,
                            searchable=True,
                            w=240,
                        ),
                    ],
                    gap="sm",
                    align="flex-end",
                ),
            ],
            gap=6,
        ),
        withBorder=True,
        p="sm",
        radius="md",
    )


# -- the answer's parts -------------------------------------------------------------------------------------------
def _tph(v: Any) -> str:
    return "never" if v is None else f"{float(v):,.0f}"


def _usd(v: Any, places: int = 2) -> str:
    return format_usd(None if v is None else Decimal(str(v)), places=places, none="—")


def coverage(s: Mapping[str, Any], *, short: bool = False) -> str:
    """Which calls the money is for: those with an API rate (the others are left out of both sides)."""
    calls, excluded = s.get("calls") or 0, s.get("excluded_calls") or 0
    text = f"{calls - excluded:,} of {calls:,} calls priced" + ("" if short else " at API rates")
    if short or not excluded:
        return text
    return f"{text}; {excluded:,} without an API rate left out of both sides"


def monthly(usd: Any, cover: str) -> Any:
    """A monthly amount (to the cent: the inputs are estimates) with its coverage beside it, as ``money`` shows
    exact amounts."""
    return html.Span(
        [
            html.Span(_usd(usd), className="tc-money"),
            dmc.Text(cover, size="xs", c="dimmed", className="tc-coverage"),
        ]
    )


def _rate(v: Any) -> str:
    """$/GPU-hour: at least two places, more when it has them (``$2.093``)."""
    if v is None:
        return "—"
    d = Decimal(str(v)).normalize()
    places = max(2, -int(d.as_tuple().exponent))
    return format_usd(d, places=min(places, 4))


def answer_box(s: Mapping[str, Any]) -> Any:
    api = Decimal(s["api_monthly_usd"])
    cheapest = min(Decimal(s[k]) for k in ("rent_always_on_usd", "rent_autoscaled_usd", "best_hybrid_usd"))
    points = [s.get(k) for k in ("breakeven_tokens_per_hour", "breakeven_autoscaled_tokens_per_hour")]
    if cheapest < api:
        title, colour = "Renting is cheaper at today's volume", "green"
    elif any(p is not None for p in points) or s.get("breakeven_hybrid_tokens_per_hour") is not None:
        first = min(float(p) for p in (*points, s.get("breakeven_hybrid_tokens_per_hour")) if p is not None)
        ratio = first / float(s["tokens_per_hour"]) if s.get("tokens_per_hour") else None
        more = f" ({ratio:,.2f}× today's volume)" if ratio else ""
        title, colour = f"The API is cheaper: renting starts to pay at {first:,.0f} tokens/hour{more}", "blue"
    else:
        title, colour = "Renting never wins at these prices", "gray"
    return dmc.Alert(
        dmc.Text(s["verdict"], size="sm", id="breakeven-verdict"),
        title=title,
        color=colour,
        variant="light",
        radius="md",
        id="breakeven-answer",
        styles={"title": {"fontSize": "var(--mantine-font-size-lg)"}},
    )


def stats(s: Mapping[str, Any]) -> Any:
    cover = coverage(s, short=True)
    util = s.get("utilisation")
    return dmc.SimpleGrid(
        [
            stat(
                "API, a month",
                monthly(s["api_monthly_usd"], cover),
                f"{_usd(s['api_usd_per_mtok'], 4)}/M tokens",
                id="breakeven-api",
            ),
            stat(
                "Rent always on, a month",
                monthly(s["rent_always_on_usd"], cover),
                f"{s['always_on_replicas']} replica(s)" + (f", {util:.0%} of their throughput used" if util else ""),
                id="breakeven-always-on",
            ),
            stat(
                "Rent autoscaled, a month",
                monthly(s["rent_autoscaled_usd"], cover),
                f"{s['autoscaled_mean_replicas']:,.2f} replicas on average",
                id="breakeven-autoscaled",
            ),
            stat(
                "Best hybrid, a month",
                monthly(s["best_hybrid_usd"], cover),
                f"{s['best_hybrid_replicas']} fixed replica(s), the rest at API prices",
                id="breakeven-hybrid",
            ),
            stat(
                "Breakeven, always on (tokens/hour)",
                html.Span(_tph(s.get("breakeven_tokens_per_hour")), id="breakeven-point"),
                f"autoscaled {_tph(s.get('breakeven_autoscaled_tokens_per_hour'))} · hybrid "
                f"{_tph(s.get('breakeven_hybrid_tokens_per_hour'))}; observed {_tph(s.get('tokens_per_hour'))}",
                id="breakeven-points",
            ),
        ],
        cols=5,
        spacing="sm",
    )


def assumptions(s: Mapping[str, Any], options: Any) -> Any:
    tps = s.get("tokens_per_s")
    parts = [
        f"renting {s.get('gpu') or 'a GPU'} at {_rate(s.get('usd_per_gpu_hour'))}/GPU-hour "
        f"(from: {s.get('usd_per_gpu_hour_source')})",
        f"{s.get('gpus_per_replica')} GPU(s) per replica",
        f"{tps:,.1f} tokens/s per replica ({s.get('throughput_source')}, confidence {s.get('confidence')})"
        if tps
        else "no throughput",
        f"planned at {float(options.utilisation):.0%} utilisation",
        f"at least {options.min_replicas} replica(s) always on, sized for the {options.sizing} hour",
        f"autoscaled replica-hours +{float(options.autoscale_buffer):.0%}",
        f"{options.hours_per_month} hours a month",
    ]
    return dmc.Text("Assumed: " + "; ".join(parts) + ".", size="sm", c="dimmed", id="breakeven-assumptions")


def curve_figure(ans: Mapping[str, Any]) -> Any:
    import plotly.graph_objects as go

    rows = rows_of(ans["tables"]["curve"])
    s = ans["summary"]
    fig = go.Figure()
    xs = [float(r["tokens_per_hour"]) for r in rows]
    for col, (label, colour, shape) in MODES.items():
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[float(r[col]) for r in rows],
                mode="lines",
                name=label,
                line={
                    "color": colour,
                    "width": 3 if col == "api_usd" else 2,
                    "shape": shape,
                    "dash": "dash" if col == "hybrid_usd" else "solid",
                },
                hovertemplate="%{x:,.0f} tokens/hour: $%{y:,.2f} a month<extra>" + label + "</extra>",
            )
        )
    observed = float(s["tokens_per_hour"])
    fig.add_vline(x=observed, line={"dash": "dot", "color": "#495057"})
    fig.add_annotation(
        x=math.log10(observed), y=1, yref="paper", text="observed", showarrow=False, yanchor="bottom", font={"size": 11}
    )
    marks = [r for r in rows if r.get("mark") and r["mark"] != "observed"]
    if marks:
        fig.add_trace(
            go.Scatter(
                x=[float(r["tokens_per_hour"]) for r in marks],
                y=[float(r["api_usd"]) for r in marks],
                mode="markers+text",
                marker={"size": 13, "color": "#c92a2a", "symbol": "star"},
                text=[f"{r['mark']}: {float(r['tokens_per_hour']):,.0f}/h" for r in marks],
                textposition=["top left" if i % 2 == 0 else "bottom right" for i in range(len(marks))],
                textfont={"size": 11, "color": "#c92a2a"},
                name="breakeven",
                hovertemplate="%{text}<br>$%{y:,.2f} a month<extra></extra>",
            )
        )
    fig.update_xaxes(type="log", dtick="D2", title_text="tokens per hour (the observed profile scaled)")
    fig.update_yaxes(type="log", dtick="D2", title_text="USD a month", tickprefix="$")
    fig.update_layout(
        height=420,
        margin={"l": 70, "r": 20, "t": 30, "b": 50},
        legend={"orientation": "h", "y": -0.2},
        template="plotly_white",
    )
    return dmc.Stack(
        [
            dmc.Text("Monthly cost against volume", fw=600),
            dcc.Graph(figure=fig, id="breakeven-curve", config={"displaylogo": False}),
            dmc.Text(
                f"API spend grows with volume; rent grows in steps of one replica. The stars are where renting costs "
                f"no more than the API. Money for the priced traffic only: {coverage(s)}.",
                size="xs",
                c="dimmed",
            ),
        ],
        gap=4,
    )


def sensitivity_table(ans: Mapping[str, Any]) -> Any:
    s = ans["summary"]
    head = [
        "Case",
        "Tokens/s",
        "$/GPU-hour",
        "Always on",
        "Autoscaled",
        "Best hybrid",
        "Breakeven always on",
        "Breakeven autoscaled",
        "Breakeven hybrid",
    ]
    body = [
        dmc.TableTr(
            [
                dmc.TableTd(r["case"], style=NOWRAP),
                dmc.TableTd(f"{float(r['tokens_per_s']):,.1f}"),
                dmc.TableTd(_rate(r["usd_per_gpu_hour"])),
                dmc.TableTd(_usd(r["rent_always_on_usd"])),
                dmc.TableTd(_usd(r["rent_autoscaled_usd"])),
                dmc.TableTd(_usd(r["best_hybrid_usd"])),
                dmc.TableTd(_tph(r["breakeven_tokens_per_hour"])),
                dmc.TableTd(_tph(r["breakeven_autoscaled_tokens_per_hour"])),
                dmc.TableTd(_tph(r["breakeven_hybrid_tokens_per_hour"])),
            ],
            id=f"breakeven-sensitivity-{i}",
        )
        for i, r in enumerate(rows_of(ans["tables"]["sensitivity"]))
    ]
    return dmc.Stack(
        [
            dmc.Text(
                "Sensitivity: throughput and $/GPU-hour 30% either way (monthly cost; breakeven in tokens/hour)", fw=600
            ),
            dmc.Table(
                [dmc.TableThead(dmc.TableTr([dmc.TableTh(h) for h in head])), dmc.TableTbody(body)],
                withTableBorder=True,
                striped=True,
                fz="sm",
            ),
            dmc.Text(f"Money for the priced traffic only: {coverage(s)}.", size="xs", c="dimmed"),
        ],
        gap=4,
        id="breakeven-sensitivity",
    )


def traffic_table(ans: Mapping[str, Any]) -> Any:
    head = ["Provider", "Model", "Deployment", "Calls", "Tokens/hour", "Priced at", "API, a month", "Billed"]
    body = []
    for r in rows_of(ans["tables"]["traffic"]):
        unpriced = r.get("unpriced_calls") or 0
        billed = money(r["observed_cost_usd"], f"{unpriced:,} unpriced calls not in it" if unpriced else None)
        body.append(
            dmc.TableTr(
                [
                    dmc.TableTd(r["provider"]),
                    dmc.TableTd(r["model"]),
                    dmc.TableTd(r["deployment"]),
                    dmc.TableTd(f"{r['calls']:,}"),
                    dmc.TableTd(_tph(r["tokens_per_hour"])),
                    dmc.TableTd(dmc.Text(r["priced_at"] or "", size="xs")),
                    dmc.TableTd(_usd(r["api_monthly_usd"])),
                    dmc.TableTd(billed),
                ]
            )
        )
    return dmc.Stack(
        [
            dmc.Text("The traffic, and the API rates it is priced at", fw=600),
            dmc.TableScrollContainer(
                dmc.Table(
                    [dmc.TableThead(dmc.TableTr([dmc.TableTh(h) for h in head])), dmc.TableTbody(body)],
                    withTableBorder=True,
                    fz="sm",
                ),
                minWidth=800,
            ),
        ],
        gap=4,
        id="breakeven-traffic",
    )


def notes(ans: Mapping[str, Any]) -> Any:
    return dmc.Stack(
        [
            dmc.Text("Notes", fw=600),
            dmc.List([dmc.ListItem(dmc.Text(n, size="sm")) for n in ans["notes"]], size="sm", spacing=2),
        ],
        gap=4,
        id="breakeven-notes",
    )


def body(store: ReadStore, query: Mapping[str, Any]) -> Any:
    filters = filters_from_query(query)
    options = options_from_query(query)
    try:
        ans = QUESTIONS[NAME].run(store, filters, options).to_json()
    except UsageError as exc:  # e.g. no GPU rate known: say which control answers it
        return dmc.Alert(
            [
                dmc.Text(str(exc)),
                dmc.Text("Pick a GPU offer or a $ per GPU-hour, and a throughput, above.", size="sm", mt=4),
            ],
            title="Renting cannot be priced yet",
            color="blue",
            className="tc-prompt",
        )
    s = ans["summary"]
    if s.get("direction") == "none" or "api_monthly_usd" not in s:
        return dmc.Stack([empty_state("No priced traffic to compare"), dmc.Text(s.get("verdict", ""), size="sm")])
    return dmc.Stack(
        [
            answer_box(s),
            stats(s),
            assumptions(s, options),
            curve_figure(ans),
            sensitivity_table(ans),
            traffic_table(ans),
            notes(ans),
        ],
        gap="lg",
    )


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        return page(
            NAME, "Breakeven: rent vs API", query, ctx.store, controls(ctx.store, query), html.Div(id=f"{NAME}-body")
        )

    dash.register_page(NAME, path="/breakeven", name="Breakeven", layout=layout)

    @app.callback(Output(f"{NAME}-body", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh(query: dict[str, str] | None) -> Any:
        return body(ctx.store, query or {})
