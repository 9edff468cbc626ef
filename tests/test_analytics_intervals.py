"""The delta intervals' moments: combined from parts (one completion value each, as the SQL aggregates them) they
must be numpy's covariance of the tasks themselves, whatever the split; and the delta interval of a group read as
parts must be ``ratio_ci``'s delta interval of its tasks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskcost.analytics._cost_intervals import delta_intervals, moments
from taskcost.analytics._stats import BOOTSTRAP_MAX_UNITS, ratio_ci
from tests.budget import examples

# a task: its group, the part it is aggregated in (several parts may share a completion value), spend in
# micro-dollars, completed or not
_task = st.tuples(
    st.sampled_from(["a", "b", None]),
    st.integers(0, 3),
    st.integers(0, 5_000_000),
    st.booleans(),
)


def _parts(tasks: Sequence[tuple[str | None, int, int, bool]]) -> pl.DataFrame:
    df = pl.DataFrame(tasks, schema=["g", "part", "x", "done"], orient="row")
    return df.group_by("g", "part", "done").agg(
        n=pl.len(),
        x_sum=pl.col("x").cast(pl.Float64).sum(),
        x_m2=pl.col("x").cast(pl.Float64).var(ddof=0) * pl.len(),
        y=pl.col("done").first().cast(pl.Int8),
    )


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(_task, min_size=1, max_size=60))
def test_moments_from_parts_are_the_tasks_covariance(tasks: list[tuple[str | None, int, int, bool]]) -> None:
    got = {r["g"]: r for r in moments(_parts(tasks), ["g"]).iter_rows(named=True)}
    assert set(got) == {g for g, *_ in tasks}
    for g, m in got.items():
        x = np.array([t[2] for t in tasks if t[0] == g], dtype=float)
        y = np.array([1.0 if t[3] else 0.0 for t in tasks if t[0] == g])
        assert m["n"] == len(x)
        assert m["mx"] == pytest.approx(x.mean()) and m["my"] == pytest.approx(y.mean())
        if len(x) > 1:
            cov = np.cov(x, y, ddof=1) * (len(x) - 1)
            scale = max(1.0, float(np.abs(x).max()) ** 2)
            assert m["sxx"] == pytest.approx(cov[0, 0], abs=1e-9 * scale * len(x), rel=1e-9)
            assert m["syy"] == pytest.approx(cov[1, 1], abs=1e-9)
            assert m["sxy"] == pytest.approx(cov[0, 1], abs=1e-9 * scale * len(x), rel=1e-9)


def test_a_large_groups_delta_interval_is_ratio_cis() -> None:
    rng = np.random.default_rng(7)
    n = BOOTSTRAP_MAX_UNITS + 500  # above the bootstrap: ratio_ci takes the delta method
    x = rng.integers(0, 40_000, n)
    done = rng.random(n) < 0.7
    tasks = [("a", int(i % 3), int(v), bool(d)) for i, (v, d) in enumerate(zip(x, done, strict=True))]
    ours = delta_intervals(moments(_parts(tasks), ["g"]), ["g"], 0.9)["a"]
    theirs = ratio_ci(x, done.astype(float), 0.9)
    assert (ours.method, theirs.method) == ("delta", "delta")
    assert ours.low == pytest.approx(theirs.low, rel=1e-9) and ours.high == pytest.approx(theirs.high, rel=1e-9)


def test_no_completed_task_no_interval() -> None:
    tasks = [("a", 0, 100 * i, False) for i in range(BOOTSTRAP_MAX_UNITS + 1)]
    assert delta_intervals(moments(_parts(tasks), ["g"]), ["g"], 0.95)["a"].method == "none"
