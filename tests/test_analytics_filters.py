"""Every filter dimension narrows every kind of answer: two tasks that differ in one dimension only, asked with
that dimension set to one value, then the other, then unset (a task question and a call question)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from taskcost.analytics import DIMENSIONS, QUESTIONS, Filters
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet

# dimension -> (how a task or call takes the value, value a, value b)
TASK_SIDE = {"project", "kind", "agent_name", "agent_version", "harness_version"}
VALUES: dict[str, tuple[str, str]] = {
    "project": ("p-a", "p-b"),
    "kind": ("review", "fix"),
    "agent_name": ("reviewer", "fixer"),
    "agent_version": ("1.0", "2.0"),
    "harness_version": ("h1", "h2"),
    "model": ("cheap-1", "pricey-1"),
    "provider": ("openai", "anthropic"),
    "engine": ("vllm", "sglang"),
    "engine_version": ("0.6.0", "0.7.0"),
    "quantization": ("fp8", "bf16"),
    "gpu_type": ("H100", "A100"),
    "cluster": ("c-a", "c-b"),
    "deployment": ("api", "self_hosted"),
}
CALL_COLUMN = {"cluster": "cluster_id"}


def test_every_dimension_is_covered_here() -> None:
    assert set(VALUES) == set(DIMENSIONS)


def _store(tmp_path: Path, dimension: str) -> DuckDBStore:
    fleet = Fleet()
    for i, value in enumerate(VALUES[dimension]):
        task: dict[str, Any] = {"minute": i}
        call: dict[str, Any] = {"input_tokens": 1000 * (i + 1), "cache_read": 500}
        if dimension in TASK_SIDE:
            task[dimension] = value
        elif dimension == "model":
            call["model"] = value
        elif dimension == "provider":
            call["provider"] = value
        else:
            call[CALL_COLUMN.get(dimension, dimension)] = value
        model = call.pop("model", "cheap-1")
        fleet.task(f"t{i}", **task).call(model, **call)
    store = DuckDBStore.open(tmp_path / f"{dimension}.duckdb")
    fleet.write(store)
    return store


@pytest.mark.parametrize("dimension", sorted(VALUES))
def test_each_dimension_narrows_tasks_and_calls(tmp_path: Path, dimension: str) -> None:
    cost, cache = QUESTIONS["cost"], QUESTIONS["cache"]
    a, b = VALUES[dimension]
    with _store(tmp_path, dimension) as store:

        def tasks(f: Filters) -> int:
            return int(cost.run(store, f, cost.options()).to_json()["summary"]["tasks"])

        def input_tokens(f: Filters) -> int:
            return int(cache.run(store, f, cache.options()).to_json()["summary"]["input_tokens"])

        assert tasks(Filters()) == 2
        assert tasks(Filters(**{dimension: a})) == 1 and tasks(Filters(**{dimension: b})) == 1
        assert tasks(Filters(**{dimension: "no-such-value"} if dimension != "deployment" else {"golden": True})) == 0
        # the calls: 1,000 input tokens in the first task, 2,000 in the second
        assert input_tokens(Filters()) == 3000
        assert input_tokens(Filters(**{dimension: a})) == 1000
        assert input_tokens(Filters(**{dimension: b})) == 2000


def test_golden_narrows_to_the_golden_tasks(tmp_path: Path) -> None:
    fleet = Fleet()
    fleet.task("g", golden=True).call("cheap-1", input_tokens=1000)
    fleet.task("n").call("cheap-1", input_tokens=2000)
    with DuckDBStore.open(tmp_path / "g.duckdb") as store:
        fleet.write(store)
        cost, cache = QUESTIONS["cost"], QUESTIONS["cache"]
        assert cost.run(store, Filters(golden=True), cost.options()).to_json()["summary"]["tasks"] == 1
        assert cache.run(store, Filters(golden=True), cache.options()).to_json()["summary"]["input_tokens"] == 1000
