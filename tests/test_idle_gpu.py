"""Idle GPU cost (taskcost/analytics/_idle.py) in ``cost`` and ``per-token``, worked out by hand.

One cluster, ``gpu-east``: 2 GPUs x $3/GPU-hour = $6 a one-hour window; a call's share is $6 x its seconds / 3600.
Two windows, 09:00 and 10:00 (the reconcile tests' clusters file). Rates are the analytics builder's (cheap-1: $1/M
input, $2/M output, so 1,000 in + 100 out = $0.0012). Every call has 1,000 input and 100 output tokens but one.

- p1, qwen3-32b (self-hosted): q1 09:00-09:10 (600 s: $1) and q2 10:30-10:35 (300 s: $0.50).
- p2, llama-70b (self-hosted): l1 09:10-09:30 and l2 09:30-09:50 (1,200 s each: $2 each).
- p1, cheap-1 (API): a1 ($0.0012); a2 (10,000 in + 100 out = $0.0102) with a tool call that reports no cost.

Window 09:00: attributed $1 + $4 = $5 of the $6 bill, idle $1: qwen's part $1 x 1/5 = $0.20, llama's $0.80.
Window 10:00: attributed $0.50, idle $5.50, all qwen's. Idle in all $6.50 of the $12 bill.

qwen3-32b: $1.50 attributed over 2,200 tokens = $681.818182/M; loaded $1.50 + $5.70 = $7.20 -> $3,272.727273/M;
per completed task $0.75 attributed, $3.60 loaded. llama-70b: $4 / 2,200 tokens = $1,818.181818/M; loaded $4.80 ->
$2,181.818182/M; per task $2, loaded $2.40. So qwen ranks 2nd (attributed) but is the dearest fully loaded.
cheap-1: per completed task over a1 alone ($0.0012): a2 has an unpriced tool call, left out and counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from taskcost.analytics import QUESTIONS, Filters
from taskcost.analytics._cost import CostAnswer
from taskcost.pricing import PricingConfig
from taskcost.store import DuckDBStore
from tests.builders.analytics import BOOK, T0, Fleet, ns
from tests.test_analytics_reconcile import CLUSTERS, WINDOW, H

SH: dict[str, Any] = {"deployment": "self_hosted", "cluster_id": "gpu-east", "provider": "vllm"}


def _fleet() -> Fleet:
    f = Fleet()
    f.task("q1", project="p1").call("qwen3-32b", duration_s=600, **SH)
    f.task("q2", project="p1", minute=90).call("qwen3-32b", duration_s=300, **SH)
    f.task("l1", project="p2", minute=10).call("llama-70b", duration_s=1200, **SH)
    f.task("l2", project="p2", minute=30).call("llama-70b", duration_s=1200, **SH)
    f.task("a1", project="p1", minute=40).call("cheap-1", deployment="api")
    f.task("a2", project="p1", minute=45).call("cheap-1", input_tokens=10_000, deployment="api").tool(None)
    return f


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DuckDBStore]:
    st = DuckDBStore.open(tmp_path / "idle.duckdb")
    _fleet().write(st)
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(CLUSTERS)
    st.reprice(PricingConfig(book_table=BOOK, clusters_file=clusters).build(), now_ns=ns(T0) + 3 * H)
    yield st
    st.close()


class _NoBills:
    """A store that answers SQL but gives no clusters' bills (as a remote one)."""

    def __init__(self, store: DuckDBStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "cluster_costs":
            raise AttributeError(name)
        return getattr(self._store, name)


class _Caller(_NoBills):
    """The dashboards' store (``dashboards/app.py``): every query limited to one caller's project, with the bills."""

    def __init__(self, store: DuckDBStore, project: str) -> None:
        super().__init__(store)
        self._project = project

    def query(self, sql: str, params: list[Any] | None = None, **kwargs: Any) -> Any:
        return self._store.query(sql, params, **{**kwargs, "project": self._project})

    def arrow(self, sql: str, params: list[Any] | None = None, **kwargs: Any) -> Any:
        return self._store.arrow(sql, params, **{**kwargs, "project": self._project})

    def caller_project(self) -> str:
        return self._project

    def cluster_costs(self, **options: Any) -> Any:
        return self._store.cluster_costs(**options)


def ask(store: Any, question: str, **filters: Any) -> dict[str, Any]:
    q = QUESTIONS[question]
    return q.run(store, Filters.model_validate({**WINDOW, **filters}), q.options()).to_json()


def rows(doc: dict[str, Any], table: str) -> dict[Any, dict[str, Any]]:
    t = doc["tables"][table]
    return {r[0]: dict(zip(t["columns"], r, strict=True)) for r in t["rows"]}


def d(value: Any) -> Decimal | None:
    return None if value is None else Decimal(value)


def test_cost_shows_idle_gpu_as_its_own_line(store: DuckDBStore) -> None:
    windows = store.cluster_costs(since_ns=ns(T0), until_ns=ns(T0) + 2 * H)
    assert [(w.attributed_usd, w.idle_usd, w.bill_usd) for w in windows] == [
        (Decimal(5), Decimal(1), Decimal(6)),
        (Decimal("0.5"), Decimal("5.5"), Decimal(6)),
    ]
    doc = ask(store, "cost")
    s = doc["summary"]
    assert d(s["gpu_idle_usd"]) == sum(w.idle_usd for w in windows) == Decimal("6.5")  # the bills' idle
    assert d(s["gpu_bill_usd"]) == Decimal(12) and d(s["gpu_attributed_usd"]) == Decimal("5.5")
    assert s["gpu_windows"] == 2
    idle = rows(doc, "waste")["gpu_idle"]
    assert d(idle["amount_usd"]) == Decimal("6.5") and idle["is_waste"] is False
    assert any("idle GPU: $6.50 of the $12.00 GPU bill" in n for n in doc["notes"])
    assert {"gpu_idle_usd", "gpu_bill_usd"} <= set(CostAnswer.terminal_keys)  # a terminal shows them


def test_cost_a_project_sees_only_its_share_of_idle(store: DuckDBStore) -> None:
    p1, p2 = ask(store, "cost", project="p1")["summary"], ask(store, "cost", project="p2")["summary"]
    # p1: $1 of 09:00's $5 attributed -> $0.20 of its $1 idle; all of 10:00's $5.50
    assert (d(p1["gpu_attributed_usd"]), d(p1["gpu_idle_usd"]), d(p1["gpu_bill_usd"])) == (
        Decimal("1.5"), Decimal("5.7"), Decimal("7.2"),
    )  # fmt: skip
    assert (d(p2["gpu_attributed_usd"]), d(p2["gpu_idle_usd"]), d(p2["gpu_bill_usd"])) == (
        Decimal(4), Decimal("0.8"), Decimal("4.8"),
    )  # fmt: skip
    # the dashboards' store, limited to p2 by the caller's key: the same share, never the whole bill
    scoped = ask(_Caller(store, "p2"), "cost")
    assert d(scoped["summary"]["gpu_idle_usd"]) == Decimal("0.8")
    assert d(rows(scoped, "waste")["gpu_idle"]["amount_usd"]) == Decimal("0.8")


def test_cost_without_bills_says_unknown_not_zero(store: DuckDBStore) -> None:
    doc = ask(_NoBills(store), "cost")
    assert doc["summary"]["gpu_idle_usd"] is None and doc["summary"]["gpu_bill_usd"] is None
    assert rows(doc, "waste")["gpu_idle"]["amount_usd"] is None
    assert any("idle GPU cost unknown" in n and "not $0" in n for n in doc["notes"])
    assert doc["summary"]["spend_usd"] is not None  # the rest of the answer stands


def test_per_token_gives_attributed_and_fully_loaded_figures(store: DuckDBStore) -> None:
    doc = ask(store, "per-token")
    s, r, detail = doc["summary"], rows(doc, "ranking"), rows(doc, "detail")
    assert s["ranking_basis"] == "attributed" and d(s["gpu_idle_usd"]) == Decimal("6.5")
    qwen, llama, cheap = r["qwen3-32b"], r["llama-70b"], r["cheap-1"]
    assert (d(detail["qwen3-32b"]["idle_usd"]), d(detail["llama-70b"]["idle_usd"])) == (Decimal("5.7"), Decimal("0.8"))
    assert d(detail["cheap-1"]["idle_usd"]) == 0
    assert (d(qwen["per_mtok_usd"]), d(qwen["loaded_usd_per_mtok"])) == (Decimal("681.818182"), Decimal("3272.727273"))
    assert (d(llama["per_mtok_usd"]), d(llama["loaded_usd_per_mtok"])) == (
        Decimal("1818.181818"), Decimal("2181.818182"),
    )  # fmt: skip
    assert (d(qwen["per_completed_task_usd"]), d(qwen["loaded_usd_per_completed_task"])) == (
        Decimal("0.75"), Decimal("3.6"),
    )  # fmt: skip
    assert (d(llama["per_completed_task_usd"]), d(llama["loaded_usd_per_completed_task"])) == (
        Decimal(2), Decimal("2.4"),
    )  # fmt: skip
    assert d(cheap["loaded_usd_per_completed_task"]) == d(cheap["per_completed_task_usd"])  # API: no idle
    # the ranking uses the attributed figures; the loaded ranks say what was paid
    assert (qwen["per_token_rank"], llama["per_token_rank"], cheap["per_token_rank"]) == (2, 3, 1)
    assert (qwen["loaded_per_token_rank"], llama["loaded_per_token_rank"]) == (3, 2)
    assert (qwen["per_task_rank"], qwen["loaded_per_task_rank"], llama["loaded_per_task_rank"]) == (2, 3, 2)
    assert any("ranks use the attributed figures" in n for n in doc["notes"])


def test_per_token_a_project_sees_only_its_share(store: DuckDBStore) -> None:
    for doc in (ask(store, "per-token", project="p1"), ask(_Caller(store, "p1"), "per-token")):
        detail, r = rows(doc, "detail"), rows(doc, "ranking")
        assert set(r) == {"qwen3-32b", "cheap-1"}  # nothing of p2's model
        assert d(detail["qwen3-32b"]["idle_usd"]) == Decimal("5.7") and d(doc["summary"]["gpu_idle_usd"]) == Decimal(
            "5.7"
        )
        assert d(r["qwen3-32b"]["loaded_usd_per_completed_task"]) == Decimal("3.6")
    p2 = ask(store, "per-token", project="p2")
    assert d(p2["summary"]["gpu_idle_usd"]) == Decimal("0.8")
    assert d(rows(p2, "ranking")["llama-70b"]["loaded_usd_per_completed_task"]) == Decimal("2.4")


def test_per_token_without_bills_says_unknown_not_zero(store: DuckDBStore) -> None:
    doc = ask(_NoBills(store), "per-token")
    assert doc["summary"]["gpu_idle_usd"] is None
    qwen = rows(doc, "ranking")["qwen3-32b"]
    assert qwen["loaded_usd_per_mtok"] is None and qwen["loaded_usd_per_completed_task"] is None
    assert d(qwen["per_mtok_usd"]) == Decimal("681.818182") and qwen["per_token_rank"] == 2
    assert any("idle GPU cost unknown" in n and "not $0" in n for n in doc["notes"])


def test_per_token_per_task_figure_is_over_fully_priced_tasks_only(store: DuckDBStore) -> None:
    doc = ask(store, "per-token")
    cheap, detail = rows(doc, "ranking")["cheap-1"], rows(doc, "detail")["cheap-1"]
    # a2 has a tool call that reports no cost: left out (not $0.0102 averaged in), counted beside it
    assert d(cheap["per_completed_task_usd"]) == Decimal("0.0012")
    assert cheap["unpriced_tasks"] == 1 and detail["priced_completed_tasks"] == 1
    assert detail["unpriced_completed_tasks"] == 1 and cheap["completed_tasks"] == 2
    assert doc["summary"]["unpriced_tasks"] == 1 and doc["summary"]["unpriced_completed_tasks"] == 1
    assert any("fully priced finished tasks only" in n for n in doc["notes"])


def test_the_cost_page_shows_idle_gpu(store: DuckDBStore) -> None:
    from dashboards.pages.cost import _idle_stat, _waste_kinds

    def text(component: Any) -> str:
        return json.dumps(component.to_plotly_json(), default=lambda o: o.to_plotly_json())

    whole = ask(store, "cost")
    shown = text(_idle_stat(whole["summary"]))
    assert "$6.5" in shown and "of the $12." in shown and "GPU bill" in shown
    assert "idle GPU (not waste)" in text(_waste_kinds(whole["tables"]["waste"]))
    unknown = text(_idle_stat(ask(_NoBills(store), "cost")["summary"]))
    assert "unknown" in unknown and "not $0" in unknown


def test_per_token_idle_of_a_window_no_call_ran_in_is_in_no_group(store: DuckDBStore) -> None:
    # until 12:00: the 11:00 window ($6, no call) counts too; it has no group to share it with
    doc = ask(store, "per-token", until=T0 + timedelta(hours=3))
    s = doc["summary"]
    assert (d(s["gpu_idle_usd"]), d(s["gpu_idle_shared_usd"])) == (Decimal("12.5"), Decimal("6.5"))
    assert d(rows(doc, "detail")["qwen3-32b"]["idle_usd"]) == Decimal("5.7")
    assert any(
        n.startswith("$6.00 of the $12.50 idle GPU cost is in cluster windows no selected call") for n in doc["notes"]
    )
    cost = ask(store, "cost", until=T0 + timedelta(hours=3))["summary"]
    assert (d(cost["gpu_idle_usd"]), d(cost["gpu_bill_usd"])) == (Decimal("12.5"), Decimal(18))
