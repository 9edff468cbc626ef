"""The server allocates the self-hosted clusters' GPU-hours by itself once a window has ended: the code
`taskcost reprice` runs, in the background, beside the single writer; idempotent; late spans are picked up; its
state is in /readyz."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from taskcost.app import create_app
from taskcost.collector._allocation import ClusterAllocator
from taskcost.pricing import PricingConfig, PricingSource
from taskcost.settings import Settings
from taskcost.store import DuckDBStore, StoreUnavailableError
from tests.builders.pricing import call, costs, ingest, ns

S = 1_000_000_000
H = 3600 * S
T10 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
ALONE_600_S = (Decimal("5.98") * 600 / 3600).quantize(Decimal("1e-12"))  # 600 s alone on 2 GPUs at $2.99
SH = {"deployment": "self_hosted", "cluster": "gpu-east", "provider": "vllm", "model": "qwen3-32b"}
CLUSTERS = """
version = "2026-11"

[[clusters]]
id = "gpu-east"
gpu_type = "H100-SXM"
gpu_count = 2
usd_per_gpu_hour = "2.99"
effective_from = {start}
"""


class Clock:
    def __init__(self, at: datetime) -> None:
        self.ns = ns(at)

    def __call__(self) -> int:
        return self.ns

    def set(self, at: datetime) -> None:
        self.ns = ns(at)


@pytest.fixture
def source(tmp_path: Path) -> PricingSource:
    path = tmp_path / "clusters.toml"
    path.write_text(CLUSTERS.format(start="2026-11-02T08:00:00Z"))
    return PricingSource(PricingConfig(prices_dir=tmp_path / "prices", clusters_file=path), check_interval_s=0)


def _calls() -> list[Any]:
    return [
        call("a", T10, duration_s=600, **SH),
        call("b", T10 + timedelta(seconds=300), duration_s=600, **SH),
        call("c", T10 + timedelta(seconds=1800), duration_s=0, **SH),
        call("d", T10 + timedelta(seconds=3000), duration_s=900, **SH),
        call("x", T10, **{**SH, "cluster": "elsewhere"}),
        call("late", T10 + timedelta(hours=3), **SH),
    ]


def _windows(store: DuckDBStore) -> list[tuple[Any, ...]]:
    """The stored windows, without when they were computed."""
    return store.admin_query(
        "SELECT cluster_id, window_start_ns, window_end_ns, bill_usd, attributed_usd, idle_usd, busy_s, calls "
        "FROM cluster_cost_rows ORDER BY window_start_ns"
    ).rows


def test_the_server_allocates_ended_windows_as_reprice_does(source: PricingSource, tmp_path: Path) -> None:
    clock = Clock(T10 + timedelta(hours=3, minutes=30))
    with DuckDBStore.open(tmp_path / "served.duckdb") as store, DuckDBStore.open(tmp_path / "cron.duckdb") as cron:
        pricer = source.current()
        ingest(store, _calls(), pricer, received_ns=clock())
        ingest(cron, _calls(), pricer, received_ns=clock())
        allocator = ClusterAllocator(store, source, delay_s=60, clock=clock)
        assert allocator.status()["state"] == "not started"
        wait = allocator.run_once()
        got = costs(store)
        assert got["a"] == got["b"] == Decimal("0.7475") and got["c"] == Decimal(0) and got["d"] == Decimal("1.495")
        assert got["x"] is None and got["late"] is None  # another cluster; a window that has not ended
        # the windows from the cluster's first period (08:00) to the last that ended (13:00), as `taskcost reprice`
        # run at the same moment stores them, and the same prices
        cron.reprice(pricer, now_ns=clock())
        assert _windows(store) == _windows(cron) and len(_windows(store)) == 5
        assert got == costs(cron)
        assert store.query("SELECT cost_usd FROM tasks").rows == cron.query("SELECT cost_usd FROM tasks").rows
        status = allocator.status(detail=True)
        assert status["state"] == "idle" and status["error"] is None
        assert status["allocated_through"] == "2026-11-02T13:00:00Z" == status["last_window_end"]
        assert status["next_due_at"] == "2026-11-02T14:01:00Z"  # the window 13:00-14:00 ends, and a minute more
        assert status["last_run"]["windows"] == 5 and Decimal(status["last_run"]["bill_usd"]) == Decimal("5.98") * 5
        assert 1 <= wait <= 300
        # nothing is due until the next window ends: a run now changes nothing
        before = store.admin_query("SELECT computed_at_ns FROM cluster_cost_rows").rows
        allocator.run_once()
        assert store.admin_query("SELECT computed_at_ns FROM cluster_cost_rows").rows == before
        # the late call's window (13:00-14:00) is allocated once it has ended, and the delay has passed
        clock.set(T10 + timedelta(hours=4, seconds=30))
        allocator.run_once()
        assert costs(store)["late"] is None
        clock.set(T10 + timedelta(hours=4, minutes=1))
        allocator.run_once()
        assert costs(store)["late"] == (Decimal("5.98") / 3600).quantize(Decimal("1e-12"))
        assert allocator.status()["allocated_through"] == "2026-11-02T14:00:00Z"


def test_allocating_a_window_twice_costs_the_same(source: PricingSource, store: DuckDBStore) -> None:
    pricer = source.current()
    ingest(store, _calls(), pricer)
    now = ns(T10 + timedelta(hours=5))
    first = store.allocate_clusters(pricer, since_ns=ns(T10), until_ns=ns(T10) + 2 * H, now_ns=now)
    got, windows = costs(store), _windows(store)
    tasks = store.query("SELECT task_id, cost_usd FROM tasks").rows
    again = store.allocate_clusters(pricer, since_ns=ns(T10), until_ns=ns(T10) + 2 * H, now_ns=now + S)
    assert costs(store) == got and _windows(store) == windows  # the same windows, stored once
    assert store.query("SELECT task_id, cost_usd FROM tasks").rows == tasks
    assert (first.windows, first.bill_usd, again.bill_usd) == (2, Decimal("11.96"), Decimal("11.96"))
    assert first.self_hosted_changed == 4 and again.self_hosted_changed == 0
    for w in store.cluster_costs():
        assert w.attributed_usd + w.idle_usd == w.bill_usd


def test_a_call_that_comes_after_its_window_was_allocated_is_allocated_at_the_next_run(
    source: PricingSource, store: DuckDBStore
) -> None:
    clock = Clock(T10 + timedelta(hours=2))
    pricer = source.current()
    ingest(store, [call("a", T10, duration_s=600, **SH)], pricer, received_ns=clock())
    allocator = ClusterAllocator(store, source, delay_s=60, clock=clock)
    allocator.run_once()
    assert costs(store)["a"] == ALONE_600_S
    # a span of the same hour arrives late (an exporter's retry): the next look re-allocates its window
    clock.set(T10 + timedelta(hours=2, minutes=5))
    ingest(store, [call("b", T10 + timedelta(seconds=300), duration_s=600, **SH)], pricer, received_ns=clock())
    allocator.run_once()
    got = costs(store)
    assert got["a"] == got["b"] == Decimal("0.7475")
    [window] = [w for w in store.cluster_costs() if w.window_start_ns == ns(T10)]
    assert (window.calls, window.attributed_usd + window.idle_usd) == (2, window.bill_usd)
    assert allocator.status(detail=True)["last_run"]["late_calls_from"] == "2026-11-02T10:05:00Z"


def test_ingest_goes_on_while_a_window_is_allocated(
    source: PricingSource, store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskcost.store import _reprice

    pricer = source.current()
    ingest(store, _calls()[:4], pricer)
    inside, release = threading.Event(), threading.Event()
    allocate = _reprice.allocate_self_hosted

    def slow(*args: Any, **kwargs: Any) -> Any:
        inside.set()  # the allocation's transaction is open, its calls read
        assert release.wait(30)
        return allocate(*args, **kwargs)

    monkeypatch.setattr(_reprice, "allocate_self_hosted", slow)
    allocator = ClusterAllocator(store, source, delay_s=0, clock=lambda: ns(T10 + timedelta(hours=3)))
    worker = threading.Thread(target=allocator.run_once)
    repricing = threading.Thread(target=lambda: store.reprice(pricer, now_ns=ns(T10 + timedelta(hours=3))))
    worker.start()
    try:
        assert inside.wait(30)
        assert allocator.status()["state"] == "allocating"
        started = time.monotonic()
        ingest(store, [call("api", T10 + timedelta(hours=4))], pricer)  # committed by the writer meanwhile
        assert time.monotonic() - started < 10
        assert store.query("SELECT count(*) FROM llm_calls WHERE span_id = 'api'").rows == [(1,)]
        # a re-price that comes now waits for the allocation (not refused); another allocation is
        repricing.start()
        with pytest.raises(StoreUnavailableError, match="already running"):
            store.allocate_clusters(pricer, since_ns=None, until_ns=None)
    finally:
        release.set()
        worker.join(30)
        if repricing.is_alive():
            repricing.join(60)
    assert costs(store)["a"] == Decimal("0.7475") and allocator.status()["state"] == "idle"


def test_while_a_reprice_runs_the_allocation_waits(
    source: PricingSource, store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskcost.store import _reprice

    pricer = source.current()
    ingest(store, _calls()[:4], pricer)
    inside, release = threading.Event(), threading.Event()
    allocate = _reprice.allocate_self_hosted

    def slow(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        assert release.wait(30)
        return allocate(*args, **kwargs)

    monkeypatch.setattr(_reprice, "allocate_self_hosted", slow)
    now = ns(T10 + timedelta(hours=3))
    repricing = threading.Thread(target=lambda: store.reprice(pricer, now_ns=now))
    repricing.start()
    allocator = ClusterAllocator(store, source, delay_s=0, clock=lambda: now)
    try:
        assert inside.wait(30)
        assert allocator.run_once() == 30.0  # it looks again shortly
        status = allocator.status()
        assert status["state"] == "waiting" and "a re-price is already running" in status["waiting_for"]
    finally:
        release.set()
        repricing.join(60)
    monkeypatch.setattr(_reprice, "allocate_self_hosted", allocate)
    allocator.run_once()
    assert allocator.status()["state"] == "idle" and costs(store)["a"] == Decimal("0.7475")


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[TestClient, DuckDBStore]]:
    """The app on a store that holds self-hosted calls of ended windows, with its lifespan (the allocation's
    thread) running."""
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    path = tmp_path / "clusters.toml"
    path.write_text(CLUSTERS.format(start=start.isoformat().replace("+00:00", "Z")))
    settings = Settings(db=tmp_path / "t.duckdb", decode_workers=0, clusters_file=path, cluster_allocation_delay_s=0)
    store = DuckDBStore.open(settings.db)
    ingest(store, [call("a", start + timedelta(minutes=10), duration_s=600, **SH)], settings.pricing_config().build())
    app = create_app(settings, store, dashboards=False)
    with TestClient(app) as client:
        yield client, store
    store.close()


def test_readyz_says_how_the_allocation_stands(started: tuple[TestClient, DuckDBStore]) -> None:
    client, store = started
    deadline = time.monotonic() + 30
    while (state := client.get("/readyz").json()["cluster_allocation"])["runs"] < 1:
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    assert state["state"] == "idle" and state["enabled"] and state["error"] is None
    assert state["clusters"].startswith("clusters 2026-11 (") and state["window_s"] == 3600
    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    if state["allocated_through"] != hour.isoformat().replace("+00:00", "Z") and now - hour < timedelta(minutes=1):
        hour -= timedelta(hours=1)  # the hour turned between the allocation's run and this check
    assert state["allocated_through"] == state["last_window_end"] == hour.isoformat().replace("+00:00", "Z")
    assert state["next_due_at"] == (hour + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert "last_run" not in state  # no figures about the calls: /readyz is open to anyone
    assert costs(store)["a"] == ALONE_600_S  # without anyone running `taskcost reprice`
    assert len(store.cluster_costs()) == 3
    status = client.get("/api/pricing/status").json()
    assert status["cluster_allocation"]["state"] == "idle" and status["cluster_window_s"] == 3600


def test_the_allocation_can_be_turned_off(tmp_path: Path, store: DuckDBStore) -> None:
    settings = Settings(db=tmp_path / "t.duckdb", decode_workers=0, allocate_clusters=False)
    with TestClient(create_app(settings, store, dashboards=False)) as client:
        state = client.get("/readyz").json()["cluster_allocation"]
    assert (state["enabled"], state["state"], state["runs"]) == (False, "off", 0)
