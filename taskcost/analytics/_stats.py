"""Confidence intervals the questions share, with a fixed seed.

They are scipy.stats' own methods (percentile ``bootstrap`` drawing exactly its resamples, ``binomtest``'s Wilson
interval, ``norm``) written over numpy and the standard library's ``statistics.NormalDist``: importing scipy.stats
takes over half a second, more than the rest of a CLI answer at a demo's size. tests/test_stats_oracle.py holds each
to scipy's result on generated data.

Money enters as integer micro-dollars (exact sums); only the interval's ends are estimates, rounded back to
``Decimal`` micro-dollars. Point estimates are computed exactly by the callers, never here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from statistics import NormalDist

from taskcost._internal.lazy import np, pl

__all__ = [
    "normal_cdf",
    "normal_ppf",
    "BOOTSTRAP_MAX_UNITS",
    "MAX_CONFIDENCE",
    "BOOTSTRAP_RESAMPLES",
    "SEED",
    "Interval",
    "delta_ratio_ci",
    "delta_ratio_variance",
    "difference_ci",
    "micro_usd",
    "ratio_ci",
    "usd_from_micro",
    "wilson_ci",
]


_NORMAL = NormalDist()
# The highest confidence level a question takes: the two-sided quantile 0.5 + level/2 must stay below 1 in floating
# point (0.9999999999999999 rounds it to 1.0, where the normal quantile is infinite).
MAX_CONFIDENCE = 0.999999


def normal_ppf(p: float) -> float:
    """The standard normal's quantile (scipy.stats.norm.ppf)."""
    return _NORMAL.inv_cdf(p)


def normal_cdf(x: float) -> float:
    """The standard normal's distribution function (scipy.stats.norm.cdf)."""
    return _NORMAL.cdf(x)


SEED = 20261204
"""Every resampling is seeded: the same data gives the same interval."""
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_MAX_UNITS = 2000
"""Up to this many units (tasks) a ratio's interval is a percentile bootstrap; above, the delta method (its normal
approximation, which the bootstrap converges to), computed in one pass: the answer stays fast on millions of tasks."""

_MICRO = Decimal("0.000001")


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str  # "bootstrap", "delta", "wilson", "newcombe", or "none" (too few units)

    @classmethod
    def none(cls) -> Interval:
        return cls(math.nan, math.nan, "none")

    def usd(self) -> tuple[Decimal | None, Decimal | None]:
        """The ends as money (the values were in micro-dollars)."""
        return usd_from_micro(self.low), usd_from_micro(self.high)


def micro_usd(column: pl.Series) -> np.ndarray:
    """A Decimal money column as exact integer micro-dollars (rounded half to even; NULL as 0)."""
    return (column.fill_null(0).cast(pl.Decimal(38, 12)) * 1_000_000).round(0).cast(pl.Int64).to_numpy()


def usd_from_micro(value: float) -> Decimal | None:
    if not math.isfinite(value):
        return None
    return (Decimal(repr(value)) / 1_000_000).quantize(_MICRO, rounding=ROUND_HALF_EVEN)


def ratio_ci(numerator: np.ndarray, denominator: np.ndarray, confidence: float = 0.95) -> Interval:
    """Interval of ``sum(numerator) / sum(denominator)`` over units (e.g. spend over completed tasks, one entry per
    task): a seeded percentile bootstrap resampling units when there are at most ``BOOTSTRAP_MAX_UNITS``, else the
    delta method. "none" when there are fewer than 2 units or the denominator sums to 0. The upper end is +inf
    when too many resamples drew no unit of the denominator (few completed tasks): the data bound it from below
    only."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    n = len(num)
    if n < 2 or den.sum() <= 0:
        return Interval.none()
    if n <= BOOTSTRAP_MAX_UNITS:

        def ratio(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
            # a resample without any unit in the denominator (no completed task drawn) has no finite ratio:
            # +inf, so the interval keeps its lower end and says its upper end is unbounded
            top, bottom = x.sum(axis=axis), y.sum(axis=axis)
            return np.divide(top, bottom, out=np.full(np.shape(top), np.inf), where=bottom > 0)

        low, high = percentile_bootstrap(num, den, ratio, confidence)
        return Interval(low, high, "bootstrap")
    cov = np.cov(num, den, ddof=1)
    return delta_ratio_ci(n, num.mean(), den.mean(), cov[0, 0], cov[1, 1], cov[0, 1], confidence)


def percentile_bootstrap(
    x: np.ndarray, y: np.ndarray, statistic: Callable[[np.ndarray, np.ndarray, int], np.ndarray], confidence: float
) -> tuple[float, float]:
    """scipy.stats.bootstrap((x, y), statistic, paired=True, vectorized=True, method="percentile",
    n_resamples=BOOTSTRAP_RESAMPLES, random_state=default_rng(SEED)): the same resamples (one draw of
    ``BOOTSTRAP_RESAMPLES`` x n unit indices) and the same quantiles (linear). NaN ends when the statistic has NaN in
    its distribution."""
    n = len(x)
    draws = np.random.default_rng(SEED).integers(0, n, (BOOTSTRAP_RESAMPLES, n))
    with np.errstate(invalid="ignore"):  # +inf in the distribution: its quantiles may be inf or NaN, as scipy's
        theta = np.sort(statistic(x[draws], y[draws], -1))
        alpha = (1 - confidence) / 2
        return _linear_quantile(theta, alpha), _linear_quantile(theta, 1 - alpha)


def _linear_quantile(ordered: np.ndarray, p: float) -> float:
    """scipy.stats.quantile(method="linear") of sorted values, its arithmetic kept: (1 - g) y[j] + g y[j + 1], so a
    distribution ending in +inf gives what scipy's gives."""
    n = len(ordered)
    jg = p * n + (1 - p)
    j = int(jg // 1) - 1
    g = 0.0 if j < 0 else jg % 1
    low, high = ordered[min(max(j, 0), n - 1)], ordered[min(max(j + 1, 0), n - 1)]
    return float((1 - g) * low + g * high)


def delta_ratio_ci(
    n: int, mean_x: float, mean_y: float, var_x: float, var_y: float, cov_xy: float, confidence: float = 0.95
) -> Interval:
    """The delta-method interval of a ratio of means (Deng et al. 2018) from ``n`` units' means, variances and
    covariance (ddof 1): var(r) = (s_x^2 - 2r s_xy + r^2 s_y^2) / (n mean_y^2)."""
    r, var = delta_ratio_variance(n, mean_x, mean_y, var_x, var_y, cov_xy)
    half = normal_ppf(0.5 + confidence / 2) * math.sqrt(max(var, 0.0))
    return Interval(float(r - half), float(r + half), "delta")


def delta_ratio_variance(
    n: int, mean_x: float, mean_y: float, var_x: float, var_y: float, cov_xy: float
) -> tuple[float, float]:
    """A ratio of means and its delta-method variance: r = mean_x / mean_y, var(r) = (s_x^2 - 2r s_xy + r^2 s_y^2) /
    (n mean_y^2)."""
    r = mean_x / mean_y
    return r, (var_x - 2 * r * cov_xy + r * r * var_y) / (n * mean_y * mean_y)


def wilson_ci(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval of a proportion ("none" when n is 0)."""
    if n <= 0:
        return Interval.none()
    # scipy.stats.binomtest(k, n).proportion_ci(method="wilson"): Newcombe (1998), without continuity correction
    z = normal_ppf(0.5 + confidence / 2)
    p = successes / n
    denom = 2 * (n + z * z)
    center = (2 * n * p + z * z) / denom
    delta = z / denom * math.sqrt(4 * n * p * (1 - p) + z * z)
    low = 0.0 if successes == 0 else center - delta
    high = 1.0 if successes == n else center + delta
    return Interval(low, high, "wilson")


def difference_ci(k_base: int, n_base: int, k_cand: int, n_cand: int, confidence: float = 0.95) -> Interval:
    """Interval of ``k_cand/n_cand - k_base/n_base`` (a difference of proportions, in proportion units): Newcombe's
    hybrid score interval from the two Wilson intervals."""
    if n_base <= 0 or n_cand <= 0:
        return Interval.none()
    p1, p2 = k_base / n_base, k_cand / n_cand
    w1, w2 = wilson_ci(k_base, n_base, confidence), wilson_ci(k_cand, n_cand, confidence)
    d = p2 - p1
    low = d - math.sqrt((p2 - w2.low) ** 2 + (w1.high - p1) ** 2)
    high = d + math.sqrt((w2.high - p2) ** 2 + (p1 - w1.low) ** 2)
    return Interval(low, high, "newcombe")
