"""Re-pricing and the GPU-hour allocation on the ClickHouse store (versioned cost rows) give the DuckDB store's answers.

The parity traffic (tests/test_clickhouse_parity.py) is stored in both stores at the tests' book; both are then priced
again with another book (a model dearer, a discount, tools priced) and a clusters file for the self-hosted cluster.
Both reports and every priced view must agree, money exact; a second re-price changes nothing; merging the parts
(ClickHouse collapses the versions) changes nothing either; a span re-sent after the re-price stays at its new price.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from taskcost.pricing import PricingConfig, RepriceReport
from taskcost.store import DuckDBStore
from taskcost.store.clickhouse._store import ClickHouseStore
from tests.builders.analytics import BOOK, T0, ns
from tests.conftest import cli_env
from tests.test_clickhouse_parity import _Collect, _sorted, _traffic

CLUSTERS = """\
version = "ch-reprice-tests"

[[clusters]]
id = "gpu-a"
gpu_type = "H100"
gpu_count = 2
usd_per_gpu_hour = "3.5"
effective_from = 2026-11-01T00:00:00Z
"""
PRICED_VIEWS = ("llm_calls", "tasks", "llm_call_hours", "tool_calls")


def _book2() -> dict[str, Any]:
    book = copy.deepcopy(BOOK)
    book["version"] = "analytics-tests-2"
    for m in book["models"]:
        if m["model"] == "cheap-1":
            m["input_mtok"], m["output_mtok"] = "1.5", "3"
    book["discounts"] = [{"provider": "anthropic", "percent": "10", "effective_from": "2026-11-03"}]
    book["tools"] = [{"tool": "b", "usd_per_call": "0.002"}]
    return book


def test_the_reprice_command_runs_on_the_clickhouse_store(tmp_path: Path) -> None:
    """(First: chDB opens one data directory per process at a time, and the module's stores stay open.)
    `taskcost reprice --store chdb://...` with no server: the store itself, re-priced with this environment's book,
    and `taskcost prices clusters` reads its windows (an empty list without a clusters file)."""
    collected = _Collect()
    _traffic(seed=3, tasks=12).write(collected)  # type: ignore[arg-type]
    dsn = f"chdb://{tmp_path / 'ch'}"
    with ClickHouseStore.open(dsn) as ch:
        for batch in collected.batches:
            ch.write(batch)
        assert ch.query("SELECT count(*) FROM tool_calls WHERE cost_usd = 0.5").rows == [(0,)]
    book = tmp_path / "book.toml"
    book.write_text('version = "cli-2"\n\n[[tools]]\ntool = "*"\nusd_per_call = "0.5"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "taskcost", "reprice", "--store", dsn, "--db", str(tmp_path / "none.duckdb")],
        capture_output=True,
        text=True,
        env={**cli_env(), "TASKCOST_PRICE_BOOK_FILE": str(book)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "re-pricing the ClickHouse store chdb://" in proc.stderr, proc.stderr
    assert "re-priced all history" in proc.stdout and "tool calls priced by the book: 1, 1 changed" in proc.stdout
    with ClickHouseStore.open(dsn) as ch:
        books = ch.query("SELECT DISTINCT price_book_version FROM llm_calls WHERE price_book_version IS NOT NULL").rows
        assert [b[0].split(" ")[0] for b in books] == ["cli-2"]
        priced_tools = ch.query("SELECT count(*) FROM tool_calls WHERE cost_usd = 0.5").rows[0][0]
    assert priced_tools > 0
    listed = subprocess.run(
        [sys.executable, "-m", "taskcost", "prices", "clusters", "--store", dsn, "--db", str(tmp_path / "none.duckdb")],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    assert listed.returncode == 0 and "no allocated cluster windows" in listed.stdout, listed.stderr


@pytest.fixture(scope="module")
def repriced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DuckDBStore, ClickHouseStore, list[Any]]]:
    tmp = tmp_path_factory.mktemp("ch-reprice")
    collected = _Collect()
    _traffic(seed=11, tasks=90).write(collected)  # type: ignore[arg-type]
    clusters = tmp / "clusters.toml"
    clusters.write_text(CLUSTERS)
    new = PricingConfig(book_table=_book2(), clusters_file=clusters).build()
    now = ns(T0 + timedelta(days=3))
    with DuckDBStore.open(tmp / "d.duckdb") as duck, ClickHouseStore.open(f"chdb://{tmp / 'ch'}") as ch:
        for batch in collected.batches:
            duck.write(batch)
            ch.write(batch)
        assert duck.query("SELECT count(*) FROM llm_calls").rows == ch.query("SELECT count(*) FROM llm_calls").rows
        reports = [duck.reprice(new, now_ns=now), ch.reprice(new, now_ns=now)]
        yield duck, ch, [*reports, new, now, collected]


def _report(r: RepriceReport) -> dict[str, Any]:
    doc = r.to_json()
    doc.pop("seconds")
    return doc


def _rows(store: Any, view: str) -> list[dict[str, Any]]:
    rows = store.arrow(f"SELECT * FROM {view}").to_pylist()
    for r in rows:
        r.pop("priced_at", None)  # when each store ran its re-price: the same now_ns, but ingest times differ
        if r.get("container_image_tags") is None and "container_image_tags" in r:
            r["container_image_tags"] = []  # (the one listed difference: tests/test_clickhouse_parity.py)
    return _sorted(rows)


def test_the_reports_agree_and_something_changed(repriced: tuple[DuckDBStore, ClickHouseStore, list[Any]]) -> None:
    _, _, (d, c, *_) = repriced
    assert _report(c) == _report(d)
    assert d.changed > 0 and d.tools_changed > 0 and d.windows > 0 and d.self_hosted_changed > 0
    assert d.after_usd != d.before_usd


@pytest.mark.parametrize("view", PRICED_VIEWS)
def test_every_priced_view_agrees_after_the_reprice(
    repriced: tuple[DuckDBStore, ClickHouseStore, list[Any]], view: str
) -> None:
    duck, ch, _ = repriced
    want, got = _rows(duck, view), _rows(ch, view)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want, strict=True):
        assert g == w, {k: (g[k], w[k]) for k in w if g[k] != w[k]}


def test_windows_agree_and_a_second_reprice_changes_nothing(
    repriced: tuple[DuckDBStore, ClickHouseStore, list[Any]],
) -> None:
    duck, ch, (_, _, new, now, _) = repriced
    assert ch.cluster_costs() == duck.cluster_costs() != []
    again = ch.reprice(new, now_ns=now + 1)
    assert (again.changed, again.updated, again.tools_changed, again.self_hosted_changed) == (0, 0, 0, 0)
    assert again.after_usd == again.before_usd
    assert _report(again) == _report(duck.reprice(new, now_ns=now + 1))


def test_merged_parts_and_a_resent_batch_keep_the_new_prices(
    repriced: tuple[DuckDBStore, ClickHouseStore, list[Any]],
) -> None:
    duck, ch, (*_, collected) = repriced
    before = {v: _rows(ch, v) for v in PRICED_VIEWS}
    for batch in collected.batches[:3]:  # a collector that re-sends what it sent at the old prices
        ch.write(batch)
    for table in ("llm_call_rows", "tool_call_rows", "cluster_cost_rows"):
        ch.admin_query(f"OPTIMIZE TABLE {table} FINAL")
    for v in PRICED_VIEWS:
        assert _rows(ch, v) == before[v] == _rows(duck, v), v
    repriced_rows = ch.admin_query("SELECT count() FROM llm_call_rows").rows[0][0]
    assert repriced_rows == duck.query("SELECT count(*) FROM llm_calls").rows[0][0]  # the versions collapsed


def test_the_server_allocation_reads_what_is_due(repriced: tuple[DuckDBStore, ClickHouseStore, list[Any]]) -> None:
    duck, ch, (_, _, new, now, _) = repriced
    for since in (None, ns(T0)):
        assert ch.cluster_allocation_due(new, closed_ns=now, received_since_ns=since) == duck.cluster_allocation_due(
            new, closed_ns=now, received_since_ns=since
        )
    a = ch.allocate_clusters(new, since_ns=ns(T0), until_ns=ns(T0 + timedelta(days=1)), now_ns=now + 2)
    b = duck.allocate_clusters(new, since_ns=ns(T0), until_ns=ns(T0 + timedelta(days=1)), now_ns=now + 2)
    assert _report(a) == _report(b) and a.windows > 0
    assert ch.cluster_costs() == duck.cluster_costs()
    assert _rows(ch, "tasks") == _rows(duck, "tasks")
