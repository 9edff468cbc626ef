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
from taskcost.store import DuckDBStore, PreparedBatch
from taskcost.store.clickhouse._schema import PUBLIC_VIEWS
from taskcost.store.clickhouse._store import ClickHouseStore
from tests.builders.analytics import T0, Fleet

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
    ("changes", {}, {}),
    ("changes", {}, {"since": T0, "until": T0.replace(day=T0.day + 1)}),
    ("reconcile", {}, {}),
]
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
    with DuckDBStore.open(tmp / "d.duckdb") as duck, ClickHouseStore.open(f"chdb://{tmp / 'ch'}") as ch:
        for batch in collected.batches:
            duck.write(batch)
            ch.write(batch)
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
    got = q.run(ch, f, o).to_json()
    _same(got, want, name)


def test_every_question_is_asked() -> None:
    assert {name for name, _, _ in ASKED} == set(QUESTIONS)
