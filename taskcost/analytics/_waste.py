"""Waste inside completed tasks, from their calls: superseded attempts and cache misses, in one pass.

The cost question (``_cost.py``) takes the task-level parts (failed and abandoned tasks, tool spend) from ``tasks``;
what a task's roll-up cannot say is measured here, per task and model:

- **superseded attempts**: every attempt of a logical call (``call_id``) except its last (highest ``attempt``),
  split into failed ones (status ``error``) and retried-but-ok ones, with the uncached input they re-sent;
- **cache misses**: the cache question's missed tokens (``_cache_sql``, the same rule call for call), of the last
  attempts only: the input tokens that repeated the previous call's prompt prefix but were not read from the cache.
  The repeated prefix comes from the SDK's fingerprint (``stable_prefix_chars / prompt_chars x input_tokens``; the
  SDK sets it only on a call it compared with a previous one) when the call has one, else it is estimated as
  ``min(previous input, this input)``, the previous call being the one before it without a fingerprint of its task,
  provider and model; minus ``cache_read_tokens``, floored at 0. Superseded attempts are left out of it: their whole
  cost is already waste, so the parts stay disjoint (and the cache question's ``missed_usd``, over every call
  attempt of every task, is the larger figure: ``MISS_SCOPE_NOTE``).

Missed tokens are priced in Python ``Decimal`` at each model's (input - cache-read) rate: the rates its stored costs
used (``_rates``), else, for a model no stored call read the cache with (so no stored cost shows that rate), the
list rates of the bundled price data; tokens of a model neither knows, of an unpriced call or of a self-hosted one
(it pays for GPU time, not per token) are counted as unpriced, never as $0.

Why it reads only some calls: "previous call" needs an order within a task (window functions: standard SQL, also in
ClickHouse), and sorting millions of calls, or even reading a scattered sample of them, costs seconds on one core.
What is cheap is a time range: calls are stored about in time order, so a range of ``start_time`` skips the rest of
the table. So the pass reads the calls of the selected completed tasks within a few time windows that cover them
(``call_windows``), and, above ``SAMPLE_ATTEMPTS`` attempts, only the completed tasks that started in a few evenly
spaced time slices (``sample_slices``; one per time bucket when there are few): a systematic sample the caller scales.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from taskcost._internal.lazy import np, pl
from taskcost.analytics._answer import frame
from taskcost.analytics._filters import Filters, Sql, any_of, utc_text
from taskcost.analytics._rates import ModelRates, listed_rates
from taskcost.pricing import format_usd
from taskcost.store import ReadStore

__all__ = [
    "COUNTS",
    "MISS_SCOPE_NOTE",
    "SAMPLE_ATTEMPTS",
    "Discounts",
    "Slices",
    "call_waste",
    "call_windows",
    "miss_discounts",
    "priced_misses",
    "sample_slices",
    "task_hash",
    "task_order",
    "waste_notes",
]

SAMPLE_ATTEMPTS = 10_000
"""Above this many attempts in the selected completed tasks, retries and cache misses are measured on a sample of
about this many (unless asked for exactly): the answer stays well under a second on 10M calls."""
SLICES = 4
"""Time slices of the sample (evenly spaced over the selection), or one per time bucket up to ``MAX_STRATA``."""
MAX_STRATA = 32
MAX_WINDOWS = 16
"""Time ranges of calls the pass reads at most (the smallest gaps between the tasks' spans are closed to get there)."""
MARGIN = timedelta(minutes=1)
"""Calls are read from a minute before their task's start to a minute after its end (clocks differ a little)."""
_PLACES = Decimal("0.000000000001")  # the views' money scale, DECIMAL(38, 12)
_US = timedelta(microseconds=1)


def task_hash(alias: str = "") -> str:
    """SQL for a task's 64-bit hash (DuckDB ``hash``; ClickHouse ``sipHash64``): joins a task's call figures back to
    its measured task within one answer (each engine its own hash: the values never leave it)."""
    return f"hash({alias}project, {alias}task_id)"


def task_order(alias: str = "") -> str:
    """SQL for a task's place in a bootstrap's units: the MD5 of its identity (hex), the same on every engine, so a
    store on DuckDB and one on ClickHouse resample the same tasks into the same interval."""
    return f"md5({alias}project || chr(31) || {alias}task_id)"


@dataclass(frozen=True)
class Slices:
    """Ranges ``[start, end)`` of task start times: the sampled completed tasks are those that started in one."""

    ranges: list[tuple[datetime, datetime]]

    def sql(self, column: str = "start_time") -> Sql:
        """The condition a sampled task's ``column`` meets (FALSE for no range)."""
        return any_of(
            Sql(f"{column} >= CAST(? AS TIMESTAMP) AND {column} < CAST(? AS TIMESTAMP)", [utc_text(a), utc_text(b)])
            for a, b in self.ranges
        )


def sample_slices(done: pl.DataFrame, exact: bool, strata: str | None) -> Slices | None:
    """Which completed tasks to measure. ``done``: the completed tasks in parts (any grouping finer than the strata),
    each with its ``attempts``, and of its tasks with a start time the ``first_start``, ``last_start`` and
    ``timed_attempts``. None for all of them (at most ``SAMPLE_ATTEMPTS`` attempts, or ``exact``); else slices of time
    holding about ``SAMPLE_ATTEMPTS`` attempts, spread evenly over each stratum (the ``strata`` column's values, a time
    bucket, when there are at most ``MAX_STRATA``; else the whole selection), each stratum getting an equal share."""
    total = int(done["attempts"].sum())
    if exact or total <= SAMPLE_ATTEMPTS:
        return None
    timed = done.filter(pl.col("first_start").is_not_null())
    key = pl.lit(0) if strata is None else pl.col(strata)
    spread = {"lo": pl.col("first_start").min(), "hi": pl.col("last_start").max()}
    groups = timed.group_by(key.alias("_s")).agg(**spread, attempts=pl.col("timed_attempts").sum())
    if len(groups) > MAX_STRATA:
        groups = timed.select(_s=pl.lit(0), **spread, attempts=pl.col("timed_attempts").sum())
    share = SAMPLE_ATTEMPTS / max(len(groups), 1)
    n = max(1, SLICES // max(len(groups), 1))
    ranges: list[tuple[datetime, datetime]] = []
    for lo, hi, attempts in groups.sort("lo").select("lo", "hi", "attempts").iter_rows():
        if attempts <= share or lo == hi:
            ranges.append((lo, hi + _US))
            continue
        span: timedelta = hi - lo
        width = span * (share / attempts) / n
        for i in range(n):
            centre = lo + span * ((i + 0.5) / n)
            ranges.append((centre - width / 2, centre + width / 2))
    return Slices(ranges)


def call_windows(spans: pl.DataFrame) -> list[tuple[datetime, datetime]] | None:
    """At most ``MAX_WINDOWS`` ranges of call start times that hold every call of these tasks (``spans``: their
    ``start_time`` and ``end_time``), or None when a task has no time (then every call is read)."""
    if len(spans) == 0:
        return []
    if spans["start_time"].null_count():
        return None
    iv = spans.select(lo=pl.col("start_time") - MARGIN, hi=pl.coalesce("end_time", "start_time") + MARGIN).sort("lo")
    # merge overlapping spans: a new range starts where a span begins after every earlier one ended
    iv = iv.with_columns(reach=pl.col("hi").cum_max())
    iv = iv.with_columns(new=(pl.col("lo") > pl.col("reach").shift(1)).fill_null(True).cum_sum())
    merged = iv.group_by("new").agg(lo=pl.col("lo").min(), hi=pl.col("hi").max()).sort("lo")
    lo, hi = merged["lo"].to_list(), merged["hi"].to_list()
    if len(lo) > MAX_WINDOWS:  # keep the largest gaps between ranges, close the others
        gaps = merged.select((pl.col("lo").shift(-1) - pl.col("hi")).dt.total_microseconds())[:-1].to_series()
        cuts = sorted(np.argsort(-gaps.to_numpy(), kind="stable")[: MAX_WINDOWS - 1].tolist())
        starts = [0, *(c + 1 for c in cuts)]
        ends = [*cuts, len(lo) - 1]
        lo, hi = [lo[s] for s in starts], [hi[e] for e in ends]
    return list(zip(lo, hi, strict=True))


_COLUMNS = (
    "project, task_id, call_id, attempt, start_time, span_id, provider, model, cost_usd, status, input_tokens, "
    "cache_read_tokens, uncached_input_tokens, prompt_chars, stable_prefix_chars, deployment"
)

# what each attempt is: superseded (a later attempt of its call exists), a repeat, measured by the fingerprint or
# estimated, and how many input tokens it missed the cache by: the cache question's rule, call for call
# (``_cache_sql``: a call with a stable prefix is a repeat by the fingerprint; one without is estimated from the
# previous call without one of its task, provider and model, by start time then the smaller prompt). One sort (the
# task's calls by model and time) gives the previous call; the last attempt of each call is an aggregate joined back
# (cheaper than a second sort)
_PASS = f"""
joined AS (
    SELECT c.* FROM (SELECT {task_hash()} AS h, * FROM calls) AS c JOIN keys ON c.h = keys.h
),
last_attempts AS (SELECT h, call_id, max(attempt) AS last_attempt FROM joined GROUP BY h, call_id),
ordered AS (
    SELECT j.*, coalesce(j.attempt < l.last_attempt, FALSE) AS superseded,
        j.stable_prefix_chars IS NOT NULL AS fingerprinted,
        lag(CASE WHEN j.stable_prefix_chars IS NULL THEN coalesce(j.input_tokens, 0) END IGNORE NULLS) OVER (
            PARTITION BY j.h, j.provider, j.model ORDER BY j.start_time, coalesce(j.input_tokens, 0)
        ) AS previous_input
    FROM joined AS j JOIN last_attempts AS l ON j.h = l.h AND j.call_id IS NOT DISTINCT FROM l.call_id
),
marked AS (
    SELECT h, provider, model, cost_usd, uncached_input_tokens,
        -- a miss has a per-token price only on a priced API call (a self-hosted call pays for GPU time)
        cost_usd IS NOT NULL AND coalesce(deployment, '') <> 'self_hosted' AS per_token,
        superseded AND status = 'error' AS failed_attempt,
        superseded AND coalesce(status, '') <> 'error' AS retried_attempt,
        NOT superseded AND (fingerprinted OR previous_input IS NOT NULL) AS repeat_call,
        fingerprinted,
        CASE WHEN NOT superseded AND (fingerprinted OR previous_input IS NOT NULL) THEN greatest(
            CASE WHEN fingerprinted THEN CASE WHEN prompt_chars > 0
                    THEN CAST(round(CAST(stable_prefix_chars AS DOUBLE) * coalesce(input_tokens, 0) / prompt_chars)
                              AS BIGINT) ELSE 0 END
                ELSE least(previous_input, coalesce(input_tokens, 0)) END
            - coalesce(cache_read_tokens, 0), 0) ELSE 0 END AS missed
    FROM ordered
)
SELECT h, provider, model,
    count(*) FILTER (WHERE failed_attempt) AS failed_attempts,
    sum(cost_usd) FILTER (WHERE failed_attempt) AS failed_attempts_usd,
    count(*) FILTER (WHERE failed_attempt AND cost_usd IS NULL) AS failed_attempts_unpriced,
    coalesce(sum(uncached_input_tokens) FILTER (WHERE failed_attempt), 0) AS failed_attempts_tokens,
    count(*) FILTER (WHERE retried_attempt) AS retried_attempts,
    sum(cost_usd) FILTER (WHERE retried_attempt) AS retried_attempts_usd,
    count(*) FILTER (WHERE retried_attempt AND cost_usd IS NULL) AS retried_attempts_unpriced,
    coalesce(sum(uncached_input_tokens) FILTER (WHERE retried_attempt), 0) AS retried_attempts_tokens,
    count(*) FILTER (WHERE repeat_call AND fingerprinted) AS fingerprint_calls,
    count(*) FILTER (WHERE repeat_call AND NOT fingerprinted) AS estimated_calls,
    count(*) FILTER (WHERE missed > 0) AS missed_calls,
    count(*) FILTER (WHERE missed > 0 AND cost_usd IS NULL) AS missed_unpriced_calls,
    coalesce(sum(missed) FILTER (WHERE NOT per_token), 0) AS missed_tokens_unpriced_calls,
    coalesce(sum(missed) FILTER (WHERE per_token), 0) AS missed_tokens
FROM marked
GROUP BY h, provider, model
"""

COUNTS = (
    "failed_attempts",
    "failed_attempts_unpriced",
    "failed_attempts_tokens",
    "retried_attempts",
    "retried_attempts_unpriced",
    "retried_attempts_tokens",
    "fingerprint_calls",
    "estimated_calls",
    "missed_calls",
    "missed_unpriced_calls",
    "missed_tokens",
    "missed_tokens_unpriced_calls",
)


def call_waste(
    store: ReadStore, filters: Filters, tasks: list[int], windows: list[tuple[datetime, datetime]] | None
) -> pl.DataFrame:
    """Per task (``h``: its ``task_hash``) of ``tasks`` and (provider, model): counts, dollars and tokens of
    superseded attempts and cache misses, reading only calls that start in ``windows`` (all when None). The tasks
    travel as one list parameter (a join against it costs little; re-reading ``tasks`` for them would not)."""
    if not tasks or windows == []:
        windows, tasks = [], []
    project = "" if filters.project is None else " AND project = ?"
    one = f"SELECT {_COLUMNS} FROM llm_calls WHERE TRUE{project}"
    mine = [] if filters.project is None else [filters.project]
    if windows is None:
        calls = Sql(one, mine)
    elif not windows:
        calls = Sql(f"{one} AND FALSE", mine)
    else:
        calls = Sql("")
        for i, (lo, hi) in enumerate(windows):
            calls += Sql(
                ("\n    UNION ALL " if i else "")
                + f"{one} AND start_time >= CAST(? AS TIMESTAMP) AND start_time < CAST(? AS TIMESTAMP)",
                [*mine, utc_text(lo), utc_text(hi)],
            )
    sql = Sql("WITH keys AS (SELECT * FROM unnest(CAST(? AS UBIGINT[])) AS k(h)),\ncalls AS (", [tasks])
    sql += calls + Sql("),") + Sql(_PASS)
    return frame(store, sql, filters, max_rows=100_000_000).with_columns(pl.col(c).cast(pl.Int64) for c in COUNTS)


@dataclass(frozen=True)
class Discounts:
    """What one missed token costs per (provider, model): input rate - cache-read rate."""

    usd_per_token: dict[tuple[str | None, str | None], Decimal]
    listed: list[str]  # provider/model priced at the price data's list rates (no stored cost shows a cache-read rate)
    unknown: list[str]  # provider/model with no rate at all: their missed tokens stay unpriced


def miss_discounts(
    models: list[tuple[str | None, str | None]], rates: dict[tuple[str | None, str | None], ModelRates], at: datetime
) -> Discounts:
    """Each model's cache discount: from the stored calls' price detail (``_rates``: the rates the costs used), else,
    when no stored call of the model read the cache, at the price data's list rates (time ``at``), else unknown."""
    out: dict[tuple[str | None, str | None], Decimal] = {}
    listed: list[str] = []
    unknown: list[str] = []
    for key in models:
        stored = rates.get(key)
        discount = None if stored is None else stored.cache_discount
        name = f"{key[0]}/{key[1]}"
        if discount is None:
            list_rates = listed_rates(key[0], key[1], at)
            discount = None if list_rates is None else list_rates.cache_discount
            (unknown if discount is None else listed).append(name)
        if discount is not None:
            out[key] = discount
    return Discounts(out, sorted(listed), sorted(unknown))


def priced_misses(df: pl.DataFrame, discounts: Discounts) -> pl.DataFrame:
    """``df`` (aggregated per group and (provider, model)) with ``missed_usd``: its missed tokens at the model's cache
    discount, exact; and ``missed_unpriced_tokens``: those of a model without a known discount, or of unpriced calls.
    One Decimal product per aggregated row, never per call."""
    usd: list[Decimal] = []
    unpriced: list[int] = []
    for provider, model, tokens, other in df.select(
        "provider", "model", "missed_tokens", "missed_tokens_unpriced_calls"
    ).iter_rows():
        discount = discounts.usd_per_token.get((provider, model))
        if discount is None:
            usd.append(Decimal(0))
            unpriced.append(tokens + other)
        else:
            usd.append((tokens * discount).quantize(_PLACES, rounding=ROUND_HALF_EVEN))
            unpriced.append(other)
    return df.with_columns(
        pl.Series("missed_usd", usd, dtype=pl.Decimal(38, 12)),
        pl.Series("missed_unpriced_tokens", unpriced, dtype=pl.Int64),
    )


MISS_SCOPE_NOTE = (
    "cache misses here are waste: those of completed tasks' last attempts only (a failed or abandoned task and a "
    "superseded attempt are whole waste already); the cache question's missed_usd (Cache page) counts every selected "
    "call attempt, of any task, so it is larger"
)
"""Why this question's ``cache_miss_usd`` differs from the cache question's ``missed_usd`` (docs/analytics.md, "Cache
economics", "Missed vs the cost question's cache misses")."""

_NAMED = 10
"""Models a note names at most (the others are counted): a note stays a sentence whatever the models."""


def _names(models: list[str]) -> str:
    shown = ", ".join(models[:_NAMED])
    return shown if len(models) <= _NAMED else f"{shown} and {len(models) - _NAMED:,} more"


def waste_notes(t: dict[str, Any], slices: Slices | None, discounts: Discounts) -> list[str]:
    """The notes of a cost answer: coverage, tasks still running, how cache misses were measured and priced, and
    whether waste was sampled."""
    attempts, unpriced = int(t["attempts"]), int(t["unpriced_calls"])
    notes = [
        f"coverage: {attempts - unpriced:,} of {attempts:,} call attempts of finished tasks priced"
        + (f"; {unpriced:,} unpriced, excluded from every dollar figure" if unpriced else "")
    ]
    if t["in_progress"]:
        notes.append(
            f"{int(t['in_progress']):,} tasks still running (no outcome yet) are left out; they spent "
            f"{format_usd(Decimal(t['in_progress_usd'] or 0))} so far "
            f"({int(t['in_progress_unpriced']):,} unpriced attempts)"
        )
    notes.append(
        f"cache misses: {int(t['fingerprint_calls']):,} repeat calls measured by the SDK's prompt fingerprint, "
        f"{int(t['estimated_calls']):,} estimated as min(previous input, this input)"
    )
    notes.append(MISS_SCOPE_NOTE)
    if t["missed_unpriced_tokens"]:
        why = [f"no cache-read rate known for {_names(discounts.unknown)}"] if discounts.unknown else []
        if t["missed_tokens_unpriced_calls"]:
            why.append(f"{int(t['missed_tokens_unpriced_calls']):,} of them in unpriced or self-hosted calls")
        notes.append(
            f"{int(t['missed_unpriced_tokens']):,} missed cache tokens are not priced ({'; '.join(why)}): "
            "not in the cache-miss dollars"
        )
    if discounts.listed:
        notes.append(
            f"cache misses of {_names(discounts.listed)} are priced at the price data's list rates (input - cache "
            "read): their stored costs show no cache-read rate (none of their priced calls read the cache)"
        )
    if slices is not None:
        notes.append(
            f"retries and cache misses measured on the {int(t['sampled_completed']):,} of {int(t['completed']):,} "
            f"completed tasks that started in {len(slices.ranges)} evenly spaced time slices, scaled to the rest "
            "by LLM spend (dollars) and by tasks (attempts, tokens); --exact measures them all"
        )
    if t["unmeasured_groups"]:
        notes.append(
            f"{t['unmeasured_groups']} groups had no completed task in the sample: their waste is not shown (the "
            "summary scales the whole sample to the whole selection instead of adding up groups); --exact measures them"
        )
    return notes
