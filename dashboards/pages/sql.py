"""SQL: a read-only console over the views, with their columns beside it, the answer as a table, a CSV download and
a quick chart. The query lives in the URL (``?q=``), so a view can be shared; it runs through the same sandbox,
limits and read-key project as ``/api/sql``."""

from __future__ import annotations

import json
from typing import Any

import dash
import dash_mantine_components as dmc
import plotly.graph_objects as go
from dash import Dash, Input, Output, State, dcc, html

from dashboards._context import PageContext
from dashboards._ui import empty_state, error_box, page, safe_callback, url_id
from taskcost.analytics import RELATIONS, UsageError, run_sql, sql_schema

__all__ = ["register"]

NAME = "sql"

PAGE_ROWS = 1_000
PAGE_BYTES = 8 * 1024 * 1024
"""What a query shows on the page at most (the table and the chart)."""
CSV_ROWS = 10_000
CSV_BYTES = 32 * 1024 * 1024
"""What the CSV download holds at most (``/api/sql``'s default limits)."""

EXAMPLES: dict[str, str] = {
    "Tasks by kind and outcome": (
        "SELECT kind, outcome, count(*) AS tasks, sum(cost_usd) AS cost_usd\n"
        "FROM tasks\nGROUP BY kind, outcome\nORDER BY kind, outcome"
    ),
    "Spend by model": (
        "SELECT provider, model, count(*) AS calls, sum(cost_usd) AS cost_usd,\n"
        "       count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_calls\n"
        "FROM llm_calls\nGROUP BY provider, model\nORDER BY cost_usd DESC NULLS LAST"
    ),
    "LLM calls per hour": (
        "SELECT date_trunc('hour', start_time) AS hour, count(*) AS calls, sum(cost_usd) AS cost_usd\n"
        "FROM llm_calls\nGROUP BY hour\nORDER BY hour"
    ),
    "Slowest tool calls": (
        "SELECT tool_name, count(*) AS calls, quantile_cont(duration_s, 0.95) AS p95_s\n"
        "FROM tool_calls\nGROUP BY tool_name\nORDER BY p95_s DESC"
    ),
    "Latest spans": "SELECT name, service_name, start_ns, received_ns, status_code\nFROM spans\n"
    "ORDER BY received_ns DESC\nLIMIT 50",
}
DEFAULT_SQL = EXAMPLES["Tasks by kind and outcome"]

_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
_NUMERIC_PREFIX = ("DECIMAL", "DOUBLE", "FLOAT", "REAL", "UHUGEINT")

# Ctrl+Enter (Cmd+Enter) in the editor presses Run. Attached once per rendered editor.
_KEYS_JS = """
function (id) {
    const attach = function () {
        const el = document.getElementById(id);
        if (!el) { return false; }
        if (!el.dataset.tcKeys) {
            el.dataset.tcKeys = "1";
            el.addEventListener("keydown", function (e) {
                if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
                    e.preventDefault();
                    const run = document.getElementById("sql-run");
                    if (run) { run.click(); }
                }
            });
        }
        return true;
    };
    if (!attach()) { setTimeout(attach, 200); }
    return window.dash_clientside.no_update;
}
"""


def _q(query: dict[str, Any] | None) -> str:
    """The query kept in the URL (the last one when the address repeats ``q``)."""
    q = (query or {}).get("q") or ""
    if isinstance(q, list):
        q = q[-1] if q else ""
    return str(q)


def _numeric(sql_type: str) -> bool:
    t = sql_type.upper()
    return t in _NUMERIC or t.startswith(_NUMERIC_PREFIX)


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, list | dict):
        return json.dumps(v)
    return str(v)


def _md_cell(text: str) -> str:
    """``text`` as a Markdown table cell shows it (a type such as ``STRUCT(a VARCHAR)`` has no pipe; one would end
    the cell)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")


def _table(columns: list[str], types: list[str], rows: list[list[Any]]) -> Any:
    """The answer as one table component (its rows as plain data: a thousand rows render at once)."""
    head = [html.Span([c, dmc.Text(t, size="xs", c="dimmed")]) for c, t in zip(columns, types, strict=True)]
    return html.Div(
        dmc.Table(
            data={"head": head, "body": [[_cell(v) for v in row] for row in rows]},
            striped=True,
            highlightOnHover=True,
            withTableBorder=True,
            withColumnBorders=True,
            stickyHeader=True,
            fz="sm",
            id="sql-table",
        ),
        style={"maxHeight": "520px", "overflow": "auto"},
    )


def _schema_panel(relations: list[Any]) -> Any:
    """Each relation's columns as one Markdown table: one component each, not five a column (~1,400 components for
    the views' ~290 columns kept the browser busy rendering for seconds after every answer)."""
    items = []
    for rel in relations:
        lines = ["| column | type |", "|---|---|"]
        lines += [f"| `{name}` | {_md_cell(typ)} |" for name, typ in rel.columns]
        items.append(
            dmc.AccordionItem(
                [
                    dmc.AccordionControl(
                        dmc.Group([dmc.Text(rel.name, ff="monospace", fw=600), dmc.Badge(str(len(rel.columns)))])
                    ),
                    dmc.AccordionPanel(
                        dcc.Markdown(
                            "\n".join(lines),
                            className="tc-schema-columns",
                            style={"fontSize": "var(--mantine-font-size-xs)"},
                        )
                    ),
                ],
                value=rel.name,
            )
        )
    return dmc.Accordion(items, multiple=True, value=[], variant="contained", id="sql-schema-list")


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        q = _q(query)
        editor = dmc.Stack(
            [
                dmc.Textarea(
                    id="sql-editor",
                    value=q or DEFAULT_SQL,
                    autosize=True,
                    minRows=7,
                    maxRows=22,
                    styles={"input": {"fontFamily": "var(--mantine-font-family-monospace)", "fontSize": 13}},
                    spellCheck=False,
                    label="One read-only SELECT",
                    description=f"Over {', '.join(RELATIONS)}: the same sandbox, limits and project as /api/sql. "
                    "Ctrl+Enter runs it.",
                ),
                dmc.Group(
                    [
                        dmc.Button("Run", id="sql-run", n_clicks=0),
                        dmc.Select(
                            id="sql-example",
                            data=list(EXAMPLES),
                            placeholder="Examples",
                            clearable=True,
                            w=240,
                        ),
                        dmc.Button("Download CSV", id="sql-csv", variant="light", n_clicks=0, disabled=not q),
                        dmc.Text(f"CSV: the whole answer, up to {CSV_ROWS:,} rows", size="xs", c="dimmed"),
                    ],
                    gap="sm",
                ),
                # the query as the URL keeps it (?q=): Run writes it here, the router renders the page from it
                dcc.Input(id=url_id("q"), type="hidden", value=q),
            ],
            gap="xs",
        )
        schema = dmc.Paper(
            [
                dmc.Text("Schema", fw=600),
                dmc.Text("What a query may read: the views and the raw spans.", size="xs", c="dimmed"),
                html.Div(id="sql-schema"),
            ],
            withBorder=True,
            p="sm",
            radius="md",
        )
        chart = dmc.Stack(
            [
                dmc.Group(
                    [
                        dmc.Select(id="sql-x", label="x", data=[], w=200),
                        dmc.Select(id="sql-y", label="y (a number)", data=[], w=200),
                        dmc.SegmentedControl(id="sql-chart-kind", data=["bar", "line"], value="bar"),
                    ],
                    align="flex-end",
                    gap="sm",
                ),
                html.Div(id="sql-chart"),
            ],
            gap="xs",
            id="sql-chart-section",
            style={"display": "none"},  # shown once there is an answer to chart
        )
        return page(
            NAME,
            "SQL",
            query,
            ctx.store,
            html.Div(id="sql-notice"),
            dmc.Grid(
                [dmc.GridCol(editor, span={"base": 12, "md": 8}), dmc.GridCol(schema, span={"base": 12, "md": 4})]
            ),
            html.Div(id="sql-status"),
            html.Div(id="sql-result-view"),
            html.Div(id="sql-csv-message"),
            chart,
            dcc.Store(id="sql-result"),
            dcc.Store(id="sql-again"),
            dcc.Store(id="sql-keys"),
            dcc.Download(id="sql-download"),
            filters=False,
        )

    dash.register_page(NAME, path="/sql", name="SQL", layout=layout)

    app.clientside_callback(_KEYS_JS, Output("sql-keys", "data"), Input("sql-editor", "id"))

    @app.callback(
        Output(url_id("q"), "value"),
        Output("sql-again", "data"),
        Input("sql-run", "n_clicks"),
        State("sql-editor", "value"),
        State(url_id("q"), "value"),
        State("sql-again", "data"),
        prevent_initial_call=True,
    )
    def run(_clicks: int, text: str | None, current: str | None, again: int | None) -> Any:
        """Run puts the query in the URL (the page renders again from it); the same query again runs it again."""
        text = (text or "").strip()
        if text and text == (current or "").strip():
            return dash.no_update, (again or 0) + 1
        return text, dash.no_update

    @app.callback(Output("sql-editor", "value"), Input("sql-example", "value"), prevent_initial_call=True)
    def example(name: str | None) -> Any:
        return EXAMPLES.get(name or "", dash.no_update)

    @app.callback(Output("sql-schema", "children"), Output("sql-notice", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback(2)
    def schema(_query: dict[str, str] | None) -> Any:
        panel = _schema_panel(sql_schema(ctx.store))
        has_data = run_sql(ctx.store, "SELECT EXISTS (SELECT 1 FROM spans) AS has_data").rows[0][0]
        notice = (
            None if has_data else empty_state("No spans stored yet: every query answers with no rows", filtered=False)
        )
        return panel, notice

    @app.callback(
        Output("sql-status", "children"),
        Output("sql-result-view", "children"),
        Output("sql-result", "data"),
        Input(f"{NAME}-query", "data"),
        Input("sql-again", "data"),
    )
    @safe_callback(3)
    def answer(query: dict[str, str] | None, _again: int | None) -> Any:
        q = _q(query)
        if not q.strip():
            hint = dmc.Text("Write a SELECT (or pick an example) and press Run.", c="dimmed", size="sm")
            return hint, None, None
        try:
            ans = run_sql(ctx.store, q, max_rows=PAGE_ROWS, max_bytes=PAGE_BYTES)
        except UsageError as exc:
            box = dmc.Alert(str(exc), title="The query was refused or failed", color="red", className="tc-error")
            return html.Div(box, id="sql-error"), None, None
        n = len(ans.rows)
        text = f"{n:,} row{'' if n == 1 else 's'} in {ans.elapsed_s:.3f} s"
        if ans.truncated:
            limit = "the page's row limit" if ans.truncated_by == "rows" else "the page's size limit"
            text = (
                f"first {n:,} rows: the answer has more ({limit}). Narrow the query, or download the CSV "
                f"(up to {CSV_ROWS:,} rows)"
            )
        status = dmc.Text(text, size="sm", c="orange" if ans.truncated else "dimmed", id="sql-row-count")
        view = _table(ans.columns, ans.types, ans.rows) if ans.columns else None
        return status, view, ans.to_json()

    @app.callback(
        Output("sql-download", "data"),
        Output("sql-csv-message", "children"),
        Input("sql-csv", "n_clicks"),
        State(f"{NAME}-query", "data"),
        prevent_initial_call=True,
    )
    @safe_callback(2, message_at=1)
    def download(_clicks: int, query: dict[str, str] | None) -> Any:
        q = _q(query)
        if not q.strip():
            return None, dmc.Text("Run a query first.", size="sm", c="dimmed")
        try:
            ans = run_sql(ctx.store, q, max_rows=CSV_ROWS, max_bytes=CSV_BYTES)
        except UsageError as exc:
            return None, error_box(str(exc))
        note = None
        if ans.truncated:
            note = dmc.Text(
                f"The CSV holds the first {len(ans.rows):,} rows: the answer has more.", size="sm", c="orange"
            )
        return dcc.send_string(ans.csv(), "taskcost-query.csv"), note

    @app.callback(
        Output("sql-x", "data"),
        Output("sql-x", "value"),
        Output("sql-y", "data"),
        Output("sql-y", "value"),
        Output("sql-chart", "children"),
        Output("sql-chart-section", "style"),
        Input("sql-result", "data"),
        Input("sql-x", "value"),
        Input("sql-y", "value"),
        Input("sql-chart-kind", "value"),
    )
    def chart(result: dict[str, Any] | None, x: str | None, y: str | None, kind: str | None) -> Any:
        """The answer as a bar or line chart of one numeric column over another column (the first ones by
        default); hidden while there is no answer."""
        if not result or not result.get("rows"):
            return [], None, [], None, None, {"display": "none"}
        columns: list[str] = result["columns"]
        types: list[str] = result["types"]
        numeric = [c for c, t in zip(columns, types, strict=True) if _numeric(t)]
        if x not in columns:
            x = next((c for c in columns if c not in numeric), columns[0])
        if y not in numeric:
            y = next((c for c in numeric if c != x), None)
        if y is None:
            note = dmc.Text("No numeric column to chart.", size="sm", c="dimmed")
            return columns, x, numeric, None, note, {}
        try:
            fig = _figure(result, x, y, kind)
        except (TypeError, ValueError) as exc:  # a value a chart cannot place: say so, keep the table
            return columns, x, numeric, y, error_box(f"cannot chart {y} by {x}: {exc}"), {}
        return columns, x, numeric, y, dcc.Graph(id="sql-graph", figure=fig, config={"displaylogo": False}), {}


def _figure(result: dict[str, Any], x: str, y: str, kind: str | None) -> go.Figure:
    columns: list[str] = result["columns"]
    xi, yi = columns.index(x), columns.index(y)
    x_type = result["types"][xi].upper()
    xs = [_label(r[xi]) for r in result["rows"]]
    ys = [None if r[yi] is None else float(r[yi]) for r in result["rows"]]
    trace = go.Scatter(x=xs, y=ys, mode="lines+markers") if kind == "line" else go.Bar(x=xs, y=ys)
    fig = go.Figure(trace)
    fig.update_layout(
        template="plotly_white",
        height=360,
        margin={"l": 50, "r": 20, "t": 30, "b": 50},
        xaxis_title=x,
        yaxis_title=y,
        title={"text": f"{y} by {x}", "font": {"size": 14}},
    )
    if not _numeric(x_type) and not x_type.startswith(("TIMESTAMP", "DATE", "TIME")):
        fig.update_xaxes(type="category")  # text that looks like numbers or dates stays text
    return fig


def _label(v: Any) -> Any:
    if v is None:
        return "NULL"
    if isinstance(v, list | dict):
        return json.dumps(v)
    return v
