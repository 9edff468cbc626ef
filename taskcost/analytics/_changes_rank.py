"""What changed, ranked: the fingerprint's fields, the side-by-side table of two windows' values with each value's
status, the ranking of the changed values by how far cost per completed task or p95 moved with them, and the top
change in words (``_changes`` gathers the figures)."""

from __future__ import annotations

from typing import Any

from taskcost._internal.lazy import pl

__all__ = ["FIELDS", "change", "rank", "sentence", "side_by_side"]

FIELDS: tuple[str, ...] = (
    "engine", "engine_version", "quantization", "gpu_type", "container_image_name", "cluster_id", "harness_version",
    "agent_version", "model", "provider", "price_source", "deployment",
)  # fmt: skip
"""The fingerprint's fields: ``llm_calls`` columns, each call attempt's own value (``price_source`` is the price
data version its cost came from)."""

_EPS = 1e-9  # shares are floats: 0.35 - 0.30 must count as a move of 0.05
_STATUS_ORDER = {"appeared": 0, "share_up": 1, "share_down": 2, "disappeared": 3, "unchanged": 4}


def side_by_side(long: pl.DataFrame, base_calls: int, cur_calls: int, m: float) -> pl.DataFrame:
    """The fingerprint table of a comparison: one row per (field, value) seen in either window, with its status."""
    keys = ["field", "field_order", "value"]

    def side(w: str) -> pl.DataFrame:
        return long.filter(pl.col("w") == w).select(
            *keys, pl.col("calls").alias(f"calls_{w}"), pl.col("first_seen").alias(f"first_{w}"),
            pl.col("last_seen").alias(f"last_{w}"),
        )  # fmt: skip

    both = side("baseline").join(side("current"), on=keys, how="full", coalesce=True, nulls_equal=True)
    share_b = pl.col("calls_baseline") / base_calls if base_calls else pl.lit(None, pl.Float64)
    share_c = pl.col("calls_current") / cur_calls if cur_calls else pl.lit(None, pl.Float64)
    both = both.with_columns(pl.col("calls_baseline", "calls_current").fill_null(0)).with_columns(
        share_b.alias("share_baseline"), share_c.alias("share_current")
    )
    move = pl.col("share_current").fill_null(0) - pl.col("share_baseline").fill_null(0)
    status = (
        pl.when(pl.col("calls_baseline") == 0)
        .then(pl.lit("appeared"))
        .when(pl.col("calls_current") == 0)
        .then(pl.lit("disappeared"))
        .when(move >= max(m, 2 * _EPS) - _EPS)  # a share that did not move is unchanged, even with m = 0
        .then(pl.lit("share_up"))
        .when(move <= -max(m, 2 * _EPS) + _EPS)
        .then(pl.lit("share_down"))
        .otherwise(pl.lit("unchanged"))
    )
    return (
        both.with_columns(
            move.alias("share_change"),
            status.alias("status"),
            pl.min_horizontal("first_baseline", "first_current").alias("first_seen"),
            pl.max_horizontal("last_baseline", "last_current").alias("last_seen"),
        )
        .sort(["field_order", "calls_current", "calls_baseline", "value"], descending=[False, True, True, False],
              nulls_last=True)
        .select("field", "value", "share_baseline", "share_current", "share_change", "status", "calls_baseline",
                "calls_current", "first_seen", "last_seen")
    )  # fmt: skip


def change(with_: Any, ref: Any) -> float | None:
    if with_ is None or ref is None or ref <= 0:
        return None
    return float(with_ / ref) - 1.0


def rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        moves = [abs(x) for x in (r["cost_change"], r["p95_change"]) if x is not None]
        score = max(moves) if moves else None
        rest = (_STATUS_ORDER[r["status"]], -r["calls"], FIELDS.index(r["field"]), str(r["value"]))
        return (score is None, -(score or 0.0), *rest)

    ranked = sorted(rows, key=key)
    return [{**r, "rank": i + 1} for i, r in enumerate(ranked)]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.0%}"


def sentence(ranked: pl.DataFrame, table: pl.DataFrame) -> str | None:
    """The top change in words: ``engine_version 0.6.0 → 0.7.0 on 80% of calls; p95 +35%, cost per completed task
    -12% (against the rest of current window)``. "a → b" is a migration: ``b`` appeared or ``a`` disappeared. When
    both values are on calls of both windows and only their shares moved, it is a mix shift, said with the shares:
    ``agent_version mix shifted: v1 30% → 70% of calls, v3 70% → 30%``."""
    tops = ranked.filter(
        pl.col("compared_with").is_not_null()
        & (pl.col("cost_change").is_not_null() | pl.col("p95_change").is_not_null())
    )
    if tops.is_empty():
        return None
    top = tops.row(0, named=True)

    def show(v: str | None) -> str:
        return "(none)" if v is None else v

    share, was = top["share_current"], top["share_baseline"] or 0.0
    if top["status"] == "share_down":
        head = f"{top['field']} {show(top['value'])} down to {share:.0%} of calls (was {was:.0%})"
    else:
        losers = table.filter(
            (pl.col("field") == top["field"]) & pl.col("status").is_in(["disappeared", "share_down"])
        ).sort("share_change")
        if losers.is_empty():
            head = f"{top['field']} {show(top['value'])} on {share:.0%} of calls (was {was:.0%})"
        elif top["status"] == "share_up" and losers["status"][0] == "share_down":
            # both values in both windows, only their shares moved: a mix shift, not a migration from one to the other
            lost = losers.row(0, named=True)
            head = (
                f"{top['field']} mix shifted: {show(top['value'])} {was:.0%} → {share:.0%} of calls, "
                f"{show(lost['value'])} {lost['share_baseline']:.0%} → {lost['share_current']:.0%}"
            )
        else:
            head = f"{top['field']} {show(losers['value'][0])} → {show(top['value'])} on {share:.0%} of calls"
    moves = f"p95 {_pct(top['p95_change'])}, cost per completed task {_pct(top['cost_change'])}"
    return f"{head}; {moves} (against the {top['compared_with']})"
