"""Engines: one model's deployment configurations side by side, ranked by decode speed, and which of the five variables
(hardware & topology, quantization, speculative decoding, prefix-cache hit rate, PD disaggregation) differ between
the fastest and the slowest.

The same weights served by different stacks run several times apart. For each configuration of the model (one
combination of engine, version, quantization, GPU type and count, cluster, deployment, tensor/pipeline/data parallel
sizes, PD split and its pools' GPUs, speculative method and draft model: ``_engines_sql.CONFIG``) the answer gives its
decode speed (the median per call of output tokens / decode seconds: the engine's where it reported them, else the
client's latency - TTFT), TTFT by input size, queue / prefill / decode time, cache hit rates (client, engine, engine
metrics), speculative acceptance, output tokens per GPU-second, $/1M tokens attributed and fully loaded, $/completed
task and the error rate, with intervals. docs/analytics.md, "Engines", defines each figure.

Reads (``_engines_sql``): the configurations' exact sums and busy time (one row each) with a sample of their calls
for the quantiles (one read of the calls joined with ``engine_calls``), the tasks per configuration, the engines'
metrics per cluster, and the clusters' bills (``_idle``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

from pydantic import Field

from taskcost._internal.lazy import pl
from taskcost.analytics import _engines_figures as fig
from taskcost.analytics import _engines_sql as q
from taskcost.analytics._answer import Answer, Table
from taskcost.analytics._engines_words import compare, labels, pairs, speculation_sentence, spread
from taskcost.analytics._filters import Filters, Sql
from taskcost.analytics._idle import UNKNOWN_NOTE, read_bills
from taskcost.analytics._question import Options, Question
from taskcost.analytics._stats import BOOTSTRAP_RESAMPLES, MAX_CONFIDENCE
from taskcost.store import ReadStore

__all__ = ["QUESTION", "EnginesAnswer", "EnginesOptions", "engines"]


class EnginesOptions(Options):
    same_as: str | None = Field(
        None,
        description="Other model names that are the same weights (comma-separated; e.g. an API offering of the "
        "model): compared as configurations of their own.",
    )
    min_calls: int = Field(
        20, ge=1, le=1_000_000_000, description="Rank only configurations with at least this many call attempts (the "
        "others say how many more they need).",
    )  # fmt: skip
    confidence: float = Field(0.95, gt=0.5, le=MAX_CONFIDENCE, description="Confidence level of every interval.")


_CI = ("_low", "_high")


def _with_ci(*names: str) -> list[str]:
    return [f"{n}{s}" for n in names for s in ("", *_CI)]


_TABLES: dict[str, tuple[str, tuple[str, ...], list[str]]] = {
    # name -> (title, the columns a terminal shows, every column)
    "ranking": (
        "Configurations, fastest decode first (config: the key of the other tables)",
        ("config", "configuration", "calls", "decode_tps"),
        ["config", "rank", "configuration", "calls", *_with_ci("decode_tps"), "decode_source", "engine_decode_calls",
         "client_decode_calls", "unranked_because", "needed_calls", *q.CONFIG],
    ),
    "speed": (
        "Decode speed (output tokens/s per call, median) and output tokens per GPU-second busy",
        ("config", "decode_tps", "decode_tps_low", "decode_tps_high", "gpu_tps"),
        ["config", *_with_ci("decode_tps"), "gpu_tps", "output_tokens", "busy_s", "gpu_count"],
    ),
    "timing": (
        "Time to first token (client) and the engine's queue, prefill and decode time, p50 seconds",
        ("config", "ttft_p50_s", "queue_p50_s", "prefill_p50_s", "decode_p50_s"),
        ["config", *_with_ci("ttft_p50_s", "ttft_p95_s", "queue_p50_s", "prefill_p50_s", "decode_p50_s"),
         "ttft_calls", "engine_rows"],
    ),
    "ttft": (
        "Time to first token by input size, seconds",
        ("config", "input_band", "calls", "ttft_p50_s", "ttft_p95_s"),
        ["config", "input_band", "calls", *_with_ci("ttft_p50_s", "ttft_p95_s")],
    ),
    "rates": (
        "Cache hit rates (client, engine, engine metrics) and error rate",
        ("config", "client_hit_rate", "engine_hit_rate", "prefix_hit_rate", "error_rate"),
        ["config", *_with_ci("client_hit_rate", "engine_hit_rate"), "prefix_hit_rate", "prefix_source",
         *_with_ci("error_rate"), "errors", "calls", "mean_waiting", "kv_cache_usage", "preemptions"],
    ),
    "speculation": (
        "Speculative decoding: acceptance, and decode speed with it and without (a configuration differing only in it)",
        ("config", "spec_method", "accept_rate", "accept_length", "decode_tps", "speedup"),
        ["config", "spec_method", "spec_draft_model", *_with_ci("accept_rate"), "accept_source", "accept_length",
         "decode_tps", "decode_tps_without", "without_config", "speedup"],
    ),
    "money": (
        "$/1M tokens (priced calls), attributed and fully loaded, and $/completed task",
        ("config", "usd_per_mtok", "loaded_usd_per_mtok", "usd_per_completed_task"),
        ["config", "usd_per_mtok", "loaded_usd_per_mtok", "usd_per_completed_task", "calls", "priced_calls",
         "unpriced_calls", "priced_tokens", "spend_usd", "idle_usd", "finished_tasks", "completed_tasks",
         "priced_completed_tasks", "unpriced_tasks", "task_spend_usd"],
    ),
}  # fmt: skip
_EXTRA: dict[str, tuple[str, tuple[str, ...]]] = {
    "variables": ("The five variables, fastest against slowest", ("variable", "fastest", "slowest", "differs")),
    "moved": ("How the figures moved with them, fastest against slowest (association)",
              ("metric", "fastest", "slowest", "change")),
    "pairs": ("Configurations that differ in one variable only (a: the faster)",
              ("variable", "a", "b", "a_value", "b_value", "ratio")),
}  # fmt: skip
_FLOAT = {"decode_tps", "gpu_tps", "busy_s", "accept_length", "speedup", "decode_tps_without", "mean_waiting",
          "kv_cache_usage", "preemptions", "ratio", "decode_tps_a", "decode_tps_b"}  # fmt: skip
_INT = {"rank", "calls", "engine_decode_calls", "client_decode_calls", "needed_calls", "gpu_count", "tp_size",
        "pp_size", "dp_size", "output_tokens", "ttft_calls", "engine_rows", "errors", "priced_calls", "unpriced_calls",
        "priced_tokens", "finished_tasks", "completed_tasks", "priced_completed_tasks", "unpriced_tasks"}  # fmt: skip


def _dtype(column: str) -> Any:
    if column.endswith("_usd") or column.startswith("usd_per") or "_usd_per" in column:
        return pl.Decimal(38, 12) if column in ("spend_usd", "idle_usd", "task_spend_usd") else pl.Decimal(38, 6)
    if column in _INT:
        return pl.Int64
    if column == "pd_disaggregated" or column == "differs":
        return pl.Boolean
    if column in _FLOAT or column.endswith(("_s", "_rate", "_low", "_high")):
        return pl.Float64
    return pl.String


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pl.DataFrame:
    schema = {c: _dtype(c) for c in columns}
    return pl.DataFrame([{c: r.get(c) for c in columns} for r in rows], schema=schema, orient="row")


@dataclass(frozen=True)
class EnginesAnswer(Answer):
    """The configurations (``frames``: one table each, keyed by ``config``), and the summary's sentences."""

    question: ClassVar[str] = "engines"
    terminal_keys: ClassVar[tuple[str, ...]] = (
        "model", "configurations", "ranked_configurations", "calls", "spread", "differences", "speculation",
    )  # fmt: skip
    frames: dict[str, pl.DataFrame]
    head: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        return dict(self.head)

    def tables(self) -> list[Table]:
        out = [Table(n, title, self.frames[n], shown) for n, (title, shown, _) in _TABLES.items()]
        return out + [Table(n, title, self.frames[n], shown) for n, (title, shown) in _EXTRA.items()]


def _models(store: ReadStore, filters: Filters, options: EnginesOptions) -> tuple[str | None, list[str]]:
    model = filters.model or q.default_model(store, filters)
    if model is None:
        return None, []
    same = [m.strip() for m in (options.same_as or "").split(",") if m.strip() and m.strip() != model]
    return model, [model, *dict.fromkeys(same)]


def _idle(
    store: ReadStore, filters: Filters, configs: list[fig.Config], models: list[str]
) -> dict[str, Decimal] | None:
    """Each self-hosted configuration's part of the idle GPU cost (None: the store gives no bills)."""
    bills = read_bills(store, filters.narrowed(model=None))
    if bills.windows is None:
        return None
    if not bills.windows or bills.filters.deployment == "api":
        return {}
    group = Sql(f"CASE WHEN c.model IN ({', '.join('?' for _ in models)}) THEN coalesce(c.cluster_id, '') END", models)
    by_cluster = {k: v for k, v in bills.idle(bills.shares(store, group)).items() if k is not None}
    return fig.split_idle(configs, by_cluster)


def _unranked(c: fig.Config, min_calls: int) -> str | None:
    if c["calls"] < min_calls:
        c["needed_calls"] = min_calls - c["calls"]
        return f"fewer than {min_calls} calls"
    if c["decode_tps"] is None:
        return "no decode speed (no engine decode time, and no streamed call with a TTFT)"
    return None


def _order(configs: list[fig.Config], model: str, min_calls: int) -> tuple[list[fig.Config], list[fig.Config]]:
    """Ranked configurations (the fastest decode first) then the others, each given its ``config`` id and label."""
    for c, label in zip(configs, labels(configs, model), strict=True):
        c["configuration"], c["needed_calls"] = label, None
        c["unranked_because"] = _unranked(c, min_calls)

    def values(c: fig.Config) -> tuple[tuple[bool, str], ...]:  # the same order on any store
        return tuple((c[x] is None, str(c[x])) for x in q.CONFIG)

    ranked = sorted((c for c in configs if c["unranked_because"] is None),
                    key=lambda c: (-c["decode_tps"], -c["calls"], c["configuration"], values(c)))  # fmt: skip
    rest = sorted((c for c in configs if c["unranked_because"] is not None),
                  key=lambda c: (-c["calls"], c["configuration"], values(c)))  # fmt: skip
    for i, c in enumerate([*ranked, *rest], 1):
        c["config"] = f"c{i}"
        ok = any(c is o for o in ranked)
        c["rank"] = 1 + sum(1 for o in ranked if o["decode_tps"] > c["decode_tps"]) if ok else None
    return ranked, rest


def _speculation_rows(configs: list[fig.Config], found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for c in configs:
        if c["spec_method"] in (None, "", "none"):
            continue
        pair = next((p for p in found if p["variable"] == "speculation" and c["config"] in (p["a"], p["b"])), None)
        row = {k: c.get(k) for k in _TABLES["speculation"][2]}
        if pair is not None:
            mine = pair["a"] == c["config"]
            row["without_config"] = pair["b"] if mine else pair["a"]
            row["decode_tps_without"] = pair["decode_tps_b"] if mine else pair["decode_tps_a"]
            if row["decode_tps_without"] and c["decode_tps"] is not None:
                row["speedup"] = round(c["decode_tps"] / row["decode_tps_without"], 2)
        rows.append(row)
    return rows


def _notes(configs: list[fig.Config], options: EnginesOptions, folded: int, ambiguous: int, idle: Any) -> list[str]:
    notes = []
    engine = sum(c["engine_decode_calls"] for c in configs)
    client = sum(c["client_decode_calls"] for c in configs)
    notes.append(
        "decode speed (decode_tps) = output tokens / decode seconds per successful call, the median per "
        f"configuration: the engine's decode time where it reported one ({engine:,} calls), else the client's latency "
        f"- TTFT ({client:,} calls; decode_source says which); configurations are ranked by it"
    )
    notes.append(
        f"intervals at {options.confidence:.0%}: a seeded bootstrap ({BOOTSTRAP_RESAMPLES:,} resamples) of the calls "
        f"for medians and percentiles, of at most {q.SAMPLE:,} calls per configuration (a deterministic sample above); "
        "the hit and acceptance rates resample the same calls; Wilson for the error rate"
    )
    for c in configs:
        if c.get("needed_calls"):
            notes.append(
                f"{c['config']} ({c['configuration']}) has {c['calls']:,} call attempt(s): {c['needed_calls']:,} more "
                f"would rank it (min_calls {options.min_calls})"
            )
    if folded:
        notes.append(
            f"{folded:,} call attempt(s) without topology tags (no engine row: the engine never answered them) are "
            "counted in the one configuration of their cluster with the same call tags"
        )
    unpriced, calls = sum(c["unpriced_calls"] for c in configs), sum(c["calls"] for c in configs)
    if unpriced:
        notes.append(
            f"{unpriced:,} of {calls:,} call attempts are unpriced: left out of $/1M tokens (its spend and its tokens "
            "alike), never counted as $0 (unpriced_calls in the money table)"
        )
    if ambiguous:
        notes.append(
            f"{ambiguous} configuration(s) differ only in columns a task does not carry (topology, decoding, GPU "
            "count): their tasks cannot be told apart, so they have no $/completed task"
        )
    notes.append(
        "engine metrics (prefix_hit_rate, accept_length, mean_waiting, kv_cache_usage, preemptions) are each "
        "cluster's engines over [since, until): the other filters do not narrow them"
    )
    if idle is None:
        notes.append(UNKNOWN_NOTE + "; loaded_usd_per_mtok is empty")
    return notes


def engines(store: ReadStore, filters: Filters, options: EnginesOptions) -> EnginesAnswer:
    """``filters.model``'s configurations (default: the self-hosted model with the most calls), ranked by decode
    speed, with the spread and the variables that differ between the fastest and the slowest."""
    model, models = _models(store, filters, options)
    empty = {n: _frame([], cols) for n, (_, _, cols) in _TABLES.items()}
    empty |= {n: _frame([], list(cols) + (["decode_tps_a", "decode_tps_b"] if n == "pairs" else []))
              for n, (_, cols) in _EXTRA.items()}  # fmt: skip
    head: dict[str, Any] = {"model": model, "models": models, "configurations": 0, "ranked_configurations": 0,
                            "calls": 0, "spread": None, "spread_ratio": None, "fastest": None, "slowest": None,
                            "differences": None, "speculation": None, "min_calls": options.min_calls,
                            "variables": [], "pairs": []}  # fmt: skip
    if model is None:
        note = "no self-hosted model in this selection: name the model to compare with --model"
        return EnginesAnswer(filters, frames=empty, head=head, notes=[note])
    sums, picked = q.configs_and_sample(store, filters, models)
    canonical, configs = fig.fold(sums)
    if not configs:
        note = f"no call attempts of {', '.join(models)} in this selection"
        return EnginesAnswer(filters, frames=empty, head=head, notes=[note])
    calls = q.sample(picked, canonical, {c["k"]: int(c["calls"]) for c in configs})
    by_key = {k[0]: part for k, part in calls.partition_by("kk", as_dict=True, maintain_order=True).items()}
    tasks, ambiguous = fig.task_map(configs, q.task_figures(store, filters, models))
    clusters = sorted({c["cluster_id"] for c in configs if c["cluster_id"] is not None})
    per_cluster = fig.cluster_metrics(q.metrics(store, filters, clusters), models)
    idle = _idle(store, filters, configs, models)
    bands: list[dict[str, Any]] = []
    for c in configs:
        part = by_key.get(c["k"])
        rows = fig.timings(c, part if part is not None else calls.clear(), options.confidence)
        bands += [{**b, "k": c["k"]} for b in rows]
        fig.throughput(c, c["busy_us"])
        fig.money(c, None if idle is None else idle.get(c["k"], Decimal(0)), tasks.get(c["k"]), c["k"] in ambiguous)
        metrics = per_cluster.get(c["cluster_id"] or "", {})
        c.update({k: v for k, v in metrics.items() if k not in ("metrics_accept_rate", "metrics_accept_source")})
        if c["accept_rate"] is None and metrics.get("metrics_accept_rate") is not None:
            c["accept_rate"], c["accept_source"] = metrics["metrics_accept_rate"], metrics["metrics_accept_source"]
    for m in ("prefix_hit_rate", "prefix_source", "accept_length", "mean_waiting", "kv_cache_usage", "preemptions"):
        for c in configs:
            c.setdefault(m, None)
    ranked, rest = _order(configs, model, options.min_calls)
    ordered = [*ranked, *rest]
    ids = {c["k"]: c["config"] for c in ordered}
    for b in bands:
        b["config"] = ids[b["k"]]
    bands.sort(key=lambda b: (int(ids[b["k"]][1:]), [x[0] for x in fig.BANDS].index(b["input_band"])))
    found = pairs(ranked)
    frames = {n: _frame(ordered, cols) for n, (_, _, cols) in _TABLES.items() if n not in ("ttft", "speculation")}
    frames["ttft"] = _frame(bands, _TABLES["ttft"][2])
    frames["speculation"] = _frame(_speculation_rows(ordered, found), _TABLES["speculation"][2])
    frames["pairs"] = _frame(found, [*_EXTRA["pairs"][1], "decode_tps_a", "decode_tps_b"])
    variables: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    if ranked:
        fast, slow = ranked[0], ranked[-1]
        ratio, sentence = spread(fast, slow)
        head |= {"spread": sentence, "spread_ratio": ratio, "fastest": fast["config"], "slowest": slow["config"]}
        if fast is not slow:
            variables, moved, head["differences"] = compare(fast, slow)
    else:
        head["spread"] = f"no configuration can be ranked (each needs {options.min_calls} calls and a decode speed)"
    frames["variables"] = _frame(variables, list(_EXTRA["variables"][1]))
    frames["moved"] = _frame(moved, list(_EXTRA["moved"][1]))
    head |= {
        "configurations": len(ordered),
        "ranked_configurations": len(ranked),
        "calls": sum(int(c["calls"]) for c in ordered),
        "speculation": speculation_sentence(ordered, found),
        "min_calls": options.min_calls,
        "variables": variables,
        "pairs": found,
    }
    folded = sum(int(c.get("folded_calls", 0)) for c in ordered)
    notes = _notes(ordered, options, folded, len(ambiguous), idle)
    return EnginesAnswer(filters, frames=frames, head=head, notes=notes)


QUESTION = Question(
    name="engines",
    help="one model's deployment configurations side by side: decode speed, latency, cache, money; what differs",
    run=engines,
    options=EnginesOptions,
)
