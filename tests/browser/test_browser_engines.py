"""The Engines page in a real browser, on the demo's data: its ranking, sentences and decode-speed chart are the
``engines`` answer the same server gives over ``GET /api/analytics/engines`` (the CLI's), for the options in the URL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import number, open_page, shot
from tests.browser.test_browser_cost import api, figure, rows, table_column
from tests.conftest import Server


def _check(page: Any, server: Server, **params: str) -> dict[str, Any]:
    want = api(server, "engines", **params)
    s = want["summary"]
    assert page.locator("#engines-spread").inner_text() == s["spread"]
    assert page.locator("#engines-differences").inner_text() == (s["differences"] or "—")
    assert page.locator("#engines-speculation").inner_text() == (s["speculation"] or "—")
    ranking = rows(want, "ranking")
    assert table_column(page, "engines-ranking") == [r["config"] for r in ranking]
    assert table_column(page, "engines-ranking", 1) == [r["configuration"] for r in ranking]
    assert [int(number(x)) for x in table_column(page, "engines-ranking", 2)] == [r["calls"] for r in ranking]
    speeds = [r["decode_tps"] for r in ranking]
    assert [number(x) for x in table_column(page, "engines-ranking", 3)] == pytest.approx(speeds)
    bars = figure(page, "engines-decode-chart")[0]
    assert bars["x"] == pytest.approx([x for x in speeds if x is not None])
    assert bars["y"] == [f"{r['config']} · {r['configuration']}" for r in ranking if r["decode_tps"] is not None]
    return want


def test_engines_page_is_the_answer(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/engines")
    want = _check(page, demo_server)
    s = want["summary"]
    # the demo serves one open model on seven deployments that differ in the five variables
    assert s["model"] == "llama-3.1-70b-instruct" and s["configurations"] >= 5
    assert s["ranked_configurations"] >= 2 and s["spread_ratio"] > 1.5
    assert "Association, not causation" in s["differences"]
    shot(page, "engines", readme=True)
    # an option in the address (as many calls as the busiest configuration has): only the busiest stay ranked, and
    # the page still shows the API's figures for it
    most = str(max(r["calls"] for r in rows(want, "ranking")))
    open_page(page, demo_server, f"/engines?min_calls={most}")
    fewer = _check(page, demo_server, min_calls=most)
    assert 1 <= fewer["summary"]["ranked_configurations"] < s["ranked_configurations"]
    assert "more calls" in " ".join(table_column(page, "engines-ranking", 9))
