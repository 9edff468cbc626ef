"""Parity: the same traffic in the DuckDB store and in the ClickHouse store (chDB), the same answers.

Every public view row for row, and every analytics question (with the options the dashboards and the CLI use) as its
JSON document: money exact (Decimal text), counts exact, and floats within ``FLOAT_REL`` (a float sum's last digits
depend on the order it is added in; both engines take quantiles the same way, linearly between the two nearest
values: DuckDB's ``quantile_cont``, ClickHouse's ``quantileExactInclusive``). The analytics run unchanged on both: the
ClickHouse store writes their SQL in its dialect (taskcost/store/clickhouse/_dialect.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from taskcost.analytics import QUESTIONS, Filters
from taskcost.normalize import normalize_request
from taskcost.store import DuckDBStore, PreparedBatch, prepare_batch
from taskcost.store.clickhouse._schema import PUBLIC_VIEWS
from taskcost.store.clickhouse._store import ClickHouseStore
from tests.builders.analytics import T0, Fleet, pricer
from tests.interop.otlp import S, request

FLOAT_REL = 1e-9

# (question, options, filters): what is asked of both stores
ASKED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("cost", {}, {}),
    ("cost", {"by": "model"}, {}),
    ("cost", {"by": "kind", "bucket": "day"}, {}),
    ("cost", {}, {"project": "default", "since": T0.replace(hour=12)}),
    ("per-token", {}, {}),
    ("cache", {}, {}),
    ("cache", {"by": "kind"}, {}),
    ("canary", {"dimension": "engine_version", "baseline": "0.6.0", "candidate": "0.7.0"}, {}),
    ("breakeven", {"usd_per_gpu_hour": "2.50"}, {}),
    ("breakeven", {"usd_per_gpu_hour": "2.50", "tokens_per_s": "2000"}, {"gpu_type": "H100"}),
    ("breakeven", {"usd_per_gpu_hour": "2.50", "max_groups": 1}, {}),
    ("changes", {}, {}),
    ("changes", {}, {"since": T0, "until": T0.replace(day=T0.day + 1)}),
    ("reconcile", {}, {}),
    ("engines", {}, {}),
    ("engines", {"same_as": "gpt-4o-mini, cheap-1", "min_calls": 3}, {"model": "llama-70b"}),
]
# (question, the table and the column of its groups): where an entry's max_groups folds the traffic's groups into
# `other` (the traffic has more than max_groups + 1 of them), the DuckDB answer is checked to hold that row
FOLDED_IN = {"breakeven": ("traffic", "model")}
# Where the two stores cannot agree, and why (the view test fails when one is not needed any more)
VALUE_DIFFERENCES = {
    ("llm_calls", "container_image_tags"): "a ClickHouse Array cannot be NULL: a call without tags has [], not NULL",
}


def _traffic(seed: int = 7, tasks: int = 160) -> Fleet:
    """A fleet with what the questions tell apart: API models priced and not, a self-hosted model on two engine
    versions and two GPU types, retries answered later, failed and abandoned tasks, running ones, cache reads and
    writes, prompt fingerprints with breaks, tools priced and not, golden tasks, two projects, two days."""
    rng = random.Random(seed)
    f = Fleet()
    for i in range(tasks):
        outcome = rng.choices(["completed", "failed", "abandoned", None], [80, 8, 6, 6])[0]
        t = f.task(
            f"t{i}",
            kind=rng.choice(["review", "triage", "report"]),
            outcome=outcome,
            minute=i * 17 + rng.random(),
            project="default" if rng.random() < 0.85 else "other",
            golden=i % 23 == 0,
            agent_version=rng.choice(["1.0", "1.1"]),
            harness_version="h1",
            agent_name="bot",
        )
        for c in range(rng.randint(1, 5)):
            model = rng.choice(["cheap-1", "pricey-1", "claude-x", "llama-70b", "mystery-9"])
            extra: dict[str, Any] = {}
            if model == "llama-70b":
                version = rng.choice(["0.6.0", "0.7.0"])
                extra = {
                    "provider": "vllm",
                    "engine": "vllm",
                    "engine_version": version,
                    "gpu_type": "H100" if version == "0.7.0" else rng.choice(["H100", "A100"]),
                    "gpu_count": 2,
                    "cluster_id": "gpu-a",
                    "deployment": "self_hosted",
                    "quantization": rng.choice(["fp8", "bf16"]),
                }
            elif model == "mystery-9":
                extra = {"provider": "openai"}
            size = rng.randint(200, 9000)
            if rng.random() < 0.7:
                stable = rng.randint(0, size * 4)
                extra |= {"prompt_chars": size * 4, "stable_prefix_chars": stable}
                if stable < size * 2:
                    extra |= {"prefix_break_block": rng.randint(0, 3), "prefix_break_kind": "system"}
            read = rng.randint(0, size // 2) if rng.random() < 0.5 else None
            call_id = f"t{i}c{c}"
            if rng.random() < 0.15:  # a failed attempt, then its retry
                t.call(model, input_tokens=size, output_tokens=0, call_id=call_id, status="error", **extra)
                t.call(model, input_tokens=size, cache_read=read, call_id=call_id, attempt=2, ttft_s=0.2, **extra)
            else:
                out = rng.randint(10, 900)
                ttft = rng.uniform(0.05, 1.5) if rng.random() < 0.8 else None
                t.call(model, input_tokens=size, output_tokens=out, cache_read=read, call_id=call_id, ttft_s=ttft,
                       duration_s=rng.uniform(0.3, 9), **extra)  # fmt: skip
        for _ in range(rng.randint(0, 2)):
            t.tool(Decimal(rng.choice(["0.001", "0.0125"])) if rng.random() < 0.7 else None, name=rng.choice("ab"))
    return f


_CALL = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini"}
_TOPOLOGY = {
    "taskcost.parallel.tensor": 4,
    "taskcost.parallel.pipeline": 2,
    "taskcost.pd.disaggregated": True,
    "taskcost.pd.prefill_gpu_type": "H100",
    "taskcost.pd.decode_gpu_type": "L40S",
    "taskcost.spec.method": "eagle3",
    "taskcost.spec.draft_model": "eagle3-8b",
}
_TIMINGS = {
    "taskcost.engine.prefill_s": 0.25,
    "taskcost.engine.decode_s": 1.5,
    "taskcost.engine.prefill_tokens": 300,
    "taskcost.engine.cached_tokens": 600,
    "taskcost.engine.decode_tokens": 80,
    "taskcost.spec.draft_tokens": 60,
    "taskcost.spec.accepted_tokens": 45,
}


def _engine_span(i: int, request_id: str, parent: int | None = None, trace: int = 1, at: int = 0) -> S:
    return S(
        "llm_request",
        i,
        parent=parent,
        trace=trace,
        scope="vllm.llm_engine",
        start_ms=at + 5,
        end_ms=at + 90 + i,
        attrs={
            "gen_ai.request.id": request_id,
            "gen_ai.response.model": "gpt-4o-mini",
            "gen_ai.usage.prompt_tokens": 900,
            "gen_ai.usage.completion_tokens": 80 + i,
            "gen_ai.usage.cached_tokens": 512 + i,
            "gen_ai.latency.time_in_queue": 0.001 * i,
            "gen_ai.latency.time_to_first_token": 0.02 + 0.001 * i,
            "gen_ai.latency.e2e": 0.08 + 0.001 * i,
            "gen_ai.latency.time_in_model_prefill": 0.01,
            "gen_ai.latency.time_in_model_decode": 0.06,
            "gen_ai.latency.time_in_model_inference": 0.07,
        },
    )


def _engine_traffic() -> list[tuple[str, Any]]:
    """(project, OTLP request): client calls with engine timings and topology tags, and vLLM server spans matched by
    parent, by request id (as sent and with vLLM's ``chatcmpl-`` prefix), several for one call, one that two calls
    could take, one unmatched, one with a call's id two hours away (unmatched), one re-sent, one stored before its
    call; in two projects."""
    usage = {"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 80}

    def call(i: int, task: str, at: int, trace: int = 1, attrs: dict[str, Any] | None = None) -> S:
        extra = {"taskcost.task.id": task, "taskcost.call.id": f"{task}-{i}", **_CALL, **usage, **(attrs or {})}
        return S("chat", i, trace=trace, start_ms=at, end_ms=at + 100 + i, attrs=extra)

    engine_first = [_engine_span(40, "r-40", parent=4, trace=9, at=3000)]  # stored before its call
    clients = [
        call(2, "e1", 0, attrs=_TOPOLOGY),
        call(3, "e1", 200, attrs={**_TIMINGS, "gen_ai.response.id": "chatcmpl-r-31"}),
        call(4, "e2", 3000, trace=9, attrs=_TIMINGS),
        call(5, "e2", 3200, trace=9, attrs={"gen_ai.response.id": "same-id"}),
        call(6, "e3", 3400, trace=10, attrs={"gen_ai.response.id": "same-id", **_TOPOLOGY}),
        call(7, "e3", 3600, trace=10, attrs={"taskcost.parallel.data": 8}),
        call(8, "e3", 3800, trace=10),  # no engine data
        call(9, "e4", 0, trace=14, attrs={"gen_ai.response.id": "far-r"}),
    ]
    engines = [
        _engine_span(20, "r-20", parent=2),
        _engine_span(21, "r-21", parent=2, at=10),  # a second engine span of the same call
        _engine_span(31, "r-31", trace=11, at=200),  # by request id, with vLLM's prefix
        _engine_span(50, "same-id", trace=12, at=3200),  # two calls have this response id: the earlier one takes it
        _engine_span(70, "nobody", trace=13, at=3600),  # unmatched
        _engine_span(80, "far-r", trace=15, at=7_200_000),  # its call's id, but two hours after it: unmatched
    ]
    other = [call(2, "o1", 0, trace=20, attrs={"gen_ai.response.id": "o-r"}), _engine_span(90, "o-r", trace=21)]
    return [
        ("default", request(*engine_first)),
        ("default", request(*clients, resource={"taskcost.cluster.id": "gpu-a"})),
        ("default", request(*engines, resource={"service.name": "vllm-east"})),
        ("default", request(engines[0])),  # re-sent
        ("other", request(*other)),
    ]


class _Collect:
    def __init__(self) -> None:
        self.batches: list[PreparedBatch] = []

    def write(self, batch: PreparedBatch) -> None:
        self.batches.append(batch)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DuckDBStore, ClickHouseStore]]:
    tmp = tmp_path_factory.mktemp("parity")
    collected = _Collect()
    _traffic().write(collected)  # type: ignore[arg-type]
    for i, (project, req) in enumerate(_engine_traffic()):
        collected.write(prepare_batch(normalize_request(req), 10 + i, project=project, pricer=pricer()))
    with DuckDBStore.open(tmp / "d.duckdb") as duck, ClickHouseStore.open(f"chdb://{tmp / 'ch'}") as ch:
        for batch in collected.batches:
            duck.write(batch)
            ch.write(batch)
        duck.fold_rollups()  # the engines question's hours settled: read from what the writer keeps, not the calls
        yield duck, ch


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(repr(v) for v in r.values()))


@pytest.mark.parametrize("view", PUBLIC_VIEWS)
def test_every_view_holds_the_same_rows(stores: tuple[DuckDBStore, ClickHouseStore], view: str) -> None:
    duck, ch = stores
    want = duck.arrow(f"SELECT * FROM {view}").to_pylist()
    for (v, col), _why in VALUE_DIFFERENCES.items():
        if v == view:
            assert any(r[col] is None for r in want), f"{v}.{col}: listed as a difference, but never NULL here"
            for r in want:
                r[col] = [] if r[col] is None else r[col]
    got = ch.arrow(f"SELECT * FROM {view}").to_pylist()
    assert len(got) == len(want) > 0
    for g, w in zip(_sorted(got), _sorted(want), strict=True):
        assert g == w, {k: (g[k], w[k]) for k in w if g[k] != w[k]}


def test_engine_views_say_what_the_traffic_holds(stores: tuple[DuckDBStore, ClickHouseStore]) -> None:
    """The engine traffic above, as both stores answer it: each engine span once, matched by the documented rule."""
    for st in stores:
        spans = {r["request_id"]: r for r in st.arrow("SELECT * FROM engine_spans").to_pylist()}
        assert {k: (r["matched"], r["call_id"]) for k, r in spans.items()} == {
            "r-20": (True, "e1-2"),
            "r-21": (True, "e1-2"),
            "r-31": (True, "e1-3"),
            "r-40": (True, "e2-4"),
            "same-id": (True, "e2-5"),
            "nobody": (False, None),
            "far-r": (False, None),
            "o-r": (True, "o1-2"),
        }
        calls = {r["call_id"]: r for r in st.arrow("SELECT * FROM engine_calls").to_pylist()}
        assert sorted(calls) == ["e1-2", "e1-3", "e2-4", "e2-5", "e3-6", "e3-7", "o1-2"]
        assert calls["e1-2"]["engine_e2e_s"] == pytest.approx(0.1)  # the first of its two engine spans
        assert (calls["e1-2"]["tp_size"], calls["e1-2"]["engine"], calls["e1-2"]["cluster_id"]) == (
            4,
            "vllm-east",
            "gpu-a",
        )
        e13 = calls["e1-3"]
        assert (e13["engine_source"], e13["prefill_s"], e13["spec_accepted_tokens"]) == ("engine_span", 0.01, 45)
        assert (calls["e3-6"]["engine_source"], calls["e3-6"]["spec_method"]) == ("response", "eagle3")
        assert calls["e3-7"]["dp_size"] == 8 and calls["e2-5"]["cost_usd"] is not None


def _same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, float) and isinstance(got, float):
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=FLOAT_REL), where
    elif isinstance(want, dict) and isinstance(got, dict):
        assert set(got) == set(want), (where, set(got) ^ set(want))
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list) and isinstance(got, list):
        assert len(got) == len(want), (where, len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]")
    else:
        assert got == want, (where, got, want)


@pytest.mark.parametrize(("name", "options", "filters"), ASKED, ids=[f"{a[0]}-{i}" for i, a in enumerate(ASKED)])
def test_every_question_answers_the_same(
    stores: tuple[DuckDBStore, ClickHouseStore], name: str, options: dict[str, Any], filters: dict[str, Any]
) -> None:
    duck, ch = stores
    q = QUESTIONS[name]
    f, o = Filters(**filters), q.options(**options)
    want = q.run(duck, f, o).to_json()
    if "max_groups" in options:  # the fold happens, else the entry checks nothing the unfolded ones do not
        table, column = FOLDED_IN[name]
        folded = want["tables"][table]
        assert "other" in [r[folded["columns"].index(column)] for r in folded["rows"]], folded
    got = q.run(ch, f, o).to_json()
    _same(got, want, name)


def test_every_question_is_asked() -> None:
    assert {name for name, _, _ in ASKED} == set(QUESTIONS)
