"""Cache economics' per-call tables: the prompt-prefix stability report by task kind, where prefixes break, and
time to first token by the call's hit-rate band and input size (from the per-call aggregate of ``_cache``)."""

from __future__ import annotations

from taskcost._internal.lazy import pl

__all__ = ["HIT_RATE_BANDS", "INPUT_SIZE_BANDS", "hit_rate_expr", "money_sum", "prefix_tables", "ttft_tables"]

HIT_RATE_BANDS = ("0%", "(0, 25%]", "(25, 50%]", "(50, 75%]", "(75, 100%]")
"""A call's own hit rate (cache_read / input), in bands; decided in integer arithmetic (no float edges)."""
INPUT_SIZE_BANDS = ("< 1k", "1k-4k", "4k-16k", "16k-64k", ">= 64k")
"""A call's input tokens, in bands: under 1,024 tokens most provider caches do not cache at all."""


def money_sum(column: str) -> pl.Expr:
    """The sum of a priced column, null (not $0) when no call in the group could be priced."""
    total = pl.col(column).sum().cast(pl.Decimal(38, 12))
    return pl.when(pl.col(column).is_not_null().any()).then(total).otherwise(None).alias(column)


def hit_rate_expr(read: str = "cache_read_tokens", total: str = "input_tokens") -> pl.Expr:
    return pl.when(pl.col(total) > 0).then(pl.col(read) / pl.col(total)).otherwise(None).alias("hit_rate")


_STABILITY = [
    "kind", "fingerprinted_calls", "compared_calls", "breaks", "break_rate", "top_break_kind", "top_break_block",
    "top_break_calls", "mean_stable_share", "after_break_tokens", "after_break_usd", "missed_tokens", "missed_usd",
    "unpriced_calls",
]  # fmt: skip
_BREAKERS = [
    "kind", "break_kind", "break_block", "breaks", "share_of_breaks", "after_break_tokens", "after_break_usd",
    "missed_tokens", "missed_usd", "unpriced_calls",
]  # fmt: skip


# -- prefix stability --------------------------------------------------------------------------------------------


def prefix_tables(kinds: pl.DataFrame, breaks: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per task kind: calls with a fingerprint, compared calls (those with a previous call to compare with), breaks,
    where they break most, the mean stable share; and the breakers (kind, block kind, block index) ranked by the
    input tokens from the break on. ``kinds``: the per-call query's priced rows by kind; ``breaks``: by kind and
    break (block kind and index)."""
    fp = kinds.filter(pl.col("has_fingerprint"))
    breaks = breaks.filter(pl.col("has_fingerprint") & pl.col("prefix_break_block").is_not_null())
    keys = ["task_kind", "prefix_break_kind", "prefix_break_block"]
    breakers = (
        breaks.group_by(keys)
        .agg(
            pl.col("calls").sum().cast(pl.Int64).alias("breaks"),
            pl.col("after_break_tokens").sum().cast(pl.Int64),
            money_sum("after_break_usd"),
            pl.col("missed_tokens").sum().cast(pl.Int64),
            money_sum("missed_usd"),
            pl.col("unpriced_calls").sum().cast(pl.Int64),
        )
        .sort(["after_break_tokens", "breaks", *keys], descending=[True, True, False, False, False], nulls_last=True)
    )
    top = breakers.sort(["breaks", "prefix_break_kind", "prefix_break_block"], descending=[True, False, False])
    top = top.group_by("task_kind", maintain_order=True).first()
    top = top.select(
        "task_kind",
        pl.col("prefix_break_kind").alias("top_break_kind"),
        pl.col("prefix_break_block").alias("top_break_block"),
        pl.col("breaks").alias("top_break_calls"),
    )
    per_kind = fp.group_by("task_kind").agg(
        pl.col("calls").sum().cast(pl.Int64).alias("fingerprinted_calls"),
        pl.col("compared_calls").sum().cast(pl.Int64),
        pl.col("breaks").sum().cast(pl.Int64),
        pl.col("stable_share_sum").sum(),
        pl.col("share_calls").sum().cast(pl.Int64),
        pl.col("after_break_tokens").sum().cast(pl.Int64),
        money_sum("after_break_usd"),
        pl.col("missed_tokens").sum().cast(pl.Int64),
        money_sum("missed_usd"),
        pl.col("unpriced_calls").sum().cast(pl.Int64),
    )
    stability = (
        per_kind.join(top, on="task_kind", how="left", nulls_equal=True)
        .with_columns(
            break_rate=pl.when(pl.col("compared_calls") > 0).then(pl.col("breaks") / pl.col("compared_calls")),
            mean_stable_share=pl.when(pl.col("share_calls") > 0).then(
                pl.col("stable_share_sum") / pl.col("share_calls")
            ),
        )
        .rename({"task_kind": "kind"})
        .select(_STABILITY)
        .sort(["breaks", "kind"], descending=[True, False], nulls_last=True)
    )
    breakers = breakers.with_columns(share_of_breaks=pl.col("breaks") / pl.col("breaks").sum().over("task_kind"))
    breakers = breakers.rename(
        {"task_kind": "kind", "prefix_break_kind": "break_kind", "prefix_break_block": "break_block"}
    )
    breakers = breakers.select(_BREAKERS)
    return stability, breakers


# -- TTFT --------------------------------------------------------------------------------------------------------


def ttft_tables(bands: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per hit-rate band, and per input-size and hit-rate band: calls, calls with a TTFT, the band's hit rate, and the
    median and p95 TTFT (linear interpolation) of the calls that have one (the per-call query's band rows)."""
    labels = {"hit_band": ("hit_rate_band", HIT_RATE_BANDS), "size_band": ("input_size_band", INPUT_SIZE_BANDS)}
    bands = bands.filter(pl.col("hit_band").is_not_null()).with_columns(
        hit_rate_expr(),
        pl.col("ttft_quantiles").list.get(0, null_on_oob=True).alias("median_ttft_s"),
        pl.col("ttft_quantiles").list.get(1, null_on_oob=True).alias("p95_ttft_s"),
    )

    def table(keys: list[str], part: str) -> pl.DataFrame:
        named = [
            pl.col(k).replace_strict(dict(enumerate(labels[k][1])), return_dtype=pl.String).alias(labels[k][0])
            for k in keys
        ]
        out = bands.filter(pl.col("part") == part).sort(keys)
        return out.select(*named, "calls", "ttft_calls", "hit_rate", "median_ttft_s", "p95_ttft_s")

    return table(["hit_band"], "hit"), table(["size_band", "hit_band"], "size")
