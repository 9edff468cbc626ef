"""The canary's statistics and rules (reference: canary-and-breakeven.md §1.7): intervals for a ratio of quantiles
and a ratio of per-task ratios between two independent arms, the three-outcome rule of one metric, the sample size
that would decide it, the metrics with their minimum samples, and the verdict over all of them.

Effects are read in their "bad" direction: a ratio of quantiles or of costs is worse when it rises (candidate /
baseline > 1), a rate difference is worse when the error rate rises or the success rate falls. ``Effect`` carries
a metric's point estimate, interval and margin in its own units; the rule works on the log of ratios (so a ratio
and a percentage-point difference follow the same arithmetic) and reports in the metric's units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from taskcost._internal.lazy import np, pl
from taskcost.analytics._stats import (
    BOOTSTRAP_RESAMPLES,
    SEED,
    Interval,
    delta_ratio_variance,
    difference_ci,
    normal_cdf,
    normal_ppf,
)

__all__ = [
    "METRICS",
    "METRIC_BY_NAME",
    "metric_schema",
    "POWER_Z",
    "TASK_BOOTSTRAP_MAX_UNITS",
    "Compared",
    "Decision",
    "Effect",
    "Judgement",
    "Metric",
    "Outcome",
    "judge",
    "quantile_notes",
    "rounded_needed",
    "judged",
    "needed_rate_units",
    "needed_units",
    "quantile",
    "quantile_ratio_cis",
    "ratio_of_ratios_cis",
    "verdict",
]

Decision = Literal["pass", "fail", "not_enough_data"]
Outcome = Literal["better", "within_margin", "worse", "inconclusive"]

POWER_Z = 0.8416212335729143  # normal_ppf(0.80), written out
"""z of 80 % power, for the sample size a metric would need (``n ≈ (z + 0.84)² · Var / δ²``)."""


def quantile(sorted_values: np.ndarray, q: float) -> float:
    """The q-quantile of sorted values as an order statistic: the value at rank ``ceil(q·n)`` (numpy's
    ``inverted_cdf``), the same definition the bootstrap below resamples."""
    n = len(sorted_values)
    return float(sorted_values[_rank(q, n) - 1])


def _rank(q: float, n: int) -> int:
    return min(max(math.ceil(q * n - 1e-9), 1), n)


def _bootstrap_order_statistics(
    sorted_values: np.ndarray, qs: Sequence[float], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """``resamples`` bootstrap draws of each q-quantile, shape (len(qs), resamples), without drawing n indices per
    resample: in a resample (n indices drawn uniformly), the j-th smallest index is ``floor(n·U(j))`` with U(j) the
    j-th order statistic of n uniforms, and the j-th smallest resampled value is the sorted sample at that index.
    The U(j) of several ranks come out jointly from gamma-distributed spacings (U(j) = S_j / S_{n+1}, S a sum of
    exponentials). Exactly the percentile bootstrap of an order statistic, at a cost independent of n: B = 2,000
    resamples of 10,000 calls take milliseconds, where resampling them takes about a second."""
    n = len(sorted_values)
    ranks = np.array([_rank(q, n) for q in qs])
    unique, inverse = np.unique(ranks, return_inverse=True)
    shapes = np.diff(np.concatenate(([0], unique, [n + 1]))).astype(np.float64)
    spacings = rng.gamma(shapes[:, None], size=(len(shapes), resamples))
    sums = np.cumsum(spacings, axis=0)
    index = np.minimum((sums[:-1] / sums[-1] * n).astype(np.int64), n - 1)
    draws: np.ndarray = sorted_values[index][inverse]
    return draws


def quantile_ratio_cis(
    baseline: np.ndarray,
    candidate: np.ndarray,
    qs: Sequence[float],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[tuple[float, Interval]]:
    """For each q: candidate q-quantile / baseline q-quantile and its seeded percentile-bootstrap interval (each arm
    resampled on its own; all quantiles of an arm come from the same resamples). An interval of "none" when an arm
    has fewer than 2 values; a ratio of NaN when the baseline quantile is 0."""
    if len(baseline) < 2 or len(candidate) < 2:
        return [(math.nan, Interval.none()) for _ in qs]
    base, cand = np.sort(np.asarray(baseline, np.float64)), np.sort(np.asarray(candidate, np.float64))
    rng = np.random.default_rng(SEED)
    draws_b = _bootstrap_order_statistics(base, qs, resamples, rng)
    draws_c = _bootstrap_order_statistics(cand, qs, resamples, rng)
    alpha = (1 - confidence) / 2
    out = []
    for i, q in enumerate(qs):
        b, c = quantile(base, q), quantile(cand, q)
        if b <= 0:
            out.append((math.nan, Interval.none()))
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = draws_c[i] / draws_b[i]
        low, high = np.nanquantile(ratios, [alpha, 1 - alpha])
        out.append((c / b, Interval(float(low), float(high), "bootstrap")))
    return out


TASK_BOOTSTRAP_MAX_UNITS = 500
"""Up to this many tasks per arm the task ratios' intervals are a bootstrap (one resampling of each arm serves every
ratio: B x n draws, about 30 ms at 500 tasks per arm); above, the delta method, which the bootstrap converges to
and which costs one pass: the question stays fast whatever the arms' size."""


def ratio_of_ratios_cis(
    base: Sequence[tuple[np.ndarray, np.ndarray]],
    cand: Sequence[tuple[np.ndarray, np.ndarray]],
    confidence: float = 0.95,
) -> list[Interval]:
    """For each (num, den) pair, the interval of (Σ num_c / Σ den_c) / (Σ num_b / Σ den_b) with units (tasks)
    resampled within each arm: e.g. cost per completed task (num = a task's cost, den = 1 when it completed) and
    tokens per task (den = 1). A seeded percentile bootstrap (numpy, B resamples of each arm's tasks, shared by the
    pairs) while both arms have at most ``TASK_BOOTSTRAP_MAX_UNITS`` tasks; above, the delta method on the log of
    the ratio. "none" with fewer than 2 units in an arm, or a zero sum in the baseline."""
    nb, nc = len(base[0][0]), len(cand[0][0])
    usable = [
        min(nb, nc) >= 2 and db.sum() > 0 and dc.sum() > 0 and xb.sum() > 0
        for (xb, db), (_, dc) in zip(base, cand, strict=True)
    ]
    if not any(usable):
        return [Interval.none() for _ in base]
    if max(nb, nc) > TASK_BOOTSTRAP_MAX_UNITS:
        return [
            _delta_ratio_of_ratios(b, c, confidence) if ok else Interval.none()
            for b, c, ok in zip(base, cand, usable, strict=True)
        ]
    rng = np.random.default_rng(SEED)
    rep_b, rep_c = _replicates(base, nb, rng), _replicates(cand, nc, rng)
    alpha = (1 - confidence) / 2
    out = []
    for rb, rc, ok in zip(rep_b, rep_c, usable, strict=True):
        if not ok:
            out.append(Interval.none())
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = rc / rb
        low, high = np.nanquantile(ratios, [alpha, 1 - alpha])
        out.append(Interval(float(low), float(high), "bootstrap"))
    return out


def _replicates(pairs: Sequence[tuple[np.ndarray, np.ndarray]], n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Σ num / Σ den of each pair over ``BOOTSTRAP_RESAMPLES`` resamples of the arm's n units (the same resamples
    for every pair)."""
    index = rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n), dtype=np.int32)
    out = []
    for num, den in pairs:
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(num[index].sum(axis=1) / den[index].sum(axis=1))
    return out


def _ratio_and_variance(num: np.ndarray, den: np.ndarray) -> tuple[float, float]:
    """sum(num) / sum(den) and its delta-method variance (Deng et al. 2018)."""
    cov = np.cov(num, den, ddof=1)
    r, var = delta_ratio_variance(len(num), float(num.mean()), float(den.mean()), cov[0, 0], cov[1, 1], cov[0, 1])
    return r, float(var)


def _delta_ratio_of_ratios(
    base: tuple[np.ndarray, np.ndarray], cand: tuple[np.ndarray, np.ndarray], confidence: float
) -> Interval:
    rb, vb = _ratio_and_variance(*base)
    rc, vc = _ratio_and_variance(*cand)
    if rc <= 0:
        return Interval.none()
    se = math.sqrt(max(vb / (rb * rb) + vc / (rc * rc), 0.0))
    z = normal_ppf(0.5 + confidence / 2)
    log_ratio = math.log(rc / rb)
    return Interval(math.exp(log_ratio - z * se), math.exp(log_ratio + z * se), "delta")


@dataclass(frozen=True)
class Effect:
    """A metric's comparison in its own units. ``scale``: "ratio" (candidate / baseline; neutral 1; ``margin`` the
    ratio allowed, e.g. 1.10) or "pp" (candidate − baseline in percentage points; neutral 0; ``margin`` the points
    allowed, positive). ``bad``: the direction that is worse."""

    point: float
    ci: Interval
    margin: float
    scale: Literal["ratio", "pp"]
    bad: Literal["increase", "decrease"]

    @property
    def signed_margin(self) -> float:
        """The margin as a value of the effect: 1.10 (ratio), +1.0 pp, or −2.0 pp (a decrease is bad)."""
        if self.scale == "ratio":
            return self.margin if self.bad == "increase" else 1 / self.margin
        return self.margin if self.bad == "increase" else -self.margin

    def _bad(self, x: float) -> float:
        value = math.log(x) if self.scale == "ratio" else x
        return value if self.bad == "increase" else -value

    def bad_units(self) -> tuple[float, float, float, float] | None:
        """(point, low, high, margin) on the bad-direction scale (log of ratios; neutral 0), or None."""
        values = (self.point, self.ci.low, self.ci.high)
        if not all(math.isfinite(v) for v in values) or (self.scale == "ratio" and min(values) <= 0):
            return None
        ends = sorted((self._bad(self.ci.low), self._bad(self.ci.high)))
        margin = math.log(self.margin) if self.scale == "ratio" else self.margin
        return self._bad(self.point), ends[0], ends[1], margin


@dataclass(frozen=True)
class Judgement:
    decision: Decision
    outcome: Outcome
    rule: str


def _fmt(value: float, scale: str) -> str:
    return f"{value:.4g}" if scale == "ratio" else f"{value:+.2f} pp"


def judge(effect: Effect) -> Judgement:
    """The three-outcome rule: FAIL when the interval's near end is past neutral (statistically worse) and the point
    is past the margin (practically worse); PASS when the interval's far end is within the margin (non-inferior:
    even the pessimistic end is acceptable), "better" when it is even on the good side of neutral; otherwise not
    enough data (the interval contains the margin)."""
    units = effect.bad_units()
    if units is None:
        return Judgement("not_enough_data", "inconclusive", "no interval (too few values, or a zero baseline)")
    point, low, high, margin = units
    s, m = effect.scale, _fmt(effect.signed_margin, effect.scale)
    neutral = "1" if s == "ratio" else "0"
    worse_end, better_end = (
        (effect.ci.low, effect.ci.high) if effect.bad == "increase" else (effect.ci.high, effect.ci.low)
    )
    gt, lt = (">", "<") if effect.bad == "increase" else ("<", ">")
    if low > 0 and point > margin:
        return Judgement(
            "fail",
            "worse",
            f"CI end {_fmt(worse_end, s)} {gt} {neutral} and point {_fmt(effect.point, s)} {gt} margin {m}",
        )
    if high <= margin:
        if high < 0:
            return Judgement(
                "pass", "better", f"CI end {_fmt(better_end, s)} {lt} {neutral}: better, within margin {m}"
            )
        return Judgement("pass", "within_margin", f"CI end {_fmt(better_end, s)} within margin {m}")
    ci = f"[{_fmt(effect.ci.low, s)}, {_fmt(effect.ci.high, s)}]"
    return Judgement("not_enough_data", "inconclusive", f"CI {ci} contains the margin {m}")


def needed_units(effect: Effect, n: int, minimum: int, confidence: float) -> int | None:
    """Units per arm that would likely decide a ratio metric (80 % power), taking the point estimate as the truth:
    ``n ≈ (z + 0.84)² · Var / δ²``, with Var read off the interval we have (half-width h at n units, on the log
    scale: Var ≈ n·(h/z)²) and δ the distance from the point to what the interval must clear (the margin for a
    pass, neutral for a fail); so ``n_needed = n · ((z + 0.84)/z · h/δ)²``, never below ``minimum``. None when the
    point sits on the margin (no sample size decides it)."""
    units = effect.bad_units()
    if units is None or n < 2:
        return minimum
    point, low, high, margin = units
    h, delta = (high - point, margin - point) if point <= margin else (point - low, point)
    if delta <= 0:
        return None
    if h <= 0:
        return max(minimum, n)
    z = normal_ppf(0.5 + confidence / 2)
    return max(minimum, math.ceil(n * ((z + POWER_Z) / z * h / delta) ** 2))


_MAX_NEEDED = 1_000_000_000


def needed_rate_units(effect: Effect, counts: tuple[int, int, int, int], minimum: int, confidence: float) -> int | None:
    """Units per arm that would likely decide a rate difference: the smallest n for the smaller arm (the other
    scaled alike, the observed rates kept) at which the Newcombe interval at ``z + 0.84`` (the interval that clears
    the boundary with 80 % power) would clear it. Scaling the interval we have by 1/√n would overstate it badly near
    a rate of 0 (0 errors in 20 calls: about 10,600 calls instead of 778). None when the point sits on the margin."""
    kb, nb, kc, nc = counts
    units = effect.bad_units()
    if units is None or min(nb, nc) < 1:
        return minimum
    point, _, _, margin = units
    if point == margin:
        return None
    level = 2 * normal_cdf(normal_ppf(0.5 + confidence / 2) + POWER_Z) - 1
    small = min(nb, nc)

    def decides(m: int) -> bool:
        f = m / small
        ci = difference_ci(round(kb * f), round(nb * f), round(kc * f), round(nc * f), level)
        e = Effect(effect.point, Interval(100 * ci.low, 100 * ci.high, ci.method), effect.margin, "pp", effect.bad)
        u = e.bad_units()
        return u is not None and (u[2] <= u[3] if point <= margin else u[1] > 0)

    high = small
    while not decides(high):
        if high > _MAX_NEEDED:
            return None
        high *= 2
    low = max(high // 2, small)
    while low < high:  # the smallest m that decides, in (high // 2, high]
        mid = (low + high) // 2
        if decides(mid):
            high = mid
        else:
            low = mid + 1
    return max(minimum, high)


# -- the metrics and the verdict ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    """One compared figure: per call (from the sample, or every attempt for the error rate) or per task."""

    name: str
    unit: str  # of the arms' values: s, %, usd, tokens
    scale: Literal["ratio", "pp"]
    bad: Literal["increase", "decrease"]
    minimum: int  # units per arm before it is judged at all
    per: str  # what ``minimum`` and ``needed_n`` count
    margin_option: str  # the option (CanaryOptions field) holding its margin


METRICS: tuple[Metric, ...] = (
    Metric("latency_p50", "s", "ratio", "increase", 100, "calls", "latency_p50_margin"),
    Metric("latency_p95", "s", "ratio", "increase", 200, "calls", "latency_p95_margin"),
    Metric("latency_p99", "s", "ratio", "increase", 1000, "calls", "latency_p99_margin"),
    Metric("ttft_p50", "s", "ratio", "increase", 100, "calls", "ttft_p50_margin"),
    Metric("ttft_p95", "s", "ratio", "increase", 200, "calls", "ttft_p95_margin"),
    Metric("ttft_p99", "s", "ratio", "increase", 1000, "calls", "ttft_p99_margin"),
    Metric("error_rate", "%", "pp", "increase", 100, "calls", "error_rate_margin_pp"),
    Metric("task_success_rate", "%", "pp", "decrease", 100, "finished tasks", "success_rate_margin_pp"),
    Metric("cost_per_completed_task", "usd", "ratio", "increase", 30, "completed tasks", "cost_margin"),
    Metric("tokens_per_task", "tokens", "ratio", "increase", 30, "finished tasks", "tokens_margin"),
)
"""Reference §1.7: minimum samples per arm as in its table (p95 and p99: at least 10 values above the quantile)."""
METRIC_BY_NAME = {m.name: m for m in METRICS}


@dataclass(frozen=True)
class Compared:
    """A metric's data: units per arm, both arms' values (as text: money stays exact), the effect (None when it
    cannot be formed) and, for a rate, its counts (k_base, n_base, k_cand, n_cand)."""

    n: tuple[int, int]
    values: tuple[str | None, str | None]
    effect: Effect | None
    counts: tuple[int, int, int, int] | None = None


TAIL_VALUES = 10
"""A q-quantile is estimated from too few values when fewer than this many lie above it: ``n < 10 / (1 - q)``
(reference §1.7: "a CI for the p99 means little with fewer than ~10 observations in the tail"; the same floor gives
the p95 and p99 minimums, 200 and 1,000 calls)."""
_QUANTILE_OF = {"p50": 0.50, "p95": 0.95, "p99": 0.99}


def _quantile_of(metric: str) -> tuple[str, float] | None:
    """``("p99", 0.99)`` for ``latency_p99``; None for a metric that is not a quantile."""
    label = metric.rsplit("_", 1)[-1]
    return (label, _QUANTILE_OF[label]) if label in _QUANTILE_OF else None


def few_values_text(metric: str, n: int) -> str | None:
    """What an arm's quantile from ``n`` values is when fewer than ``TAIL_VALUES`` lie above it: the largest value
    seen (its rank ``ceil(q·n)`` is ``n``), or one of the few largest; None when enough values back it."""
    of = _quantile_of(metric)
    if of is None or n <= 0:
        return None
    label, q = of
    above = n - _rank(q, n)
    if n * (1 - q) >= TAIL_VALUES - 1e-9:
        return None
    if above == 0:
        return f"{label} from {n:,} calls is the largest one seen"
    return f"{label} from {n:,} calls has only {above:,} of them above it"


def quantile_notes(rows: list[dict[str, Any]]) -> list[str]:
    """A note per quantile metric an arm estimated from too few values (``few_values_text``), the arm named."""
    out = []
    for r in rows:
        for arm, n in (("baseline", r["n_baseline"]), ("candidate", r["n_candidate"])):
            if (text := few_values_text(r["metric"], n)) is not None:
                q = _QUANTILE_OF[r["metric"].rsplit("_", 1)[-1]]
                need = math.ceil(TAIL_VALUES / (1 - q) - 1e-9)
                out.append(
                    f"{r['metric']}, {arm}: {text}: not an estimate of the {r['metric'].rsplit('_', 1)[-1]} (that "
                    f"takes at least {need:,} calls, {TAIL_VALUES} above it)."
                )
    return out


def rounded_needed(n: int | None) -> int | None:
    """A "needed" sample size rounded up to 2 significant digits (12,345 -> 13,000; 385 -> 390; under 100 as it is):
    it is an estimate from the point effect and the interval at hand, so its other digits mean nothing."""
    if n is None or n < 100:
        return n
    step = 10 ** (len(str(n)) - 2)
    return -(-n // step) * step


def judged(metric: Metric, compared: Compared, margin: float, critical: bool, confidence: float) -> dict[str, Any]:
    """One row of the ``metrics`` table: the data, the rule that fired and the units per arm it would need."""
    nb, nc = compared.n
    e = compared.effect
    if nb == 0 or nc == 0:
        which = "either arm" if nb == nc else ("the baseline" if nb == 0 else "the candidate")
        j = Judgement("not_enough_data", "inconclusive", f"no data in {which}")
    elif min(nb, nc) < metric.minimum:
        j = Judgement("not_enough_data", "inconclusive", f"{min(nb, nc)} {metric.per} < minimum {metric.minimum}")
    elif e is None:
        j = Judgement("not_enough_data", "inconclusive", "no ratio: the baseline's value is 0")
    else:
        j = judge(e)
    needed = None
    if j.decision == "not_enough_data":
        if e is None:
            needed = metric.minimum
        elif compared.counts is not None:
            needed = needed_rate_units(e, compared.counts, metric.minimum, confidence)
        else:
            needed = needed_units(e, min(nb, nc), metric.minimum, confidence)
    ci = e.ci if e is not None else Interval.none()
    few = [t for t in (few_values_text(metric.name, nb), few_values_text(metric.name, nc)) if t is not None]
    rule = j.rule + (f" ({'; '.join(dict.fromkeys(few))})" if few else "")
    return {
        "metric": metric.name,
        "critical": critical,
        "unit": metric.unit,
        "n_baseline": nb,
        "n_candidate": nc,
        "minimum_n": metric.minimum,
        "baseline": compared.values[0],
        "candidate": compared.values[1],
        "effect": None if e is None else e.point,
        "effect_unit": metric.scale,
        "ci_low": ci.low if math.isfinite(ci.low) else None,
        "ci_high": ci.high if math.isfinite(ci.high) else None,
        "ci_method": ci.method,
        "margin": margin if metric.scale == "ratio" or metric.bad == "increase" else -margin,
        "decision": j.decision,
        "outcome": j.outcome,
        "rule": rule,
        "needed_n": rounded_needed(needed),
        "needed_per": metric.per,
    }


def metric_schema() -> dict[str, Any]:
    """The metric table's columns (a function: polars loads on first use)."""
    return {
        "metric": pl.String,
        "critical": pl.Boolean,
        "unit": pl.String,
        "n_baseline": pl.Int64,
        "n_candidate": pl.Int64,
        "minimum_n": pl.Int64,
        "baseline": pl.String,
        "candidate": pl.String,
        "effect": pl.Float64,
        "effect_unit": pl.String,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "ci_method": pl.String,
        "margin": pl.Float64,
        "decision": pl.String,
        "outcome": pl.String,
        "rule": pl.String,
        "needed_n": pl.Int64,
        "needed_per": pl.String,
        "holds_verdict": pl.Boolean,
    }


def verdict(rows: list[dict[str, Any]], non_critical_fail: str, allowed: set[str]) -> tuple[Decision, str]:
    """Reference "Combining metrics": a critical metric worse fails; any other worse fails (unless
    ``non_critical_fail`` is "warn"); an inconclusive metric that holds the verdict gives not enough data; no metric
    passed at all is not enough data too; else pass. Marks each row's ``holds_verdict``: inconclusive, not allowed
    to be, and critical or with data in some arm (a non-critical metric nobody records, such as TTFT without
    streaming, is left out; a critical one never is). Returns (verdict, why)."""
    for r in rows:
        measured = r["n_baseline"] + r["n_candidate"] > 0
        r["holds_verdict"] = (
            r["outcome"] == "inconclusive" and r["metric"] not in allowed and (r["critical"] or measured)
        )
    worse = [r["metric"] for r in rows if r["outcome"] == "worse"]
    critical_worse = [r["metric"] for r in rows if r["outcome"] == "worse" and r["critical"]]
    if critical_worse:
        return "fail", f"critical metric worse: {', '.join(critical_worse)}"
    if worse and non_critical_fail == "fail":
        return "fail", f"worse: {', '.join(worse)}"
    held = [r["metric"] for r in rows if r["holds_verdict"]]
    if held:
        return "not_enough_data", f"inconclusive: {', '.join(held)}"
    if not any(r["decision"] == "pass" for r in rows):
        return "not_enough_data", "no metric could be judged"
    warned = f" (worse, only warned: {', '.join(worse)})" if worse else ""
    return "pass", "every metric that holds the verdict is better or within its margin" + warned
