"""Self-hosted cost: a cluster's bill allocated to the calls it served by busy seconds, the rest idle,
to the exact 1e-12 dollar; the clusters file; the shipped GPU-rate catalogue."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskcost.pricing import (
    Cluster,
    ClustersFile,
    ConfigFileError,
    Pricer,
    ServedCall,
    allocate_window,
    gpu_catalogue,
    largest_remainder,
    load_clusters,
)
from taskcost.store import DuckDBStore
from tests.budget import examples
from tests.builders.pricing import call, costs, ingest, ns

S = 1_000_000_000
T10 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
H = 3600 * S


def cluster(**kw: object) -> Cluster:
    fields: dict[str, object] = {
        "id": "gpu-east",
        "gpu_type": "H100-SXM",
        "gpu_count": 2,
        "usd_per_gpu_hour": "2.99",
        "effective_from": "2026-11-01T00:00:00Z",
    }
    return Cluster.model_validate({**fields, **kw})


def test_two_gpus_for_one_hour_attributed_plus_idle_is_the_bill() -> None:
    # 2 GPUs x $2.99/GPU-hour x 1 hour = $5.98. In the hour 10:00-11:00:
    #   A runs 0-600 s, B 300-900 s (together 300-600 s), C takes no time at 1800 s, D runs 3000-3900 s.
    #   A alone 300 s + half of 300 s = 450 s; B the same; D 600 s in this hour; busy 1500 s, idle 2100 s.
    t0 = ns(T10)
    calls = [
        ServedCall("A", t0, t0 + 600 * S),
        ServedCall("B", t0 + 300 * S, t0 + 900 * S),
        ServedCall("C", t0 + 1800 * S, t0 + 1800 * S),
        ServedCall("D", t0 + 3000 * S, t0 + 3900 * S),
    ]
    a = allocate_window(cluster(), t0, t0 + H, calls)
    assert a.bill_usd == Decimal("5.98")
    assert a.busy_ns == 1500 * S
    # exact shares: 5.98 x 450/3600 = 0.7475; 5.98 x 600/3600 = 0.99666...; idle 5.98 x 2100/3600 = 3.48833...
    # rounded to 1e-12 by largest remainder: D's remainder (.67) beats idle's (.33), so D gets the last unit
    assert a.shares == {
        "A": Decimal("0.747500000000"),
        "B": Decimal("0.747500000000"),
        "C": Decimal("0E-12"),
        "D": Decimal("0.996666666667"),
    }
    assert a.idle_usd == Decimal("3.488333333333")
    assert a.attributed_usd + a.idle_usd == a.bill_usd
    assert sum(a.shares.values()) == a.attributed_usd
    nxt = allocate_window(cluster(), t0 + H, t0 + 2 * H, calls)
    assert nxt.shares == {"D": Decimal("0.498333333333")}  # its last 300 s, alone
    assert a.shares["D"] + nxt.shares["D"] == Decimal("1.495")  # 900 busy seconds alone = 5.98 x 900/3600


@settings(max_examples=examples(40), deadline=None)
@given(
    rate=st.decimals(min_value=Decimal("0.01"), max_value=Decimal(50), places=4),
    gpus=st.integers(1, 8),
    spans=st.lists(st.tuples(st.integers(-600, 3600), st.integers(0, 5000)), max_size=25),
    window_s=st.sampled_from([600, 1000, 3600]),
)
def test_the_sum_is_always_exact(rate: Decimal, gpus: int, spans: list[tuple[int, int]], window_s: int) -> None:
    t0 = ns(T10)
    calls = [ServedCall(i, t0 + s * S, t0 + (s + d) * S) for i, (s, d) in enumerate(spans)]
    a = allocate_window(cluster(usd_per_gpu_hour=str(rate), gpu_count=gpus), t0, t0 + window_s * S, calls)
    assert sum(a.shares.values(), Decimal(0)) + a.idle_usd == a.bill_usd
    assert all(v >= 0 for v in a.shares.values()) and a.idle_usd >= 0
    exact = Fraction(rate) * gpus * Fraction(window_s, 3600)
    assert abs(Fraction(a.bill_usd) - exact) <= Fraction(1, 2 * 10**12)


def test_largest_remainder() -> None:
    assert largest_remainder(10, [Fraction(10, 3)] * 3) == [4, 3, 3]
    assert largest_remainder(5, [Fraction(1, 2), Fraction(9, 2)]) == [1, 4]
    with pytest.raises(ValueError):
        largest_remainder(5, [Fraction(1)])


CLUSTERS = """\
version = "2026-11"

[[clusters]]
id = "gpu-east"
gpu_type = "H100-SXM"
gpu_count = 2
usd_per_gpu_hour = "2.99"
effective_from = 2026-11-01T00:00:00Z
"""


def test_reprice_allocates_the_cluster_to_its_calls_and_reports_idle(store: DuckDBStore, tmp_path: Path) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text(CLUSTERS)
    pricer = Pricer(clusters=load_clusters(path))
    sh = {"deployment": "self_hosted", "cluster": "gpu-east", "provider": "vllm", "model": "qwen3-32b"}
    ingest(
        store,
        [
            call("a", T10, duration_s=600, **sh),
            call("b", T10 + timedelta(seconds=300), duration_s=600, **sh),
            call("c", T10 + timedelta(seconds=1800), duration_s=0, **sh),
            call("d", T10 + timedelta(seconds=3000), duration_s=900, **sh),
            call("x", T10, **{**sh, "cluster": "elsewhere"}),
            call("late", T10 + timedelta(hours=3), **sh),
        ],
        pricer,
    )
    before = store.query("SELECT span_id, cost_usd, unpriced_reason FROM llm_calls ORDER BY span_id").rows
    assert all(cost is None for _, cost, _ in before)  # self-hosted calls wait for their window to close
    assert "`taskcost reprice` allocates closed windows" in before[0][2]
    # re-price the hour 10:00-11:00 at 13:30: d runs into 11:00-12:00, so that window is allocated too
    report = store.reprice(pricer, since_ns=ns(T10), until_ns=ns(T10) + H, now_ns=ns(T10) + 3 * H + H // 2)
    got = costs(store)
    assert got["a"] == got["b"] == Decimal("0.7475") and got["c"] == Decimal(0)
    assert got["d"] == Decimal("1.495")
    assert got["x"] is None and got["late"] is None
    reasons = dict(store.query("SELECT span_id, unpriced_reason FROM llm_calls").rows)
    assert "'elsewhere' is not in the clusters file" in reasons["x"]
    windows = store.cluster_costs()
    assert [(w.window_start_ns - ns(T10)) // H for w in windows] == [0, 1]
    first = windows[0]
    assert (first.bill_usd, first.attributed_usd, first.idle_usd) == (
        Decimal("5.98"),
        Decimal("2.491666666667"),
        Decimal("3.488333333333"),
    )
    for w in windows:
        assert w.attributed_usd + w.idle_usd == w.bill_usd
    assert (report.windows, report.bill_usd) == (2, Decimal("11.96"))
    assert report.attributed_usd + report.idle_usd == report.bill_usd
    assert report.attributed_usd == sum(v for v in got.values() if v is not None)
    detail = store.query("SELECT price_source, price_detail FROM llm_calls WHERE span_id = 'd'").rows[0]
    assert detail[0].startswith("clusters 2026-11 (") and '"method":"busy_seconds"' in detail[1]
    # the task's cost now includes its self-hosted share
    task_cost = store.query("SELECT cost_usd FROM tasks").rows[0][0]
    assert task_cost == Decimal("0.7475") * 2 + Decimal("1.495")
    # the late call's window closes later; a re-price then picks it up (300 s alone of 4 GPU-hours... 1 s here)
    store.reprice(pricer, now_ns=ns(T10) + 5 * H)
    late = costs(store)["late"]
    assert late == (Decimal("5.98") / 3600).quantize(Decimal("1e-12"))


def test_clusters_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text(
        CLUSTERS
        + '\n[[clusters]]\nid = "gpu-east"\ngpu_count = 4\nusd_per_gpu_hour = "2.5"\neffective_from = 2026-11-15\n'
        + '\n[[clusters]]\nid = "gpu-west"\ngpu_count = 1\neffective_from = 2026-11-01\n'
    )
    with pytest.raises(ConfigFileError) as caught:
        load_clusters(path)
    assert "line 16, clusters[2]: give exactly one of usd_per_gpu_hour and catalogue" in str(caught.value)
    path.write_text(
        CLUSTERS
        + '\n[[clusters]]\nid = "gpu-east"\ngpu_count = 4\nusd_per_gpu_hour = "2.5"\neffective_from = 2026-11-15\n'
    )
    with pytest.raises(ConfigFileError, match="overlaps"):
        load_clusters(path)
    path.write_text(CLUSTERS.replace('usd_per_gpu_hour = "2.99"', 'catalogue = "no-such-offer"'))
    with pytest.raises(ConfigFileError, match="line 8, clusters\\[0\\].catalogue|no offer 'no-such-offer'"):
        load_clusters(path)


def test_rate_changes_and_catalogue_rates() -> None:
    f = ClustersFile.model_validate(
        {
            "clusters": [
                {
                    "id": "c",
                    "gpu_count": 1,
                    "catalogue": "runpod-1x-h100-sxm",
                    "effective_from": "2026-11-01",
                    "effective_to": "2026-11-02T10:30:00Z",
                },
                {"id": "c", "gpu_count": 1, "usd_per_gpu_hour": "1.5", "effective_from": "2026-11-02T10:30:00Z"},
            ]
        }
    )
    first, second = f.periods("c")
    assert first.rate == Decimal("2.99") and "runpod-1x-h100-sxm" in first.rate_source
    assert "checked 2026-12-02" in first.rate_source
    t0 = ns(T10)
    # the rate changes at 10:30: half an hour at $2.99 plus half an hour at $1.50
    a = allocate_window(first, t0, t0 + H // 2, [ServedCall("x", t0, t0 + H)])
    b = allocate_window(second, t0 + H // 2, t0 + H, [ServedCall("x", t0, t0 + H)])
    assert a.shares["x"] + b.shares["x"] == Decimal("2.99") / 2 + Decimal("1.5") / 2


def test_the_shipped_catalogue_has_a_source_and_a_date_on_every_row() -> None:
    rows = gpu_catalogue()
    assert len(rows) >= 10
    for r in rows.values():
        assert r.source and r.checked <= date.today()
        assert r.usd_per_gpu_hour * r.gpus_per_instance == r.instance_usd_per_hour
    assert rows["aws-p5-h100-2026"].usd_per_gpu_hour == Decimal("6.88")
