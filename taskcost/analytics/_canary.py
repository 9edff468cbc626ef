"""Canary: baseline vs candidate on one dimension (engine version, model, GPU type...), with a verdict that can gate a
rollout (exit 0 pass, 1 fail, 3 not enough data).

Arms: the calls (latency, TTFT, error rate) and the tasks (success rate, cost per completed task, tokens per task)
whose value of the dimension is the baseline's or the candidate's, under every filter (``--golden`` restricts both
arms to the fixed task set). A task joins an arm when all its calls share that value; tasks that mix values are in
neither arm. Statistics and defaults follow canary-and-breakeven.md §1.7: each metric has a margin, a minimum
sample per arm and three outcomes; "not enough data" is an answer of its own, never a silent pass.

Three SQL statements, whatever the store's size: the arms' exact call counts, a deterministic sample of their
successful calls for the quantiles (about ``call_sample`` per arm), and one row per task of the arms (a warm-up adds
one). Dialect note: the sample uses DuckDB's ``hash()`` (ClickHouse: ``cityHash64``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import Field

from taskcost._internal.exit_codes import canary_exit_code
from taskcost._internal.lazy import np, pl
from taskcost.analytics._answer import Answer, Table
from taskcost.analytics._canary_sql import ARMS, _counts, _sample, _task_frame
from taskcost.analytics._canary_stats import (
    METRIC_BY_NAME,
    METRICS,
    Compared,
    Effect,
    judged,
    metric_schema,
    quantile,
    quantile_notes,
    quantile_ratio_cis,
    ratio_of_ratios_cis,
    rounded_needed,
    verdict,
)
from taskcost.analytics._filters import CALL_DIMENSIONS, Filters, utc_text
from taskcost.analytics._question import Options, Question, UsageError
from taskcost.analytics._stats import BOOTSTRAP_RESAMPLES, MAX_CONFIDENCE, Interval, difference_ci, micro_usd
from taskcost.store import ReadStore

__all__ = ["QUESTION", "CanaryAnswer", "CanaryOptions", "canary"]

Dimension = Literal[
    "engine_version",
    "engine",
    "harness_version",
    "agent_version",
    "model",
    "quantization",
    "gpu_type",
    "cluster",
    "provider",
    "deployment",
]
_QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}


def _ratio(description: str, default: float) -> Any:
    return Field(default, gt=1.0, le=100.0, description=description)


class CanaryOptions(Options):
    dimension: Dimension | None = Field(None, description="What differs between the arms (required).")
    baseline: str | None = Field(None, description="The dimension's value of the baseline arm (required).")
    candidate: str | None = Field(None, description="The dimension's value of the candidate arm (required).")
    confidence: float = Field(0.95, gt=0.5, le=MAX_CONFIDENCE, description="Two-sided confidence of every interval.")
    critical: str = Field(
        "error_rate,task_success_rate,cost_per_completed_task",
        description="Comma-separated metrics whose 'worse' always fails, and whose lack of data is never ignored.",
    )
    allow_inconclusive: str = Field(
        "", description="Comma-separated metrics whose inconclusive outcome does not hold the verdict back."
    )
    non_critical_fail: Literal["fail", "warn"] = Field(
        "fail", description="What a non-critical metric's 'worse' does to the verdict: fail it, or only warn."
    )
    latency_p50_margin: float = _ratio("Allowed ratio candidate/baseline of the p50 latency.", 1.10)
    latency_p95_margin: float = _ratio("Allowed ratio of the p95 latency.", 1.10)
    latency_p99_margin: float = _ratio("Allowed ratio of the p99 latency.", 1.20)
    ttft_p50_margin: float = _ratio("Allowed ratio of the p50 time to first token.", 1.10)
    ttft_p95_margin: float = _ratio("Allowed ratio of the p95 time to first token.", 1.10)
    ttft_p99_margin: float = _ratio("Allowed ratio of the p99 time to first token.", 1.20)
    error_rate_margin_pp: float = Field(
        1.0, gt=0, lt=100, description="Allowed rise of the call error rate, in percentage points."
    )
    success_rate_margin_pp: float = Field(
        2.0, gt=0, lt=100, description="Allowed fall of the task success rate, in percentage points."
    )
    cost_margin: float = _ratio("Allowed ratio of the cost per completed task.", 1.10)
    tokens_margin: float = _ratio("Allowed ratio of the tokens per task.", 1.10)
    call_sample: int = Field(
        10_000, ge=1_000, le=100_000, description="Successful calls per arm sampled for the latency and TTFT quantiles."
    )
    warmup_s: float = Field(
        0.0, ge=0, le=31_536_000, description="Leave out each arm's first seconds (from its first call; up to a year)."
    )


@dataclass(frozen=True)
class CanaryAnswer(Answer):
    """The verdict, one row per metric (``metrics``) and one per arm (``arms``)."""

    question: ClassVar[str] = "canary"
    terminal_keys: ClassVar[tuple[str, ...]] = (
        "verdict", "dimension", "baseline", "candidate", "worse_metrics", "holding_verdict_metrics",
        "needed_calls_per_arm", "needed_tasks_per_arm", "baseline_calls", "candidate_calls",
    )  # fmt: skip
    dimension: str
    baseline: str
    candidate: str
    verdict: Literal["pass", "fail", "not_enough_data"]
    metrics: pl.DataFrame
    arms: pl.DataFrame
    needed_calls_per_arm: int | None
    needed_tasks_per_arm: int | None
    confidence: float
    call_sample: int

    def summary(self) -> dict[str, Any]:
        outcomes = self.metrics["outcome"].to_list()
        arms = {row["arm"]: row for row in self.arms.iter_rows(named=True)}
        worse = self.metrics.filter(pl.col("outcome") == "worse")["metric"].to_list()
        held = self.metrics.filter(pl.col("holds_verdict"))["metric"].to_list()
        inconclusive = self.metrics.filter(pl.col("outcome") == "inconclusive")["metric"].to_list()
        out: dict[str, Any] = {
            "verdict": self.verdict,
            "dimension": self.dimension,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "metrics_better": outcomes.count("better"),
            "metrics_within_margin": outcomes.count("within_margin"),
            "metrics_worse": outcomes.count("worse"),
            "metrics_inconclusive": outcomes.count("inconclusive"),
            "worse_metrics": ", ".join(worse),
            # every inconclusive metric, as the table shows them; those that hold the verdict back (not allowed to be
            # inconclusive) apart: the two lists differed under one name (3 said, 10 shown)
            "inconclusive_metrics": ", ".join(inconclusive),
            "holding_verdict_metrics": ", ".join(held),
            "needed_calls_per_arm": self.needed_calls_per_arm,
            "needed_tasks_per_arm": self.needed_tasks_per_arm,
        }
        for arm in ARMS:
            row = arms[arm]
            out[f"{arm}_calls"] = row["calls"]
            out[f"{arm}_finished_tasks"] = row["finished_tasks"]
            out[f"{arm}_cost_per_completed_task_usd"] = row["cost_per_completed_task_usd"]
            out[f"{arm}_unpriced_calls"] = row["unpriced_calls"]
            out[f"{arm}_unpriced_tasks"] = row["unpriced_tasks"]
        out["confidence"] = self.confidence
        out["call_sample"] = self.call_sample
        return out

    def tables(self) -> list[Table]:
        title = f"{self.dimension}: {self.baseline} (baseline) vs {self.candidate} (candidate)"
        return [
            Table(
                "metrics",
                f"Canary, {title}: verdict {self.verdict}",
                self.metrics,
                display=(
                    "metric",
                    "n_baseline",
                    "n_candidate",
                    "baseline",
                    "candidate",
                    "effect",
                    "ci_low",
                    "ci_high",
                    "margin",
                    "outcome",
                    "rule",
                    "needed_n",
                ),
            ),  # fmt: skip
            Table(
                "arms",
                title,
                self.arms,
                display=("arm", "value", "calls", "errors", "finished_tasks", "completed_tasks", "cost_usd"),
            ),
        ]


# -- SQL ----------------------------------------------------------------------------------------------------------
# -- the arms' figures --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Arm:
    value: str
    calls: int
    errors: int
    ok_calls: int
    first_call: datetime | None
    last_call: datetime | None
    latency: np.ndarray  # sampled successful calls
    ttft: np.ndarray  # the sampled calls that report one
    input_tokens: np.ndarray
    finished: int
    completed: int
    running: int
    cost_usd: Decimal | None  # the priced part of every finished task; None when none has one
    unpriced_calls: int
    attempts: int
    tool_calls: int
    unpriced_tool_calls: int
    unpriced_tasks: int  # finished tasks with an unpriced call attempt or tool call: not in the cost per task
    priced_completed: int  # completed tasks fully priced
    priced_cost_usd: Decimal  # the spend of the fully priced finished tasks
    task_cost_micro: np.ndarray  # per fully priced finished task
    task_completed: np.ndarray  # per fully priced finished task
    task_tokens: np.ndarray  # per finished task

    @property
    def cost_per_completed(self) -> Decimal | None:
        """Over the fully priced tasks only (``_cost_priced``): None without a fully priced completed task."""
        if not self.priced_completed:
            return None
        return (self.priced_cost_usd / self.priced_completed).quantize(Decimal("1e-12"))

    @property
    def tokens_per_task(self) -> float | None:
        return float(self.task_tokens.mean()) if self.finished else None


def _arm(arm: str, value: str, counts: dict[str, dict[str, Any]], sample: pl.DataFrame, tasks: pl.DataFrame) -> _Arm:
    row = counts.get(arm, {})
    s = sample.filter(pl.col("value") == value)
    t = tasks.filter(pl.col("arm") == arm)
    finished = t.filter(pl.col("outcome").is_not_null())
    cost = finished["cost_usd"].sum() if finished["cost_usd"].null_count() < finished.height else None
    priced = finished.filter(pl.col("priced"))
    priced_cost = priced["cost_usd"].sum() if priced.height else None
    return _Arm(
        value=value,
        calls=int(row.get("calls") or 0),
        errors=int(row.get("errors") or 0),
        ok_calls=int(row.get("calls") or 0) - int(row.get("errors") or 0),
        first_call=row.get("first_call"),
        last_call=row.get("last_call"),
        latency=s["duration_s"].drop_nulls().to_numpy(),
        ttft=s["ttft_s"].drop_nulls().to_numpy(),
        input_tokens=s["input_tokens"].drop_nulls().to_numpy(),
        finished=finished.height,
        completed=int((finished["outcome"] == "completed").sum()),
        running=t.height - finished.height,
        cost_usd=Decimal(cost) if cost is not None else None,
        unpriced_calls=int(finished["unpriced_calls"].sum()),
        attempts=int(finished["attempts"].sum()),
        tool_calls=int(finished["tool_calls"].sum()),
        unpriced_tool_calls=int(finished["unpriced_tools"].sum()),
        unpriced_tasks=finished.height - priced.height,
        priced_completed=int((priced["outcome"] == "completed").sum()),
        # a fully priced task without a cost has no call nor tool call at all: it cost nothing
        priced_cost_usd=Decimal(priced_cost) if priced_cost is not None else Decimal(0),
        task_cost_micro=micro_usd(priced["cost_usd"]),
        task_completed=(priced["outcome"] == "completed").cast(pl.Float64).to_numpy(),
        task_tokens=finished["tokens"].cast(pl.Float64).to_numpy(),
    )


# -- the metrics --------------------------------------------------------------------------------------------------
def _num(x: float | None) -> str | None:
    return None if x is None or not math.isfinite(x) else f"{x:.6g}"


def _compare(arms: tuple[_Arm, _Arm], options: CanaryOptions) -> dict[str, Compared]:
    b, c = arms
    conf = options.confidence
    out: dict[str, Compared] = {}

    def effect(metric: str, point: float | None, ci: Interval) -> Effect | None:
        m = METRIC_BY_NAME[metric]
        if point is None or not math.isfinite(point):
            return None
        return Effect(point, ci, float(getattr(options, m.margin_option)), m.scale, m.bad)

    for name, (xb, xc) in {"latency": (b.latency, c.latency), "ttft": (b.ttft, c.ttft)}.items():
        cis = quantile_ratio_cis(xb, xc, list(_QUANTILES.values()), conf)
        for (label, q), (point, ci) in zip(_QUANTILES.items(), cis, strict=True):
            vb = quantile(np.sort(xb), q) if len(xb) else None
            vc = quantile(np.sort(xc), q) if len(xc) else None
            metric = f"{name}_{label}"
            out[metric] = Compared((len(xb), len(xc)), (_num(vb), _num(vc)), effect(metric, point, ci))

    def rates(metric: str, kb: int, nb: int, kc: int, nc: int) -> Compared:
        pb, pc = (kb / nb if nb else None), (kc / nc if nc else None)
        values = (_num(None if pb is None else 100 * pb), _num(None if pc is None else 100 * pc))
        if pb is None or pc is None:
            return Compared((nb, nc), values, None)
        ci = difference_ci(kb, nb, kc, nc, conf)
        pp = Interval(100 * ci.low, 100 * ci.high, ci.method)
        return Compared((nb, nc), values, effect(metric, 100 * (pc - pb), pp), (kb, nb, kc, nc))

    out["error_rate"] = rates("error_rate", b.errors, b.calls, c.errors, c.calls)
    out["task_success_rate"] = rates("task_success_rate", b.completed, b.finished, c.completed, c.finished)

    cb, cc = b.cost_per_completed, c.cost_per_completed
    tb, tc = b.tokens_per_task, c.tokens_per_task
    # cost over the fully priced tasks (``_cost_priced``), tokens over every finished task: resampled apart
    [cost_ci] = ratio_of_ratios_cis(
        [(b.task_cost_micro, b.task_completed)], [(c.task_cost_micro, c.task_completed)], conf
    )
    [tokens_ci] = ratio_of_ratios_cis(
        [(b.task_tokens, np.ones(b.finished))], [(c.task_tokens, np.ones(c.finished))], conf
    )
    out["cost_per_completed_task"] = Compared(
        (b.priced_completed, c.priced_completed),
        (None if cb is None else str(cb), None if cc is None else str(cc)),
        effect("cost_per_completed_task", float(cc / cb) if cb and cc is not None else None, cost_ci),
    )
    out["tokens_per_task"] = Compared(
        (b.finished, c.finished),
        (_num(tb), _num(tc)),
        effect("tokens_per_task", tc / tb if tb and tc is not None else None, tokens_ci),
    )
    return out


def _needed(rows: list[dict[str, Any]], arms: tuple[_Arm, _Arm]) -> tuple[int | None, int | None]:
    """The most calls and finished tasks per arm the metrics holding the verdict need (completed tasks turned into
    finished ones at the lower of the arms' success rates)."""
    held = [r for r in rows if r["holds_verdict"] and r["needed_n"] is not None]  # None: more data would not decide
    calls = [r["needed_n"] for r in held if r["needed_per"] == "calls"]
    tasks = [r["needed_n"] for r in held if r["needed_per"] == "finished tasks"]
    success = min((a.completed / a.finished for a in arms if a.finished), default=0.0)
    for r in held:
        if r["needed_per"] == "completed tasks":
            tasks.append(math.ceil(r["needed_n"] / success) if success > 0 else r["needed_n"])
    return rounded_needed(max(calls, default=None)), rounded_needed(max(tasks, default=None))


def _arms_frame(arms: tuple[_Arm, _Arm]) -> pl.DataFrame:
    rows = []
    for name, a in zip(ARMS, arms, strict=True):
        rows.append(
            {
                "arm": name,
                "value": a.value,
                "calls": a.calls,
                "errors": a.errors,
                "sampled_calls": len(a.latency),
                "sampled_ttft": len(a.ttft),
                "first_call": a.first_call,
                "last_call": a.last_call,
                "finished_tasks": a.finished,
                "completed_tasks": a.completed,
                "running_tasks": a.running,
                "cost_usd": a.cost_usd,
                "cost_per_completed_task_usd": a.cost_per_completed,
                "attempts": a.attempts,
                "unpriced_calls": a.unpriced_calls,
                "tool_calls": a.tool_calls,
                "unpriced_tool_calls": a.unpriced_tool_calls,
                "unpriced_tasks": a.unpriced_tasks,
                "priced_completed_tasks": a.priced_completed,
                "tokens_per_task": a.tokens_per_task,
                "median_input_tokens": float(np.median(a.input_tokens)) if len(a.input_tokens) else None,
            }
        )
    schema: dict[str, Any] = {
        "arm": pl.String,
        "value": pl.String,
        "calls": pl.Int64,
        "errors": pl.Int64,
        "sampled_calls": pl.Int64,
        "sampled_ttft": pl.Int64,
        "first_call": pl.Datetime("us"),
        "last_call": pl.Datetime("us"),
        "finished_tasks": pl.Int64,
        "completed_tasks": pl.Int64,
        "running_tasks": pl.Int64,
        "cost_usd": pl.Decimal(38, 12),
        "cost_per_completed_task_usd": pl.Decimal(38, 12),
        "attempts": pl.Int64,
        "unpriced_calls": pl.Int64,
        "tool_calls": pl.Int64,
        "unpriced_tool_calls": pl.Int64,
        "unpriced_tasks": pl.Int64,
        "priced_completed_tasks": pl.Int64,
        "tokens_per_task": pl.Float64,
        "median_input_tokens": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def _notes(arms: tuple[_Arm, _Arm], dim: str, options: CanaryOptions, cutoffs: dict[str, datetime]) -> list[str]:
    b, c = arms
    notes = [
        f"latency and TTFT: successful call attempts, a deterministic sample of about {options.call_sample:,} per "
        f"arm (by a hash of the start time; baseline {len(b.latency):,} of {b.ok_calls:,}, candidate "
        f"{len(c.latency):,} of {c.ok_calls:,}); quantile ratios with a seeded percentile bootstrap "
        f"(B={BOOTSTRAP_RESAMPLES:,}); error rate over every attempt and success rate over finished tasks, Newcombe "
        "intervals in percentage points; cost and tokens per task resampled over tasks (delta method above 500 "
        "per arm)."
    ]
    for name, a in zip(ARMS, arms, strict=True):
        if not a.calls and not a.finished and not a.running:
            notes.append(f"no calls or tasks with {dim}={a.value} ({name}) under these filters: check the value.")
        elif not a.finished and dim in CALL_DIMENSIONS:
            notes.append(
                f"no finished task used only {dim}={a.value} ({name}): tasks whose calls mix values are in neither "
                "arm, so the task metrics have no data there."
            )
        if a.running:
            notes.append(f"{name}: {a.running:,} tasks still running are left out of the task metrics.")
        if a.unpriced_tasks:
            notes.append(_coverage_note(name, a))
    times = (b.first_call, b.last_call, c.first_call, c.last_call)
    if all(t is not None for t in times) and (times[1] < times[2] or times[3] < times[0]):  # type: ignore[operator]
        notes.append(
            "the arms ran at different times: a difference may come from the time, not the change; compare them "
            "over a shared window (--since/--until)."
        )
    mb, mc = (float(np.median(a.input_tokens)) if len(a.input_tokens) else 0.0 for a in arms)
    if mb > 0 and mc > 0 and abs(mc / mb - 1) > 0.10:
        notes.append(
            f"prompt mix: the median input is {mb:,.0f} tokens (baseline) vs {mc:,.0f} (candidate); latency depends "
            "on input length, so part of a latency difference may be the mix."
        )
    if options.warmup_s > 0:
        since = ", ".join(f"{arm} from {utc_text(t)}" for arm, t in cutoffs.items())
        notes.append(f"warm-up: the first {options.warmup_s:g} s of each arm left out ({since or 'no calls'}).")
    return notes


def _unpriced_text(a: _Arm) -> str:
    what = [f"{a.unpriced_calls:,} of {a.attempts:,} call attempts"] if a.unpriced_calls else []
    if a.unpriced_tool_calls:
        what.append(f"{a.unpriced_tool_calls:,} of {a.tool_calls:,} tool calls")
    return " and ".join(what)


def _coverage_note(name: str, a: _Arm) -> str:
    """Unpriced is never $0 (``_cost_priced``): the tasks left out of the arm's cost per completed task."""
    note = (
        f"coverage, {name}: {_unpriced_text(a)} in its finished tasks are unpriced; the {a.unpriced_tasks:,} of "
        f"{a.finished:,} finished tasks with any are left out of its cost per completed task (not counted as $0)"
    )
    if a.completed and not a.priced_completed:
        return (
            note + ": none of its completed tasks is fully priced, so it has no cost figure and cost is not compared."
        )
    return note + "."


def _unpriced_rule(row: dict[str, Any], arms: tuple[_Arm, _Arm]) -> dict[str, Any]:
    """The cost metric of an arm whose completed tasks are all unpriced: not compared, and the rule says why."""
    unpriced = [(name, a) for name, a in zip(ARMS, arms, strict=True) if a.completed and not a.priced_completed]
    if not unpriced:
        return row
    why = "; ".join(
        f"{name}: no fully priced completed task ({a.unpriced_tasks:,} of {a.finished:,} finished tasks unpriced, "
        f"{_unpriced_text(a)})"
        for name, a in unpriced
    )
    # more tasks like these would not decide it: no sample size is named
    return row | {
        "decision": "not_enough_data",
        "outcome": "inconclusive",
        "rule": f"not compared: {why}",
        "needed_n": None,
    }


# -- the question -------------------------------------------------------------------------------------------------
def _metric_names(text: str, option: str) -> set[str]:
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = names - set(METRIC_BY_NAME)
    if unknown:
        raise UsageError(
            f"--{option}: unknown metric {', '.join(sorted(unknown))} (metrics: {', '.join(METRIC_BY_NAME)})"
        )
    return names


def _checked(filters: Filters, options: CanaryOptions) -> tuple[str, dict[str, str]]:
    dim, base, cand = options.dimension, options.baseline, options.candidate
    if dim is None:
        raise UsageError("--dimension is required: what differs between the arms (engine_version, model, ...)")
    if base is None or cand is None:
        raise UsageError("--baseline and --candidate are both required: the dimension's value of each arm")
    if base == cand:
        raise UsageError(f"--baseline and --candidate are both {base!r}: nothing to compare")
    if getattr(filters, dim) is not None:
        raise UsageError(f"--{dim.replace('_', '-')} is set as a filter and is the canary's dimension: drop the filter")
    if dim == "deployment" and not {base, cand} <= {"api", "self_hosted"}:
        raise UsageError("deployment is 'api' or 'self_hosted'")
    return dim, {"baseline": base, "candidate": cand}


def canary(store: ReadStore, filters: Filters, options: CanaryOptions) -> CanaryAnswer:
    """Baseline vs candidate on ``options.dimension``: every metric with both arms' values, the effect (a ratio or
    a percentage-point difference) and its interval, the outcome and the samples it had and needs; the verdict."""
    dim, values = _checked(filters, options)
    critical = _metric_names(options.critical, "critical")
    allowed = _metric_names(options.allow_inconclusive, "allow-inconclusive")
    cutoffs: dict[str, datetime] = {}
    counts = _counts(store, filters, dim, values, cutoffs)
    if options.warmup_s > 0:
        cutoffs = {arm: r["first_call"] + timedelta(seconds=options.warmup_s) for arm, r in counts.items()}
        counts = _counts(store, filters, dim, values, cutoffs)
    sample = _sample(store, filters, dim, values, cutoffs, counts, options.call_sample)
    tasks = _task_frame(store, filters, dim, values, cutoffs)
    arms = (
        _arm("baseline", values["baseline"], counts, sample, tasks),
        _arm("candidate", values["candidate"], counts, sample, tasks),
    )
    compared = _compare(arms, options)
    rows = [
        judged(m, compared[m.name], float(getattr(options, m.margin_option)), m.name in critical, options.confidence)
        for m in METRICS
    ]
    rows = [_unpriced_rule(r, arms) if r["metric"] == "cost_per_completed_task" else r for r in rows]
    outcome, why = verdict(rows, options.non_critical_fail, allowed)
    needed_calls, needed_tasks = _needed(rows, arms) if outcome == "not_enough_data" else (None, None)
    notes = [f"verdict {outcome}: {why}."]
    if outcome == "not_enough_data":
        parts = [f"{n:,} {what}" for n, what in ((needed_calls, "calls"), (needed_tasks, "finished tasks")) if n]
        if parts:
            notes.append(f"to decide, about {' and '.join(parts)} per arm would be needed (needed_n per metric).")
        sampled = [r["needed_n"] or 0 for r in rows if r["holds_verdict"] and r["unit"] == "s"]
        if max(sampled, default=0) > options.call_sample:
            notes.append(
                f"the quantiles need more than --call-sample {options.call_sample:,} calls: raise it if the arms "
                "have them."
            )
    notes += quantile_notes(rows) + _notes(arms, dim, options, cutoffs)
    return CanaryAnswer(
        filters=filters,
        notes=notes,
        dimension=dim,
        baseline=values["baseline"],
        candidate=values["candidate"],
        verdict=outcome,
        metrics=pl.DataFrame(rows, schema=metric_schema()),
        arms=_arms_frame(arms),
        needed_calls_per_arm=needed_calls,
        needed_tasks_per_arm=needed_tasks,
        confidence=options.confidence,
        call_sample=options.call_sample,
    )


QUESTION = Question(
    name="canary",
    help="baseline vs candidate, with a verdict (exit 0 pass, 1 fail, 3 not enough data)",
    run=canary,
    options=CanaryOptions,
    exit_code=canary_exit_code,
)
