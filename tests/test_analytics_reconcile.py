"""Reconcile (taskcost/analytics/_reconcile.py): API + attributed GPU + idle GPU + tools = what was paid, worked out
by hand. One cluster, ``gpu-east``: 2 GPUs x $3/GPU-hour = $6 a one-hour window; the window is 09:00-11:00 (two
windows). Rates are the analytics builder's (cheap-1: $1/M input, $2/M output; pricey-1: $10/M, $20/M).

- p1: a self-hosted call 09:00-09:10 (600 s), a cheap-1 call (1,000 in + 100 out = $0.0012), a self-hosted call on a
  cluster the clusters file does not know (unpriced), a tool call of $0.50 and one that reports no cost.
- p2: self-hosted calls 09:20-09:40 (1,200 s) and 10:30-10:45 (900 s), a pricey-1 call ($0.012), and a call of a
  model the book does not price (unpriced).

Window 09:00: busy 1,800 s: p1 $6 x 600/3600 = $1, p2 $2; attributed $3, idle $3. Window 10:00: p2 $6 x 900/3600 =
$1.50, idle $4.50.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from taskcost.analytics import QUESTIONS, Filters, NoOptions
from taskcost.app import create_app
from taskcost.pricing import PricingConfig
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.builders.analytics import BOOK, T0, Fleet, ns
from tests.conftest import run_cli

H = 3600 * 1_000_000_000
WINDOW = {"since": T0, "until": T0 + timedelta(hours=2)}
CLUSTERS = """\
version = "reconcile-tests"

[[clusters]]
id = "gpu-east"
gpu_type = "H100-SXM"
gpu_count = 2
usd_per_gpu_hour = "3"
effective_from = 2026-11-02T09:00:00Z
"""
SH = {"deployment": "self_hosted", "cluster_id": "gpu-east", "provider": "vllm"}


def _fleet(open_call: bool = False) -> Fleet:
    f = Fleet()
    p1 = f.task("p1-a", project="p1")
    p1.call("qwen3-32b", duration_s=600, **SH).call("cheap-1", deployment="api").tool(Decimal("0.50")).tool(
        None, name="browse"
    )
    f.task("p1-b", project="p1", minute=5).call("qwen3-32b", duration_s=60, **{**SH, "cluster_id": "elsewhere"})
    p2 = f.task("p2-a", project="p2", minute=20).call("qwen3-32b", duration_s=1200, **SH)
    p2.call("pricey-1").call("mystery-9", provider="openai")
    f.task("p2-b", project="p2", minute=90).call("qwen3-32b", duration_s=900, **SH)
    if open_call:  # 10:50-11:20: holds 600 s of the 10:00 window, but its last window is still open at 11:00
        f.task("p1-late", project="p1", minute=110).call("qwen3-32b", duration_s=1800, **SH)
    return f


def _store(path: Path, *, open_call: bool = False, now_h: int = 3) -> DuckDBStore:
    store = DuckDBStore.open(path)
    _fleet(open_call).write(store)
    clusters = path.parent / "clusters.toml"
    clusters.write_text(CLUSTERS)
    pricer = PricingConfig(book_table=BOOK, clusters_file=clusters).build()
    store.reprice(pricer, now_ns=ns(T0) + now_h * H)
    return store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DuckDBStore]:
    st = _store(tmp_path / "r.duckdb")
    yield st
    st.close()


def ask(store: DuckDBStore, **filters: Any) -> dict[str, Any]:
    f = Filters.model_validate({**WINDOW, **filters})
    return QUESTIONS["reconcile"].run(store, f, NoOptions()).to_json()


def lines(doc: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    t = doc["tables"]["lines"]
    return {(r[0], r[1]): dict(zip(t["columns"], r, strict=True)) for r in t["rows"]}


def test_every_dollar_adds_up_unscoped(store: DuckDBStore) -> None:
    doc = ask(store)
    s = doc["summary"]
    assert s["scope"] == "whole" and s["windows"] == 2
    assert Decimal(s["api_usd"]) == Decimal("0.0012") + Decimal("0.012")
    assert Decimal(s["gpu_attributed_usd"]) == Decimal(3) + Decimal("1.5")
    assert Decimal(s["gpu_idle_usd"]) == Decimal(3) + Decimal("4.5")
    assert Decimal(s["tools_usd"]) == Decimal("0.5")
    assert Decimal(s["bills_usd"]) == Decimal(12)  # two $6 windows: attributed + idle
    assert Decimal(s["total_usd"]) == Decimal("0.0132") + Decimal("4.5") + Decimal("7.5") + Decimal("0.5")
    assert s["closes"] is True and Decimal(s["difference_usd"]) == 0 and s["bills_balance"] is True
    assert (s["unpriced_calls"], s["unpriced_tool_calls"]) == (2, 1)  # mystery-9 and the unknown cluster; browse
    got = lines(doc)
    api = got["api", "openai"]
    assert (api["calls"], api["priced_calls"], api["unpriced_calls"]) == (3, 2, 1)
    east = got["gpu_attributed", "gpu-east"]
    assert (east["calls"], east["priced_calls"], east["unpriced_calls"], east["windows"]) == (3, 3, 0, 2)
    assert Decimal(east["usd"]) == Decimal(east["calls_usd"]) == Decimal("4.5")
    assert Decimal(east["difference_usd"]) == 0 and Decimal(east["bill_usd"]) == 12
    assert Decimal(got["gpu_idle", "gpu-east"]["usd"]) == Decimal("7.5")
    # the unknown cluster: counted, never $0
    other = got["gpu_attributed", "elsewhere"]
    assert (other["calls"], other["priced_calls"], other["unpriced_calls"], other["usd"]) == (1, 0, 1, None)
    assert ("gpu_idle", "elsewhere") not in got
    assert Decimal(got["tools", "search"]["usd"]) == Decimal("0.5")
    browse = got["tools", "browse"]
    assert (browse["calls"], browse["unpriced_calls"], browse["usd"]) == (1, 1, None)
    assert s["headline"].startswith("$12.51 paid: API $0.013200 + GPU attributed $4.50 + GPU idle $7.50 + tools")
    assert (
        "2 unpriced call(s) and 1 unpriced tool call(s) not in it" in s["headline"]
        and "match the clusters' allocation" in s["headline"]
    )
    assert any("start is in [since, until)" in n for n in doc["notes"])
    assert any("2 LLM call(s) are unpriced" in n for n in doc["notes"])


def test_a_project_sees_its_share_and_never_another_projects_figures(store: DuckDBStore) -> None:
    p1, p2 = ask(store, project="p1"), ask(store, project="p2")
    s1, s2 = p1["summary"], p2["summary"]
    assert s1["scope"] == s2["scope"] == "share" and s1["difference_usd"] is None
    # p1: $1 of the 09:00 window's $3 attributed, so $3 idle x 1/3 = $1 of its idle; nothing of 10:00 (no call)
    assert (Decimal(s1["gpu_attributed_usd"]), Decimal(s1["gpu_idle_usd"])) == (Decimal(1), Decimal(1))
    assert Decimal(s1["bills_usd"]) == Decimal(2) and s1["windows"] == 1
    assert Decimal(s1["api_usd"]) == Decimal("0.0012") and Decimal(s1["tools_usd"]) == Decimal("0.5")
    assert Decimal(s1["total_usd"]) == Decimal("2.5012")
    assert (s1["unpriced_calls"], s1["unpriced_tool_calls"]) == (1, 1) and s1["closes"] is True
    # p2: $2 + $1.50 attributed; idle $3 x 2/3 = $2 and $4.50 x 1.5/1.5 = $4.50
    assert (Decimal(s2["gpu_attributed_usd"]), Decimal(s2["gpu_idle_usd"])) == (Decimal("3.5"), Decimal("6.5"))
    assert Decimal(s2["api_usd"]) == Decimal("0.012") and Decimal(s2["tools_usd"]) == 0
    assert s2["unpriced_calls"] == 1
    # the shares add up to the whole bills
    whole = ask(store)["summary"]
    assert Decimal(s1["total_usd"]) + Decimal(s2["total_usd"]) == Decimal(whole["total_usd"])
    # nothing of p2 (nor the whole bill) in p1's answer
    east = lines(p1)["gpu_attributed", "gpu-east"]
    assert (east["calls"], Decimal(east["bill_usd"]), east["difference_usd"]) == (1, Decimal(2), None)
    text = json.dumps(p1)
    for leak in ("12.000000000000", "4.500000000000", "3.500000000000", "mystery", "pricey"):
        assert leak not in text
    assert any("project p1's share" in n and "pro rata" in n for n in p1["notes"])


def test_a_share_of_a_bill_still_held_by_an_unpriced_call_does_not_close(tmp_path: Path) -> None:
    # at 11:00 the 10:00 window is allocated with the late call in it (600 s: $1), but that call stays unpriced
    with _store(tmp_path / "r.duckdb", open_call=True, now_h=2) as store:
        s = ask(store)["summary"]
        assert s["closes"] is False and Decimal(s["difference_usd"]) == Decimal(-1)
        # 10:00: busy 900 + 600 s: attributed $1.50 + $1 = $2.50, idle $3.50; the bills still balance
        assert Decimal(s["gpu_attributed_usd"]) == Decimal("5.5") and Decimal(s["gpu_idle_usd"]) == Decimal("6.5")
        assert s["bills_balance"] is True and s["unpriced_calls"] == 3
        assert "DOES NOT CLOSE" in s["headline"] and "-$1.00" in s["headline"]


def test_deployment_and_cluster_filters(store: DuckDBStore) -> None:
    api = ask(store, deployment="api")["summary"]
    assert api["windows"] == 0 and Decimal(api["gpu_attributed_usd"]) == 0 and Decimal(api["bills_usd"]) == 0
    assert Decimal(api["api_usd"]) == Decimal("0.0012")  # the calls that say `api` (pricey-1's says nothing)
    sh = ask(store, deployment="self_hosted", cluster="gpu-east")
    assert sh["summary"]["scope"] == "whole" and sh["summary"]["closes"] is True
    # tools go with their task: p1-a's calls mix deployments (`mixed`), so a self-hosted read leaves its tools out
    assert {k for k, _ in lines(sh)} == {"gpu_attributed", "gpu_idle"}
    # a window is counted by its start: 09:30-10:30 counts the 10:00 window only
    half = ask(store, since=T0 + timedelta(minutes=30), until=T0 + timedelta(minutes=90))["summary"]
    assert half["windows"] == 1 and Decimal(half["bills_usd"]) == 6 and half["closes"] is True


def test_the_cli_and_http_give_the_same_answer(store: DuckDBStore, tmp_path: Path) -> None:
    library = ask(store)
    settings = Settings(db=tmp_path / "r.duckdb", decode_workers=0)
    with TestClient(create_app(settings, store, dashboards=False), raise_server_exceptions=False) as client:
        r = client.get(
            "/api/analytics/reconcile", params={"since": T0.isoformat(), "until": WINDOW["until"].isoformat()}
        )
        assert r.status_code == 200, r.text
        assert r.json()["summary"] == json.loads(json.dumps(library))["summary"]
    store.close()
    args = ("reconcile", "--db", str(tmp_path / "r.duckdb"), "--since", T0.isoformat())
    doc = json.loads(run_cli(*args, "--until", WINDOW["until"].isoformat(), "--format", "json").stdout)
    assert doc["summary"] == library["summary"]
    shown = run_cli(*args, "--until", WINDOW["until"].isoformat()).stdout
    assert "$12.51 paid" in shown and "gpu_idle" in shown and "gpu-east" in shown


def test_a_duplicate_span_takes_no_share_of_a_bill(tmp_path: Path) -> None:
    # two spans of one response (the same response_id): llm_calls counts it once, and the allocation gives the other
    # span no share (it gave it half: $0.50 of $1.00 held by no call, which reconcile caught), so the bill closes
    with DuckDBStore.open(tmp_path / "d.duckdb") as store:
        f = Fleet()
        f.task("a", project="p1").call("qwen3-32b", duration_s=600, at_s=0, response_id="r1", **SH).call(
            "qwen3-32b", duration_s=600, at_s=0, response_id="r1", **SH
        )
        f.write(store)
        clusters = tmp_path / "clusters.toml"
        clusters.write_text(CLUSTERS)
        store.reprice(PricingConfig(book_table=BOOK, clusters_file=clusters).build(), now_ns=ns(T0) + 3 * H)
        held = store.query("SELECT coalesce(sum(cost_usd), 0) FROM llm_calls").rows[0][0]
        attributed = sum(w.attributed_usd for w in store.cluster_costs(since_ns=ns(T0), until_ns=ns(T0) + 2 * H))
        s = ask(store)["summary"]
        assert held == attributed > 0 and Decimal(s["difference_usd"]) == 0 and s["closes"] is True
