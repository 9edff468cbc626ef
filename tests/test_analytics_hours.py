"""``hours_scope`` (the calls added up per hour, from the hourly roll-up where whole hours are selected) selects
exactly the calls ``call_scope`` selects, whatever the filters: any time range (on the hour or not, shorter than an
hour or not), call and task dimensions, golden tasks, projects. Both run through the store's sandbox, as every
question does."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskcost.analytics import Filters
from taskcost.analytics._answer import frame
from taskcost.analytics._filters import HOUR_COLUMNS, Sql, call_scope, hours_scope
from taskcost.store import DuckDBStore
from tests.budget import examples
from tests.builders.analytics import T0, Fleet
from tests.builders.rollup import HOUR_KEY, hours_from

_SUMS = (
    "sum(attempts)::BIGINT AS attempts, sum(errors)::BIGINT AS errors, sum(cost_usd) AS cost_usd, "
    "sum(input_tokens)::BIGINT AS input_tokens, sum(cache_read_tokens)::BIGINT AS cache_read_tokens, "
    "sum(cache_write_tokens)::BIGINT AS cache_write_tokens, sum(output_tokens)::BIGINT AS output_tokens, "
    "sum(reasoning_tokens)::BIGINT AS reasoning_tokens"
)


@pytest.fixture(scope="module")
def store() -> Iterator[DuckDBStore]:
    """Five hours of calls, a call every 7 minutes: two projects, kinds, golden tasks, models (one unpriced),
    engines, errors."""
    fleet = Fleet()
    for i in range(40):
        task = fleet.task(
            f"t{i}",
            minute=i * 7.5,
            project=("p-a", "p-b")[i % 2],
            kind=("review", "fix", "report")[i % 3],
            golden=i % 4 == 0,
            outcome=("completed", "failed", None)[i % 5 % 3],
        )
        for j in range(3):
            task.call(
                ("cheap-1", "pricey-1", "claude-x", "unknown-model")[(i + j) % 4],
                input_tokens=1000 + 10 * i,
                cache_read=None if j == 2 else 100 * j,
                status="error" if (i + j) % 6 == 0 else "ok",
                duration_s=130.0,
                engine=("vllm", "sglang", None)[(i * j) % 3],
                engine_version=("0.6.0", "0.7.0")[i % 2],
                deployment=("api", "self_hosted")[j % 2],
            )
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore.open(Path(tmp) / "hours.duckdb", fold_rows=50) as s:
        fleet.write(s)
        yield s


def _times() -> st.SearchStrategy[datetime | None]:
    minutes = st.one_of(st.integers(-30, 330).map(float), st.floats(-30, 330, allow_nan=False))
    return st.one_of(st.none(), minutes.map(lambda m: T0 + timedelta(minutes=m)))


@st.composite
def filters(draw: st.DrawFn) -> Filters:
    values: dict[str, Any] = {"since": draw(_times()), "until": draw(_times())}
    for name, options in (
        ("project", ["p-a", "p-b"]),
        ("model", ["cheap-1", "unknown-model"]),
        ("engine", ["vllm", "sglang"]),
        ("engine_version", ["0.7.0"]),
        ("deployment", ["api", "self_hosted"]),
        ("kind", ["review", "fix"]),
    ):
        values[name] = draw(st.one_of(st.none(), st.sampled_from(options)))
    values["golden"] = draw(st.booleans())
    return Filters.model_validate(values)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(f=filters())
def test_hours_scope_selects_the_calls_call_scope_selects(store: DuckDBStore, f: Filters) -> None:
    hourly = (
        Sql("WITH ") + hours_scope(f) + Sql(f" SELECT {HOUR_KEY}, {_SUMS} FROM scoped_hours GROUP BY ALL ORDER BY ALL")
    )
    calls = Sql("WITH ") + call_scope(f) + Sql(hours_from("scoped_calls"))  # worked out from the calls
    got, want = frame(store, hourly, f), frame(store, calls, f)
    assert got.rows() == want.rows()
    # per minute (finer than the roll-up): the same calls, hour by hour
    per_minute = Sql("WITH ") + hours_scope(f, grain="minute")
    per_minute += Sql(
        " SELECT date_trunc('hour', hour) AS h, sum(attempts)::BIGINT AS n FROM scoped_hours GROUP BY 1 ORDER BY 1"
    )
    by_hour = want.group_by("hour", maintain_order=True).agg(n=pl.col("attempts").sum()).sort("hour")
    assert frame(store, per_minute, f).rows() == by_hour.rows()


def test_whole_hours_are_read_from_the_roll_up(store: DuckDBStore) -> None:
    """The roll-up holds the selection's whole hours (so the scope reads them there); a partial hour's calls come from
    the calls; a task filter reads every call."""
    aligned = Filters(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=3))
    assert "llm_call_hours" in hours_scope(aligned).text and "llm_calls" not in hours_scope(aligned).text
    partial = Filters(since=T0 + timedelta(minutes=90), until=T0 + timedelta(hours=3))
    assert "llm_call_hours" in hours_scope(partial).text and "llm_calls" in hours_scope(partial).text
    assert "llm_call_hours" not in hours_scope(Filters(kind="review")).text
    rows = frame(store, Sql(f"SELECT {HOUR_COLUMNS} FROM llm_call_hours"), Filters()).height
    calls = frame(store, Sql("SELECT count(*) AS n FROM llm_calls"), Filters()).item()
    assert 0 < rows < calls
