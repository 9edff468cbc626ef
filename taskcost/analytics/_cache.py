"""Cache economics: how much of the input the prompt cache served, what that saved, what it missed, whether it buys
latency, and which task kinds break their prompt prefix (from the SDK's fingerprint).

Definitions (docs/analytics.md, "Cache economics"):

- hit rate = sum(cache_read_tokens) / sum(input_tokens) (input is stored inclusive of cache reads and writes);
- saved = sum(cache_read_tokens) x (input rate - cache-read rate);
- missed = for each call that is not the first of its (provider, model) in its task, the input tokens that repeated
  the previous call's prompt prefix but were not read from the cache, priced like a saving. The repeated prefix is
  ``round(stable_prefix_chars x input_tokens / prompt_chars)`` when the SDK's fingerprint measured it, else
  ``min(previous input, this input)``; minus ``cache_read_tokens``, floored at 0. A call with a stable prefix is a
  repeat by the fingerprint itself (the SDK only measures one against a previous call), so the window that finds the
  previous call runs over the other calls only: with the SDK everywhere it is nearly free.

Tokens are summed per (provider, model) in SQL and priced here, exactly (polars Decimal), at each model's rates from
``_rates``. Self-hosted calls (priced per GPU-hour) and models with no known cache-read rate keep their tokens and get
no dollars, and every money figure says how many calls it could not price.

Hit rate and savings are plain sums over every selected call (exact at any size). Misses, the prefix report and the
TTFT bands need each call with its task (a join) and, without a fingerprint, its previous call (a window): above
``SAMPLE_CALLS`` selected calls they are measured on the calls of a sample of tasks (a hash of the task id, so a task
is whole) and scaled up; ``exact`` measures every call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import Field

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import Answer, Table, frame
from taskcost.analytics._cache_sql import (
    HASH_BUCKETS,
    _fits,
    _Folds,
    _folds,
    _per_call_sql,
    _task_valued,
    _totals_sql,
    _unfolded,
    per_call_parts,
    rates_later,
    with_rates,
)
from taskcost.analytics._cache_tables import (
    HIT_RATE_BANDS,
    INPUT_SIZE_BANDS,
    hit_rate_expr,
    money_sum,
    prefix_tables,
    ttft_tables,
)
from taskcost.analytics._facts import Bucket, check_bucket, check_dimension
from taskcost.analytics._filters import DIMENSIONS, Filters
from taskcost.analytics._groups import OTHER, Top, max_groups_option
from taskcost.analytics._question import Options, Question
from taskcost.store import ReadStore

__all__ = [
    "HASH_BUCKETS",
    "HIT_RATE_BANDS",
    "INPUT_SIZE_BANDS",
    "QUESTION",
    "SAMPLE_CALLS",
    "CacheAnswer",
    "CacheOptions",
    "cache_economics",
]

SAMPLE_CALLS = 50_000
"""Above this many selected calls, misses, the prefix report and the TTFT percentiles are measured on the calls of a
sample of tasks of about this many calls (unless ``exact``): the answer stays well under a second at 10M calls, and
under 0.2 s from the CLI at 1M (measured at 1M in one process: 0.11 s with 50,000, 0.14 s with 100,000)."""

_M = Decimal(1_000_000)


class CacheOptions(Options):
    by: str | None = Field(None, description=f"Group by this dimension ({', '.join(DIMENSIONS)}); none: one row.")
    bucket: Bucket | None = Field(
        None, description="Also a time series with one row per minute, hour, day or week (of each call's start)."
    )
    exact: bool = Field(
        False,
        description=f"Measure misses, the prefix report and TTFT percentiles on every call, not on a sample of tasks "
        f"above {SAMPLE_CALLS:,} calls (slower on large selections).",
    )
    misses: bool = Field(
        True,
        description="Measure misses, TTFT by hit rate and the prefix report (a second pass over the calls); false: "
        "hit rates and savings only, with the missed figures left empty (null), not zero.",
    )
    max_groups: int = max_groups_option()


@dataclass(frozen=True)
class CacheAnswer(Answer):
    """Hit rate, savings and misses overall (the headline), per group, over time and per model; TTFT by hit-rate
    band; the prefix-stability report."""

    question = "cache"
    by: str | None
    bucket: str | None
    totals: dict[str, Any]
    groups: pl.DataFrame
    over_time: pl.DataFrame
    by_model: pl.DataFrame
    ttft_by_hit_rate: pl.DataFrame
    ttft_by_input_size: pl.DataFrame
    prefix_stability: pl.DataFrame
    prefix_breakers: pl.DataFrame

    def summary(self) -> dict[str, Any]:
        return dict(self.totals)

    def tables(self) -> list[Table]:
        by = f" by {self.by}" if self.by else ""
        key = (self.by,) if self.by else ()
        totals = (
            "calls", "input_tokens", "cache_read_tokens", "hit_rate", "saved_usd", "write_premium_usd", "missed_tokens",
            "missed_usd",
        )  # fmt: skip
        out = [
            Table("groups", f"Cache hit rate, saved and missed{by}", self.groups, (*key, *totals, "unpriced_calls")),
            Table(
                "by_model",
                "By model, at its rates (USD per million tokens)",
                self.by_model,
                (
                    "provider",
                    "model",
                    "self_hosted",
                    "input_usd_per_mtok",
                    "cache_read_usd_per_mtok",
                    "cache_write_usd_per_mtok",
                    *totals,
                ),  # fmt: skip
            ),
        ]
        if self.bucket is not None:
            out.append(Table("over_time", f"Per {self.bucket}{by}", self.over_time, ("bucket", *key, *totals)))
        out += [
            Table("ttft_by_hit_rate", "Time to first token by the call's hit rate", self.ttft_by_hit_rate),
            Table(
                "ttft_by_input_size",
                "Time to first token by input size and hit rate (like against like)",
                self.ttft_by_input_size,
            ),
            Table(
                "prefix_stability",
                "Prompt-prefix stability by task kind (SDK fingerprint)",
                self.prefix_stability,
                _STABILITY_SHOWN,
            ),
            Table(
                "prefix_breakers",
                "Where prefixes break, by tokens after the break",
                self.prefix_breakers,
                (
                    "kind",
                    "break_kind",
                    "break_block",
                    "breaks",
                    "share_of_breaks",
                    "after_break_tokens",
                    "after_break_usd",
                    "missed_usd",
                ),
            ),  # fmt: skip
        ]
        return [t for t in out if t.frame.width]  # misses=false: the tables it did not measure are left out


_STABILITY_SHOWN = (
    "kind", "fingerprinted_calls", "compared_calls", "breaks", "break_rate", "top_break_kind", "top_break_block",
    "mean_stable_share", "after_break_tokens", "after_break_usd", "missed_tokens", "missed_usd", "unpriced_calls",
)  # fmt: skip
"""The prefix report's columns a terminal and the Cache page show (``top_break_calls`` is in CSV and JSON)."""


def _threshold(calls: int, exact: bool) -> int | None:
    """The hash threshold that samples about ``SAMPLE_CALLS`` calls' tasks, or None: measure every call."""
    if exact or calls <= SAMPLE_CALLS:
        return None
    return max(1, math.ceil(HASH_BUCKETS * SAMPLE_CALLS / calls))


# -- pricing -----------------------------------------------------------------------------------------------------


def _priced(df: pl.DataFrame, money: dict[str, str], premium: bool = False) -> pl.DataFrame:
    """Rows keyed by (..., self_hosted, input, cache_read, cache_write): the rates of the row's model in USD per token,
    from the SQL) with token columns priced (``money``: money column -> its tokens) at the cache discount (input rate -
    cache-read rate), which is null for a self-hosted call (no per-token price) and for a model without both rates;
    ``unpriced_calls`` and ``unpriced_<tokens>`` count what could not be priced. A self-hosted call has no per-token
    price whatever its tokens: every one is unpriced, its saving unknown (so the count does not depend on how calls fall
    into rows). An API call's tokens cost exactly $0 at any rate when there are none: a row of a model without a
    known rate, without cache reads or misses (an attempt that got no response), has nothing unpriced.

    With ``premium``: also ``write_premium_usd`` = ``cache_write_tokens`` x (cache-write rate - input rate), what the
    cache writes cost more than plain input, and ``saved_usd`` is net of it (a saving of a row whose writes cannot be
    priced is unknown: null)."""
    discount = pl.col("input") - pl.col("cache_read")
    out = df.with_columns(discount=pl.when(pl.col("self_hosted")).then(None).otherwise(discount))
    writes = premium and "cache_write_tokens" in df.columns
    if writes:
        extra_rate = pl.col("cache_write") - pl.col("input")
        out = out.with_columns(write_extra=pl.when(pl.col("self_hosted")).then(None).otherwise(extra_rate))
    extra = []
    per_token = ~pl.col("self_hosted")  # a self-hosted call has no per-token price: never $0
    for m, tokens in money.items():
        usd = pl.col(tokens).cast(pl.Decimal(38, 0)) * pl.col("discount")
        extra.append(pl.when(per_token & (pl.col(tokens) == 0)).then(usd.fill_null(0)).otherwise(usd).alias(m))
    priced = per_token & (
        pl.col("discount").is_not_null() | (pl.sum_horizontal([pl.col(t) for t in money.values()]) == 0)
    )
    if writes:
        usd = pl.col("cache_write_tokens").cast(pl.Decimal(38, 0)) * pl.col("write_extra")
        none_written = per_token & (pl.col("cache_write_tokens") == 0)
        extra.append(pl.when(none_written).then(usd.fill_null(0)).otherwise(usd).alias("write_premium_usd"))
        priced = priced & (pl.col("write_extra").is_not_null() | (pl.col("cache_write_tokens") == 0))
        extra.append(
            pl.when(pl.col("write_extra").is_not_null())
            .then(0)
            .otherwise(pl.col("cache_write_tokens"))
            .alias("unpriced_cache_write_tokens")
        )
    extra.append(pl.when(priced).then(0).otherwise(pl.col("calls")).alias("unpriced_calls"))
    extra += [
        pl.when(pl.col("discount").is_not_null()).then(0).otherwise(pl.col(tokens)).alias(f"unpriced_{tokens}")
        for tokens in ("cache_read_tokens", "missed_tokens")
        if tokens in money.values()
    ]
    out = out.with_columns(extra)
    if writes and "saved_usd" in out.columns:
        out = out.with_columns(saved_usd=pl.col("saved_usd") - pl.col("write_premium_usd"))
    return out


def _scaled(df: pl.DataFrame, scale: float) -> pl.DataFrame:
    """A sample's counts and tokens scaled up to the whole selection (whole numbers; unchanged at scale 1)."""
    if scale == 1:
        return df
    counts = [c for c, t in df.schema.items() if t == pl.Int64]
    floats = [c for c, t in df.schema.items() if t == pl.Float64]
    return df.with_columns(
        *[(pl.col(c) * scale).round(0).cast(pl.Int64) for c in counts], *[pl.col(c) * scale for c in floats]
    )


_COUNTS = [
    "calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "missed_tokens", "fingerprint_calls",
    "size_estimate_calls", "unpriced_calls", "unpriced_cache_read_tokens", "unpriced_cache_write_tokens",
    "unpriced_missed_tokens",
]  # fmt: skip
_FIGURES = [
    "calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "hit_rate", "saved_usd", "write_premium_usd",
    "missed_tokens", "missed_usd", "fingerprint_calls", "size_estimate_calls", "unpriced_calls",
    "unpriced_cache_read_tokens", "unpriced_cache_write_tokens", "unpriced_missed_tokens",
]  # fmt: skip


def _rollup(priced: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Priced rows summed to ``keys``: the columns of ``groups``, ``over_time`` and ``by_model``."""
    money = [money_sum("saved_usd"), money_sum("write_premium_usd"), money_sum("missed_usd")]
    aggs = [pl.col(c).sum().cast(pl.Int64) for c in _COUNTS] + money
    out = priced.group_by(keys, maintain_order=True).agg(aggs) if keys else priced.select(aggs)
    out = out.with_columns(hit_rate_expr()).select(*keys, *_FIGURES)
    return out.sort(keys, nulls_last=True) if keys else out


# -- the question ------------------------------------------------------------------------------------------------


def _notes(by_model: pl.DataFrame, misses: bool = True, folded: int = 0) -> list[str]:
    notes = []
    hosted = by_model.filter(pl.col("self_hosted"))
    missed = f" and {int(hosted['missed_tokens'].sum()):,} missed" if misses else ""
    if hosted.height and (calls := int(hosted["calls"].sum())):
        notes.append(
            f"{calls:,} self-hosted call(s) are priced per GPU-hour, not per token: their "
            f"{int(hosted['cache_read_tokens'].sum()):,} cache-read{missed} tokens are counted without dollars."
        )
    for row in by_model.filter(~pl.col("self_hosted") & (pl.col("unpriced_calls") > 0)).iter_rows(named=True):
        if folded and row["provider"] is None and row["model"] == OTHER:
            missed = f" and {row['unpriced_missed_tokens']:,} missed" if misses else ""
            notes.append(
                f"{OTHER} (the {folded:,} models past max_groups): {row['unpriced_cache_read_tokens']:,} cache-read"
                f"{missed} tokens ({row['unpriced_calls']:,} calls) of those with no priced call, or none read from "
                "the cache, in the window are unpriced."
            )
            continue
        why = (
            "no priced call of it in the window"
            if row["input_usd_per_mtok"] is None
            else "no priced call of it read from the cache in the window, so its cache-read rate is unknown"
        )
        missed = f" and {row['missed_tokens']:,} missed" if misses else ""
        notes.append(
            f"{row['provider'] or '(no provider)'}/{row['model'] or '(no model name)'}: {why}; its"
            f" {row['cache_read_tokens']:,} cache-read{missed} tokens "
            f"({row['calls']:,} calls) are unpriced."
        )
    return notes


def _usd(value: Decimal | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if abs(value) >= Decimal("0.01") else f"${value:.6f}"


def _headline(total: dict[str, Any], misses: bool = True) -> str:
    """E.g. ``hit rate 23.5% of 37,500 input tokens; saved $0.02, missed $0.03 (2 of 14 calls without a per-token
    price: tokens only)``; without ``misses`` (not measured), no missed figure."""
    if not total["input_tokens"]:
        return "no input tokens in the selection"
    missed = f", missed {_usd(total['missed_usd'])}" if misses else ""
    premium = total.get("write_premium_usd")
    net = f" (net of {_usd(premium)} cache-write premium)" if premium else ""
    text = (
        f"hit rate {total['hit_rate']:.1%} of {total['input_tokens']:,} input tokens; "
        f"saved {_usd(total['saved_usd'])}{net}{missed}"
    )
    if total["unpriced_calls"]:
        text += f" ({total['unpriced_calls']:,} of {total['calls']:,} calls without a per-token price: tokens only)"
    return text


_CELL = ["grp", "bucket", "provider", "model", "self_hosted", "input", "cache_read", "cache_write"]
"""A cell of the tokens: a group, a time bucket and a model (with its rates)."""


def _by_model(priced: pl.DataFrame) -> pl.DataFrame:
    """One row per (provider, model, self_hosted), with the rates it was priced at (USD per million tokens; none for
    the ``other`` row of a fold, whose models each had their own)."""
    out = _rollup(priced, ["provider", "model", "self_hosted"])
    units = ("input", "cache_read", "cache_write")
    one = pl.struct(*units).n_unique() == 1
    rate_cols = priced.group_by("provider", "model").agg(
        pl.when(one).then(pl.col(u).first() * _M).cast(pl.Decimal(38, 12)).alias(f"{u}_usd_per_mtok") for u in units
    )
    out = out.join(rate_cols, on=["provider", "model"], how="left", nulls_equal=True).with_columns(
        pl.when(pl.col("self_hosted")).then(None).otherwise(pl.col(f"{u}_usd_per_mtok")).alias(f"{u}_usd_per_mtok")
        for u in units
    )
    first = ["provider", "model", "self_hosted", *(f"{u}_usd_per_mtok" for u in units)]
    return out.select(*first, *[c for c in out.columns if c not in first])


def _breaks(answer: pl.DataFrame) -> int:
    """The distinct prefix breaks among the measured calls (counted in SQL when they were folded there)."""
    values = answer.filter(pl.col("part") == "break_values")["calls"]
    if len(values):
        return int(values[0])
    breaks = answer.filter((pl.col("part") == "breaks") & pl.col("prefix_break_block").is_not_null())
    return breaks.select("prefix_break_kind", "prefix_break_block").unique().height


def _refold(
    store: ReadStore, filters: Filters, options: CacheOptions, folds: _Folds, answer: pl.DataFrame
) -> _Folds | None:
    """The folds to read the per-call answer again with, when its task kinds, a task dimension's values or its prefix
    breaks (read unfolded) do not fit; None when they do (or were folded already)."""
    by, limit = options.by, options.max_groups
    if folds.breaks:
        return None
    known = {"models": folds.models}
    if by is not None and not _task_valued(by) and folds.group is not None:
        known["group"] = folds.group
    kinds = answer.filter(pl.col("part").is_in(["kinds", "breaks"]))
    if (kind_top := _fits(kinds, ["task_kind"], limit)) is not None:
        known["kinds"] = kind_top
    if by == "kind":  # the same fold as the prefix report's
        if kind_top is not None:
            known["group"] = kind_top
    elif _task_valued(by) and (group := _fits(answer.filter(pl.col("part") == "cells"), ["grp"], limit)) is not None:
        known["group"] = group
    breaks_fit = _breaks(answer) <= limit + 1
    if breaks_fit and len(known) == (3 if by is not None else 2):
        return None
    return _folds(store, filters, by, limit, options.misses, known, breaks=not breaks_fit)


def cache_economics(store: ReadStore, filters: Filters, options: CacheOptions) -> CacheAnswer:
    """Cache hit rate, dollars saved and missed (overall, per ``options.by``, per ``options.bucket``, per model), TTFT
    by hit-rate band, and the prefix-stability report, over the calls ``filters`` select."""
    by, bucket = options.by, options.bucket
    check_dimension(by)
    check_bucket(store, filters, bucket)
    # the values of every grouping past max_groups are folded in SQL: a model's rates (``rates_cte``) do not depend on
    # which of its calls are looked at, and are learned from the project's calls in the window
    # They are read unfolded first (the common case: no ranking query), and ranked and read again only when they do
    # not fit: the calls' values (models, a call dimension) in the totals, the tasks' and the breaks in the per-call
    # answer.
    limit, none = options.max_groups, Top((), 0, options.max_groups)
    folds = _unfolded(by, limit)
    totals_frame = frame(store, _totals_sql(filters, by, bucket, folds), filters)
    known = {"kinds": none, "group": none} if _task_valued(by) else {"kinds": none}
    if (models := _fits(totals_frame, ["provider", "model"], limit)) is not None:
        known["models"] = models
    if by is not None and not _task_valued(by) and (group := _fits(totals_frame, ["grp"], limit)) is not None:
        known["group"] = group
    if "models" not in known or (by is not None and "group" not in known):
        folds = _folds(store, filters, by, limit, options.misses, known, breaks=False)
        totals_frame = frame(store, _totals_sql(filters, by, bucket, folds), filters)
    add_rates = rates_later(folds)
    calls = int(totals_frame["calls"].sum())
    threshold = _threshold(calls, options.exact) if options.misses else 0
    answer = per_call_parts(frame(store, _per_call_sql(filters, by, bucket, threshold, folds), filters))
    if (again := _refold(store, filters, options, folds, answer)) is not None:
        folds = again
        answer = per_call_parts(frame(store, _per_call_sql(filters, by, bucket, threshold, folds), filters))
    if add_rates:
        totals_frame = with_rates(totals_frame, answer)

    def part(name: str) -> pl.DataFrame:
        return answer.filter(pl.col("part") == name).drop(
            "part", "ttft_calls", "hit_band", "size_band", "ttft_quantiles"
        )

    per_call = part("cells")
    measured = int(per_call["calls"].sum())
    scale = calls / measured if threshold and measured else 1.0
    per_call = _scaled(per_call, scale)
    bands = _scaled(answer.filter(pl.col("part").is_in(["hit", "size"])), scale)

    # exact tokens per cell, with the (scaled) misses of the same cell; a task's value (kind, ...) is known to the
    # per-call query only: its groups are its cells (exact unless sampled)
    money = {"saved_usd": "cache_read_tokens", "missed_usd": "missed_tokens"}
    measures = ["missed_tokens", "fingerprint_calls", "size_estimate_calls"]
    task_cells = per_call.group_by(_CELL).agg(
        pl.col("calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", *measures).sum()
    )
    keys = _CELL[1:] if _task_valued(by) else _CELL
    misses = task_cells.group_by(keys).agg(pl.col(*measures).sum())
    cells = totals_frame.join(misses, on=keys, how="left", nulls_equal=True).with_columns(
        pl.col(*measures).fill_null(0)
    )
    priced = _priced(cells, money, premium=True)
    grouped = _priced(task_cells, money, premium=True) if _task_valued(by) else priced
    group_keys = ["grp"] if by is not None else []
    rename = {"grp": by} if by is not None else {}
    groups = _rollup(grouped, group_keys).rename(rename)
    over_time = _rollup(grouped, ["bucket", *group_keys]).rename(rename) if bucket is not None else pl.DataFrame()
    by_model = _by_model(priced)

    prefix_money = {"missed_usd": "missed_tokens", "after_break_usd": "after_break_tokens"}
    prefix_stability, prefix_breakers = prefix_tables(
        _priced(_scaled(part("kinds"), scale), prefix_money), _priced(_scaled(part("breaks"), scale), prefix_money)
    )
    ttft_by_hit_rate, ttft_by_input_size = ttft_tables(bands)

    total = _rollup(priced, []).row(0, named=True)
    compared = int(prefix_stability["compared_calls"].sum())
    breaks = int(prefix_stability["breaks"].sum())
    totals: dict[str, Any] = {
        "headline": _headline(total),
        **{k: total[k] for k in ("calls", "input_tokens", "cache_read_tokens", "hit_rate", "saved_usd")},
        **{k: total[k] for k in ("cache_write_tokens", "write_premium_usd", "unpriced_cache_write_tokens")},
        **{k: total[k] for k in ("missed_tokens", "missed_usd", "fingerprint_calls", "size_estimate_calls")},
        **{k: total[k] for k in ("unpriced_calls", "unpriced_cache_read_tokens", "unpriced_missed_tokens")},
        "prefix_compared_calls": compared,
        "prefix_breaks": breaks,
        "prefix_break_rate": breaks / compared if compared else None,
        "measured_calls": measured,
    }
    notes = _notes(by_model, options.misses, folds.models.folded)
    totals["folded_groups"] = folds.group.folded if folds.group is not None else 0
    notes += folds.notes(by, _breaks(answer))
    if not options.misses:
        return _without_misses(filters, by, bucket, totals, groups, over_time, by_model, notes)
    notes.append(
        "missed counts every selected call attempt (any task outcome, retries included); the cost question's "
        "cache_miss_usd (a waste part) counts completed tasks' last attempts only, so it is smaller."
    )
    notes.append(
        f"missed tokens: {totals['fingerprint_calls']:,} repeat call(s) measured by the SDK's prompt fingerprint, "
        f"{totals['size_estimate_calls']:,} estimated as min(previous input, this input) (no fingerprint)."
    )
    if calls and not prefix_stability.height:
        notes.append("no selected call carries the SDK's prompt fingerprint: there is no prefix-stability report.")
    if threshold:
        grouped_note = f" (and the groups by {by}: a task's value is read with it)" if _task_valued(by) else ""
        notes.append(
            f"misses, the prefix report and TTFT figures{grouped_note} were measured on the calls of a sample of "
            f"tasks ({measured:,} of {calls:,} calls, tasks chosen by a hash of their id) and scaled by {scale:.2f}; "
            "the other hit rates, savings and call counts are exact (exact=true measures every call)."
        )
    return CacheAnswer(
        filters,
        by,
        bucket,
        totals,
        groups,
        over_time,
        by_model,
        ttft_by_hit_rate,
        ttft_by_input_size,
        prefix_stability,
        prefix_breakers,
        notes=notes,
    )


_UNMEASURED = ["missed_tokens", "missed_usd", "fingerprint_calls", "size_estimate_calls", "unpriced_missed_tokens"]


def _without_misses(
    filters: Filters,
    by: str | None,
    bucket: str | None,
    totals: dict[str, Any],
    groups: pl.DataFrame,
    over_time: pl.DataFrame,
    by_model: pl.DataFrame,
    notes: list[str],
) -> CacheAnswer:
    """The answer of ``misses=false``: what was not measured is null (unknown), never zero."""

    def unknown(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(pl.lit(None, dtype=df.schema[c]).alias(c) for c in _UNMEASURED if c in df.columns)

    totals = {**totals, **dict.fromkeys([*_UNMEASURED, "prefix_compared_calls", "prefix_breaks"]), "measured_calls": 0}
    totals["prefix_break_rate"] = None
    totals["headline"] = _headline(totals, misses=False)
    notes.append("misses, TTFT by hit rate and the prefix report were not measured (misses=false).")
    empty = pl.DataFrame()
    return CacheAnswer(
        filters,
        by,
        bucket,
        totals,
        unknown(groups),
        unknown(over_time),
        unknown(by_model),
        empty,
        empty,
        empty,
        empty,
        notes=notes,
    )


def _run(store: ReadStore, filters: Filters, options: CacheOptions) -> Answer:
    return cache_economics(store, filters, options)


QUESTION = Question(
    name="cache",
    help="cache economics: hit rate, dollars saved and missed, prefix stability",
    run=_run,
    options=CacheOptions,
)
