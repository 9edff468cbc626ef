"""`taskcost serve --store chdb:///dir`, end to end: the real server as a subprocess on an in-process chDB, fed by the
real OpenTelemetry OTLP/HTTP exporter, read through /api/sql, /api/analytics and every dashboard page in headless
Chromium, restarted on the same data; and the ClickHouse store's local spool (taskcost/store/clickhouse/
_spool_writer.py) at the store level, with a ClickHouse that cannot be reached (a real closed port): acknowledged
into the spool, 503-style StoreBusyError past its bound, every acknowledged span inserted once after a restart.

chDB allows one process per data directory: while the server runs, this process never opens its directory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from taskcost.normalize import normalize_request
from taskcost.store import PreparedBatch, StoreBusyError, prepare_batch
from taskcost.store.clickhouse._store import ClickHouseStore
from tests.builders.analytics import pricer
from tests.conftest import Server, free_port, start_server, stop_server
from tests.otlp_samples import sample_request
from tests.test_reliability import make_spans

pytestmark = pytest.mark.slow  # real servers, a browser

PROTOBUF = "application/x-protobuf"


def _serve(tmp: Path, port: int) -> Server:
    """The real `taskcost serve --store chdb:///<tmp>/ch --db <tmp>/x.duckdb`; returns once /healthz answers."""
    args = ("--store", f"chdb://{tmp / 'ch'}")
    return start_server(tmp / "x.duckdb", port, tmp / "server.log", {"TASKCOST_DECODE_WORKERS": "1"}, args)


def _sql(server: Server, sql: str) -> list[list[Any]]:
    resp = httpx.post(f"{server.url}/api/sql", json={"sql": sql}, timeout=30)
    assert resp.status_code == 200, resp.text
    rows: list[list[Any]] = resp.json()["rows"]
    return rows


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, int]]:
    """A chDB-backed server that took 200 spans (20 tasks) from the real exporter: (server, spans sent)."""
    tmp = tmp_path_factory.mktemp("ch-serve")
    server = _serve(tmp, free_port())
    try:
        spans = make_spans(200)
        exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", timeout=30)
        for i in range(0, len(spans), 50):
            assert exporter.export(spans[i : i + 50]) is SpanExportResult.SUCCESS, server.log.read_text()
        exporter.shutdown()
        yield server, len(spans)
    finally:
        stop_server(server)


def test_spans_sent_are_queryable_and_stored_once(served: tuple[Server, int]) -> None:
    server, sent = served
    # acknowledged (the spool), then read: the read waits for what was acknowledged before it
    assert _sql(server, "SELECT count(*) FROM llm_calls") == [[sent]]
    assert _sql(server, "SELECT count(*) FROM tasks") == [[sent // 10]]
    (total,) = _sql(server, "SELECT sum(cost_usd) FROM llm_calls")[0]
    assert Decimal(str(total)) > 0
    cost = httpx.get(f"{server.url}/api/analytics/cost", timeout=30)
    assert cost.status_code == 200, cost.text
    assert cost.json()["tables"]
    # the same spans sent again are stored once
    exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", timeout=30)
    assert exporter.export(make_spans(10)) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert _sql(server, "SELECT count(*) FROM llm_calls") == [[sent + 10]]
    # not available on ClickHouse yet: said clearly, and the server keeps serving
    resp = httpx.post(f"{server.url}/api/admin/reprice", json={}, timeout=30)
    assert resp.status_code in (401, 403, 503), resp.text


def _batch() -> PreparedBatch:
    return prepare_batch(normalize_request(sample_request()), 5, pricer=pricer())


def test_clickhouse_unreachable_spools_then_busy_then_replays_each_span_once(tmp_path: Path) -> None:
    """Inserts through a real closed port fail: intake is acknowledged into the spool until its bound, then
    StoreBusyError; reopened with ClickHouse reachable, every acknowledged span is inserted, once."""
    data, spool = f"chdb://{tmp_path / 'ch'}", tmp_path / "x.duckdb.clickhouse-spool"
    dead = f"clickhouse://127.0.0.1:{free_port()}/taskcost"  # nothing listens there
    acked: list[PreparedBatch] = []
    store = ClickHouseStore.open(data, spool_dir=spool, spool_max_bytes=40_000, insert_dsn=dead)
    try:
        busy = None
        for _ in range(50):
            batch = _batch()
            try:
                future = store.submit(batch)
            except StoreBusyError as exc:
                busy = exc
                break
            future.result(10)  # acknowledged: fsynced in the spool
            acked.append(batch)
            time.sleep(0.05)
        assert busy is not None and "spool" in str(busy), "the spool's bound was never reached"
        assert len(acked) >= 2
        assert store.queued_spans == sum(b.span_count for b in acked)
        assert store.admin_arrow("SELECT count() AS n FROM span_rows").column("n").to_pylist() == [0]
    finally:
        store.close()
    assert list(spool.glob("*.spool")), "acknowledged records must stay in the spool"
    # a restart against a working ClickHouse (the same chDB directory): the spool is replayed at open
    with ClickHouseStore.open(data, spool_dir=spool) as again:
        expected = sum(b.span_count for b in acked)
        got = again.admin_arrow("SELECT count() AS n, uniqExact(trace_id, span_id) AS u FROM span_rows")
        assert got.to_pylist() == [{"n": expected, "u": expected}]
        assert again.committed_spans == expected
        assert again.queued_spans == 0
    # and once more: nothing is replayed twice
    with ClickHouseStore.open(data, spool_dir=spool) as third:
        assert third.admin_arrow("SELECT count() AS n FROM span_rows").column("n").to_pylist() == [expected]
        assert third.committed_spans == 0
    assert not list(spool.glob("*.spool"))


def test_the_intake_answers_503_with_retry_after_once_the_spool_is_full(tmp_path: Path) -> None:
    """The same through the real app (create_app, OTLP/HTTP): 200s while the spool takes the batches, then 503 +
    Retry-After (nothing kept of that batch); after a restart every acknowledged span is stored once."""
    from fastapi.testclient import TestClient

    from taskcost.app import create_app
    from taskcost.settings import Settings

    data, spool = f"chdb://{tmp_path / 'ch'}", tmp_path / "x.duckdb.clickhouse-spool"
    dead = f"clickhouse://127.0.0.1:{free_port()}/taskcost"
    settings = Settings(
        db=tmp_path / "x.duckdb", store=data, decode_workers=0, allocate_clusters=False, backpressure_wait_s=0.1
    )
    store = ClickHouseStore.open(data, spool_dir=spool, spool_max_bytes=40_000, insert_dsn=dead)
    acked = refused = 0
    try:
        with TestClient(create_app(settings, store, dashboards=False)) as client:
            for _ in range(30):
                resp = client.post(
                    "/v1/traces", content=sample_request().SerializeToString(), headers={"Content-Type": PROTOBUF}
                )
                if resp.status_code == 503:
                    refused += 1
                    assert resp.headers["Retry-After"], resp.headers
                    assert b"spool" in resp.content, resp.content  # (a google.rpc.Status, as the request was protobuf)
                    break
                assert resp.status_code == 200, resp.text
                acked += 1
    finally:
        store.close()
    assert refused == 1 and acked >= 2
    with ClickHouseStore.open(data, spool_dir=spool) as again:
        got = again.admin_arrow("SELECT count() AS n, uniqExact(trace_id, span_id) AS u FROM span_rows").to_pylist()
        assert got == [{"n": acked * 4, "u": acked * 4}]  # the sample request has 4 spans


def test_a_second_collector_on_the_same_spool_is_refused(tmp_path: Path) -> None:
    from taskcost.store import StoreUnavailableError

    spool = tmp_path / "sp"
    with ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}", spool_dir=spool) as store:
        with pytest.raises(StoreUnavailableError, match="spool"):
            ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}", spool_dir=spool)
        assert store.submit(_batch()).result(10).spans == 4
        assert store.query("SELECT count(*) FROM spans").rows == [(4,)]


def test_every_dashboard_page_opens_on_the_clickhouse_store(served: tuple[Server, int], tmp_path: Path) -> None:
    """Every page the navigation lists, in headless Chromium, shows no error box, traceback or failed callback."""
    from playwright.sync_api import sync_playwright

    from bench.dashboards import CHROME_ARGS, CHROMIUM
    from tests.browser.conftest import Watch, settle

    server, _ = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROME_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
            watch = Watch()
            watch.attach(page)
            page.watch = watch  # what tests/browser/conftest.py's settle() reads
            page.goto(f"{server.url}/dash/")
            settle(page)
            page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
            links = {a.get_attribute("id"): a.get_attribute("href") for a in page.locator("a[id^='nav-']").all()}
            assert len(links) >= 5 and all(h and h.startswith("/dash") for h in links.values()), links
            problems = []
            for link, href in links.items():  # as a reader moves between the pages: the navigation's links
                page.locator(f"a#{link}").click()
                page.wait_for_function("(href) => window.location.pathname === href", arg=href)
                settle(page)
                path = str(href).removeprefix("/dash")
                text = page.inner_text("body")
                for bad in ("Cannot show this", "Traceback"):
                    if bad in text:
                        problems.append(f"{path}: {text[text.index(bad) : text.index(bad) + 300]!r}")
            assert not problems, problems
            assert not watch.errors, (watch.errors, server.log.read_text()[-6000:])
        finally:
            browser.close()
    assert (tmp_path / "overview.png").stat().st_size > 10_000


def test_a_restart_on_the_same_chdb_directory_keeps_the_data(served: tuple[Server, int]) -> None:
    """(Last of the served tests: it stops the module's server.)"""
    server, _ = served
    before = _sql(server, "SELECT count(*) AS calls, (SELECT count(*) FROM tasks) AS tasks FROM llm_calls")
    assert before[0][0] > 0
    stop_server(server)  # SIGTERM: a graceful stop (uvicorn raises the signal again once it has stopped)
    assert server.proc.returncode in (0, -15), server.log.read_text()
    assert "taskcost stopped; " in server.log.read_text()
    again = _serve(server.db.parent, int(server.url.rsplit(":", 1)[1]))
    try:
        assert _sql(again, "SELECT count(*) AS calls, (SELECT count(*) FROM tasks) AS tasks FROM llm_calls") == before
    finally:
        stop_server(again)
    served_info = server.db.with_name(server.db.name + ".serve.json")
    assert not served_info.exists()  # removed at a clean stop (it was written beside --db's path)
