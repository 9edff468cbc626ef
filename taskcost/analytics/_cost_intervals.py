"""The intervals of cost per completed task (``taskcost cost``): of the whole selection and of each group shown, a
seeded bootstrap of the tasks up to ``BOOTSTRAP_MAX_UNITS`` (within ``BOOTSTRAP_BUDGET_UNITS`` over all groups), the
delta method above it, every large group's from one aggregate."""

from __future__ import annotations

import math
import warnings
from typing import Any

from taskcost._internal.lazy import np, pl
from taskcost.analytics._stats import BOOTSTRAP_MAX_UNITS, Interval, delta_ratio_ci, ratio_ci, stats

__all__ = [
    "ABANDONED",
    "BOOTSTRAP_BUDGET_UNITS",
    "COMPLETED",
    "FAILED",
    "KEYS",
    "RUNNING",
    "group_intervals",
    "interval",
]

BOOTSTRAP_BUDGET_UNITS = 4_000
"""Tasks the groups' bootstrap intervals may resample in all (about 0.3 s): groups past it, in order of spend, get no
interval (a group of more than ``BOOTSTRAP_MAX_UNITS`` tasks uses the delta method, which costs nothing)."""
RUNNING, COMPLETED, FAILED, ABANDONED = 0, 1, 2, 3  # the task frame's outcome codes
KEYS = ["grp", "bucket"]  # a group: its value of the dimension and its time bucket


def interval(units: pl.DataFrame, confidence: float) -> Interval:
    """``ratio_ci`` of task spend (``micro_usd``) over completed tasks; units sorted by their hash first when they will
    be bootstrapped, so the same data resamples the same way whatever order the store returned it in."""
    if len(units) <= BOOTSTRAP_MAX_UNITS:
        units = units.sort("h")
    done = (units["outcome"] == COMPLETED).cast(pl.Int64).to_numpy()
    with warnings.catch_warnings():
        # a resample without a completed task has no ratio (NaN), and then neither has the interval: "none" below
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        ci = ratio_ci(units["micro_usd"].to_numpy(), np.asarray(done), confidence)
    return ci if math.isfinite(ci.low) and math.isfinite(ci.high) else Interval.none()


def group_intervals(
    finished: pl.DataFrame, keys: list[tuple[Any, Any]], confidence: float, whole: Interval, alone: bool
) -> tuple[list[Interval], int]:
    """Intervals of the shown groups (in order of spend), within ``BOOTSTRAP_BUDGET_UNITS``; how many were skipped.
    When one group holds every finished task (``alone``: common, e.g. one model), it has the ``whole`` selection's
    interval, and the tasks are not split."""
    if alone and len(finished):
        sizes = {tuple(finished.row(0)[:2]): len(finished)}
        parts, large = {}, {}
    else:
        # every group's size, and the large groups' delta intervals, at once; the rows of the small ones, each to
        # bootstrap
        moments = _moments(finished)
        sizes = {(g, b): n for g, b, n in moments.select(*KEYS, "n").iter_rows()}
        large = _delta_intervals(moments.filter(pl.col("n") > BOOTSTRAP_MAX_UNITS), confidence)
        few = moments.filter(pl.col("n") <= BOOTSTRAP_MAX_UNITS).select(KEYS)
        small = finished.join(few, on=KEYS, nulls_equal=True) if len(few) else finished.clear()
        parts = small.partition_by(KEYS, as_dict=True) if len(small) else {}
    out, budget, skipped = [], BOOTSTRAP_BUDGET_UNITS, 0
    for key in keys:
        n = sizes.get(key, 0)
        if not n:
            out.append(Interval.none())
            continue
        if n <= BOOTSTRAP_MAX_UNITS and n > budget:
            out.append(Interval.none())
            skipped += 1
            continue
        if n <= BOOTSTRAP_MAX_UNITS:
            budget -= n
        if n == len(finished):
            out.append(whole)
        else:
            out.append(large[key] if n > BOOTSTRAP_MAX_UNITS else interval(parts[key], confidence))
    return out, skipped


def _moments(finished: pl.DataFrame) -> pl.DataFrame:
    """Per group: its tasks (``n``), the means of spend (micro-dollars) and of completion, and their centred sums of
    squares and products (``np.cov``'s, before dividing by n - 1)."""
    x = pl.col("micro_usd").cast(pl.Float64)
    y = (pl.col("outcome") == COMPLETED).cast(pl.Float64)
    return finished.group_by(KEYS).agg(
        n=pl.len(),
        mx=x.mean(),
        my=y.mean(),
        sxx=((x - x.mean()) ** 2).sum(),
        syy=((y - y.mean()) ** 2).sum(),
        sxy=((x - x.mean()) * (y - y.mean())).sum(),
    )


def _delta_intervals(moments: pl.DataFrame, confidence: float) -> dict[tuple[Any, Any], Interval]:
    """``interval`` of each group of ``moments`` by the delta method (``ratio_ci``'s, for more than
    ``BOOTSTRAP_MAX_UNITS`` tasks), from its moments."""
    out = {}
    for g, b, n, mx, my, sxx, syy, sxy in moments.iter_rows():
        if my <= 0:  # no completed task: no ratio
            out[(g, b)] = Interval.none()
            continue
        ci = delta_ratio_ci(n, mx, my, sxx / (n - 1), syy / (n - 1), sxy / (n - 1), confidence)
        out[(g, b)] = ci if math.isfinite(ci.low) and math.isfinite(ci.high) else Interval.none()
    return out
