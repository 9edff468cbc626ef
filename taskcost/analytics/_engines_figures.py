"""The ``engines`` question's figures per configuration, from its reads (``_engines_sql``): the fold of untagged calls,
quantiles with their bootstrap intervals, rates with theirs, throughput per GPU-second, money, the engines' own
metrics per cluster. Python runs over configurations and sampled calls here, never over every call."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from taskcost._internal.lazy import np, pl
from taskcost.analytics._canary_stats import _bootstrap_order_statistics, quantile
from taskcost.analytics._engines_sql import CALL_CONFIG, ENGINE_CONFIG, TASK_KEY
from taskcost.analytics._per_token import _ratio
from taskcost.analytics._stats import BOOTSTRAP_RESAMPLES, SEED, Interval, ratio_ci, wilson_ci

__all__ = [
    "BANDS",
    "Config",
    "cluster_metrics",
    "fold",
    "money",
    "quantile_ci",
    "split_idle",
    "task_map",
    "throughput",
    "timings",
]

BANDS: tuple[tuple[str, int, int | None], ...] = (
    ("<1k", 0, 1_000),
    ("1k-4k", 1_000, 4_000),
    ("4k-16k", 4_000, 16_000),
    (">=16k", 16_000, None),
)
"""Input-size bands of the TTFT table: (label, from, to) in input tokens, ``to`` excluded."""

_SUMS = (
    "calls", "errors", "priced_calls", "priced_tokens", "input_tokens", "cache_read_tokens", "output_tokens",
    "engine_input_tokens", "engine_cached_tokens", "spec_draft_tokens", "spec_accepted_tokens", "engine_rows",
    "engine_decode_calls", "client_decode_calls", "ok_calls",
)  # fmt: skip

Config = dict[str, Any]
"""One configuration: its ``CONFIG`` columns, key ``k``, sums, then every figure the answer shows."""


def fold(rows: pl.DataFrame) -> tuple[dict[str, str], list[Config]]:
    """The configurations after the fold: a key whose calls carry no topology or decoding tag at all (no engine row:
    an attempt the engine never answered) joins the one configuration of the same cluster and call tags that has
    them, when there is exactly one; ``canonical`` maps each folded key to the key it joined."""
    configs = [{**r, **{s: int(r[s] or 0) for s in _SUMS}} for r in rows.iter_rows(named=True)]
    tagged = [c for c in configs if any(c[x] is not None for x in ENGINE_CONFIG)]
    canonical: dict[str, str] = {}
    for c in configs:
        if any(c is t for t in tagged) or c["cluster_id"] is None:
            continue
        same = [t for t in tagged if all(t[x] == c[x] for x in CALL_CONFIG)]
        if len(same) == 1:
            canonical[c["k"]] = same[0]["k"]
    by_key = {c["k"]: c for c in configs}
    for folded, into in canonical.items():
        target, extra = by_key[into], by_key.pop(folded)
        target["folded_calls"] = target.get("folded_calls", 0) + extra["calls"]
        for s in _SUMS:
            target[s] += extra[s]
        spends = [x for x in (target["spend_usd"], extra["spend_usd"]) if x is not None]
        target["spend_usd"] = sum(spends, Decimal(0)) if spends else None
    return canonical, list(by_key.values())


def quantile_ci(values: np.ndarray, q: float, confidence: float) -> tuple[float | None, Interval]:
    """The q-quantile of ``values`` (an order statistic, as the canary's) and its seeded percentile-bootstrap
    interval ("none" under 2 values)."""
    if len(values) == 0:
        return None, Interval.none()
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    point = quantile(ordered, q)
    if len(ordered) < 2:
        return point, Interval.none()
    draws = _bootstrap_order_statistics(ordered, [q], BOOTSTRAP_RESAMPLES, np.random.default_rng(SEED))[0]
    alpha = (1 - confidence) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return point, Interval(float(low), float(high), "bootstrap")


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _share(num: float | int | None, den: float | int | None) -> float | None:
    return None if num is None or not den else float(num) / float(den)


def _quantiles(into: Config, name: str, values: np.ndarray, confidence: float, q: float = 0.5) -> None:
    point, ci = quantile_ci(values, q, confidence)
    into[name], into[f"{name}_low"], into[f"{name}_high"] = point, _finite(ci.low), _finite(ci.high)


def _rate(into: Config, name: str, point: float | None, num: np.ndarray, den: np.ndarray, confidence: float) -> None:
    """A ratio of sums (exact, from the SQL's sums) and its interval resampling the sampled calls."""
    ci = ratio_ci(num, den, confidence) if point is not None else Interval.none()
    into[name], into[f"{name}_low"], into[f"{name}_high"] = point, _finite(ci.low), _finite(ci.high)


_READ = ("decode_tps", "queue_s", "prefill_s", "decode_s", "ttft_s", "input_tokens", "cache_read_tokens",
         "engine_cached_tokens", "spec_draft_tokens", "spec_accepted_tokens")  # fmt: skip


def _columns(calls: pl.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The sampled calls' columns ``_READ`` as float64 values (0 where NULL) and where each is not NULL."""
    values = calls.select(pl.col(n).cast(pl.Float64).fill_null(0.0) for n in _READ).to_numpy()
    present = calls.select(pl.col(n).is_not_null() for n in _READ).to_numpy()
    return {n: (values[:, i], present[:, i]) for i, n in enumerate(_READ)}


def timings(c: Config, calls: pl.DataFrame, confidence: float) -> list[dict[str, Any]]:
    """``c``'s decode speed, engine times, TTFT and rates from its sampled ``calls``; returns its TTFT band rows.
    (Each column is read once into an array: a frame filter per figure cost more than the figures, 13 configurations
    at 10,000 calls.)"""
    ok = calls["error"].to_numpy() == 0
    read = _columns(calls)
    speeds, has_speed = read["decode_tps"]
    point, ci = quantile_ci(speeds[ok & has_speed], 0.5, confidence)
    # the figure ranked and compared is the one printed: tokens/s to one decimal
    c["decode_tps"] = None if point is None else round(point, 1)
    c["decode_tps_low"] = None if not math.isfinite(ci.low) else round(ci.low, 1)
    c["decode_tps_high"] = None if not math.isfinite(ci.high) else round(ci.high, 1)
    c["decode_source"] = _source(c["engine_decode_calls"], c["client_decode_calls"])
    for column in ("queue_s", "prefill_s", "decode_s"):
        values, present = read[column]
        _quantiles(c, column.replace("_s", "_p50_s"), values[ok & present], confidence)
    ttft_all, has_ttft = read["ttft_s"]
    with_ttft = ok & has_ttft
    ttft = ttft_all[with_ttft]
    _quantiles(c, "ttft_p50_s", ttft, confidence)
    _quantiles(c, "ttft_p95_s", ttft, confidence, 0.95)
    c["ttft_calls"] = int(with_ttft.sum())
    input_tokens = read["input_tokens"][0]  # (0 where not reported, as the SQL's coalesce)
    sized = input_tokens[with_ttft]
    bands = []
    for label, lo, hi in BANDS:
        inside = sized >= lo
        if hi is not None:
            inside &= sized < hi
        values = ttft[inside]
        if len(values) == 0:
            continue
        row: dict[str, Any] = {"config": None, "input_band": label, "calls": len(values)}
        _quantiles(row, "ttft_p50_s", values, confidence)
        _quantiles(row, "ttft_p95_s", values, confidence, 0.95)
        bands.append(row)
    cache_read = read["cache_read_tokens"][0]
    _rate(c, "client_hit_rate", _share(c["cache_read_tokens"], c["input_tokens"]), cache_read, input_tokens,
          confidence)  # fmt: skip
    engine_cached, has_engine = read["engine_cached_tokens"]
    _rate(c, "engine_hit_rate", _share(c["engine_cached_tokens"], c["engine_input_tokens"]),
          engine_cached[has_engine], input_tokens[has_engine], confidence)  # fmt: skip
    drafted, accepted = read["spec_draft_tokens"][0], read["spec_accepted_tokens"][0]
    spec = drafted > 0
    _rate(c, "accept_rate", _share(c["spec_accepted_tokens"], c["spec_draft_tokens"]), accepted[spec], drafted[spec],
          confidence)  # fmt: skip
    c["accept_source"] = "calls" if c["accept_rate"] is not None else None
    errors = wilson_ci(int(c["errors"]), int(c["calls"]), confidence)
    c["error_rate"] = _share(c["errors"], c["calls"])
    c["error_rate_low"], c["error_rate_high"] = _finite(errors.low), _finite(errors.high)
    return bands


def _source(engine: int, client: int) -> str | None:
    if engine and client:
        return "mixed"
    return "engine" if engine else "client" if client else None


def cluster_metrics(rows: pl.DataFrame, models: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per cluster, from its engines' metrics over the window: the prefix-cache hit rate (vLLM's hits / queries in
    tokens; else cached / prompt tokens, SGLang's and llama.cpp's; else SGLang's gauge), speculative acceptance
    (accepted / draft tokens; mean acceptance length 1 + accepted / drafts; else SGLang's gauges), the mean of
    requests waiting and of KV-cache usage, and the preemptions. A cluster's series of ``models`` (and those naming
    no model) are read; when none names one of them, and its engines name one model only (the engine's own name for
    it: ``meta-llama/Llama-3.1-70B-Instruct`` for ``llama-3.1-70b-instruct``), that one's."""
    out: dict[str, dict[str, Any]] = {}
    for cluster, part in rows.partition_by("cluster_id", as_dict=True).items():
        named = part.filter(pl.col("model").is_in(list(models)) | pl.col("model").is_null())
        if named.filter(pl.col("model").is_not_null()).is_empty() and part["model"].drop_nulls().n_unique() == 1:
            named = part
        m: dict[str, dict[str, Any]] = {}
        for r in named.iter_rows(named=True):  # several series of one metric (a model and none): added up
            if r["metric"] in m:
                prev = m[r["metric"]]
                r = {**r, "delta": _add(prev["delta"], r["delta"]), "mean": _mean(prev, r),
                     "samples": prev["samples"] + r["samples"]}  # fmt: skip
            m[r["metric"]] = r

        def delta(name: str, m: dict[str, Any] = m) -> float | None:
            return m[name]["delta"] if name in m else None

        def mean(name: str, m: dict[str, Any] = m) -> float | None:
            return m[name]["mean"] if name in m else None

        def first(*pairs: tuple[float | None, str]) -> tuple[float | None, str | None]:
            return next(((v, s) for v, s in pairs if v is not None), (None, None))

        accepted = delta("spec_accepted_tokens")
        hit, hit_source = first(
            (_share(delta("prefix_cache_hits"), delta("prefix_cache_queries")), "prefix_cache_hits/queries"),
            (_share(delta("cached_prompt_tokens"), delta("prompt_tokens")), "cached/prompt tokens"),
            (mean("cache_hit_rate"), "cache_hit_rate gauge"),
        )
        rate, rate_source = first(
            (_share(accepted, delta("spec_draft_tokens")), "metrics"), (mean("spec_accept_rate"), "metrics gauge")
        )
        drafts = delta("spec_drafts")
        length = 1 + accepted / drafts if accepted is not None and drafts else mean("spec_accept_length")
        out[str(cluster[0])] = {
            "prefix_hit_rate": hit,
            "prefix_source": hit_source,
            "metrics_accept_rate": rate,
            "metrics_accept_source": rate_source,
            "accept_length": length,
            "mean_waiting": mean("requests_waiting"),
            "kv_cache_usage": mean("kv_cache_usage"),
            "preemptions": delta("preemptions"),
        }
    return out


def _add(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


def _mean(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Two series' gauge means as one (weighted by their samples)."""
    if a["mean"] is None or b["mean"] is None:
        return b["mean"] if a["mean"] is None else a["mean"]
    return float((a["mean"] * a["samples"] + b["mean"] * b["samples"]) / (a["samples"] + b["samples"]))


def task_map(configs: Sequence[Config], tasks: pl.DataFrame) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Each configuration's task figures: a row of ``tasks`` (its ``TASK_KEY`` values) belongs to the configuration
    with the same values (a task's empty ``engine`` or ``cluster_id`` matches any: the call had it from its engine
    span). Returns the figures by key, and the keys whose tasks cannot be told apart from another configuration's
    (they differ only in columns a task does not hold: topology, decoding, GPU count)."""
    out: dict[str, dict[str, Any]] = {}
    ambiguous: set[str] = set()
    for row in tasks.iter_rows(named=True):
        owners = [
            c
            for c in configs
            if all(
                row[x] == c[x] or (x in ("engine", "cluster_id") and row[x] is None and c[x] is not None)
                for x in TASK_KEY
            )
        ]
        if len(owners) > 1:
            ambiguous |= {c["k"] for c in owners}
        if len(owners) != 1:
            continue
        into = out.setdefault(owners[0]["k"], {})
        if row["completed_tasks"]:  # the kinds of work its completed tasks did
            into["task_kinds"] = sorted({*into.get("task_kinds", []), str(row["kind"])})
        for column, value in row.items():
            if column in TASK_KEY or column == "kind":
                continue
            if column == "task_spend_usd":
                if value is not None:
                    into[column] = into.get(column, Decimal(0)) + Decimal(value)
            else:
                into[column] = into.get(column, 0) + int(value or 0)
    return out, ambiguous


def split_idle(configs: Sequence[Config], by_cluster: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Each self-hosted configuration's part of the idle GPU cost of its cluster's windows (``by_cluster``: the idle
    the selected models' calls hold on each cluster, pro rata to their shares of each window): all of it when it is
    the cluster's only configuration, else pro rata to the configurations' attributed dollars there."""
    out: dict[str, Decimal] = {}
    for cluster, idle in by_cluster.items():
        on = [c for c in configs if (c["cluster_id"] or "") == cluster and c["deployment"] == "self_hosted"]
        if not on:
            continue
        weights = [c["spend_usd"] or Decimal(0) for c in on]
        total = sum(weights, Decimal(0))
        for c, w in zip(on, weights, strict=True):
            out[c["k"]] = idle * w / total if total else idle / len(on)
    return out


def money(c: Config, idle: Decimal | None, tasks: Mapping[str, Any] | None, ambiguous: bool) -> None:
    """``c``'s $/1M tokens (priced calls only, attributed and fully loaded) and $/completed task (fully priced finished
    tasks whose calls all ran on it); None, never $0, without a priced figure."""
    spend, tokens = c["spend_usd"], int(c["priced_tokens"] or 0)
    c["idle_usd"] = idle
    c["usd_per_mtok"] = _ratio(spend, tokens, 1_000_000)
    c["loaded_usd_per_mtok"] = None if idle is None or spend is None else _ratio(spend + idle, tokens, 1_000_000)
    t = dict(tasks or {})
    for column in ("finished_tasks", "completed_tasks", "priced_completed_tasks", "unpriced_tasks"):
        c[column] = None if ambiguous else int(t.get(column, 0))
    c["task_spend_usd"] = None if ambiguous else t.get("task_spend_usd")
    c["task_kinds"] = [] if ambiguous else list(t.get("task_kinds", []))
    c["usd_per_completed_task"] = None if ambiguous else _ratio(t.get("task_spend_usd"),
                                                               int(t.get("priced_completed_tasks", 0)))  # fmt: skip
    c["unpriced_calls"] = int(c["calls"]) - int(c["priced_calls"])


def throughput(c: Config, busy_us: int | None) -> None:
    """Output tokens per GPU-second busy: the configuration's output tokens / (the seconds one of its calls was in
    flight x its GPUs); None without a GPU count. (The attempts folded in, never served, are not in the busy time.)"""
    busy_us = int(busy_us) if busy_us is not None else None
    c["busy_s"] = None if busy_us is None else busy_us / 1e6
    gpus = c["gpu_count"]
    c["gpu_tps"] = None if not gpus or not busy_us else round(c["output_tokens"] / (busy_us / 1e6 * gpus), 3)
