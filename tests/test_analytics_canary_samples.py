"""The canary's per-call samples for the dashboards' overlaid distributions, and the GPU offers for the breakeven
page's menu (taskcost/analytics/_canary_samples.py), on hand-built fleets."""

from __future__ import annotations

from decimal import Decimal

import pytest

from taskcost.analytics import Filters, UsageError, canary_samples, gpu_offers
from taskcost.analytics._canary import CanaryOptions, canary
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet

BASE, CAND = "0.6.0", "0.7.0"


def small_fleet(store: DuckDBStore) -> None:
    """Baseline: 10 ok calls of 1..10 s and one error, no TTFT; candidate: 4 ok calls of 2 s, TTFT 0.1..0.4 s, one of
    them in a golden task; a call of another version that belongs to neither arm."""
    fleet = Fleet()
    t = fleet.task("b")
    for d in range(1, 11):
        t.call(duration_s=d, engine_version=BASE)
    t.call(duration_s=0.5, status="error", engine_version=BASE)
    for i in range(4):
        fleet.task(f"c{i}", minute=i + 1, golden=i == 0).call(duration_s=2, ttft_s=0.1 * (i + 1), engine_version=CAND)
    fleet.task("other", minute=9).call(duration_s=99, engine_version="0.5.0")
    fleet.write(store)


def test_every_successful_call_of_a_small_arm_with_its_latency_and_ttft(store: DuckDBStore) -> None:
    small_fleet(store)
    df = canary_samples(store, Filters(), "engine_version", BASE, CAND)
    assert df.columns == ["arm", "duration_s", "ttft_s"]
    base = df.filter(df["arm"] == "baseline")
    cand = df.filter(df["arm"] == "candidate")
    assert base["duration_s"].to_list() == [float(d) for d in range(1, 11)]  # the error left out, sorted
    assert base["ttft_s"].null_count() == 10
    assert cand["duration_s"].to_list() == [2.0] * 4
    assert sorted(cand["ttft_s"].to_list()) == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_filters_apply_to_both_arms(store: DuckDBStore) -> None:
    small_fleet(store)
    df = canary_samples(store, Filters(golden=True), "engine_version", BASE, CAND)
    assert df["arm"].to_list() == ["candidate"]
    assert df["ttft_s"].to_list() == pytest.approx([0.1])


def test_a_large_arm_is_sampled_as_the_canary_samples_it(store: DuckDBStore) -> None:
    fleet = Fleet()
    for arm, version, n in (("b", BASE, 3000), ("c", CAND, 1500)):
        for k in range(n // 100):
            t = fleet.task(f"{arm}{k}", minute=k)
            for i in range(100):
                t.call(duration_s=1 + (i % 7) / 10, engine_version=version)
    fleet.write(store)
    df = canary_samples(store, Filters(), "engine_version", BASE, CAND, size=1000)
    n_base = df.filter(df["arm"] == "baseline").height
    n_cand = df.filter(df["arm"] == "candidate").height
    assert 700 <= n_base <= 1300 and 700 <= n_cand <= 1300  # about 1,000 each, by a hash of the start time
    again = canary_samples(store, Filters(), "engine_version", BASE, CAND, size=1000)
    assert again.equals(df)  # deterministic
    arms = canary(
        store, Filters(), CanaryOptions(dimension="engine_version", baseline=BASE, candidate=CAND, call_sample=1000)
    ).arms
    assert arms["sampled_calls"].to_list() == [n_base, n_cand]  # the very calls the canary's quantiles read


def test_an_empty_store_gives_an_empty_sample(store: DuckDBStore) -> None:
    df = canary_samples(store, Filters(), "model", "a", "b")
    assert df.height == 0 and df.columns == ["arm", "duration_s", "ttft_s"]


@pytest.mark.parametrize(
    ("dimension", "baseline", "candidate", "size", "message"),
    [
        ("colour", "a", "b", 100, "not a canary dimension"),
        ("model", "a", "a", 100, "nothing to compare"),
        ("model", "a", "b", 0, "sample size"),
        ("model", "a", "b", 10_001, "sample size"),
    ],
)
def test_usage_errors(
    store: DuckDBStore, dimension: str, baseline: str, candidate: str, size: int, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        canary_samples(store, Filters(), dimension, baseline, candidate, size=size)


def test_the_dimension_set_as_a_filter_is_a_usage_error(store: DuckDBStore) -> None:
    with pytest.raises(UsageError, match="drop the filter"):
        canary_samples(store, Filters(engine_version=BASE), "engine_version", BASE, CAND)


def test_gpu_offers_are_the_catalogue() -> None:
    offers = {o.id: o for o in gpu_offers()}
    lam = offers["lambda-1x-h100-sxm"]
    assert (lam.gpu_type, lam.usd_per_gpu_hour) == ("H100-SXM", Decimal("3.29"))
    assert "checked" in lam.source
    assert len(offers) == len(gpu_offers())  # ids are unique
