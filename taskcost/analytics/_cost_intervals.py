"""The intervals of cost per completed task (``taskcost cost``, ``taskcost per-token``): of the whole selection and of
each group shown, a seeded bootstrap of the tasks up to ``BOOTSTRAP_MAX_UNITS`` (within ``BOOTSTRAP_BUDGET_UNITS``
over all groups), the delta method above it.

The delta method needs a group's moments only, which the SQL aggregates in parts (tasks of one outcome: spend's count,
sum and sum of squared deviations; completion is constant within a part) and ``moments`` combines here (Chan et al.'s
pairwise formulas): no task row crosses into Python for it. The tasks of a bootstrapped group are read one by one (a
few thousand at most)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from taskcost._internal.lazy import np, pl
from taskcost.analytics._stats import BOOTSTRAP_MAX_UNITS, Interval, delta_ratio_ci, ratio_ci

__all__ = [
    "ABANDONED",
    "BOOTSTRAP_BUDGET_UNITS",
    "COMPLETED",
    "FAILED",
    "KEYS",
    "RUNNING",
    "SPEND_MOMENTS",
    "delta_intervals",
    "group_intervals",
    "interval",
    "moments",
]

BOOTSTRAP_BUDGET_UNITS = 4_000
"""Tasks the groups' bootstrap intervals may resample in all (about 0.3 s): groups past it, in order of spend, get no
interval (a group of more than ``BOOTSTRAP_MAX_UNITS`` tasks uses the delta method, which costs nothing)."""
RUNNING, COMPLETED, FAILED, ABANDONED = 0, 1, 2, 3  # the outcome codes of the cost SQL (`_OUTCOME`)
KEYS = ["grp", "bucket"]  # a group: its value of the dimension and its time bucket

SPEND_MOMENTS = (
    "sum(CAST(coalesce(cost_usd, 0) AS DOUBLE) * 1e6) AS x_sum, "
    "coalesce(var_pop(CAST(coalesce(cost_usd, 0) AS DOUBLE) * 1e6), 0) * count(*) AS x_m2"
)
"""SQL aggregates of a part's spend in micro-dollars, as ``moments`` reads them: sum and sum of squared deviations
(``var_pop`` times count; ClickHouse: ``varPop``). In DOUBLE: a DECIMAL product per task costs five times as much, and
these feed an estimate only (the point figures are exact sums)."""

Rows = Callable[[list[tuple[Any, Any]] | None], "pl.DataFrame"]
"""Reads the finished tasks of these groups (all of them: None): ``KEYS``, ``outcome``, ``micro_usd`` and ``o``
(``task_order``)."""


def interval(units: pl.DataFrame, confidence: float) -> Interval:
    """``ratio_ci`` of task spend (``micro_usd``) over completed tasks; units sorted by ``task_order`` first when they
    will be bootstrapped, so the same data resamples the same way whatever order the store returned it in."""
    if len(units) <= BOOTSTRAP_MAX_UNITS:
        units = units.sort("o")
    done = (units["outcome"] == COMPLETED).cast(pl.Int64).to_numpy()
    # a resample without a completed task has no ratio (NaN), and then neither has the interval: "none" below
    ci = ratio_ci(units["micro_usd"].to_numpy(), np.asarray(done), confidence)
    return ci if math.isfinite(ci.low) and math.isfinite(ci.high) else Interval.none()


def moments(parts: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per group of ``keys``: its units (``n``), the means of spend and of completion (``mx``, ``my``), and their
    centred sums of squares and products (``np.cov``'s, before dividing by n - 1), from ``parts``: finer groups, each
    of one completion value ``y`` (0 or 1), with ``n``, ``x_sum`` and ``x_m2`` (``SPEND_MOMENTS``)."""
    n, y = pl.col("n").cast(pl.Float64), pl.col("y").cast(pl.Float64)
    part_mean = pl.col("x_sum") / n
    mx, my = pl.col("x_sum").sum() / n.sum(), (n * y).sum() / n.sum()
    return parts.group_by(keys).agg(
        n=pl.col("n").sum(),
        mx=mx,
        my=my,
        sxx=pl.col("x_m2").sum() + (n * (part_mean - mx) ** 2).sum(),
        syy=(n * (y - my) ** 2).sum(),
        sxy=(n * (part_mean - mx) * (y - my)).sum(),
    )


def delta_intervals(m: pl.DataFrame, keys: list[str], confidence: float) -> dict[Any, Interval]:
    """``interval`` of each group of ``moments`` by the delta method (``ratio_ci``'s, for more than
    ``BOOTSTRAP_MAX_UNITS`` units), keyed by its values of ``keys`` (a tuple when there are several)."""
    out = {}
    for row in m.iter_rows(named=True):
        key = tuple(row[k] for k in keys) if len(keys) > 1 else row[keys[0]]
        n, my = row["n"], row["my"]
        if n < 2 or my <= 0:  # no completed task: no ratio
            out[key] = Interval.none()
            continue
        v = n - 1
        ci = delta_ratio_ci(n, row["mx"], my, row["sxx"] / v, row["syy"] / v, row["sxy"] / v, confidence)
        out[key] = ci if math.isfinite(ci.low) and math.isfinite(ci.high) else Interval.none()
    return out


def group_intervals(
    m: pl.DataFrame, keys: list[tuple[Any, Any]], confidence: float, whole: Interval, rows: Rows
) -> tuple[list[Interval], int]:
    """Intervals of the shown groups (``keys``, in order of spend), within ``BOOTSTRAP_BUDGET_UNITS``; how many were
    skipped. ``m``: every group's ``moments`` (of finished tasks). A group holding every finished task (common, e.g.
    one model) has the ``whole`` selection's interval."""
    sizes = {(g, b): n for g, b, n in m.select(*KEYS, "n").iter_rows()}
    total = sum(sizes.values())
    large = delta_intervals(m.filter(pl.col("n") > BOOTSTRAP_MAX_UNITS), KEYS, confidence)
    chosen: list[tuple[Any, Any]] = []
    out: list[Interval | tuple[Any, Any]] = []
    budget, skipped = BOOTSTRAP_BUDGET_UNITS, 0
    for key in keys:
        n = sizes.get(key, 0)
        if n and n <= BOOTSTRAP_MAX_UNITS and n > budget:
            out.append(Interval.none())
            skipped += 1
        elif not n:
            out.append(Interval.none())
        elif n == total:
            budget -= n if n <= BOOTSTRAP_MAX_UNITS else 0
            out.append(whole)
        elif n > BOOTSTRAP_MAX_UNITS:
            out.append(large[key])
        else:
            budget -= n
            chosen.append(key)
            out.append(key)  # bootstrapped below, from its rows
    parts = rows(chosen).partition_by(KEYS, as_dict=True) if chosen else {}
    return [i if isinstance(i, Interval) else interval(parts[i], confidence) for i in out], skipped
