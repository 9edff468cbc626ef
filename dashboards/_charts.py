"""Charts and tables the pages share: Plotly figures as plain dicts (``Fig``), answer tables made readable, the time
bucket of a page, and URL-kept choices whose default stays out of the address."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import dash_mantine_components as dmc
from dash import dcc

from dashboards._ui import PageError, filters_from_query
from taskcost.analytics import ReadStore, data_extent, format_usd

__all__ = [
    "BUCKETS",
    "BUCKET_MS",
    "NONE_LABEL",
    "STYLE",
    "Fig",
    "bucket_for",
    "bucket_of",
    "count",
    "choices",
    "graph",
    "label_of",
    "notes_list",
    "num",
    "page_bucket",
    "pct",
    "pretty",
    "rows_of",
    "section",
    "time_axis",
    "usd",
]

BUCKETS = ("minute", "hour", "day", "week")
NONE_LABEL = "(no value)"


def bucket_for(span: timedelta) -> str:
    """The trend's bucket for a selection ``span`` long: minutes up to 2 hours (a demo run, a fresh deployment),
    hours up to 3 days, days up to 120, weeks beyond."""
    if span <= timedelta(hours=2):
        return "minute"
    if span <= timedelta(days=3):
        return "hour"
    if span <= timedelta(days=120):
        return "day"
    return "week"


def page_bucket(store: ReadStore, query: Mapping[str, Any]) -> str:
    """The bucket a page's time series starts with: the URL's; else one that suits the time range; for all time,
    one that suits the selected tasks' span (``bucket_for``: minutes for a demo run, days for months of data)."""
    if query.get("bucket"):
        return str(query["bucket"])  # checked where it is used: a bad one shows an error box there
    if query.get("range") not in (None, "", "all"):
        return bucket_of(query)
    try:
        filters = filters_from_query(query)
    except PageError:  # shown by the page's callbacks
        return bucket_of(query)
    extent = data_extent(store, filters)
    if extent.first_start is None or extent.last_start is None:
        return bucket_of(query)
    return bucket_for(extent.last_start - extent.first_start)


def bucket_of(query: Mapping[str, Any]) -> str:
    """The time bucket: the URL's, else one that suits the time range (minutes for an hour or less, hours for a
    day)."""
    b = query.get("bucket")
    if b:
        if b not in BUCKETS:
            raise PageError(f"unknown time bucket {b!r}: one of {', '.join(BUCKETS)}")
        return str(b)
    if query.get("range") in ("15m", "1h"):
        return "minute"
    return "hour" if query.get("range") == "24h" else "day"


def num(v: Any) -> float | None:
    """A money string (or number) as a float, for drawing only (the figures shown as text stay exact)."""
    return None if v is None else float(v)


def count(v: Any) -> str:
    return "—" if v is None else f"{int(v):,}"


def pct(v: Any, places: int = 1) -> str:
    return "—" if v is None else f"{float(v) * 100:.{places}f}%"


def usd(v: Any) -> str:
    return format_usd(v, none="unpriced")


def label_of(v: Any) -> str:
    return NONE_LABEL if v in (None, "") else str(v)


def rows_of(table: Mapping[str, Any]) -> list[dict[str, Any]]:
    cols = table["columns"]
    return [dict(zip(cols, r, strict=True)) for r in table["rows"]]


def pretty(table: Mapping[str, Any], columns: Sequence[str], first: str | None = None) -> dict[str, Any]:
    """A table of an answer made readable: money as dollars, shares and rates as percent, no value as a label."""
    out = []
    for row in rows_of(table):
        cells: list[Any] = []
        for c in columns:
            v = row.get(c)
            if c == first:
                cells.append(label_of(v))
            elif c.endswith("_usd"):
                cells.append(format_usd(v, none="—"))
            elif c.endswith("_usd_per_mtok"):
                cells.append(format_usd(v, places=3, none="—"))
            elif isinstance(v, bool):
                cells.append("yes" if v else "no")
            elif c.endswith(("_rate", "_share")) or c.startswith("share_"):
                cells.append(pct(v))
            elif isinstance(v, float) and c.endswith("_s"):
                cells.append(f"{v:.3f} s")
            elif isinstance(v, float):
                cells.append(f"{v:,.2f}")
            elif isinstance(v, int) and not isinstance(v, bool):
                cells.append(f"{v:,}")
            else:
                cells.append(v)
        out.append(cells)
    return {"title": table.get("title", ""), "columns": list(columns), "rows": out}


_AXIS = {
    "gridcolor": "#EBF0F8",
    "linecolor": "#EBF0F8",
    "zerolinecolor": "#EBF0F8",
    "zerolinewidth": 2,
    "ticks": "",
    "automargin": True,
    "title": {"standoff": 15},
}
STYLE: dict[str, Any] = {
    "paper_bgcolor": "white",
    "plot_bgcolor": "white",
    "font": {"color": "#2a3f5f", "size": 12},
    "hovermode": "closest",
    "hoverlabel": {"align": "left"},
    "title": {"x": 0.02},
    "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
    "legend": {"orientation": "h", "y": -0.15},
    "xaxis": _AXIS,
    "yaxis": _AXIS,
}
"""Plotly's ``plotly_white`` look, as plain layout values."""


def _merge(into: dict[str, Any], props: Mapping[str, Any]) -> None:
    for k, v in props.items():
        if k == "title" and isinstance(v, str):
            v = {"text": v}
        if isinstance(v, Mapping):  # merged into a copy: the caller's (and STYLE's) dicts stay as they are
            if not isinstance(into.get(k), dict):
                into[k] = {}
            _merge(into[k], v)
        else:
            into[k] = v


class Fig:
    """A Plotly figure as the plain dict ``dcc.Graph`` takes, with the few ``go.Figure`` methods the pages use.
    (``go.Figure`` validates every property as it is set: 10-70 ms a figure, which a page of eight figures that must
    answer within a second cannot spare.)"""

    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []
        self.layout: dict[str, Any] = {}

    def add_bar(self, **props: Any) -> Fig:
        self.data.append({"type": "bar", **props})
        return self

    def add_scatter(self, **props: Any) -> Fig:
        self.data.append({"type": "scatter", **props})
        return self

    def update_layout(self, **props: Any) -> Fig:
        _merge(self.layout, props)
        return self

    def update_xaxes(self, **props: Any) -> Fig:
        return self.update_layout(xaxis=props)

    def update_yaxes(self, **props: Any) -> Fig:
        return self.update_layout(yaxis=props)

    def update_traces(self, **props: Any) -> Fig:
        for trace in self.data:
            _merge(trace, props)
        return self

    def to_dict(self, height: int) -> dict[str, Any]:
        layout: dict[str, Any] = {}
        _merge(layout, STYLE)
        _merge(layout, self.layout)
        layout["height"] = height
        return {"data": self.data, "layout": layout}


def graph(fig: Fig, id: str, height: int = 340) -> Any:
    return dcc.Graph(id=id, figure=fig.to_dict(height), config={"displayModeBar": False, "responsive": True})


def notes_list(notes: Sequence[str], id: str) -> Any:
    if not notes:
        return None
    return dmc.List([dmc.ListItem(n) for n in notes], size="xs", c="dimmed", id=id)


def section(title: str, explain: str, body: Any, *, extra: Any = None) -> Any:
    head: list[Any] = [dmc.Title(title, order=4)]
    if extra is not None:
        head.append(extra)
    return dmc.Paper(
        dmc.Stack(
            [
                dmc.Group(head, justify="space-between", align="flex-end"),
                dmc.Text(explain, size="sm", c="dimmed"),
                dcc.Loading(body, delay_show=300, type="dot"),
            ],
            gap="xs",
        ),
        withBorder=True,
        p="md",
        radius="md",
    )


def choices(
    values: Sequence[str], current: str | None, default: str, label: Any = None
) -> tuple[list[dict[str, str]], str]:
    """Options and value of a URL-kept control: the address's value, else the default (which the address leaves out
    until someone picks a value: the URL writer ignores controls appearing with a page)."""
    return [{"value": v, "label": label(v) if label else v} for v in values], current or default


BUCKET_MS = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000, "week": 7 * 86_400_000}


def time_axis(fig: Fig, x: Sequence[str], bucket: str) -> None:
    """A date axis half a bucket wider than the buckets on each side (so one bucket is a bar, not a sliver)."""
    if not x:
        return
    half = timedelta(milliseconds=BUCKET_MS[bucket] / 2)
    first, last = datetime.fromisoformat(min(x)), datetime.fromisoformat(max(x))
    fig.update_xaxes(type="date", range=[(first - half).isoformat(), (last + half).isoformat()])
