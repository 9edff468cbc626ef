"""Rent vs API (taskcost/analytics/_breakeven.py, the arithmetic in _breakeven_model.py): every expected figure is
worked out by hand in the comments, from the builder's round rates (cheap-1: $1/M input, $2/M output) and round GPU
prices. The window is set with since / until, so its idle hours count."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from taskcost.analytics import Filters, UsageError
from taskcost.analytics._breakeven import BreakevenOptions, breakeven
from taskcost.analytics._breakeven_model import Profile, Rental, breakevens, costs
from taskcost.store import DuckDBStore
from tests.builders.analytics import T0, Fleet, ns

M = 1_000_000
WINDOW = {"since": T0, "until": T0 + timedelta(hours=10)}  # 10 hours


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DuckDBStore]:
    with DuckDBStore.open(tmp_path / "a.duckdb") as s:
        yield s


def ask(store: DuckDBStore, filters: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    f = Filters.model_validate({**WINDOW, **(filters or {})})
    return breakeven(store, f, BreakevenOptions.model_validate(options)).to_json()


def flat(fleet: Fleet, *, project: str = "default", kind: str = "review", model: str = "cheap-1") -> Fleet:
    """One call in each of the 10 hours: 900,000 input + 50,000 output tokens = 950,000 tokens, which cheap-1 prices
    at 0.9 x $1 + 0.05 x $2 = $1.00."""
    for h in range(10):
        fleet.task(f"{project}-{kind}-{model}-{h}", minute=60 * h + 1, project=project, kind=kind).call(
            model, input_tokens=900_000, output_tokens=50_000
        )
    return fleet


def two_level(fleet: Fleet) -> Fleet:
    """Hours 0-4: 3,000,000 input tokens ($3.00); hours 5-9: 1,000,000 ($1.00). Mean 2,000,000 tokens/hour."""
    for h in range(10):
        tokens = 3_000_000 if h < 5 else 1_000_000
        fleet.task(f"t{h}", minute=60 * h + 1).call("cheap-1", input_tokens=tokens, output_tokens=0)
    return fleet


def close(x: float | None, expected: float, rel: float = 1e-3) -> bool:
    return x is not None and abs(x - expected) <= rel * abs(expected)


# -- the store: traffic, both directions, filters -----------------------------------------------------------------
def test_flat_profile_crosses_where_the_closed_form_says(store: DuckDBStore) -> None:
    flat(Fleet()).write(store)
    s = ask(store, usd_per_gpu_hour="0.5", tokens_per_s=1000)["summary"]
    # API: $10 over 10 hours -> 730 / 10 x $10 = $730 a month; p = $730 / (730 h x 950,000) = $1 / 950,000 tokens.
    assert s["api_monthly_usd"] == "730.000000000000"
    assert s["tokens_per_hour"] == 950_000
    # one replica (capacity 1000 x 3600 x 0.9 = 3,240,000 tokens/hour > 950,000): 1 GPU x $0.5 x 730 = $365
    assert (s["rent_always_on_usd"], s["always_on_replicas"]) == ("365.000000000000", 1)
    # autoscaled: one replica every hour, + 10% buffer: $365 x 1.1 = $401.50
    assert s["rent_autoscaled_usd"] == "401.500000000000"
    # closed form V* = g r / p = 1 x $0.5 x 950,000 = 475,000 tokens/hour (k* = 0.5); / month x 730 = 346,750,000
    assert close(s["breakeven_tokens_per_hour"], 475_000)
    assert close(s["breakeven_tokens_per_month"], 346_750_000)
    # autoscaled: $401.50 / $730 = 0.55 -> 522,500; hybrid: one fixed replica pays once 730 k x $1 >= $365: 475,000
    assert close(s["breakeven_autoscaled_tokens_per_hour"], 522_500)
    assert close(s["breakeven_hybrid_tokens_per_hour"], 475_000)
    # utilisation at 950,000 tokens/hour of 3,600,000 a replica serves at full load: 26.4%; at V*: 13.2%
    assert close(s["utilisation"], 950_000 / 3_600_000)
    assert close(s["utilisation_at_breakeven"], 475_000 / 3_600_000)
    assert s["direction"] == "api" and s["throughput_source"] == "given" and s["confidence"] == "low"
    assert "Renting always-on is the cheapest way at this volume ($365.00 a month)" in s["verdict"]
    assert "Always-on (1 replica(s)) costs no more than the API from 475,000 tokens/hour" in s["verdict"]


def test_renting_never_wins_says_so(store: DuckDBStore) -> None:
    flat(Fleet()).write(store)
    doc = ask(store, usd_per_gpu_hour="10", tokens_per_s=100)
    s = doc["summary"]
    # capacity 100 x 3600 x 0.9 = 324,000 tokens/hour: floor $10 / 324,000 = $30.86/M against the API's $1.0526/M
    assert s["breakeven_tokens_per_hour"] is None
    assert s["breakeven_autoscaled_tokens_per_hour"] is None and s["breakeven_hybrid_tokens_per_hour"] is None
    assert "Renting never wins at these prices" in s["verdict"]
    assert s["self_hosting_floor_usd_per_mtok"] == "30.864197530864"
    # always-on: ceil(950,000 / 324,000) = 3 replicas x $10 x 730 = $21,900; the best hybrid is the API alone
    assert (s["rent_always_on_usd"], s["always_on_replicas"]) == ("21900.000000000000", 3)
    assert (s["best_hybrid_usd"], s["best_hybrid_replicas"]) == ("730.000000000000", 0)
    # the curve has no breakeven mark, only the observed point
    marks = [r[-1] for r in doc["tables"]["curve"]["rows"] if r[-1] is not None]
    assert marks == ["observed"]


def test_peak_sized_against_autoscaled_and_the_best_hybrid(store: DuckDBStore) -> None:
    two_level(Fleet()).write(store)
    s = ask(store, usd_per_gpu_hour="0.8", tokens_per_s=1000, utilisation="0.5")["summary"]
    # capacity 1000 x 3600 x 0.5 = 1,800,000/hour: busy hours need ceil(3.0 / 1.8) = 2, quiet ones 1
    # API: (5 x $3 + 5 x $1) x 730 / 10 = $1,460
    assert s["api_monthly_usd"] == "1460.000000000000"
    # always-on for the peak: 2 x $0.8 x 730 = $1,168
    assert (s["rent_always_on_usd"], s["always_on_replicas"]) == ("1168.000000000000", 2)
    # autoscaled: mean (5 x 2 + 5 x 1) / 10 = 1.5 replicas x $584 x 1.1 = $963.60
    assert s["rent_autoscaled_usd"] == "963.600000000000" and s["autoscaled_mean_replicas"] == 1.5
    # hybrid: N=0 $1,460; N=1 $584 + busy hours' overflow 5 x (3.0M - 1.8M) x $1/M = $6 x 73 = $438 -> $1,022;
    # N=2 $1,168: the best is one fixed replica
    assert (s["best_hybrid_usd"], s["best_hybrid_replicas"]) == ("1022.000000000000", 1)
    # breakevens: always-on on the step the observed volume is on (2 replicas): 1168 / 1460 = 0.8 -> 1,600,000 (a
    # single replica would pay from 0.4, but the observed peak needs two); autoscaled 584 x 1.1 / 1460 = 0.44 ->
    # 880,000; hybrid: 73 x 20k x $1 = $584 at k = 0.4 -> 800,000
    assert close(s["breakeven_tokens_per_hour"], 1_600_000)
    assert close(s["breakeven_autoscaled_tokens_per_hour"], 880_000)
    assert close(s["breakeven_hybrid_tokens_per_hour"], 800_000)
    assert s["peak_tokens_per_hour"] == 3_000_000 and s["peak_factor"] == 1.5


def test_sensitivity_moves_the_breakeven_the_right_way(store: DuckDBStore) -> None:
    two_level(Fleet()).write(store)
    doc = ask(store, usd_per_gpu_hour="0.8", tokens_per_s=1000, utilisation="0.5")
    rows = {
        r[0]: dict(zip(doc["tables"]["sensitivity"]["columns"], r, strict=True))
        for r in doc["tables"]["sensitivity"]["rows"]
    }
    assert list(rows) == ["base", "throughput -30%", "throughput +30%", "$/GPU-hour -30%", "$/GPU-hour +30%"]
    # $/GPU-hour x 1.3 = $1.04: always-on 2 x 1.04 x 730 / 1460 = 1.04 -> 2,080,000; x 0.7: 0.56 -> 1,120,000
    assert close(rows["$/GPU-hour +30%"]["breakeven_tokens_per_hour"], 2_080_000)
    assert close(rows["$/GPU-hour -30%"]["breakeven_tokens_per_hour"], 1_120_000)
    # throughput x 0.7: capacity 1,260,000; autoscaled from k = 0.44 the busy hours' 1.32M need 2 replicas:
    # rent 1.5 x 642.4 = $963.60 -> k = 0.66, where 1.98M still needs 2: settles, 0.66 x 2M = 1,320,000
    assert close(rows["throughput -30%"]["breakeven_autoscaled_tokens_per_hour"], 1_320_000)
    assert close(rows["base"]["breakeven_autoscaled_tokens_per_hour"], 880_000)
    # x 1.3: capacity 2,340,000, one replica at k = 0.44 already: no lower than the base
    assert close(rows["throughput +30%"]["breakeven_autoscaled_tokens_per_hour"], 880_000)
    assert (
        rows["throughput -30%"]["tokens_per_s"] == 700
        and rows["$/GPU-hour +30%"]["usd_per_gpu_hour"] == "1.040000000000"
    )


def test_throughput_is_measured_on_busy_time_of_self_hosted_calls(store: DuckDBStore) -> None:
    fleet = flat(Fleet())
    sh: dict[str, Any] = {
        "deployment": "self_hosted",
        "cluster_id": "c1",
        "engine": "vllm",
        "gpu_count": 2,
        "gpu_type": "H100-SXM",
    }
    # two calls overlap (0-10 s and 5-15 s), one alone (100-105 s): busy 15 + 5 = 20 s, not 25; 5,000 + 5,000 + 2,000
    # tokens -> 12,000 / (20 s x 2 GPUs) = 300 tokens per GPU-second, x 2 GPUs a replica (their gpu_count) = 600/s
    fleet.task("sh", minute=30).call(
        "house-llm", input_tokens=4000, output_tokens=1000, at_s=0, duration_s=10, **sh
    ).call("house-llm", input_tokens=4000, output_tokens=1000, at_s=5, duration_s=10, **sh).call(
        "house-llm", input_tokens=1500, output_tokens=500, at_s=100, duration_s=5, **sh
    )
    fleet.write(store)
    doc = ask(store, {"model": "cheap-1"}, gpu="H100-SXM", self_hosted_model="house-llm")
    s = doc["summary"]
    assert close(s["tokens_per_s"], 600, 1e-9) and s["throughput_source"] == "measured"
    assert s["gpus_per_replica"] == 2
    # the catalogue's cheapest H100-SXM offer: Lambda at $2.99
    assert s["usd_per_gpu_hour"] == "2.99" and "cheapest H100-SXM" in s["usd_per_gpu_hour_source"]
    assert any("1.2 calls in flight" in n for n in doc["notes"])  # 25 call-seconds in 20 busy seconds
    assert any(n.startswith("substitution") for n in doc["notes"])
    # without a self-hosted call of the model, and no --tokens-per-s: a usage error
    with pytest.raises(UsageError, match="no self-hosted calls of model cheap-1"):
        ask(store, {"model": "cheap-1"}, gpu="H100-SXM")


def test_self_hosted_traffic_priced_at_the_api_model(store: DuckDBStore) -> None:
    fleet = Fleet()
    sh: dict[str, Any] = {"deployment": "self_hosted", "cluster_id": "c1", "gpu_count": 1}
    for h in range(10):  # 400,000 input + 100,000 output an hour: at cheap-1, $0.4 + $0.2 = $0.60
        fleet.task(f"sh{h}", minute=60 * h + 1).call(
            "house-llm", input_tokens=400_000, output_tokens=100_000, duration_s=100, **sh
        )
    fleet.task("api", minute=5).call("cheap-1", input_tokens=1000, output_tokens=10)  # cheap-1's stored rates
    fleet.write(store)
    doc = ask(store, {"deployment": "self_hosted"}, api_model="cheap-1", usd_per_gpu_hour="1")
    s = doc["summary"]
    # API: 10 x $0.60 x 730 / 10 = $438 a month
    assert s["direction"] == "self_hosted" and s["api_monthly_usd"] == "438.000000000000"
    # measured on the same calls: 500,000 tokens per 100 busy seconds on 1 GPU = 5,000 tokens/s
    assert close(s["tokens_per_s"], 5000, 1e-9)
    assert s["verdict"].startswith("Priced at the API model")
    [row] = doc["tables"]["traffic"]["rows"]
    t = dict(zip(doc["tables"]["traffic"]["columns"], row, strict=True))
    assert (t["model"], t["priced_at"], t["api_monthly_usd"]) == (
        "house-llm",
        "openai/cheap-1 (--api-model); cache tokens at the input rate",  # no cached call of cheap-1 stored
        "438.000000000000",
    )
    # without --api-model, house-llm has no API price (no stored call, not in the price data): nothing to compare
    s = ask(store, {"deployment": "self_hosted"}, usd_per_gpu_hour="1")["summary"]
    assert s["direction"] == "none" and (s["excluded_calls"], s["excluded_tokens"]) == (10, 5_000_000)


def test_unpriceable_traffic_is_left_out_of_both_sides_and_counted(store: DuckDBStore) -> None:
    fleet = flat(Fleet())
    fleet.task("odd", minute=5).call("mystery-model", input_tokens=7000, output_tokens=0)
    fleet.write(store)
    doc = ask(store, usd_per_gpu_hour="0.5", tokens_per_s=1000)
    s = doc["summary"]
    assert (s["calls"], s["excluded_calls"], s["excluded_tokens"]) == (11, 1, 7000)
    assert s["api_monthly_usd"] == "730.000000000000" and s["tokens_per_hour"] == 950_000
    assert any(n.startswith("coverage: 10 of 11 call attempts") for n in doc["notes"])


def test_a_name_with_no_tokens_is_not_a_model_of_the_traffic(store: DuckDBStore) -> None:
    # two models with tokens; a third name only unanswered attempts asked for (no tokens): two models to serve
    fleet = flat(flat(Fleet()), model="pricey-1")
    fleet.task("429", minute=7).call("cheap", input_tokens=0, output_tokens=0, status="error")
    fleet.write(store)
    notes = [n for n in ask(store, usd_per_gpu_hour="0.5", tokens_per_s=1000)["notes"] if "in the traffic" in n]
    assert notes and notes[0].startswith("2 models in the traffic"), notes


def test_filters_narrow_the_traffic(store: DuckDBStore) -> None:
    fleet = flat(Fleet())
    flat(fleet, kind="batch")  # another kind: $10 more over the window
    flat(fleet, model="pricey-1")  # 900,000 x $10 + 50,000 x $20 = $10 an hour: $100 more
    fleet.write(store)
    opts: dict[str, Any] = {"usd_per_gpu_hour": "0.5", "tokens_per_s": 1000}
    # everything: $10 + $10 + $100 over 10 hours -> $8,760 a month
    assert ask(store, **opts)["summary"]["api_monthly_usd"] == "8760.000000000000"
    # a task dimension: kind=review keeps cheap-1 and pricey-1 -> $110 -> $8,030
    assert ask(store, {"kind": "review"}, **opts)["summary"]["api_monthly_usd"] == "8030.000000000000"
    # a call dimension: model=cheap-1 -> both kinds' $20 -> $1,460
    assert ask(store, {"model": "cheap-1"}, **opts)["summary"]["api_monthly_usd"] == "1460.000000000000"
    # time: the first 5 hours only (a 5-hour window): $60 over 5 hours -> $8,760 still, at half the tokens
    s = ask(store, {"until": T0 + timedelta(hours=5)}, **opts)["summary"]
    assert s["hours_in_window"] == 5 and s["calls"] == 15


def test_project_isolation(store: DuckDBStore) -> None:
    fleet = flat(Fleet())
    flat(fleet, project="other", model="pricey-1")
    fleet.write(store)
    s = ask(store, {"project": "default"}, usd_per_gpu_hour="0.5", tokens_per_s=1000)["summary"]
    assert (s["calls"], s["api_monthly_usd"]) == (10, "730.000000000000")
    s = ask(store, {"project": "other"}, usd_per_gpu_hour="0.5", tokens_per_s=1000)["summary"]
    assert (s["calls"], s["api_monthly_usd"]) == (10, "7300.000000000000")


def test_gpu_price_from_the_catalogue_or_a_usage_error(store: DuckDBStore) -> None:
    flat(Fleet()).write(store)
    s = ask(store, gpu="coreweave-1x-h100", tokens_per_s=1000)["summary"]
    assert s["usd_per_gpu_hour"] == "6.16" and s["rent_always_on_usd"] == "4496.800000000000"  # 6.16 x 730
    with pytest.raises(UsageError, match="no GPU price"):
        ask(store, tokens_per_s=1000)
    with pytest.raises(UsageError, match="no such offer"):
        ask(store, gpu="abacus", tokens_per_s=1000)


# -- the arithmetic alone -------------------------------------------------------------------------------------------
def test_p95_sizing_leaves_the_spike_hour_over_capacity() -> None:
    # 40 hours: one at 3,000 tokens, 39 at 1,000; each hour's API charge $1 per 1,000 tokens
    tokens = [3000] + [1000] * 39
    profile = Profile(tokens, [Decimal(t) / 1000 for t in tokens])
    # capacity 1 token/s x 3600 x 0.5 = 1,800/hour; the p95 hour ('higher' of positions 37 and 38) is 1,000
    rental = Rental(Decimal(1), Decimal(1), utilisation=Decimal("0.5"), sizing="p95", hours_per_month=40)
    c = costs(profile, rental)
    assert profile.p95_tokens == 1000 and c.always_on_replicas == 1 and c.hours_over_capacity == 1
    # peak sizing: ceil(3000 / 1800) = 2 replicas x $1 x 40 h = $80
    assert (
        costs(profile, Rental(Decimal(1), Decimal(1), utilisation=Decimal("0.5"), hours_per_month=40)).always_on_usd
        == 80
    )


def test_always_on_breakeven_absent_when_the_peak_floor_is_above_the_api() -> None:
    # flat 1,000 tokens/hour at $1: p = $0.001/token; capacity 1,000 x 3600 x 1 = 3.6M; g r = $4000/hour:
    # floor 4000 / 3.6M = $0.00111 > $0.001: never; at $3000/hour the floor is $0.000833: V* = 3000 / 0.001 = 3M
    profile = Profile([1000] * 24, [Decimal(1)] * 24)
    never = Rental(Decimal(1000), Decimal(4000), utilisation=Decimal(1))
    assert breakevens(profile, never).always_on is None
    found = breakevens(profile, Rental(Decimal(1000), Decimal(3000), utilisation=Decimal(1)))
    assert found.always_on == Decimal(3000)  # k = 3000 x 730 / (730 x $1) -> 3,000 x 1,000 = 3M tokens/hour


def test_autoscaled_breakeven_with_a_floor_of_two_replicas() -> None:
    # flat 1,000 tokens/hour at $1.62 an hour: API $1,182.60 a month; two replicas always (HA), one would do:
    # autoscaled rent 2 x $1 x 730 x 1.1 = $1,606 up to 2 replicas' worth -> k = 1606 / 1182.6 = 1.35803...
    # (a quotient that does not multiply back exactly: the search must still settle on it)
    profile = Profile([1000] * 24, [Decimal("1.62")] * 24)
    rental = Rental(Decimal(1000), Decimal(1), min_replicas=2, autoscale_buffer=Decimal("0.1"))
    found = breakevens(profile, rental)
    assert found.autoscaled_searched and close(float(found.autoscaled or 0) * 1000, 1358.033)
    # always-on: 2 x $730 / $1,182.60 = 1.23457 -> 1,234.57 tokens/hour
    assert close(float(found.always_on or 0) * 1000, 1234.568)


def test_gpu_type_names_the_gpu_to_rent_not_the_traffic(store: DuckDBStore) -> None:
    fleet = flat(Fleet())
    sh: dict[str, Any] = {"deployment": "self_hosted", "cluster_id": "c1", "gpu_count": 1}
    # H100-SXM calls: 10,000 tokens in 10 busy seconds = 1,000/s; A100 calls: 10,000 in 20 s = 500/s
    fleet.task("h", minute=30).call(
        "house-llm", input_tokens=9000, output_tokens=1000, duration_s=10, gpu_type="H100-SXM", **sh
    )
    fleet.task("a", minute=90).call(
        "house-llm", input_tokens=9000, output_tokens=1000, duration_s=20, gpu_type="A100", **sh
    )
    fleet.write(store)
    doc = ask(store, {"gpu_type": "H100-SXM", "model": "cheap-1"}, self_hosted_model="house-llm")
    s = doc["summary"]
    # the traffic is the API calls (none has a GPU): $730 a month as in the flat case
    assert (s["calls"], s["api_monthly_usd"]) == (10, "730.000000000000")
    # measured on the H100-SXM call only; priced at the catalogue's cheapest H100-SXM offer ($2.99)
    assert close(s["tokens_per_s"], 1000, 1e-9) and s["usd_per_gpu_hour"] == "2.99"
    assert close(
        ask(store, {"gpu_type": "A100"}, self_hosted_model="house-llm", usd_per_gpu_hour="1")["summary"][
            "tokens_per_s"
        ],
        500,
        1e-9,
    )


_TWO_CLUSTERS = """\
version = "t"

[[clusters]]
id = "a100s"
gpu_type = "A100"
gpu_count = 1
usd_per_gpu_hour = "1.50"
effective_from = 2026-01-01T00:00:00Z

[[clusters]]
id = "h100s"
gpu_type = "H100-SXM"
gpu_count = 4
usd_per_gpu_hour = "3.00"
effective_from = 2026-01-01T00:00:00Z
"""


def test_the_gpu_price_is_the_one_the_measured_gpu_seconds_were_billed_at(store: DuckDBStore, tmp_path: Path) -> None:
    from taskcost.pricing import Pricer, load_clusters

    fleet = flat(Fleet())
    # a100s: 1 GPU busy 30 s (30 GPU-s at $1.50); h100s: 4 GPUs busy 10 s (40 GPU-s at $3.00): the GPU-seconds the
    # throughput pools were billed at (30 x 1.5 + 40 x 3) / 70 = $2.357142857/GPU-hour, not the last call's $3.00
    fleet.task("sh", minute=30).call(
        "house-llm", input_tokens=3000, output_tokens=0, at_s=0, duration_s=30, deployment="self_hosted",
        cluster_id="a100s", gpu_count=1, gpu_type="A100",
    ).call(
        "house-llm", input_tokens=4000, output_tokens=0, at_s=100, duration_s=10, deployment="self_hosted",
        cluster_id="h100s", gpu_count=4, gpu_type="H100-SXM",
    )  # fmt: skip
    fleet.write(store)
    path = tmp_path / "clusters.toml"
    path.write_text(_TWO_CLUSTERS)
    # the day before and the day of the calls: both clusters' busy windows and idle ones around them (every hour
    # since the clusters' effective_from up to today is ~16,000 windows, more each day, and nothing more to check)
    day = timedelta(days=1)
    store.allocate_clusters(Pricer(clusters=load_clusters(path)), since_ns=ns(T0 - day), until_ns=ns(T0 + day))
    doc = ask(store, {"model": "cheap-1"}, self_hosted_model="house-llm")
    s = doc["summary"]
    assert Decimal(s["usd_per_gpu_hour"]).quantize(Decimal("1e-9")) == Decimal("2.357142857")
    assert "2 rates of 2 clusters, weighted by their busy GPU-seconds" in s["usd_per_gpu_hour_source"]
    # 7,000 tokens over 70 busy GPU-seconds = 100 per GPU-second; clusters of 1 and 4 GPUs: a replica is one GPU, said
    assert close(s["tokens_per_s"], 100, 1e-9) and s["gpus_per_replica"] == 1
    assert any("had 1-4 GPUs each: a replica is taken as 1 GPU" in n for n in doc["notes"])


def test_unbilled_self_hosted_calls_are_priced_at_their_gpu_types_catalogue_offer(store: DuckDBStore) -> None:
    fleet = flat(Fleet())
    sh: dict[str, Any] = {"deployment": "self_hosted", "cluster_id": "c1", "gpu_count": 1, "gpu_type": "H100-SXM"}
    fleet.task("sh", minute=30).call("house-llm", input_tokens=4000, output_tokens=1000, duration_s=10, **sh)
    fleet.write(store)
    s = ask(store, {"model": "cheap-1"}, self_hosted_model="house-llm")["summary"]  # no --gpu, no rate, no bill
    assert (
        s["usd_per_gpu_hour"] == "2.99" and "the GPU type the self-hosted calls ran on" in s["usd_per_gpu_hour_source"]
    )


def test_a_six_minute_window_is_not_an_hour_of_traffic(store: DuckDBStore, tmp_path: Path) -> None:
    # two calls of $1.00 (950,000 tokens each) in the first 6 minutes of an hour, no --since/--until: observed 360 s,
    # so the hour counts at its rate, x 3600 / 360 = 10: $20 and 19,000,000 tokens an hour, $14,600 a month
    fleet = Fleet()
    fleet.task("a", minute=0).call("cheap-1", input_tokens=900_000, output_tokens=50_000, duration_s=60)
    fleet.task("b", minute=5).call("cheap-1", input_tokens=900_000, output_tokens=50_000, duration_s=60)
    fleet.write(store)
    doc = breakeven(store, Filters(), BreakevenOptions(usd_per_gpu_hour=Decimal("0.5"), tokens_per_s=1000)).to_json()
    s = doc["summary"]
    assert s["api_monthly_usd"] == "14600.000000000000"
    assert close(s["tokens_per_hour"], 19_000_000)
    traffic = doc["tables"]["traffic"]
    row = dict(zip(traffic["columns"], traffic["rows"][0], strict=True))
    assert close(row["tokens_per_hour"], 19_000_000) and row["api_monthly_usd"] == "14600.000000000000"
    assert "the only hour of the window was observed for 6 min: its traffic counts at that rate, x 10" in " ".join(
        doc["notes"]
    )
    # a burst of 2 seconds counts as 5 minutes (x 12), not as an hour's rate x 1,800
    burst = Fleet()
    burst.task("c", minute=0).call("cheap-1", input_tokens=900_000, output_tokens=50_000, duration_s=2)
    with DuckDBStore.open(tmp_path / "burst.duckdb") as other:
        burst.write(other)
        b = breakeven(other, Filters(), BreakevenOptions(usd_per_gpu_hour=Decimal("0.5"), tokens_per_s=1000))
        assert close(b.to_json()["summary"]["tokens_per_hour"], 12 * 950_000)


def test_the_cheapest_gpu_hour_allowed_draws_its_curve_and_a_cheaper_one_is_refused(store: DuckDBStore) -> None:
    # a fuzzer's $5e-324 a GPU-hour gave breakevens of ~10^-323 x the volume: the curve's grid, then in floats,
    # failed (log10 of 0). A price under a micro-dollar is refused; the smallest allowed draws its curve.
    flat(Fleet()).write(store)
    answer = ask(store, usd_per_gpu_hour="0.000001", tokens_per_s=1000)
    s = answer["summary"]
    assert s["rent_always_on_usd"] == "0.000730000000"  # 1 GPU x $0.000001 x 730 hours
    assert close(s["breakeven_tokens_per_hour"], 0.95)  # k* = 730 x $0.000001 / $730 = 10^-6 of 950,000
    curve = answer["tables"]["curve"]
    marks = {row[curve["columns"].index("mark")]: row[0] for row in curve["rows"]}
    assert marks["observed"] == 1.0 and close(marks["breakeven hybrid, breakeven always-on"], 1e-6)
    with pytest.raises(ValueError, match="greater than or equal to 0.000001"):
        BreakevenOptions.model_validate({"usd_per_gpu_hour": "5e-324"})


def test_the_curves_grid_spans_marks_beyond_a_floats_range() -> None:
    from taskcost.analytics._breakeven_model import curve_multipliers

    tiny, huge = Decimal("1.78e-323"), Decimal("1e400")
    grid = curve_multipliers([tiny, None, huge])
    assert {tiny, huge, Decimal(1)} <= set(grid)
    assert grid[0] == Decimal("1.78e-324") and grid[-1] == Decimal("1.00e401")  # a tenth of the least, 10x the most
