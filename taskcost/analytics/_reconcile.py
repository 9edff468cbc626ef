"""Reconcile: does every dollar add up. API spend + attributed GPU + idle GPU + tools = what was paid.

The check a reader runs before trusting any other page (docs/analytics.md, "Reconcile: does every dollar add up"):

- **API**: the priced non-self-hosted calls that started in [since, until), per provider (``call_scope``).
- **GPU**: the self-hosted clusters' bills (``store.cluster_costs``: the allocated windows, not readable from the SQL
  sandbox), counting the windows whose start is in [since, until). Each priced self-hosted call carries its share of
  every window it ran in (its ``price_detail``); those shares, added up per window, must equal the window's
  ``attributed_usd`` to the cent, and ``attributed_usd + idle_usd`` must equal ``bill_usd``: that is the
  reconciliation (``closes``).
- **Tools**: the priced tool calls that started in [since, until), per tool name.

Unscoped (only ``since``, ``until``, ``cluster``, ``deployment`` set) the GPU lines are the whole bills. Otherwise
(a project, as a read key's, or any other filter) they are the selection's share: its calls' own shares of each
window, and of that window's idle cost the part pro rata to them (``idle x mine / attributed``); never another
project's figures. Money is ``Decimal`` throughout; an unpriced call is counted, never $0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Any, ClassVar, Protocol, runtime_checkable

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import Answer, Table, frame
from taskcost.analytics._filters import CALL_DIMENSIONS, TASK_DIMENSIONS, Filters, Sql, call_scope, utc, utc_text
from taskcost.analytics._question import NoOptions, Question, UsageError
from taskcost.pricing import ClusterWindowCost, format_usd
from taskcost.store import ReadStore

__all__ = ["QUESTION", "ReconcileAnswer", "reconcile"]

_PLACES = Decimal("0.000000000001")  # the views' money scale, DECIMAL(38, 12)
_CENT = Decimal("0.005")  # "to the cent": a difference that rounds to $0.00
_WHOLE = frozenset({"since", "until", "cluster", "deployment"})
"""The filters under which the GPU lines are whole bills; any other one (a project first) makes them a share."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SHARES_TYPE = '[{"start":"VARCHAR","usd":"DECIMAL(38,12)"}]'
_LINE_TYPES = {
    "kind": "String", "name": "String", "calls": "Int64", "priced_calls": "Int64", "unpriced_calls": "Int64",
    "usd": "Money", "calls_usd": "Money", "difference_usd": "Money", "bill_usd": "Money", "windows": "Int64",
}  # fmt: skip
"""The lines' columns and their polars types by name (``Money``: the views' DECIMAL(38, 12))."""


def _lines_schema() -> dict[str, Any]:
    """The lines' polars schema (built when asked: importing this module does not import polars)."""
    return {c: pl.Decimal(38, 12) if t == "Money" else getattr(pl, t) for c, t in _LINE_TYPES.items()}


@runtime_checkable
class BillReader(Protocol):
    """A store that gives the clusters' allocated windows (``DuckDBStore`` and the server's store do)."""

    def cluster_costs(self, **options: Any) -> list[ClusterWindowCost]: ...


@dataclass(frozen=True)
class ReconcileAnswer(Answer):
    """The lines that make up what was paid (``lines``), their sums and whether the self-hosted side closes."""

    question: ClassVar[str] = "reconcile"
    terminal_keys: ClassVar[tuple[str, ...]] = (
        "headline", "total_usd", "api_usd", "gpu_attributed_usd", "gpu_idle_usd", "tools_usd", "bills_usd",
        "closes", "difference_usd", "unpriced_calls", "unpriced_tool_calls", "windows", "scope",
    )  # fmt: skip
    figures: dict[str, Any]
    lines: pl.DataFrame

    def summary(self) -> dict[str, Any]:
        return dict(self.figures)

    def tables(self) -> list[Table]:
        return [
            Table(
                "lines",
                "What was paid, line by line (API per provider, GPU per cluster, tools per tool)",
                self.lines,
                display=("kind", "name", "calls", "priced_calls", "unpriced_calls", "usd", "difference_usd"),
            )
        ]


# -- exact arithmetic ----------------------------------------------------------------------------------------------
def _pro_rata(idle: Decimal, mine: Decimal, attributed: Decimal) -> Decimal:
    """The selection's part of a window's idle cost: pro rata to its attributed dollars in the window."""
    if not mine or not attributed:
        return Decimal(0)
    with localcontext(prec=60):
        return (idle * mine / attributed).quantize(_PLACES, rounding=ROUND_HALF_EVEN)


def _plus(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    return b if a is None else a if b is None else a + b


def _ns(at: datetime) -> int:
    return (utc(at) - _EPOCH) // timedelta(microseconds=1) * 1000


def _iso_ns(text: str) -> int:
    """A window's start as a call's price detail writes it (``2026-11-02T10:00:00Z``), in ns since 1970."""
    return _ns(datetime.fromisoformat(text.replace("Z", "+00:00")))


# -- SQL: calls, shares, tools -------------------------------------------------------------------------------------
_LINE_SQL = (
    " SELECT {kind} AS kind, {name} AS name, count(*) AS calls, count(cost_usd) AS priced_calls, sum(cost_usd) AS usd"
    " FROM {rel} GROUP BY 1, 2 ORDER BY 1, 2 NULLS LAST"
)
_SELF_HOSTED = "coalesce(deployment = 'self_hosted', FALSE)"


def _and(conds: list[Sql]) -> Sql:
    return Sql(" AND ".join(c.text for c in conds) or "TRUE", [p for c in conds for p in c.params])


def _in_range(column: str, filters: Filters) -> list[Sql]:
    out = [Sql(f"{column} >= CAST(? AS TIMESTAMP)", [utc_text(filters.since)])] if filters.since is not None else []
    if filters.until is not None:
        out.append(Sql(f"{column} < CAST(? AS TIMESTAMP)", [utc_text(filters.until)]))
    return out


def _call_lines(store: ReadStore, filters: Filters) -> pl.DataFrame:
    """Per provider (API calls) and per cluster (self-hosted calls): the calls that started in [since, until)."""
    kind = f"CASE WHEN {_SELF_HOSTED} THEN 'gpu_attributed' ELSE 'api' END"
    name = f"CASE WHEN {_SELF_HOSTED} THEN cluster_id ELSE provider END"
    sql = Sql("WITH ") + call_scope(filters) + Sql(_LINE_SQL.format(kind=kind, name=name, rel="scoped_calls"))
    return frame(store, sql, filters)


def _shares(store: ReadStore, filters: Filters, longest_ns: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The priced self-hosted calls' shares of the windows that start in [since, until), from each call's price
    detail: per (cluster, window start) their sum, and per cluster the calls that hold one."""
    selected = filters.narrowed(deployment="self_hosted", since=None, until=None)
    conds = [Sql("c.cost_usd IS NOT NULL")]
    if filters.since is not None:  # a call that ended before since holds no share of a later window
        conds.append(Sql("c.end_time >= CAST(? AS TIMESTAMP)", [utc_text(filters.since)]))
    if filters.until is not None:  # nor one that started a whole window after until
        late = utc(filters.until) + timedelta(microseconds=longest_ns // 1000)
        conds.append(Sql("c.start_time < CAST(? AS TIMESTAMP)", [utc_text(late)]))
    base = (
        Sql("WITH ")
        + call_scope(selected)
        + Sql(
            ",\ns AS (SELECT c.cluster_id, c.project || '/' || c.trace_id || '/' || c.span_id AS call_key, "
            "u.w.start AS window_start, CAST(replace(u.w.start, 'Z', '') AS TIMESTAMP) AS ws, u.w.usd AS usd "
            f"FROM scoped_calls AS c, unnest(from_json(json_extract(c.price_detail, '$.windows'), '{_SHARES_TYPE}')) "
            "AS u(w) WHERE "
        )
        + _and(conds)
        + Sql(")\nSELECT @COLUMNS@ FROM s WHERE ")
        + _and(_in_range("ws", filters))
    )

    def read(columns: str, keys: str) -> pl.DataFrame:
        sql = Sql(base.text.replace("@COLUMNS@", columns), base.params)
        return frame(store, sql + Sql(f" GROUP BY {keys}"), filters)

    return read("cluster_id, window_start, sum(usd) AS usd", "1, 2"), read("cluster_id, count(DISTINCT call_key)", "1")


def _tool_lines(store: ReadStore, filters: Filters) -> pl.DataFrame:
    """Per tool name: the tool calls that started in [since, until), of the tasks the other filters select (a call
    dimension selects a task by the value its calls share, as ``task_scope`` does)."""
    conds = _in_range("x.start_time", filters)
    if filters.project is not None:
        conds.append(Sql("x.project = ?", [filters.project]))
    by_task = [Sql(f"t.{TASK_DIMENSIONS[d]} = ?", [v]) for d, v in filters.task_values().items() if d != "project"]
    by_task += [Sql(f"t.{CALL_DIMENSIONS[d]} = ?", [v]) for d, v in filters.call_values().items()]
    by_task += [Sql("t.golden")] if filters.golden else []
    if by_task:
        task = "EXISTS (SELECT 1 FROM tasks AS t WHERE t.project = x.project AND t.task_id = x.task_id AND "
        conds.append(Sql(task) + _and(by_task) + Sql(")"))
    scope = Sql("WITH scoped_tools AS (SELECT x.* FROM tool_calls AS x WHERE ") + _and(conds) + Sql(")")
    return frame(store, scope + Sql(_LINE_SQL.format(kind="'tools'", name="tool_name", rel="scoped_tools")), filters)


# -- the bills -----------------------------------------------------------------------------------------------------
def _windows(store: ReadStore, filters: Filters) -> list[ClusterWindowCost]:
    """The allocated windows whose start is in [since, until) (of ``cluster``, when set)."""
    if not isinstance(store, BillReader):
        raise UsageError(
            "this store does not give the clusters' bills: ask the server (`taskcost reconcile --url ...`) "
            "or the database file"
        )
    return store.cluster_costs(
        since_ns=None if filters.since is None else _ns(filters.since),
        until_ns=None if filters.until is None else _ns(filters.until),
        cluster_id=filters.cluster,
    )


def _line(kind: str, name: str | None, **values: Any) -> dict[str, Any]:
    return dict.fromkeys(_LINE_TYPES) | {"kind": kind, "name": name} | values


def _count_lines(df: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for r in df.iter_rows(named=True):
        calls, priced = int(r["calls"]), int(r["priced_calls"])
        usd = None if not priced else Decimal(r["usd"])  # unpriced: counted, never $0
        out.append(
            _line(r["kind"], r["name"], calls=calls, priced_calls=priced, unpriced_calls=calls - priced, usd=usd)
        )
    return out


@dataclass
class _Cluster:
    windows: int = 0
    bill: Decimal = Decimal(0)
    attributed: Decimal = Decimal(0)  # the allocation's
    idle: Decimal = Decimal(0)  # whole, or the selection's pro-rata part
    shares: Decimal = Decimal(0)  # the calls' own, in the counted windows
    priced: int = 0
    unpriced: int = 0
    overshoot: bool = False  # the selection holds more of a window than was attributed in it


def _gpu(
    store: ReadStore, filters: Filters, whole: bool, calls: list[dict[str, Any]]
) -> tuple[dict[str | None, _Cluster], int, bool, list[str]]:
    """Per cluster: the bill side and the calls' side (``calls``: the self-hosted lines of ``_call_lines``, for the
    unpriced); how many windows count; whether every window balances."""
    windows = _windows(store, filters)
    balanced = all(w.attributed_usd + w.idle_usd == w.bill_usd for w in windows)
    longest = max((w.window_end_ns - w.window_start_ns for w in windows), default=86_400 * 10**9)
    per_window, per_cluster = _shares(store, filters, longest)
    mine: dict[tuple[str | None, int], Decimal] = {}
    for cid, start, usd in per_window.iter_rows():
        key = (cid, _iso_ns(start))
        mine[key] = mine.get(key, Decimal(0)) + Decimal(usd)
    clusters: dict[str | None, _Cluster] = {}
    known = set()
    for w in windows:
        key = (w.cluster_id, w.window_start_ns)
        known.add(key)
        held = mine.get(key, Decimal(0))
        if not whole and not held:
            continue  # the selection ran nothing there: no share of that window
        c = clusters.setdefault(w.cluster_id, _Cluster())
        c.windows += 1
        c.attributed += w.attributed_usd
        c.shares += held
        if whole:
            c.bill += w.bill_usd
            c.idle += w.idle_usd
        else:
            c.overshoot |= held > w.attributed_usd
            c.idle += _pro_rata(w.idle_usd, held, w.attributed_usd)
    stray = [k for k in mine if k not in known]  # shares of a window with no stored allocation
    for key in stray:
        c = clusters.setdefault(key[0], _Cluster())
        c.shares += mine[key]
        c.overshoot = True
    for cid, priced in per_cluster.iter_rows():
        clusters.setdefault(cid, _Cluster()).priced = int(priced)
    for r in calls:
        if r["unpriced_calls"]:
            clusters.setdefault(r["name"], _Cluster()).unpriced = r["unpriced_calls"]
    notes = (
        [f"{len(stray)} window(s) hold priced calls' shares but no stored bill: `taskcost reprice`"] if stray else []
    )
    return clusters, sum(c.windows for c in clusters.values()), balanced, notes


def _gpu_lines(clusters: dict[str | None, _Cluster], whole: bool) -> list[dict[str, Any]]:
    out = []
    for cid in sorted(clusters, key=lambda k: (k is None, k or "")):
        c = clusters[cid]
        calls = c.priced + c.unpriced
        if whole and c.windows:
            usd: Decimal | None = c.attributed
            diff: Decimal | None = c.shares - c.attributed
        else:
            usd, diff = (c.shares if c.priced else None), None
        bill = c.bill if whole and c.windows else _plus(usd, c.idle if c.windows else None)
        out.append(
            _line("gpu_attributed", cid, calls=calls, priced_calls=c.priced, unpriced_calls=c.unpriced, usd=usd,
                  calls_usd=c.shares if c.priced else None, difference_usd=diff, bill_usd=bill, windows=c.windows)
        )  # fmt: skip
        if c.windows:
            out.append(_line("gpu_idle", cid, usd=c.idle, windows=c.windows))
    return out


# -- the question --------------------------------------------------------------------------------------------------
def _sum(lines: list[dict[str, Any]], kind: str) -> Decimal | None:
    """The kind's dollars: None when it has lines and none is priced (unpriced is never $0); $0 when it has none."""
    mine = [r for r in lines if r["kind"] == kind]
    priced = [r["usd"] for r in mine if r["usd"] is not None]
    return sum(priced, Decimal(0)) if priced or not mine else None


def reconcile(store: ReadStore, filters: Filters, options: NoOptions) -> ReconcileAnswer:
    """API spend + attributed GPU + idle GPU + tools, per provider, cluster and tool, for everything ``filters``
    select; whether the self-hosted calls' shares agree with the clusters' allocation."""
    del options
    caller = getattr(store, "caller_project", None)  # a store limited to one caller's project (the dashboards')
    if callable(caller) and (project := caller()) is not None:
        filters = filters.narrowed(project=project)  # its share of the bills, never the whole of them
    whole = set(filters.model_dump(exclude_defaults=True)) <= _WHOLE
    calls = _count_lines(_call_lines(store, filters))
    lines = [r for r in calls if r["kind"] == "api"]
    clusters: dict[str | None, _Cluster] = {}
    windows, balanced, notes = 0, True, list[str]()
    if filters.deployment != "api":
        self_hosted = [r for r in calls if r["kind"] == "gpu_attributed"]
        clusters, windows, balanced, notes = _gpu(store, filters, whole, self_hosted)
        lines += _gpu_lines(clusters, whole)
    lines += _count_lines(_tool_lines(store, filters))
    api, attributed, idle, tools = (_sum(lines, k) for k in ("api", "gpu_attributed", "gpu_idle", "tools"))
    parts = [x for x in (api, attributed, idle, tools) if x is not None]
    total = sum(parts, Decimal(0)) if parts or not lines else None
    gpu_rows = [r for r in lines if r["kind"] == "gpu_attributed"]
    bills = sum((r["bill_usd"] for r in gpu_rows if r["bill_usd"] is not None), Decimal(0))
    shares = sum((c.shares for c in clusters.values()), Decimal(0))
    attributed_all = sum((c.attributed for c in clusters.values()), Decimal(0))
    difference = shares - attributed_all if whole else None
    overshoot = any(c.overshoot for c in clusters.values())
    closes = balanced and not overshoot and (difference is None or abs(difference) < _CENT)
    unpriced = sum(int(r["unpriced_calls"] or 0) for r in lines if r["kind"] in ("api", "gpu_attributed"))
    unpriced_tools = sum(int(r["unpriced_calls"] or 0) for r in lines if r["kind"] == "tools")
    figures: dict[str, Any] = {
        "total_usd": total,
        "api_usd": api,
        "gpu_attributed_usd": attributed,
        "gpu_idle_usd": idle,
        "tools_usd": tools,
        "bills_usd": bills,
        "self_hosted_calls_usd": shares,
        "difference_usd": difference,
        "closes": closes,
        "bills_balance": balanced,
        "unpriced_calls": unpriced,
        "unpriced_tool_calls": unpriced_tools,
        "calls": sum(int(r["calls"] or 0) for r in lines if r["kind"] in ("api", "gpu_attributed")),
        "tool_calls": sum(int(r["calls"] or 0) for r in lines if r["kind"] == "tools"),
        "windows": windows,
        "scope": "whole" if whole else "share",
    }
    figures = {"headline": _headline(figures)} | figures
    notes += _notes(figures, filters, whole)
    return ReconcileAnswer(filters, figures=figures, lines=pl.DataFrame(lines, schema=_lines_schema()), notes=notes)


def _usd(value: Decimal | None) -> str:
    """Cents, or more places for a small amount (never a priced $0.0012 shown as $0.00); unpriced is a dash."""
    small = value is not None and value != 0 and abs(value) < 1
    return format_usd(value, places=6 if small else 2, none="—")


def _headline(f: dict[str, Any]) -> str:
    paid = (
        f"{_usd(f['total_usd'])} paid: API {_usd(f['api_usd'])} + GPU attributed {_usd(f['gpu_attributed_usd'])} "
        f"+ GPU idle {_usd(f['gpu_idle_usd'])} + tools {_usd(f['tools_usd'])}"
    )
    if not f["windows"]:
        check = "no cluster bill in range"
    elif f["closes"] and f["scope"] == "whole":
        check = "the self-hosted calls' shares match the clusters' allocation to the cent, and attributed + idle = bill"
    elif f["closes"]:
        check = "every window's attributed + idle = bill (this selection's share: see the notes)"
    elif not f["bills_balance"]:
        check = "DOES NOT CLOSE: a cluster window's attributed + idle differs from its bill"
    elif f["difference_usd"] is not None:
        check = (
            f"DOES NOT CLOSE: the self-hosted calls' shares differ from the allocation by "
            f"{format_usd(f['difference_usd'], places=2, sign=True)}"
        )
    else:
        check = "DOES NOT CLOSE: this selection's calls hold more of a window than the allocation attributed"
    left = [f"{f['unpriced_calls']:,} unpriced call(s)"] if f["unpriced_calls"] else []
    left += [f"{f['unpriced_tool_calls']:,} unpriced tool call(s)"] if f["unpriced_tool_calls"] else []
    tail = f"; {' and '.join(left)} not in it" if left else ""
    return f"{paid}{tail}. {check[:1].upper()}{check[1:]}."


def _notes(f: dict[str, Any], filters: Filters, whole: bool) -> list[str]:
    notes = [
        "windows are counted when their start is in [since, until): a window may end after until; API and tool "
        "calls count by their own start"
    ]
    if f["unpriced_calls"]:
        notes.append(
            f"{f['unpriced_calls']:,} LLM call(s) are unpriced (no price for the model, or a self-hosted window not "
            "allocated yet): counted in the lines, not in any dollar figure (`taskcost reprice` prices them)"
        )
    if f["unpriced_tool_calls"]:
        notes.append(f"{f['unpriced_tool_calls']:,} tool call(s) report no cost: counted, not in tools_usd")
    if not whole:
        who = f"project {filters.project}" if filters.project is not None else "this selection"
        notes.append(
            f"GPU lines are {who}'s share of the cluster bills: its calls' own shares of each window, and of that "
            "window's idle cost the part pro rata to them (idle x its attributed / all attributed in the window); "
            "bills_usd is that share. The check that every call's share adds up to the allocation needs every "
            "project's calls: ask without filters (an admin key) for difference_usd"
        )
    if f["difference_usd"] and abs(f["difference_usd"]) >= _CENT:
        notes.append(
            "a difference means a share of a bill no priced call in llm_calls holds: a self-hosted call still "
            "unpriced (its last window is open), calls that arrived after the allocation (`taskcost reprice`), or "
            "a duplicate span of one response (counted once in llm_calls) that the allocation gave a share"
        )
    return notes


QUESTION = Question(
    name="reconcile",
    help="does every dollar add up: API + attributed GPU + idle GPU + tools, per provider, cluster and tool",
    run=reconcile,
    options=NoOptions,
)
