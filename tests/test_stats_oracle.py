"""The intervals written over numpy and the standard library (taskcost.analytics._stats) against scipy.stats, the
library they replace at run time (its import alone takes over half a second): the same numbers on generated data."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from taskcost.analytics._stats import (
    BOOTSTRAP_RESAMPLES,
    SEED,
    normal_cdf,
    normal_ppf,
    percentile_bootstrap,
    ratio_ci,
    wilson_ci,
)
from tests.budget import examples


def _ratio(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    top, bottom = x.sum(axis=axis), y.sum(axis=axis)
    return np.divide(top, bottom, out=np.full(np.shape(top), np.inf), where=bottom > 0)


def _scipy_bootstrap(x: np.ndarray, y: np.ndarray, confidence: float) -> tuple[float, float]:
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap(
            (x, y),
            _ratio,
            paired=True,
            vectorized=True,
            n_resamples=BOOTSTRAP_RESAMPLES,
            confidence_level=confidence,
            method="percentile",
            random_state=np.random.default_rng(SEED),
        )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-9)


@settings(max_examples=examples(25), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5_000_000), st.booleans()), min_size=2, max_size=80),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_the_percentile_bootstrap_is_scipys(units: list[tuple[int, bool]], confidence: float) -> None:
    x = np.array([u[0] for u in units], dtype=np.float64)
    y = np.array([1.0 if u[1] else 0.0 for u in units])
    ours = percentile_bootstrap(x, y, _ratio, confidence)
    ref = _scipy_bootstrap(x, y, confidence)
    assert _same(ours[0], ref[0]) and _same(ours[1], ref[1]), (ours, ref)
    if y.sum() > 0:
        ci = ratio_ci(x, y, confidence)
        assert ci.method == "bootstrap" and _same(ci.low, ref[0]) and _same(ci.high, ref[1])


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(1, 100_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
       st.sampled_from([0.8, 0.9, 0.95, 0.99]))  # fmt: skip
def test_the_wilson_interval_is_scipys(kn: tuple[int, int], confidence: float) -> None:
    k, n = kn
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    ci = wilson_ci(k, n, confidence)
    assert (ci.low, ci.high) == (pytest.approx(ref.low, abs=1e-12), pytest.approx(ref.high, abs=1e-12))


@given(st.floats(1e-9, 1 - 1e-9))
def test_the_normal_distribution_is_scipys(p: float) -> None:
    assert normal_ppf(p) == pytest.approx(stats.norm.ppf(p), rel=1e-9, abs=1e-9)
    x = (p - 0.5) * 16
    assert normal_cdf(x) == pytest.approx(stats.norm.cdf(x), rel=1e-9, abs=1e-15)
