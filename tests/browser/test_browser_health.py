"""The Data health page in a real browser: the stored spans as /api/sql counts them, the server's counters as
/metrics shows them, the prices as /api/pricing/status names them, and the models without a price."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.browser.conftest import number, open_page, shot
from tests.conftest import Server
from tests.otlp_samples import sample_request

UNKNOWN_MODEL = "no-such-model-9"


def api_sql(server: Server, sql: str) -> list[list[Any]]:
    r = httpx.post(f"{server.url}/api/sql", json={"sql": sql}, timeout=30)
    r.raise_for_status()
    rows: list[list[Any]] = r.json()["rows"]
    return rows


def metrics(server: Server) -> dict[str, float]:
    """``/metrics`` summed per metric name (over its labels)."""
    out: dict[str, float] = {}
    for line in httpx.get(f"{server.url}/metrics", timeout=10).text.splitlines():
        m = re.match(r"^(taskcost_[a-z_]+?)(?:\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def card(page: Any, id: str) -> float:
    """The figure of a headline card (the first number after its label)."""
    return number(page.locator(f"#{id} > *").nth(1).inner_text())


def assert_server_counters_match_metrics(page: Any, server: Server) -> dict[str, float]:
    m = metrics(server)
    assert card(page, "health-received") == m["taskcost_spans_received_total"]
    assert card(page, "health-accepted") == m["taskcost_spans_accepted_total"]
    assert card(page, "health-deduplicated") == m["taskcost_spans_deduplicated_total"]
    assert card(page, "health-rejected") == m.get("taskcost_spans_rejected_total", 0.0)
    assert card(page, "health-refused") == m.get("taskcost_requests_refused_total", 0.0)
    assert card(page, "health-queue") == m["taskcost_write_queue_spans"]
    return m


def test_health_on_the_demo_shows_the_stored_spans_the_counters_and_the_prices(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/health")
    [[spans]] = api_sql(demo_server, "SELECT count(*) FROM spans")
    assert spans > 0
    assert card(page, "health-spans") == spans
    assert_server_counters_match_metrics(page, demo_server)  # a copy of the demo's file: nothing received this run
    status = httpx.get(f"{demo_server.url}/api/pricing/status", timeout=10).json()
    assert status["prices"] in page.locator("#health-price-data").inner_text()
    assert (status["book"] or "none") in page.locator("#health-price-book").inner_text()
    # which prices the stored calls carry, as the calls say
    used = api_sql(
        demo_server, "SELECT price_source, count(*) FROM llm_calls GROUP BY ALL ORDER BY 2 DESC, 1 NULLS LAST"
    )
    shown = [
        [c.inner_text() for c in r.locator("td").all()] for r in page.locator("#health-price-sources tbody tr").all()
    ]
    assert [[r[0], r[2]] for r in shown] == [[src or "(unpriced)", f"{n:,}"] for src, n in used]
    # the demo prices every call: the page says so, with the count of calls
    [[calls, unpriced]] = api_sql(
        demo_server, "SELECT count(*), count(*) FILTER (WHERE cost_usd IS NULL) FROM llm_calls"
    )
    assert unpriced == 0
    assert f"Every stored LLM call is priced ({calls:,} call attempts)" in page.locator("#health-unpriced").inner_text()
    assert "every project" in page.locator("#health-scope").inner_text()
    # does every dollar add up: the page's reconciliation is the API's, over the same 30 days
    since = (datetime.now(UTC) - timedelta(days=30)).replace(minute=0, second=0, microsecond=0)
    r = httpx.get(f"{demo_server.url}/api/analytics/reconcile", params={"since": since.isoformat()}, timeout=30)
    summary = r.json()["summary"]
    assert summary["headline"] in page.locator("#health-reconcile").inner_text()
    assert summary["closes"] is True and summary["bills_balance"] is True
    shot(page, "health")


def _post(server: Server, body: bytes) -> None:
    r = httpx.post(
        f"{server.url}/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}, timeout=30
    )
    assert r.status_code == 200, r.text


def test_health_counts_what_arrived_and_lists_the_unpriced_model(page: Any, server: Server) -> None:
    req = sample_request()
    valid = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                for attr in span.attributes:
                    if attr.key in ("gen_ai.request.model", "gen_ai.response.model"):
                        attr.value.string_value = UNKNOWN_MODEL
    bad = req.resource_spans[0].scope_spans[0].spans.add()  # all-zero ids: rejected alone (partial success)
    bad.CopyFrom(req.resource_spans[0].scope_spans[0].spans[0])
    bad.trace_id = b"\0" * 16
    body = req.SerializeToString()
    _post(server, body)
    _post(server, body)  # a client retry: the same spans again, stored once
    deadline = time.monotonic() + 30
    while metrics(server)["taskcost_spans_deduplicated_total"] < valid:
        assert time.monotonic() < deadline, metrics(server)
        time.sleep(0.2)

    open_page(page, server, "/health")
    m = assert_server_counters_match_metrics(page, server)
    assert m["taskcost_spans_accepted_total"] == valid and m["taskcost_spans_deduplicated_total"] == valid
    assert m["taskcost_spans_rejected_total"] == 2
    [[spans]] = api_sql(server, "SELECT count(*) FROM spans")
    assert card(page, "health-spans") == spans == valid
    # the spans just arrived: the last five minutes' rate is theirs
    assert card(page, "health-rate") == round(valid / 300, 2)
    assert "s ago" in page.locator("#health-last").inner_text()

    unpriced = page.locator("#health-unpriced").inner_text()
    [[calls]] = api_sql(server, f"SELECT count(*) FROM llm_calls WHERE model = '{UNKNOWN_MODEL}' AND cost_usd IS NULL")
    assert calls == 2
    row = page.locator("#health-unpriced tbody tr").filter(has_text=UNKNOWN_MODEL)
    cells = [c.inner_text() for c in row.locator("td").all()]
    assert cells[:2] == ["openai", UNKNOWN_MODEL] and cells[3] == "2", unpriced


def test_health_on_an_empty_store_says_there_is_nothing_yet(page: Any, empty_server: Server) -> None:
    open_page(page, empty_server, "/health")
    assert "No spans stored yet" in page.locator(".tc-empty").inner_text()
    assert_server_counters_match_metrics(page, empty_server)
    assert page.locator("#health-unpriced").inner_text() == "No LLM calls stored yet."
