"""Rent vs API: from the observed traffic, what renting GPUs would cost a month against per-token prices, and the
volume at which it starts to pay (canary-and-breakeven.md §2.4; the arithmetic is ``_breakeven_model``).

Both directions from one traffic profile: API calls are priced at their own model's rates and asked what renting
would cost; self-hosted calls are priced at the API model they would move to (``--api-model``; by default the same
model name at an API's rates) and asked the same. Traffic a rate cannot price is left out of both sides and counted.

Three queries, plain aggregates: the hourly traffic (tokens by provider, model, deployment and hour, over
``hours_scope``: the hourly call roll-up), and over ``call_scope`` the rates (``model_rates``: each model's latest
per-token rates in the project) and, unless a throughput is given, the self-hosted calls' busy time in their busiest
hours (the union of in-flight intervals per cluster: a running ``max(end_time)`` window over the calls by start).
Dialect notes for another store: ``date_trunc('hour', t)`` and ``date_diff('microsecond', a, b)`` are also ClickHouse
functions (``dateTrunc``, ``dateDiff``); ``arg_max(x, t) FILTER (WHERE c)`` is ClickHouse's ``argMaxIf(x, t, c)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import Field

from taskcost._internal.lazy import np, pl
from taskcost.analytics._answer import Answer, Table, frame
from taskcost.analytics._breakeven_gpu import billed_rate, gpu_price
from taskcost.analytics._breakeven_model import (
    Breakevens,
    Costs,
    Profile,
    Rental,
    breakevens,
    costs,
    curve_frame,
    per_mtok,
    sensitivity_frame,
    verdict,
)
from taskcost.analytics._breakeven_sql import (
    _BUSY,
    _DETAIL,
    _GPU_TYPES_SHOWN,
    _NO_RATE,
    _RATE,
    _top_models,
    _traffic_sql,
    _unfolded_sql,
)
from taskcost.analytics._breakeven_window import LOW_WINDOW_H, edge_notes, edge_scales, window
from taskcost.analytics._filters import Filters, Sql, call_scope
from taskcost.analytics._groups import Top, fold_note, max_groups_option
from taskcost.analytics._question import Options, Question, UsageError
from taskcost.analytics._rates import UNITS, ModelRates, completed_rates, listed_rates, model_rates
from taskcost.store import ReadStore

__all__ = ["QUESTION", "BreakevenAnswer", "BreakevenOptions", "Throughput", "breakeven"]

_M = Decimal(1_000_000)
_MAX_HOURS = 24 * 366 * 5  # a longer window is asked for by mistake (its profile would be mostly idle hours)
_MEASURE_HOURS = 24
"""Throughput is measured on the self-hosted calls that started in the busiest hours (most tokens): the load nearest
saturation, and a bounded sort whatever the history's length."""


class BreakevenOptions(Options):
    gpu: str | None = Field(
        None,
        description="GPU to rent: an offer id of the GPU catalogue (`taskcost prices gpus`) or a GPU type (its "
        "cheapest offer). Default: the rate the measured self-hosted calls were billed at (clusters file), else "
        "--gpu-type's in the catalogue (for this question --gpu-type names the GPU to rent and measure, and does "
        "not narrow the traffic).",
    )
    usd_per_gpu_hour: Decimal | None = Field(
        None,
        ge=Decimal("0.000001"),
        le=1_000_000,
        description="$ per GPU-hour (instead of --gpu's price): a micro-dollar to 1,000,000.",
    )
    gpus_per_replica: int | None = Field(
        None, ge=1, le=1024, description="GPUs per replica (default: the measured calls' gpu_count, else 1)."
    )
    tokens_per_s: float | None = Field(
        None,
        ge=0.001,
        le=1e12,
        description="Throughput of one replica, input + output tokens per second at full load (0.001 to 10^12). "
        "Given, it is used instead of the measured one (and flagged low confidence).",
    )
    self_hosted_model: str | None = Field(
        None,
        description="The self-hosted model whose calls measure throughput (default: the --model filter; else every "
        "self-hosted call selected).",
    )
    utilisation: Decimal = Field(Decimal("0.9"), gt=0, le=1, description="Share of a replica's throughput planned.")
    min_replicas: int = Field(1, ge=0, le=10_000, description="Replicas that always run (2 for high availability).")
    sizing: Literal["peak", "p95"] = Field("peak", description="Always-on replicas sized for the peak or p95 hour.")
    autoscale_buffer: Decimal = Field(
        Decimal("0.1"), ge=0, le=10, description="Autoscaled replica-hours billed on top, for cold starts (0.1: 10%)."
    )
    api_model: str | None = Field(
        None,
        description="The API model self-hosted traffic is priced at (default: the same model name at an API's rates).",
    )
    api_provider: str | None = Field(None, description="The provider of --api-model (default: any that lists it).")
    hours_per_month: int = Field(730, ge=1, le=744, description="Hours in a month of rent and of API spend.")
    max_groups: int = max_groups_option()


@dataclass(frozen=True)
class Throughput:
    """Tokens one replica serves per second, and where that figure comes from."""

    tokens_per_s: Decimal
    source: Literal["measured", "given"]
    calls: int = 0
    busy_s: float = 0.0
    concurrency: float | None = None  # mean calls in flight while busy
    gpu_types: tuple[str, ...] = ()
    gpus_per_replica: int | None = None  # what the measured calls ran on (their gpu_count), when they agree


@dataclass(frozen=True)
class BreakevenAnswer(Answer):
    question: ClassVar[str] = "breakeven"
    terminal_keys: ClassVar[tuple[str, ...]] = (
        "verdict", "tokens_per_hour", "peak_tokens_per_hour", "api_monthly_usd", "rent_always_on_usd",
        "rent_autoscaled_usd", "best_hybrid_usd", "best_hybrid_replicas", "breakeven_tokens_per_hour",
        "utilisation", "gpu", "usd_per_gpu_hour", "tokens_per_s", "throughput_source", "confidence",
    )  # fmt: skip
    direction: str  # "api" (API traffic, priced as if rented), "self_hosted", "mixed", or "none"
    profile: Profile | None
    rental: Rental | None
    throughput: Throughput | None
    observed: Costs | None
    found: Breakevens | None
    gpu_label: str
    rate_source: str
    calls: int
    excluded_calls: int  # no API rate: left out of both sides
    excluded_tokens: int
    verdict: str
    curve: pl.DataFrame
    sensitivity: pl.DataFrame
    traffic: pl.DataFrame

    def _tph(self, k: Decimal | None) -> float | None:
        return None if k is None or self.profile is None else float(k * self.profile.mean_tokens)

    def summary(self) -> dict[str, Any]:
        p, r, o, b, t = self.profile, self.rental, self.observed, self.found, self.throughput
        out: dict[str, Any] = {"direction": self.direction, "verdict": self.verdict, "calls": self.calls}
        out |= {"excluded_calls": self.excluded_calls, "excluded_tokens": self.excluded_tokens}
        if p is None or r is None or o is None or b is None or t is None:
            return out
        month = r.hours_per_month
        at_k = None if b.always_on is None else costs(p, r, b.always_on)
        return out | {
            "hours_in_window": p.hours,
            "tokens_per_hour": float(p.mean_tokens),
            "peak_tokens_per_hour": p.peak_tokens,
            "p95_tokens_per_hour": p.p95_tokens,
            "peak_factor": float(p.peak_tokens / p.mean_tokens) if p.mean_tokens else None,
            "api_monthly_usd": o.api_usd,
            "api_usd_per_mtok": per_mtok(o.api_usd, p.mean_tokens * month),
            "rent_always_on_usd": o.always_on_usd,
            "always_on_replicas": o.always_on_replicas,
            "rent_autoscaled_usd": o.autoscaled_usd,
            "autoscaled_mean_replicas": o.autoscaled_replicas,
            "best_hybrid_usd": o.hybrid_usd,
            "best_hybrid_replicas": o.hybrid_replicas,
            "utilisation": o.utilisation_always_on,
            "utilisation_autoscaled": o.utilisation_autoscaled,
            "breakeven_tokens_per_hour": self._tph(b.always_on),
            "breakeven_tokens_per_month": None if b.always_on is None else self._tph(b.always_on * month),
            "breakeven_autoscaled_tokens_per_hour": self._tph(b.autoscaled),
            "breakeven_hybrid_tokens_per_hour": self._tph(b.hybrid),
            "utilisation_at_breakeven": None if at_k is None else at_k.utilisation_always_on,
            "gpu": self.gpu_label,
            "usd_per_gpu_hour": r.usd_per_gpu_hour,
            "usd_per_gpu_hour_source": self.rate_source,
            "gpus_per_replica": r.gpus_per_replica,
            "tokens_per_s": float(t.tokens_per_s),
            "throughput_source": t.source,
            "confidence": "measured" if t.source == "measured" else "low",
            "self_hosting_floor_usd_per_mtok": per_mtok(r.usd_per_gpu_hour * r.gpus_per_replica, r.capacity),
        }

    def tables(self) -> list[Table]:
        return [
            Table("curve", "Monthly cost against volume (the observed profile scaled)", self.curve),
            Table("sensitivity", "Breakeven with throughput and $/GPU-hour 30% either way", self.sensitivity),
            Table(
                "traffic",
                "Observed traffic by model, and the API rates it is priced at",
                self.traffic,
                (
                    "provider",
                    "model",
                    "deployment",
                    "calls",
                    "tokens_per_hour",
                    "priced_at",
                    "input_usd_per_mtok",
                    "output_usd_per_mtok",
                    "api_monthly_usd",
                    "unpriced_calls",
                ),
            ),  # fmt: skip
        ]


# -- traffic -------------------------------------------------------------------------------------------------------
def _rates(
    store: ReadStore, filters: Filters, options: BreakevenOptions, models: pl.DataFrame, at: datetime
) -> pl.DataFrame:
    """(provider, model, deployment, tail_priced) -> the API rates its traffic is priced at ($/Mtok) and what they
    are. The ``other`` row of a fold (``tail_priced`` not null) was priced in SQL, each model at its own rates: here
    only at ``--api-model`` (self-hosted traffic). The stored rates are read for the models kept (a bounded list)."""
    kept = models.filter(pl.col("tail_priced").is_null())
    names = {*kept["model"].to_list(), *([options.api_model] if options.api_model is not None else [])}
    window = Filters.model_validate({"project": filters.project, "until": filters.until})
    stored = model_rates(store, window, names)
    by_model: dict[str | None, list[ModelRates]] = {}
    for r in stored.values():
        by_model.setdefault(r.model, []).append(r)
    target: ModelRates | None = None
    target_guessed = False
    if options.api_model is not None:
        found = [r for r in by_model.get(options.api_model, []) if options.api_provider in (None, r.provider)]
        if len(found) > 1:
            raise UsageError(f"--api-model {options.api_model}: priced at several providers; give --api-provider")
        stored_target = found[0] if found else None
        target, target_guessed = completed_rates(
            stored_target, listed_rates(options.api_provider, options.api_model, at)
        )
        if target is None:
            raise UsageError(f"--api-model {options.api_model}: no stored call and no price data prices it")
    rows = []
    for provider, model, deployment, tail in models.select(
        "provider", "model", "deployment", "tail_priced"
    ).iter_rows():
        rates: ModelRates | None
        if tail is not None and not (deployment == "self_hosted" and target is not None):
            rows.append(
                {"provider": provider, "model": model, "deployment": deployment, "tail_priced": tail}
                | dict.fromkeys(UNITS)
                | {"priced_at": "each at its own model's rates" if tail else None}
            )
            continue
        if deployment == "self_hosted" and target is not None:
            rates, label = target, f"{target.provider or ''}/{target.model} (--api-model)".lstrip("/")
            guessed = target_guessed
        else:
            own = stored.get((provider, model))
            if own is None and deployment == "self_hosted":
                api = [r for r in by_model.get(model, []) if r.provider == provider] or by_model.get(model, [])
                own = api[0] if len(api) == 1 else None
            complete = own is not None and all(getattr(own, u) is not None for u in UNITS)
            rates, guessed = (
                (own, False)
                if complete
                else completed_rates(own, listed_rates(provider if deployment == "api" else None, model, at))
            )
            label = "own rates" if deployment == "api" else "the same model's API rates"
        if guessed:
            label += "; cache tokens at the input rate"
        per_mtok = {u: None if rates is None or getattr(rates, u) is None else getattr(rates, u) * _M for u in UNITS}
        rows.append(
            {"provider": provider, "model": model, "deployment": deployment, "tail_priced": tail, **per_mtok}
            | {"priced_at": label}
        )
    schema: dict[str, Any] = {"provider": pl.String, "model": pl.String, "deployment": pl.String}
    schema |= {"tail_priced": pl.Boolean} | dict.fromkeys(UNITS, pl.Decimal(38, 12)) | {"priced_at": pl.String}
    return pl.DataFrame(rows, schema=schema)


def _traffic(
    store: ReadStore, filters: Filters, options: BreakevenOptions
) -> tuple[pl.DataFrame, Profile | None, pl.DataFrame, Top, list[str]]:
    """The hourly traffic: per model (the ``traffic`` table; past max_groups, one ``other`` row per deployment and
    whether it could be priced) and, over the models an API rate prices, the profile."""
    # nothing folded when the models fit (the common case: one query); else ranked, then read again folded
    hourly = frame(store, _unfolded_sql(filters, options.max_groups), filters)
    keys = ["provider", "model", "deployment"]
    top = Top((), hourly.unique(keys).height, options.max_groups)
    if hourly.is_empty():
        top = _top_models(store, filters, options.max_groups)
        if top.groups:  # (none: no traffic at all, nothing to fold)
            hourly = frame(store, _traffic_sql(filters, top), filters)
    keys = ["provider", "model", "deployment", "tail_priced"]
    if hourly.is_empty():
        return hourly, None, pl.DataFrame(), top, []
    start, hours = window(filters, hourly["hour"])
    if hours > _MAX_HOURS:
        raise UsageError(f"the window is {hours:,} hours long; give --since / --until within 5 years")
    # an hour at either end observed in part (a 6-minute window is not an hour of traffic) counts at its rate
    first, last = edge_scales(store, filters, start, hours)
    scaled = edge_notes(hours, first, last)
    h = (pl.col("hour") - start).dt.total_hours()
    scale = pl.when(h == 0).then(pl.lit(first)).when(h == hours - 1).then(pl.lit(last)).otherwise(pl.lit(Decimal(1)))
    hourly = hourly.with_columns(scale.cast(pl.Decimal(38, 12)).alias("scale"), h.alias("h"))
    scaled_tokens = (pl.col("input_tokens") + pl.col("output_tokens")).cast(pl.Decimal(38, 12)) * pl.col("scale")
    models = hourly.group_by(keys).agg(
        pl.col("calls").sum(),
        pl.col("priced_calls").sum(),
        pl.col("cost_usd").sum(),
        *(pl.col(c).sum() for c in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")),
        pl.col("hour").n_unique().alias("active_hours"),
        pl.col("tail_api_usd").sum(),
        scaled_tokens.sum().alias("scaled_tokens"),
    )
    at = min(start + timedelta(hours=hours), datetime.now(UTC).replace(tzinfo=None)).replace(tzinfo=UTC)
    rates = _rates(store, filters, options, models, at)
    tokens = {
        "input": pl.col("input_tokens") - pl.col("cache_read_tokens") - pl.col("cache_write_tokens"),
        "cache_read": pl.col("cache_read_tokens"),
        "cache_write": pl.col("cache_write_tokens"),
        "output": pl.col("output_tokens"),
    }
    # a model is priced when every unit it used has a rate; then its hours' API charge in $ x 1e6 (exact); the fold's
    # ``other`` row was judged and priced in SQL (``tail_api_usd``), unless at --api-model's rates here
    in_sql = pl.col("tail_priced").is_not_null() & pl.all_horizontal([pl.col(u).is_null() for u in UNITS])
    own = pl.all_horizontal([(tokens[u] == 0) | pl.col(u).is_not_null() for u in UNITS])
    priced = pl.when(in_sql).then(pl.col("tail_priced")).otherwise(own)
    api_umtok = (
        pl.when(in_sql)
        .then(pl.col("tail_api_usd").cast(pl.Decimal(38, 18)) * _M)
        .otherwise(pl.sum_horizontal([tokens[u].cast(pl.Decimal(38, 12)) * pl.col(u).fill_null(0) for u in UNITS]))
    )
    models = models.drop("tail_api_usd").join(rates, on=keys, how="left", nulls_equal=True)
    models = models.with_columns(priced.alias("priced"), in_sql.alias("in_sql"))
    hourly = hourly.join(models.select(*keys, *UNITS, "priced", "in_sql"), on=keys, how="left", nulls_equal=True)
    hourly = hourly.filter(pl.col("priced")).with_columns(
        (api_umtok.cast(pl.Decimal(38, 18)) * pl.col("scale")).alias("api_umtok"),
        scaled_tokens.round(0).cast(pl.Int64).alias("tokens"),
    )
    per_hour = hourly.group_by("h").agg(pl.col("tokens").sum(), pl.col("api_umtok").sum()).sort("h")
    window_hours = hours
    model_api = hourly.group_by(keys).agg(pl.col("api_umtok").sum())
    models = models.join(model_api, on=keys, how="left", nulls_equal=True)
    # a fold's two ``other`` rows of one deployment (part priced, part not) tie on the first three: the priced first
    table = models.sort(keys, descending=[False, False, False, True], nulls_last=True).select(
        *keys[:3],
        "calls",
        "input_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "output_tokens",
        (pl.col("scaled_tokens").cast(pl.Float64) / window_hours).alias("tokens_per_hour"),
        "active_hours",
        pl.col("priced_at").fill_null("no rate: excluded").alias("priced_at"),
        *(pl.col(u).alias(f"{u}_usd_per_mtok") for u in UNITS),
        "api_umtok",
        pl.col("cost_usd").alias("observed_cost_usd"),
        (pl.col("calls") - pl.col("priced_calls")).alias("unpriced_calls"),
    )
    monthly = [  # per model, a few rows: exact in Decimal
        None if x is None else (x * options.hours_per_month / window_hours / _M).quantize(Decimal("1e-12"))
        for x in table["api_umtok"].to_list()
    ]
    table = table.drop("api_umtok").with_columns(pl.Series("api_monthly_usd", monthly, dtype=pl.Decimal(38, 12)))
    table = table.select(*table.columns[:-3], "api_monthly_usd", "observed_cost_usd", "unpriced_calls")
    if per_hour.is_empty():
        return table, None, models, top, scaled
    v = np.zeros(window_hours, dtype=np.int64)
    api = [Decimal(0)] * window_hours
    idx = per_hour["h"].to_numpy()
    v[idx] = per_hour["tokens"].to_numpy()
    for i, usd in zip(idx.tolist(), per_hour["api_umtok"].to_list(), strict=True):
        api[i] = usd / _M
    return table, Profile(v.tolist(), api), models, top, scaled


# -- throughput and the GPU's price ----------------------------------------------------------------------------------
def _measure_filters(filters: Filters, options: BreakevenOptions) -> Filters:
    """The self-hosted calls that measure throughput: the selection's task dimensions and time, its infra filters
    (``--gpu-type`` included), any provider, the model ``--self-hosted-model`` (else the ``--model`` filter)."""
    return filters.narrowed(deployment="self_hosted", provider=None, model=options.self_hosted_model or filters.model)


def _measured(
    store: ReadStore, filters: Filters, options: BreakevenOptions
) -> tuple[dict[str, Any], tuple[Decimal, str | None, str] | None]:
    """Over the clusters: calls, tokens, busy time (the union of each cluster's in-flight intervals, as the clusters'
    bill is allocated), GPU-seconds busy, summed call time, GPU counts and types; and the latest billed call's price
    detail (the clusters file's rate). One row."""
    scope = _measure_filters(filters, options)
    want = options.usd_per_gpu_hour is None and options.gpu is None
    busy = _BUSY.format(
        hours=_MEASURE_HOURS, detail=_DETAIL if want else "", gpus=int(options.gpus_per_replica or 1),
        types=_GPU_TYPES_SHOWN, rate=_RATE if want else _NO_RATE,
    )  # fmt: skip
    row = frame(store, Sql("WITH ") + call_scope(scope) + Sql(busy), scope).row(0, named=True)
    detail = row.pop("detail", None) if want else None
    billed = billed_rate(detail) if detail is not None else None
    if billed is not None and row.get("billed_rate") is not None:
        # the price of a GPU-hour is the one the measured GPU-seconds were billed at, weighted as the throughput is
        # (busy GPU-seconds per cluster), not the last billed call's: with clusters of several GPU types and rates the
        # two differ
        rates, clusters = int(row["distinct_rates"] or 0), int(row["rated_units"] or 0)
        types = ", ".join(row["gpu_types"] or []) or billed[1]
        if clusters <= 1:
            source = billed[2]
        elif rates <= 1:
            source = f"{clusters} clusters at one rate, e.g. {billed[2]}"
        else:
            source = f"{rates} rates of {clusters} clusters, weighted by their busy GPU-seconds"
        billed = (Decimal(str(row["billed_rate"])), types, source)
    return row, billed


def _throughput(units: dict[str, Any], options: BreakevenOptions) -> Throughput | None:
    """Tokens per busy GPU-second, x GPUs per replica. A GPU is busy while a call is in flight on its cluster (the
    union of the calls' intervals, not their sum: a batching engine serves many at once), so this is the throughput
    at the observed load: a lower bound of capacity when the replicas were not saturated."""
    if not units.get("units") or int(units["busy_us"] or 0) <= 0 or int(units["tokens"] or 0) <= 0:
        return None
    gpu_s = float(units["gpu_s"])
    tokens = int(units["tokens"])
    busy_s = float(units["busy_us"]) / 1e6
    per_gpu = Decimal(repr(tokens / gpu_s))
    low, high = units["min_gpus"], units["max_gpus"]
    measured_gpus = int(low) if low is not None and low == high else None
    replica_gpus = options.gpus_per_replica or measured_gpus or 1
    types = list(units["gpu_types"] or [])
    if int(units["n_gpu_types"] or 0) > len(types):
        types.append(f"{int(units['n_gpu_types']) - len(types):,} more")
    return Throughput(
        tokens_per_s=per_gpu * replica_gpus,
        source="measured",
        calls=int(units["calls"]),
        busy_s=busy_s,
        concurrency=float(units["call_s"] or 0) / busy_s if busy_s else None,
        gpu_types=tuple(types),
        gpus_per_replica=measured_gpus,
    )


def breakeven(store: ReadStore, filters: Filters, options: BreakevenOptions) -> BreakevenAnswer:
    """Rent vs API for the selected traffic (docs/analytics.md, "Rent vs API")."""
    # --gpu-type names the GPU to rent (and the self-hosted calls that measure it), not the traffic: API calls have none
    table, profile, models, top, scaled = _traffic(store, filters.narrowed(gpu_type=None), options)
    notes: list[str] = fold_note(top, "models (provider, model and deployment)", "--model") + scaled
    if filters.gpu_type is not None:
        notes.append(f"--gpu-type {filters.gpu_type}: the GPU to rent and to measure throughput on; traffic on any GPU")
    calls = int(table["calls"].sum()) if not table.is_empty() else 0
    excluded = models.filter(~pl.col("priced")) if not models.is_empty() else models
    excluded_calls = int(excluded["calls"].sum()) if not excluded.is_empty() else 0
    excluded_tokens = (
        int((excluded["input_tokens"] + excluded["output_tokens"]).sum()) if not excluded.is_empty() else 0
    )
    if excluded_calls:
        names = ", ".join(
            sorted({f"{m or '(no model name)'} ({d})" for m, d in excluded.select("model", "deployment").iter_rows()})
        )
        notes.append(
            f"coverage: {calls - excluded_calls:,} of {calls:,} call attempts priced at API rates; {excluded_calls:,} "
            f"({excluded_tokens:,} tokens) have no API rate and are left out of both sides: {names}"
        )
    empty = pl.DataFrame()
    if profile is None or not sum(profile.tokens):
        nothing = "No traffic with an API price in the selection: nothing to compare."
        return BreakevenAnswer(
            filters, "none", None, None, None, None, None, "", "", calls, excluded_calls, excluded_tokens,
            nothing, empty, empty, table, notes=notes,
        )  # fmt: skip
    deployments = set(models.filter(pl.col("priced"))["deployment"].to_list())
    direction = deployments.pop() if len(deployments) == 1 else "mixed"

    units: dict[str, Any] = {}
    detail = None
    if options.tokens_per_s is None or (options.usd_per_gpu_hour is None and options.gpu is None):
        units, detail = _measured(store, filters, options)
    measured = _throughput(units, options) if units else None
    if options.tokens_per_s is not None:
        throughput = Throughput(Decimal(repr(options.tokens_per_s)), "given")
        seen = "" if measured is None else f"; measured here: {float(measured.tokens_per_s):,.0f}"
        notes.append(
            f"throughput given: {options.tokens_per_s:,.0f} tokens/s per replica (low confidence: not measured on "
            f"this traffic's shape; an offline maximum overstates SLO-bound capacity several times{seen})"
        )
    elif measured is not None:
        throughput = measured
        conc = "" if measured.concurrency is None else f", {measured.concurrency:.2g} calls in flight on average"
        notes.append(
            f"throughput measured: {float(measured.tokens_per_s):,.1f} tokens/s per replica, from {measured.calls:,} "
            f"self-hosted calls in their busiest {_MEASURE_HOURS} hours (input + output tokens per busy GPU-second x "
            f"GPUs per replica; busy = some call in flight on the cluster, {measured.busy_s:,.0f} s{conc}). That is "
            "the throughput at the observed load: below capacity if the replicas were not saturated, so renting "
            "may look dearer than it is"
        )
    else:
        what = options.self_hosted_model or filters.model
        raise UsageError(
            "no self-hosted calls "
            + (f"of model {what} " if what else "")
            + "to measure throughput from: give --tokens-per-s (or --self-hosted-model)"
        )
    ran_on = measured.gpu_types if measured is not None else ()
    rate, gpu_label, rate_source = gpu_price(filters, options.gpu, options.usd_per_gpu_hour, detail, ran_on)
    replica_gpus = options.gpus_per_replica or (measured.gpus_per_replica if measured else None) or 1
    low, high = units.get("min_gpus"), units.get("max_gpus")
    if options.gpus_per_replica is None and measured is not None and low is not None and low != high:
        notes.append(
            f"the measured clusters had {low}-{high} GPUs each: a replica is taken as 1 GPU, at the throughput per "
            "busy GPU-second and the price of one GPU-hour (give --gpus-per-replica for a replica of several)"
        )
    rental = Rental(
        tokens_per_s=throughput.tokens_per_s,
        usd_per_gpu_hour=rate,
        gpus_per_replica=replica_gpus,
        utilisation=options.utilisation,
        min_replicas=options.min_replicas,
        sizing=options.sizing,
        hours_per_month=options.hours_per_month,
        autoscale_buffer=options.autoscale_buffer,
    )
    observed = costs(profile, rental)
    found = breakevens(profile, rental)
    notes += _notes(profile, rental, observed, found, models, measured, gpu_label, filters, options, top.folded)
    return BreakevenAnswer(
        filters,
        direction,
        profile,
        rental,
        throughput,
        observed,
        found,
        gpu_label,
        rate_source,
        calls,
        excluded_calls,
        excluded_tokens,
        verdict(profile, rental, observed, found, direction),
        curve_frame(profile, rental, found),
        sensitivity_frame(profile, rental, found),
        table,
        notes=notes,
    )


def _notes(
    profile: Profile,
    rental: Rental,
    observed: Costs,
    found: Breakevens,
    models: pl.DataFrame,
    measured: Throughput | None,
    gpu_label: str,
    filters: Filters,
    options: BreakevenOptions,
    folded: int,
) -> list[str]:
    notes = []
    if profile.hours < LOW_WINDOW_H:
        notes.append(f"the window is {profile.hours} hour(s): shorter than a week, it misses the weekly cycle")
    priced = models.filter(pl.col("priced"))
    # a name with no tokens (attempts that got no response keep the name they asked for) is no traffic to serve
    served = priced.filter(pl.col("input_tokens") + pl.col("output_tokens") > 0).height
    served += max(folded - 1, 0) if priced.filter(pl.col("tail_priced").is_not_null()).height else 0
    if served > 1:
        notes.append(
            f"{served} models in the traffic: renting assumes one replica type serves them all "
            "(filter by --model to ask about one)"
        )
    measured_model = options.self_hosted_model or filters.model
    if measured is not None and measured_model and set(priced["model"].to_list()) != {measured_model}:
        notes.append(
            f"substitution: throughput is measured on {measured_model}, the traffic is of other models "
            "(check the quality of the substitute)"
        )
    types = measured.gpu_types if measured is not None else ()
    if types and not {g.strip().lower() for g in gpu_label.split(",")} <= {t.lower() for t in types}:
        notes.append(f"throughput measured on {', '.join(types)}; the price is for {gpu_label}")
    if rental.sizing == "p95" and observed.hours_over_capacity:
        notes.append(
            f"sized for the p95 hour: {observed.hours_over_capacity} of {profile.hours} hours exceed the always-on "
            "replicas' planned capacity (queueing there)"
        )
    if not found.autoscaled_searched:
        notes.append("autoscaled breakeven: the search stopped before it settled (rent and API slopes nearly equal)")
    notes.append(
        "not modelled: engineering time, data transfer, storage, cold starts beyond the autoscale buffer, retries"
    )
    return notes


QUESTION = Question(
    name="breakeven",
    help="rent vs API: when rented GPUs beat per-token prices",
    run=breakeven,
    options=BreakevenOptions,
)
