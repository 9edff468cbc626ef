"""The Cache page in a real browser: its figures are the analytics library's (asked over the same server's
``GET /api/analytics/cache``) for the filters, grouping and bucket in the URL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import number, open_page, settle, shot
from tests.browser.test_browser_cost import NONE_LABEL, api, figure, pick, rows, select, table_column
from tests.conftest import Server


def label(v: Any) -> str:
    return NONE_LABEL if v is None else str(v)


# the demo run is minutes long: with all time selected the page picks per-minute buckets
def check_cache_figures(page: Any, server: Server, by: str, bucket: str = "minute", **filters: str) -> dict[str, Any]:
    """The headline, the groups, the time series and the TTFT chart the page shows are the library's."""
    want = api(server, "cache", by=by, bucket=bucket, **filters)
    s = want["summary"]
    assert number(page.locator("#cache-hit-rate").inner_text()) == pytest.approx(s["hit_rate"] * 100, abs=0.05)
    saved = page.locator("#cache-saved").inner_text()
    for key, text in (("saved_usd", saved), ("missed_usd", page.locator("#cache-missed").inner_text())):
        if s[key] is None:  # nothing could be priced: said, not shown as $0
            assert [line for line in text.splitlines() if line.strip()][1] == "unpriced", text
        else:
            assert number(text) == pytest.approx(float(s[key]), abs=1e-6)
    if s["unpriced_calls"]:  # coverage beside the money
        assert f"{s['unpriced_calls']:,} of {s['calls']:,} calls have no per-token price" in saved
    groups = rows(want, "groups")
    assert table_column(page, "cache-groups-table") == [label(g[by]) for g in groups]
    hit = figure(page, "cache-hit-by-group")[0]
    assert hit["y"] == [label(g[by]) for g in groups]
    assert hit["x"] == pytest.approx([g["hit_rate"] for g in groups])
    saved_bars = next(t for t in figure(page, "cache-money-by-group") if t["name"] == "saved")
    assert saved_bars["x"] == [None if g["saved_usd"] is None else pytest.approx(float(g["saved_usd"])) for g in groups]
    # over time: one line per group, each point the library's hit rate of that group and bucket
    lines = {t["name"]: dict(zip(t["x"], t["y"], strict=True)) for t in figure(page, "cache-time-hit")}
    for r in rows(want, "over_time"):
        assert lines[label(r[by])][r["bucket"]] == pytest.approx(r["hit_rate"])
    # TTFT by hit-rate band
    by_band = rows(want, "ttft_by_hit_rate")
    if not any(r["ttft_calls"] for r in by_band):  # no streamed call: said so, no empty chart
        assert page.locator("#cache-no-ttft").count() == 1
        return want
    ttft = figure(page, "cache-ttft")[0]
    assert ttft["x"] == [r["hit_rate_band"] for r in by_band]
    assert ttft["y"] == [None if r["median_ttft_s"] is None else pytest.approx(r["median_ttft_s"]) for r in by_band]
    return want


def test_cache_page_shows_the_librarys_figures(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cache")
    want = check_cache_figures(page, demo_server, "kind")
    # the prefix breakers: which kinds break their prefix, where, how often
    breakers = rows(want, "prefix_breakers")
    assert breakers, "the demo breaks some prompt prefixes"
    assert table_column(page, "cache-breakers-table") == [b["kind"] for b in breakers]
    assert table_column(page, "cache-breakers-table", 1) == [
        f"{b['break_kind']} block {b['break_block']}" for b in breakers
    ]
    assert [int(number(t)) for t in table_column(page, "cache-breakers-table", 2)] == [b["breaks"] for b in breakers]
    stability = rows(want, "prefix_stability")
    bars = figure(page, "cache-breaks")[0]
    assert bars["y"] == [s["kind"] for s in stability]
    assert bars["x"] == pytest.approx([s["break_rate"] for s in stability])
    assert number(page.locator("#cache-break-rate").inner_text()) == pytest.approx(
        want["summary"]["prefix_break_rate"] * 100, abs=0.05
    )
    # the rates each model was priced at, and what could not be priced
    assert table_column(page, "cache-models-table", 1) == [m["model"] for m in rows(want, "by_model")]
    shot(page, "cache")


def test_a_filter_changes_the_figures_to_the_librarys(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cache")
    before = page.locator("#cache-hit-rate").inner_text()
    groups = rows(api(demo_server, "cache", by="model"), "groups")
    model = max((g for g in groups if g["saved_usd"] is not None), key=lambda g: g["cache_read_tokens"])["model"]
    select(page, "model", model)
    assert f"model={model}" in page.url
    assert page.locator("#cache-hit-rate").inner_text() != before
    check_cache_figures(page, demo_server, "kind", model=model)


def test_an_engine_version_filter(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cache")
    select(page, "engine_version", "0.7.0")
    assert "engine_version=0.7.0" in page.url
    want = check_cache_figures(page, demo_server, "kind", engine_version="0.7.0")
    # self-hosted calls are priced per GPU-hour: their cache tokens count, their dollars are unpriced, said so
    assert want["summary"]["unpriced_calls"] == want["summary"]["calls"]
    assert "unpriced" in page.locator("#cache-saved").inner_text()


def test_by_and_bucket_are_kept_in_the_url(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cache")
    select(page, "by", "model")
    assert "by=model" in page.url
    check_cache_figures(page, demo_server, "model")
    pick(page, "bucket", "hour")
    assert "bucket=hour" in page.url and "by=model" in page.url
    check_cache_figures(page, demo_server, "model", bucket="hour")
    page.reload()
    settle(page)
    check_cache_figures(page, demo_server, "model", bucket="hour")


def test_the_cache_page_on_an_empty_store(page: Any, empty_server: Server) -> None:
    open_page(page, empty_server, "/cache")
    assert page.locator(".tc-empty").count() == 1
    assert page.locator(".js-plotly-plot").count() == 0
    assert page.locator(".tc-error").count() == 0
    shot(page, "cache-empty")
