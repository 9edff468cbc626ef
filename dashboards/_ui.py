"""What every page shares: the filters in the URL, the filter bar, money beside its coverage, tables, empty states.

The URL is the state. Every control whose value belongs in the URL has the id ``url_id(key)``; one app-level
callback writes their values to the query string, and the page router renders the page again from it
(``layout(**query)``). So a view can be shared and reloaded, and each page's callbacks read one input: the page's
``dcc.Store`` holding the query (``query_store``), set once per render.
"""

from __future__ import annotations

import functools
import logging
import traceback
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

import dash_mantine_components as dmc
from dash import dcc, html
from pydantic import ValidationError

from taskcost.analytics import Filters, ReadStore, UsageError, dimension_values, format_usd

__all__ = [
    "FILTER_DIMENSIONS",
    "RANGES",
    "PageError",
    "answer_table",
    "coverage_text",
    "empty_state",
    "error_box",
    "filter_bar",
    "filters_from_query",
    "money",
    "page",
    "query_store",
    "safe_callback",
    "stat",
    "url_id",
]

log = logging.getLogger(__name__)

URL_TYPE = "tc-url"

FILTER_DIMENSIONS: tuple[tuple[str, str], ...] = (
    ("project", "Project"),
    ("kind", "Task kind"),
    ("model", "Model"),
    ("engine", "Engine"),
    ("engine_version", "Engine version"),
    ("gpu_type", "GPU"),
    ("cluster", "Cluster"),
)
"""The filter bar: URL key (a ``Filters`` field) -> label."""

RANGES: dict[str, timedelta | None] = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "all": None,
}
"""The time-range picker: ``?range=24h`` means since 24 hours before the page was rendered."""


class PageError(Exception):
    """A message for the person looking at the page (bad filters, a question that cannot be answered)."""


def url_id(key: str) -> dict[str, str]:
    """The id of a control whose value lives in the URL under ``key``."""
    return {"type": URL_TYPE, "key": key}


def query_store(page: str, query: Mapping[str, str]) -> dcc.Store:
    """The page's one input: the URL query it was rendered with (id ``<page>-query``)."""
    return dcc.Store(id=f"{page}-query", data=dict(query))


def filters_from_query(query: Mapping[str, Any] | None, *, now: datetime | None = None) -> Filters:
    """``Filters`` from URL query values (``range`` preset or ``since``/``until``, and any filter field).
    Unknown keys belong to the page (its own controls) and are ignored here; a bad value raises ``PageError``."""
    query = dict(query or {})
    fields = {k: v for k, v in query.items() if k in Filters.model_fields and v not in (None, "")}
    rng = query.get("range")
    if rng and rng != "all" and "since" not in fields:
        if rng not in RANGES:
            raise PageError(f"unknown time range {rng!r}: one of {', '.join(RANGES)}")
        delta = RANGES[rng]
        assert delta is not None
        fields["since"] = (now or datetime.now(UTC)) - delta
    if "golden" in fields:
        fields["golden"] = str(fields["golden"]).lower() in ("1", "true", "yes", "on")
    try:
        filters = Filters.model_validate(fields)
        filters.check()  # a time out of the store's range, or since not before until: said here, before any arithmetic
    except ValidationError as exc:
        bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise PageError(f"bad filter in the address: {bad}") from None
    except UsageError as exc:
        raise PageError(f"bad filter in the address: {exc}") from None
    return filters


def filter_bar(store: ReadStore, query: Mapping[str, str], dims: Sequence[tuple[str, str]] = FILTER_DIMENSIONS) -> Any:
    """Time range and one menu per dimension, each listing the values present in the store (the current value is
    kept even when absent, so a shared link still shows what it asks for)."""
    try:
        values = dimension_values(store, [d for d, _ in dims])
    except Exception:  # an unreadable store shows empty menus; the page itself says what went wrong
        log.exception("reading the filter values")
        values = {d: [] for d, _ in dims}
    menus = [
        dmc.Select(
            id=url_id("range"),
            label="Time range",
            data=[{"value": k, "label": "all time" if k == "all" else f"last {k}"} for k in RANGES],
            value=query.get("range") or "all",
            allowDeselect=False,
            w=120,
        )
    ]
    for dim, label in dims:
        current = query.get(dim) or None
        options = list(values.get(dim, []))
        if current and current not in options:
            options.insert(0, current)
        menus.append(
            dmc.Select(
                id=url_id(dim),
                label=label,
                data=options,
                value=current,
                placeholder="all",
                clearable=True,
                searchable=True,
                w=140,
            )
        )
    return dmc.Group(menus, gap="sm", align="flex-end", className="tc-filter-bar")


def page(name: str, title: str, query: Mapping[str, str], store: ReadStore, *body: Any, filters: bool = True) -> Any:
    """A page: title, the filter bar (unless ``filters=False``), its query store, and its body."""
    head: list[Any] = [dmc.Title(title, order=2)]
    if filters:
        head.append(filter_bar(store, query))
    return dmc.Stack([*head, query_store(name, query), *body], gap="md", id=f"{name}-page")


def coverage_text(attempts: int, unpriced: int, what: str = "call attempts") -> str:
    """How many of ``attempts`` a dollar figure covers (the unpriced ones are not in it)."""
    if not attempts:
        return f"no {what}"
    if not unpriced:
        return f"all {attempts:,} {what} priced"
    return f"{attempts - unpriced:,} of {attempts:,} {what} priced ({unpriced:,} unpriced, not in the dollars)"


def money(usd: Any, coverage: str | None = None) -> Any:
    """A money figure (``$0.012345``, ``unpriced`` when None) with its unpriced coverage beside it."""
    value = usd if usd is None or isinstance(usd, Decimal) else Decimal(str(usd))
    figure = html.Span(format_usd(value, none="unpriced"), className="tc-money")
    if not coverage:
        return figure
    return html.Span([figure, dmc.Text(coverage, size="xs", c="dimmed", className="tc-coverage")])


def stat(label: str, value: Any, sub: Any = None, *, id: str | None = None) -> Any:
    """A headline card: label, big figure, small print under it."""
    kids: list[Any] = [dmc.Text(label, size="sm", c="dimmed"), dmc.Text(value, size="xl", fw=700)]
    if sub is not None:
        kids.append(dmc.Text(sub, size="xs", c="dimmed"))
    props = {"id": id} if id else {}
    return dmc.Paper(kids, withBorder=True, p="md", radius="md", **props)


def answer_table(
    table: Mapping[str, Any], *, id: str | None = None, max_rows: int = 200, prose: tuple[str, ...] = ()
) -> Any:
    """One table of an answer's JSON (``{"title", "columns", "rows"}``) as a plain table; the ``prose`` columns (a
    sentence, not a name or a figure) wrap."""
    cols = list(table.get("display") or table["columns"])
    idx = [table["columns"].index(c) for c in cols]
    rows = table["rows"][:max_rows]
    # headers read as words; cells stay on one line (a model name broken over three lines is hard to read): a wide
    # table scrolls sideways instead
    head = dmc.TableThead(dmc.TableTr([dmc.TableTh(c.replace("_", " ")) for c in cols]))
    styles = [_PROSE if c in prose else _NOWRAP for c in cols]
    body = dmc.TableTbody(
        [dmc.TableTr([dmc.TableTd(_cell(r[i]), style=st) for i, st in zip(idx, styles, strict=True)]) for r in rows]
    )
    props = {"id": id} if id else {}
    return dmc.Stack(
        [
            dmc.Text(table.get("title", ""), fw=600),
            dmc.TableScrollContainer(
                dmc.Table([head, body], striped=True, highlightOnHover=True, withTableBorder=True, fz="sm"),
                minWidth=400,
            ),
            *(
                [dmc.Text(f"first {max_rows} of {len(table['rows'])} rows", size="xs", c="dimmed")]
                if len(table["rows"]) > max_rows
                else []
            ),
        ],
        gap=4,
        **props,
    )


_NOWRAP = {"whiteSpace": "nowrap"}
_PROSE = {"minWidth": "14em"}


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def empty_state(what: str = "No data yet", *, filtered: bool = True) -> Any:
    """What an empty store (or an empty selection) shows instead of a chart. ``filtered``: the page has filters,
    so widening them is one way out."""
    ways = "Send spans to this server's OTLP endpoint (/v1/traces) with the taskcost SDK"
    ways += ", widen the filters or the time range," if filtered else ","
    ways += " or run `taskcost demo` to see a simulated fleet."
    lead = "Nothing matches these filters. " if filtered else ""
    return dmc.Alert([dmc.Text(lead + ways)], title=what, color="gray", className="tc-empty")


def error_box(message: str) -> Any:
    return dmc.Alert(message, title="Cannot show this", color="red", className="tc-error")


F = TypeVar("F", bound=Callable[..., Any])


def safe_callback(n_outputs: int = 1, *, message_at: int = 0) -> Callable[[F], F]:
    """Wrap a page callback so that a bad filter or a failed question shows a message on the page (at output
    ``message_at``; the other outputs empty) instead of a traceback in the browser."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (PageError, UsageError) as exc:
                box = error_box(str(exc))
            except Exception as exc:  # the page must say what failed; the log keeps the traceback
                log.error("dashboard callback %s failed: %s", fn.__name__, "".join(traceback.format_exception(exc)))
                box = error_box(f"{type(exc).__name__}: {exc}")
            if n_outputs == 1:
                return box
            out: list[Any] = [None] * n_outputs
            out[message_at] = box
            return tuple(out)

        return wrapper  # type: ignore[return-value]

    return deco
