"""Idle GPU cost: the part of the self-hosted clusters' bills no call used, as its own line (``cost``) and spread over
the groups that ran on each cluster window (``per-token``'s fully loaded figures).

The bills are read once per question, through the store's ``cluster_costs`` (``_reconcile.BillReader``), counting
the windows whose start is in [since, until) (``_reconcile._windows``). Each priced self-hosted call's price detail
lists its share of every window it ran in; per group (a model, a provider, ...) and window those shares are added up in
SQL (one row per group, cluster and window: never one per call), and the group's part of the window's idle cost is
pro rata to them: ``idle x its shares / the window's attributed dollars`` (``_reconcile._pro_rata``). Unscoped (only
``since``, ``until``, ``cluster``, ``deployment`` set) the idle line is the whole bills' idle; otherwise (a project, as
a read key's, or any other filter) the selection's pro-rata part of it. A store that gives no bills (a remote one)
makes idle unknown: None with a note, never $0. Money is ``Decimal`` throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import frame
from taskcost.analytics._cost_priced import fully_priced
from taskcost.analytics._filters import Filters, Sql, call_scope, task_scope, utc, utc_text
from taskcost.analytics._reconcile import (
    _SHARES_TYPE,
    _WHOLE,
    BillReader,
    _and,
    _in_range,
    _iso_ns,
    _pro_rata,
    _windows,
)
from taskcost.pricing import ClusterWindowCost, format_usd
from taskcost.store import ReadStore

__all__ = ["UNKNOWN_NOTE", "Bills", "group_idle", "idle_notes", "read_bills"]

_LAST = datetime(2262, 1, 1, tzinfo=UTC)  # the latest time the store's timestamps take (Filters' range)
UNKNOWN_NOTE = (
    "idle GPU cost unknown: this store does not give the clusters' bills (ask the database file or the server's "
    "dashboards); gpu_idle_usd is empty, not $0"
)


@dataclass
class Bills:
    """The clusters' windows in range, for one question (``windows`` None: the store gives no bills)."""

    filters: Filters  # narrowed to the caller's project, when the store is limited to one
    windows: list[ClusterWindowCost] | None
    whole: bool  # unscoped: the idle line is the whole bills' idle
    by_window: dict[tuple[str | None, int], ClusterWindowCost] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        return self.windows is not None

    def shares(self, store: ReadStore, group: Sql | None = None, tasks: Sql | None = None) -> pl.DataFrame:
        """Per (group ``g``, task group ``t``, counted per task ``side``, cluster, window start) the selected priced
        self-hosted calls' shares of the windows in range (``usd``). ``group``: SQL over the call ``c`` (None: one
        group). ``tasks``: more CTEs (no ``WITH``, no leading comma) ending with ``ft`` (``project``, ``task_id``,
        ``value``: the tasks counted per task, and their group): a call of one of them has ``side`` true and ``t`` its
        task's value (None: ``side`` false)."""
        assert self.windows is not None
        f = self.filters
        selected = f.narrowed(deployment="self_hosted", since=None, until=None)
        conds = [Sql("c.cost_usd IS NOT NULL")]
        if f.since is not None:  # a call that ended before since holds no share of a later window
            conds.append(Sql("c.end_time >= CAST(? AS TIMESTAMP)", [utc_text(f.since)]))
        if f.until is not None:  # nor one that started a whole window after until
            longest = max((w.window_end_ns - w.window_start_ns for w in self.windows), default=86_400 * 10**9)
            late = utc(f.until) + timedelta(microseconds=longest // 1000)
            if late < _LAST:  # past the store's last time, every call qualifies
                conds.append(Sql("c.start_time < CAST(? AS TIMESTAMP)", [utc_text(late)]))
        g = Sql("CAST(NULL AS VARCHAR)") if group is None else group
        if tasks is None:
            ctes, task, join = Sql(""), "CAST(NULL AS VARCHAR) AS t, FALSE AS side", ""
        else:
            ctes, task = Sql(",\n") + tasks, "ft.value AS t, ft.task_id IS NOT NULL AS side"
            join = " LEFT JOIN ft ON ft.project = c.project AND ft.task_id = c.task_id"
        sql = (
            Sql("WITH ")
            + call_scope(selected)
            + ctes
            + Sql(",\ns AS (SELECT ")
            + g
            + Sql(f" AS g, {task}, c.cluster_id, u.w.start AS window_start, ")
            + Sql("CAST(replace(u.w.start, 'Z', '') AS TIMESTAMP) AS ws, u.w.usd AS usd ")
            + Sql(
                f"FROM scoped_calls AS c{join}, "
                f"unnest(from_json(json_extract(c.price_detail, '$.windows'), '{_SHARES_TYPE}')) AS u(w) WHERE "
            )
            + _and(conds)
            + Sql(")\nSELECT g, t, side, cluster_id, window_start, sum(usd) AS usd FROM s WHERE ")
            + _and(_in_range("ws", f))
            + Sql(" GROUP BY ALL")
        )
        return frame(store, sql, f)

    def idle(self, shares: pl.DataFrame, key: str = "g") -> dict[Any, Decimal]:
        """Per value of ``key`` (``g``: the calls' group; ``t``: the task group, over the calls counted per task):
        its part of the idle of the windows its calls hold shares of, pro rata to those shares. Python runs over the
        (group, window) rows, never over calls."""
        rows = shares if key == "g" else shares.filter(pl.col("side"))
        out: dict[Any, Decimal] = {}
        for k, cid, start, usd in rows.select(key, "cluster_id", "window_start", "usd").iter_rows():
            w = self.by_window.get((cid, _iso_ns(start)))
            part = Decimal(0) if w is None or usd is None else _pro_rata(w.idle_usd, Decimal(usd), w.attributed_usd)
            out[k] = out.get(k, Decimal(0)) + part
        return out

    def total_idle(self, shared: dict[Any, Decimal]) -> Decimal:
        """The selection's idle GPU cost: unscoped, the whole bills' (windows no call ran in too); otherwise the sum of
        its groups' parts (``shared``)."""
        if self.whole and self.windows and self.filters.deployment != "api":
            return sum((w.idle_usd for w in self.windows), Decimal(0))
        return sum(shared.values(), Decimal(0))

    def line(self, store: ReadStore) -> dict[str, Decimal | int | None]:
        """The idle line of the selection: ``gpu_idle_usd``, ``gpu_attributed_usd`` and ``gpu_bill_usd`` (their sum),
        ``gpu_windows``; None (unknown) when the store gives no bills."""
        if self.windows is None:
            return dict.fromkeys(("gpu_bill_usd", "gpu_attributed_usd", "gpu_idle_usd", "gpu_windows"))
        if self.filters.deployment == "api":
            return {"gpu_bill_usd": Decimal(0), "gpu_attributed_usd": Decimal(0), "gpu_idle_usd": Decimal(0),
                    "gpu_windows": 0}  # fmt: skip
        if self.whole:
            attributed = sum((w.attributed_usd for w in self.windows), Decimal(0))
            idle = sum((w.idle_usd for w in self.windows), Decimal(0))
            return {"gpu_bill_usd": attributed + idle, "gpu_attributed_usd": attributed, "gpu_idle_usd": idle,
                    "gpu_windows": len(self.windows)}  # fmt: skip
        shares = self.shares(store)
        held = shares.filter(pl.col("usd") != 0)
        attributed = sum((Decimal(x) for x in held["usd"].to_list()), Decimal(0))
        idle = self.idle(held).get(None, Decimal(0))  # one group, one row per window
        return {"gpu_bill_usd": attributed + idle, "gpu_attributed_usd": attributed, "gpu_idle_usd": idle,
                "gpu_windows": held.height}  # fmt: skip


def read_bills(store: ReadStore, filters: Filters) -> Bills:
    """The clusters' windows in range, read once (None when the store gives no bills: idle is then unknown). A store
    limited to one caller's project (the dashboards') narrows the read to that project: its share, never the whole."""
    caller = getattr(store, "caller_project", None)
    if callable(caller) and (project := caller()) is not None:
        filters = filters.narrowed(project=project)
    whole = set(filters.model_dump(exclude_defaults=True)) <= _WHOLE
    if not isinstance(store, BillReader):
        return Bills(filters, None, whole)
    windows = _windows(store, filters)
    return Bills(filters, windows, whole, {(w.cluster_id, w.window_start_ns): w for w in windows})


def idle_notes(gpu: dict[str, Any], known: bool, whole: bool) -> list[str]:
    """What the idle GPU line is: the clusters' bills no call used, in no task's spend (nor any per-task figure)."""
    if not known:
        return [UNKNOWN_NOTE]
    if not gpu["gpu_windows"]:
        return []
    part = (
        "the whole bills'" if whole else "this selection's pro-rata share of the bills' (idle x its attributed / all)"
    )
    return [
        f"idle GPU: {format_usd(gpu['gpu_idle_usd'], places=2)} of the {format_usd(gpu['gpu_bill_usd'], places=2)} "
        f"GPU bill ({gpu['gpu_windows']:,} cluster window(s) starting in range; {part} idle) was used by no call: "
        "its own line (gpu_idle), in no task's spend and not waste"
    ]


def group_idle(
    store: ReadStore, filters: Filters, call_value: Sql, task_value: Sql
) -> tuple[Bills, dict[Any, Decimal], dict[Any, Decimal]]:
    """Per group: its calls' part of the idle GPU cost (pro rata to their shares of each window), and per task group
    (a task's value: ``mixed`` when its calls disagree) the part its fully priced finished tasks' calls carry: what
    ``per-token`` adds to each figure. ``call_value``: the group of a call ``c``; ``task_value``: of a row of
    ``scoped_tasks``. Both empty when the store gives no bills (unknown, not $0)."""
    bills = read_bills(store, filters)
    if not bills.windows or bills.filters.deployment == "api":  # unknown, or nothing self-hosted selected: no idle
        return bills, {}, {}
    tasks = (
        task_scope(bills.filters)
        + Sql(",\nft AS (SELECT project, task_id, ")
        + task_value
        + Sql(f" AS value FROM scoped_tasks WHERE outcome IS NOT NULL AND {fully_priced()})")
    )
    shares = bills.shares(store, call_value, tasks)
    return bills, bills.idle(shares), bills.idle(shares, "t")
