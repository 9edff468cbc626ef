"""Engines: one model's deployment configurations side by side, the fastest decode first; the spread between the
fastest and the slowest, which of the five variables differ between them, and speculative decoding with and without.

Thin over the ``engines`` question: the model is the filter bar's Model (empty: the self-hosted model with the most
calls); ``same_as`` and ``min_calls`` are the question's options, each a URL key of its own. Every figure shown is
the answer's, as the CLI and ``GET /api/analytics/engines`` give it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import Dash, Input, Output, html
from pydantic import ValidationError

from dashboards._charts import Fig, graph, notes_list, pct, rows_of, section, usd
from dashboards._context import PageContext
from dashboards._ui import PageError, answer_table, empty_state, filters_from_query, page, safe_callback, url_id
from taskcost.analytics import QUESTIONS, Options, ReadStore

__all__ = ["register"]

NAME = "engines"
OPTION_KEYS = ("same_as", "min_calls")
"""The question's options the page sets (URL keys: neither is a filter's name)."""


def options_from_query(query: Mapping[str, Any]) -> Options:
    given = {k: query[k] for k in OPTION_KEYS if query.get(k) not in (None, "")}
    try:
        return QUESTIONS[NAME].options.model_validate(given)
    except ValidationError as exc:
        bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise PageError(f"bad option in the address: {bad}") from None


def controls(query: Mapping[str, str]) -> Any:
    return dmc.Group(
        [
            dmc.TextInput(
                id=url_id("same_as"),
                label="The same weights, under other names",
                value=query.get("same_as") or "",
                placeholder="e.g. an API offering of the model",
                debounce=True,
                w=320,
            ),
            dmc.NumberInput(
                id=url_id("min_calls"),
                label="Rank from calls",
                value=query.get("min_calls") or None,
                placeholder="20",
                min=1,
                step=5,
                debounce=True,
                w=140,
            ),
        ],
        gap="sm",
        align="flex-end",
    )


def _tps(v: Any) -> str:
    return "—" if v is None else f"{float(v):,.1f}"


def _s(v: Any) -> str:
    return "—" if v is None else f"{float(v):.3f} s"


def ranking_table(ans: Mapping[str, Any]) -> Any:
    money = {r["config"]: r for r in rows_of(ans["tables"]["money"])}
    timing = {r["config"]: r for r in rows_of(ans["tables"]["timing"])}
    rates = {r["config"]: r for r in rows_of(ans["tables"]["rates"])}
    head = ["Config", "Configuration", "Calls", "Decode tok/s", "Interval", "TTFT p50", "$/1M tokens",
            "Fully loaded", "Errors", "Rank"]  # fmt: skip
    body = []
    for r in rows_of(ans["tables"]["ranking"]):
        m, t, e = money[r["config"]], timing[r["config"]], rates[r["config"]]
        interval = "—" if r["decode_tps_low"] is None else f"{_tps(r['decode_tps_low'])}–{_tps(r['decode_tps_high'])}"
        rank = str(r["rank"]) if r["rank"] is not None else (r["unranked_because"] or "—")
        if r["needed_calls"]:
            rank += f": {r['needed_calls']:,} more calls"
        cells = [r["config"], r["configuration"], f"{r['calls']:,}", _tps(r["decode_tps"]), interval,
                 _s(t["ttft_p50_s"]), usd(m["usd_per_mtok"]), usd(m["loaded_usd_per_mtok"]), pct(e["error_rate"]),
                 rank]  # fmt: skip
        body.append(dmc.TableTr([dmc.TableTd(c, style={"whiteSpace": "nowrap"}) for c in cells]))
    return dmc.TableScrollContainer(
        dmc.Table(
            [dmc.TableThead(dmc.TableTr([dmc.TableTh(h) for h in head])), dmc.TableTbody(body)],
            striped=True,
            withTableBorder=True,
            fz="sm",
            id="engines-ranking",
        ),
        minWidth=900,
    )


def decode_figure(ans: Mapping[str, Any]) -> Any:
    rows = [r for r in rows_of(ans["tables"]["ranking"]) if r["decode_tps"] is not None]
    xs = [float(r["decode_tps"]) for r in rows]
    fig = Fig().add_bar(
        x=xs,
        y=[f"{r['config']} · {r['configuration']}" for r in rows],
        orientation="h",
        marker={"color": ["#1c7ed6" if r["rank"] is not None else "#adb5bd" for r in rows]},
        error_x={
            "type": "data",
            "array": [
                None if r["decode_tps_high"] is None else r["decode_tps_high"] - x
                for r, x in zip(rows, xs, strict=True)
            ],
            "arrayminus": [
                None if r["decode_tps_low"] is None else x - r["decode_tps_low"] for r, x in zip(rows, xs, strict=True)
            ],
        },
        hovertemplate="%{y}: %{x:,.1f} output tokens/s<extra></extra>",
        name="decode speed",
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title={"text": "decode speed, output tokens/s per call (median, with its interval)"})
    return graph(fig, "engines-decode-chart", height=120 + 36 * len(rows))


def readable(table: Mapping[str, Any]) -> dict[str, Any]:
    """A table of the answer as the page shows it (its terminal columns): money in dollars, rates in percent, times
    in seconds, speeds to one decimal."""
    columns = list(table.get("display") or table["columns"])
    out = []
    for row in rows_of(table):
        cells: list[Any] = []
        for c in columns:
            v = row.get(c)
            if v is None:
                cells.append("—")
            elif "usd" in c:
                cells.append(usd(v))
            elif isinstance(v, bool):
                cells.append("yes" if v else "no")
            elif c.endswith("_rate"):
                cells.append(pct(v))
            elif c.endswith("_s") and isinstance(v, float):
                cells.append(_s(v))
            elif isinstance(v, float) and c.startswith("decode_tps"):
                cells.append(_tps(v))
            elif isinstance(v, float):  # as the CLI prints it
                cells.append(f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}")
            else:
                cells.append(v)
        out.append(cells)
    return {"title": table.get("title", ""), "columns": columns, "rows": out}


def _sentence(title: str, text: str | None, id: str) -> Any:
    return dmc.Stack([dmc.Text(title, fw=600, size="sm"), dmc.Text(text or "—", size="sm", id=id)], gap=2)


def body(store: ReadStore, query: Mapping[str, Any]) -> Any:
    filters = filters_from_query(query)
    ans = QUESTIONS[NAME].run(store, filters, options_from_query(query)).to_json()
    s = ans["summary"]
    if not s["configurations"]:
        return dmc.Stack([empty_state("No configuration to compare"), notes_list(ans["notes"], "engines-notes")])
    words = dmc.Paper(
        dmc.Stack(
            [
                dmc.Text(
                    f"{s['model']}: {s['configurations']} configuration(s), {s['calls']:,} calls",
                    fw=600,
                    id="engines-model",
                ),  # fmt: skip
                _sentence("Spread", s["spread"], "engines-spread"),
                _sentence("Fastest against slowest: the five variables", s["differences"], "engines-differences"),
                _sentence("Speculative decoding, with and without", s["speculation"], "engines-speculation"),
            ],
            gap="xs",
        ),
        withBorder=True,
        p="md",
        radius="md",
    )
    tables = ans["tables"]
    return dmc.Stack(
        [
            words,
            section("Decode speed", "Output tokens per second of decode, the median per call.", decode_figure(ans)),
            section("Configurations", "The fastest decode first; unranked ones say why.", ranking_table(ans)),
            answer_table(readable(tables["variables"]), id="engines-variables"),
            answer_table(readable(tables["moved"]), id="engines-moved"),
            answer_table(readable(tables["pairs"]), id="engines-pairs"),
            answer_table(readable(tables["timing"]), id="engines-timing"),
            answer_table(readable(tables["rates"]), id="engines-rates"),
            answer_table(readable(tables["speculation"]), id="engines-spec"),
            answer_table(readable(tables["money"]), id="engines-money"),
            notes_list(ans["notes"], "engines-notes"),
        ],
        gap="md",
    )


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        return page(NAME, "Engines: one model's deployments", query, ctx.store, controls(query),
                    html.Div(id=f"{NAME}-body"))  # fmt: skip

    dash.register_page(NAME, path="/engines", name="Engines", layout=layout)

    @app.callback(Output(f"{NAME}-body", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh(query: dict[str, str] | None) -> Any:
        return body(ctx.store, query or {})
