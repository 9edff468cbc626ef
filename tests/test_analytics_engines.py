"""The ``engines`` question (taskcost/analytics/_engines.py) over a hand-built fleet, every figure worked out by hand.

One model, ``llama-8b``, self-hosted on four configurations (no clusters file: its calls are unpriced), and its API
offering ``cheap-1`` (``same_as``); ``min_calls`` 3. Every call has 1,000 input and 100 output tokens unless said.

- A, cluster ``a``: vLLM 0.6.0, fp8, 1x H100, tp1, no speculation. Four calls whose engine reported decode times 1.0,
  2.0, 0.5 and 1.0 s: 100, 50, 200, 100 tok/s, median (the 2nd of 4, as the canary's order statistic) 100.0. A fifth
  attempt failed (a 429: no engine row, no topology tag) on cluster ``a``: folded into A (5 calls, 1 error: 20%).
- B, cluster ``b``: A with EAGLE. Three calls decoding in 0.5, 0.4, 0.5 s: 200, 250, 200 -> median 200.0; each drafted
  60 tokens and had 45 accepted: acceptance 75%; the engine took 500 of the 1,000 prompt tokens from its cache: 50%.
  Its metrics (its engine names the model ``meta-llama/Llama-3.1-8B-Instruct``): 60 drafts, 180 draft tokens, 135
  accepted -> mean acceptance length 1 + 135 / 60 = 3.25.
- C, cluster ``c``: vLLM 0.6.0, bf16, 2x A100, tp2 (tags only, no timings). Streamed: latency 3 s, TTFT 1 s: 100 /
  (3 - 1) = 50 tok/s at the client. Inputs 500, 2,000 and 20,000 tokens: one call in each of three TTFT bands. Its
  prefix-cache counters read 100/400, 300/1,000, then 100/200 after a restart: hits 200 + 100 = 300 of 600 + 200 =
  800 queries, 37.5%.
- D, cluster ``d``: vLLM 0.7.0, fp8, 4x H100-SXM, tp2, prefill/decode split: one call, 2 short of ``min_calls``.
- E, ``cheap-1`` at its API: three calls of latency 1.25 s, TTFT 0.5 s: 100 / 0.75 = 133.3 tok/s; $0.0012 each (1,000
  in at $1/M + 100 out at $2/M) over 1,100 tokens: $1.090909 per 1M tokens; three completed tasks: $0.0012 each.

Ranked by decode speed: B 200.0 (c1), E 133.3 (c2), A 100.0 (c3), C 50.0 (c4); D unranked (c5). The spread: 200.0 /
50.0 = 4.0x. B against C: hardware (1xH100 tp1 vs 2xA100 tp2), quantization (fp8 vs bf16), speculation (eagle vs
none) and the prefix-cache hit rate (50.0% engine vs 37.5% from C's metrics: 12.5 points) differ; PD does not. A and B
differ in speculation alone: 200.0 with it, 100.0 without, 2.00x.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from taskcost.analytics import QUESTIONS, Filters
from taskcost.cli._render import _cell, print_rows
from taskcost.normalize import LLMCallEngineRecord
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet
from tests.conftest import REPO

SH: dict[str, Any] = {"deployment": "self_hosted", "provider": "vllm", "engine": "vllm", "engine_version": "0.6.0"}
A = {**SH, "quantization": "fp8", "gpu_type": "H100", "gpu_count": 1, "cluster_id": "a"}
B = {**A, "cluster_id": "b"}
C = {**SH, "quantization": "bf16", "gpu_type": "A100", "gpu_count": 2, "cluster_id": "c"}
D = {**SH, "engine_version": "0.7.0", "quantization": "fp8", "gpu_type": "H100-SXM", "gpu_count": 4, "cluster_id": "d"}
PLAIN = {"tp_size": 1, "pp_size": 1, "dp_size": 1, "pd_disaggregated": False, "spec_method": "none"}


def _detail(**values: Any) -> LLMCallEngineRecord:
    return LLMCallEngineRecord("", "", **values)


def _vllm(
    hits: int, queries: int, drafts: int = 0, draft_tokens: int = 0, accepted: int = 0, model: str = "llama-8b"
) -> str:
    """A vLLM /metrics page, as vLLM writes it (names, types, labels), with these counters."""
    lines = []
    for name, value in (("prefix_cache_hits", hits), ("prefix_cache_queries", queries),
                        ("spec_decode_num_drafts", drafts), ("spec_decode_num_draft_tokens", draft_tokens),
                        ("spec_decode_num_accepted_tokens", accepted)):  # fmt: skip
        lines += [f"# HELP vllm:{name}_total x", f"# TYPE vllm:{name}_total counter",
                  f'vllm:{name}_total{{engine="0",model_name="{model}"}} {float(value)}']  # fmt: skip
    return "\n".join(lines) + "\n"


def _fleet() -> Fleet:
    f = Fleet()
    for i, decode in enumerate((1.0, 2.0, 0.5, 1.0)):
        f.task(f"a{i}", minute=i).call("llama-8b", engine_detail=_detail(decode_s=decode, **PLAIN), **A)
    f.task("a-429", minute=5).call("llama-8b", status="error", output_tokens=0, **A)  # no engine row: folded into A
    eagle = {**PLAIN, "spec_method": "eagle", "spec_draft_model": "eagle-8b"}
    for i, decode in enumerate((0.5, 0.4, 0.5)):
        detail = _detail(decode_s=decode, cached_tokens=500, spec_draft_tokens=60, spec_accepted_tokens=45, **eagle)
        f.task(f"b{i}", minute=10 + i).call("llama-8b", engine_detail=detail, **B)
    for i, size in enumerate((500, 2000, 20_000)):
        detail = _detail(**{**PLAIN, "tp_size": 2})
        f.task(f"c{i}", minute=20 + i).call(
            "llama-8b", input_tokens=size, duration_s=3.0, ttft_s=1.0, engine_detail=detail, **C
        )
    pd = {
        **PLAIN,
        "tp_size": 2,
        "pd_disaggregated": True,
        "prefill_gpu_type": "H100-SXM",
        "decode_gpu_type": "H100-SXM",
    }
    f.task("d0", minute=30).call("llama-8b", engine_detail=_detail(decode_s=1.0, **pd), **D)
    for i in range(3):
        f.task(f"e{i}", minute=40 + i).call("cheap-1", duration_s=1.25, ttft_s=0.5, deployment="api")
    f.task("other", minute=50).call("pricey-1", deployment="api")  # another model: in no configuration
    for at, (hits, queries) in enumerate(((100, 400), (300, 1000), (100, 200))):
        f.metrics(_vllm(hits, queries), cluster_id="c", at_s=60 * at)
    # B's engine names the model its own way: its cluster serves that one model, so its series are B's
    hf = "meta-llama/Llama-3.1-8B-Instruct"
    f.metrics(_vllm(0, 0, model=hf), cluster_id="b", at_s=0)
    f.metrics(_vllm(0, 0, 60, 180, 135, model=hf), cluster_id="b", at_s=60)
    return f


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBStore]:
    st = DuckDBStore.open(Path(tmp_path_factory.mktemp("engines")) / "engines.duckdb")
    _fleet().write(st)
    yield st
    st.close()


def ask(store: DuckDBStore, *, filters: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    q = QUESTIONS["engines"]
    return q.run(store, Filters(**(filters or {})), q.options(**options)).to_json()


def table(doc: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    t = doc["tables"][name]
    return {r[0]: dict(zip(t["columns"], r, strict=True)) for r in t["rows"]}


@pytest.fixture(scope="module")
def doc(store: DuckDBStore) -> dict[str, Any]:
    return ask(store, same_as="cheap-1", min_calls=3)


def test_configurations_are_ranked_by_decode_speed(doc: dict[str, Any]) -> None:
    s, ranking = doc["summary"], table(doc, "ranking")
    assert s["model"] == "llama-8b" and s["models"] == ["llama-8b", "cheap-1"]  # the self-hosted model with most calls
    assert {c: (r["rank"], r["decode_tps"], r["calls"]) for c, r in ranking.items()} == {
        "c1": (1, 200.0, 3), "c2": (2, 133.3, 3), "c3": (3, 100.0, 5), "c4": (4, 50.0, 3), "c5": (None, 100.0, 1),
    }  # fmt: skip
    assert [ranking[c]["configuration"] for c in ranking] == [
        "vllm 0.6.0 · fp8 · 1xH100 tp1 · eagle",
        "api · openai · cheap-1",
        "vllm 0.6.0 · fp8 · 1xH100 tp1",
        "vllm 0.6.0 · bf16 · 2xA100 tp2",
        "vllm 0.7.0 · fp8 · 4xH100-SXM tp2 · PD split",
    ]
    assert [ranking[c]["decode_source"] for c in ranking] == ["engine", "client", "engine", "client", "engine"]
    assert (ranking["c5"]["unranked_because"], ranking["c5"]["needed_calls"]) == ("fewer than 3 calls", 2)
    assert any("c5 (vllm 0.7.0" in n and "2 more would rank it" in n for n in doc["notes"])
    assert any("1 call attempt(s) without topology tags" in n for n in doc["notes"])  # the 429 folded into A
    rates = table(doc, "rates")
    assert rates["c3"]["error_rate"] == pytest.approx(0.2) and rates["c3"]["errors"] == 1
    assert rates["c3"]["error_rate_low"] < 0.2 < rates["c3"]["error_rate_high"]  # Wilson
    assert s["spread_ratio"] == pytest.approx(4.0) and "is 4.0x the slowest, c4" in s["spread"]
    assert "200.0 vs 50.0 output tokens/s" in s["spread"]


def test_what_differs_between_the_fastest_and_the_slowest(doc: dict[str, Any]) -> None:
    variables = table(doc, "variables")
    assert {v: (r["fastest"], r["slowest"], r["differs"]) for v, r in variables.items()} == {
        "hardware": ("1xH100 tp1", "2xA100 tp2", True),
        "quantization": ("fp8", "bf16", True),
        "speculation": ("eagle", "none", True),
        "prefix_cache": ("50.0% (engine)", "37.5% (engine metrics)", True),
        "pd_disaggregation": ("colocated", "colocated", False),
    }
    s = doc["summary"]
    assert s["differences"].startswith("c1 vs c4: differ in hardware & topology: 1xH100 tp1 vs 2xA100 tp2;")
    assert "the same: PD disaggregation" in s["differences"] and "decode speed 4.00x" in s["differences"]
    assert "Association, not causation" in s["differences"]
    moved = table(doc, "moved")
    assert moved["decode speed"]["change"] == "4.00x"
    # speculation: the speed with and without it, not the acceptance alone
    pairs = doc["tables"]["pairs"]
    assert [r[:6] for r in pairs["rows"]] == [["speculation", "c1", "c3", "eagle", "none", 2.0]]
    spec = table(doc, "speculation")["c1"]
    assert (spec["accept_rate"], spec["accept_source"], spec["accept_length"]) == (0.75, "calls", 3.25)
    assert (spec["decode_tps"], spec["decode_tps_without"], spec["without_config"], spec["speedup"]) == (
        200.0, 100.0, "c3", 2.0,
    )  # fmt: skip
    assert "decode 200.0 tok/s with it, 100.0 without (c3): 2.00x faster" in s["speculation"]


def test_latency_cache_and_money(doc: dict[str, Any]) -> None:
    bands = [(r[0], r[1], r[2], r[3]) for r in doc["tables"]["ttft"]["rows"]]
    assert [b for b in bands if b[0] == "c4"] == [("c4", "<1k", 1, 1.0), ("c4", "1k-4k", 1, 1.0),
                                                  ("c4", ">=16k", 1, 1.0)]  # fmt: skip
    timing = table(doc, "timing")
    assert timing["c3"]["decode_p50_s"] == 1.0 and timing["c3"]["queue_p50_s"] is None  # no engine span
    rates = table(doc, "rates")
    assert (rates["c1"]["engine_hit_rate"], rates["c4"]["prefix_hit_rate"], rates["c4"]["prefix_source"]) == (
        0.5, 0.375, "prefix_cache_hits/queries",
    )  # fmt: skip
    money = table(doc, "money")
    assert Decimal(money["c2"]["usd_per_mtok"]) == Decimal("1.090909")  # $0.0036 / 3,300 tokens
    assert Decimal(money["c2"]["loaded_usd_per_mtok"]) == Decimal("1.090909")  # an API offering has no idle
    assert Decimal(money["c2"]["usd_per_completed_task"]) == Decimal("0.0012")
    # the 12 self-hosted calls (5 + 3 + 3 + 1) have no price: no figure, never $0, and counted
    assert (money["c3"]["usd_per_mtok"], money["c3"]["unpriced_calls"]) == (None, 5)
    assert any("12 of 15 call attempts are unpriced" in n for n in doc["notes"])
    speed = table(doc, "speed")
    assert speed["c1"]["decode_tps_low"] <= 200.0 <= speed["c1"]["decode_tps_high"]
    # B's three calls ran one after another, 1 s each, on 1 GPU: 300 output tokens / 3 GPU-seconds
    assert speed["c1"]["gpu_tps"] == pytest.approx(100.0)


def test_model_option_and_no_model(store: DuckDBStore) -> None:
    only = ask(store, filters={"model": "llama-8b"}, min_calls=30)
    assert only["summary"]["ranked_configurations"] == 0 and only["summary"]["configurations"] == 4
    assert "no configuration can be ranked" in only["summary"]["spread"]
    none = ask(store, filters={"deployment": "api"})
    assert none["summary"]["model"] is None and "name the model to compare with --model" in none["notes"][0]


def test_a_terminal_of_80_columns_shows_every_table_whole(doc: dict[str, Any]) -> None:
    """As the CLI prints the answer (``taskcost.cli._render``): each table fits 80 columns as a table."""
    for name, t in doc["tables"].items():
        out = Console(file=io.StringIO(), width=80, color_system=None)
        shown = t.get("display") or t["columns"]
        at = [t["columns"].index(c) for c in shown]
        print_rows(out, shown, [[_cell(c, r[i]) for c, i in zip(shown, at, strict=True)] for r in t["rows"]], name)
        text = out.file.getvalue()  # type: ignore[attr-defined]
        assert "record per row" not in text and "…" not in text, (name, text)


def test_the_clickhouse_store_gives_the_same_answer(
    doc: dict[str, Any], store: DuckDBStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same fleet (engine metrics and their restart included) in the ClickHouse store: the same JSON. A
    configuration larger than the sample is sampled on both (each store's own hash: the same size, not the same
    calls)."""
    pytest.importorskip("chdb")
    from taskcost.analytics import _engines_sql
    from taskcost.store.clickhouse._store import ClickHouseStore
    from tests.test_clickhouse_parity import _same

    with ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}") as ch:
        _fleet().write(ch)  # type: ignore[arg-type]
        _same(ask(ch, same_as="cheap-1", min_calls=3), doc, "engines")  # type: ignore[arg-type]
        monkeypatch.setattr(_engines_sql, "SAMPLE", 2)
        for st in (store, ch):
            sampled = table(ask(st, same_as="cheap-1", min_calls=3), "timing")  # type: ignore[arg-type]
            assert sum(r["ttft_calls"] for r in sampled.values()) < sum(
                r["ttft_calls"] for r in table(doc, "timing").values()
            )


def test_speculation_shows_the_speed_with_and_without_it(tmp_path: Path) -> None:
    """llama.cpp's own ``timings`` (sdk/tests/data: captured from a real llama.cpp server, build b1-0c1e570, serving
    SmolLM2-135M-Instruct Q4_1 on CPU): with a draft model every drafted token was accepted (41 of 41), yet its 48
    tokens took 735.093 ms (65.3 tok/s), where the same server without one decoded 16 in 148.868 ms (107.5 tok/s).
    Acceptance alone would call speculation a success; the answer shows it made decoding 0.61x as fast."""
    f = Fleet()
    for i, (name, spec) in enumerate((("llama-server-chat.json", "none"), ("llama-server-chat-speculative.json",
                                                                          "draft_model"))):  # fmt: skip
        body = json.loads((REPO / "sdk" / "tests" / "data" / name).read_text())
        t, usage = body["timings"], body["usage"]
        detail = _detail(
            prefill_s=t["prompt_ms"] / 1000, decode_s=t["predicted_ms"] / 1000, prefill_tokens=t["prompt_n"],
            cached_tokens=t["cache_n"], decode_tokens=t["predicted_n"], spec_draft_tokens=t.get("draft_n"),
            spec_accepted_tokens=t.get("draft_n_accepted"), spec_method=spec, tp_size=1,
        )  # fmt: skip
        f.task(f"s{i}", minute=i).call(
            "smollm2-135m", input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"],
            engine_detail=detail, deployment="self_hosted", engine="llamacpp", engine_version="b1-0c1e570",
            quantization="Q4_1", gpu_type="CPU", cluster_id=f"cpu-{i}",
        )  # fmt: skip
    with DuckDBStore.open(tmp_path / "spec.duckdb") as st:
        f.write(st)
        doc = ask(st, min_calls=1)
    ranking = table(doc, "ranking")
    assert [(r["configuration"], r["decode_tps"]) for r in ranking.values()] == [
        ("llamacpp b1-0c1e570 · Q4_1 · CPU tp1", 107.5),
        ("llamacpp b1-0c1e570 · Q4_1 · CPU tp1 · draft_model", 65.3),
    ]
    row = table(doc, "speculation")["c2"]
    assert (row["accept_rate"], row["decode_tps"], row["decode_tps_without"], row["speedup"]) == (
        1.0, 65.3, 107.5, 0.61,
    )  # fmt: skip
    assert (
        "acceptance 100%; decode 65.3 tok/s with it, 107.5 without (c1): 0.61x (slower with it)"
        in (doc["summary"]["speculation"])
    )
