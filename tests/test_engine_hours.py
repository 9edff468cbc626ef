"""The engines question's roll-ups the DuckDB store's writer keeps (taskcost/store/_engine_hours.py) against the calls
themselves: generated calls (configurations, projects, failures, calls across an hour's end and hours long, engine
spans arriving before or after their calls, in later commits) through the real normaliser and writer into a real
DuckDB file, some hours settled between commits and some not.

* ``engine_config_hours`` equals the calls added up per key (plain SQL over ``llm_calls`` and
  ``engine_call_figures``, every call on its own);
* the busy time from ``engine_config_busy``'s parts, over any run of whole hours, equals the union of the calls'
  intervals, measured here in Python;
* settling every hour changes neither."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskcost.normalize import normalize_request
from taskcost.store import ENGINE_CONFIG, ENGINE_HOUR_MEASURES, DuckDBStore, _engine_hours, prepare_batch
from tests.budget import examples
from tests.interop.otlp import T0, S, request

_HOUR_MS = 3_600_000
_EDGE_MS = (T0 // 1_000_000) % _HOUR_MS  # T0 is this far into its hour
_NEXT = _HOUR_MS - _EDGE_MS  # ms after T0 of the next hour's start
# a start in ms after T0: within T0's hour, around the next hour's start, near its end, and further on; calls long
# enough to run into the next hour, or hours long
_AT = st.sampled_from(
    (0, 1_000, _NEXT - 30_000, _NEXT - 5_000, _NEXT - 5, _NEXT, _NEXT + 3_000, _NEXT + 20_000,
     _NEXT + _HOUR_MS - 10_000, _NEXT + _HOUR_MS + 5_000, 3 * _HOUR_MS)
)  # fmt: skip
_LENGTH = st.sampled_from((0, 10, 2_000, 15_000, 40_000, 2 * _HOUR_MS + 5))
# configurations (engine version, cluster, tensor parallel size with engine timings), the first most often: calls of one
# configuration overlap
_CONFIGS = st.sampled_from(((None, None, None), (None, None, None), ("0.7", "gpu-a", 2), ("0.6", None, 4)))


@st.composite
def _traffic(draw: st.DrawFn) -> list[tuple[str, S]]:
    out: list[tuple[str, S]] = []
    calls = draw(st.integers(1, 14))
    for i in range(calls):
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "qwen3-32b",
            "gen_ai.provider.name": "vllm",
            "taskcost.task.id": f"t{i % 3}",
            "gen_ai.usage.input_tokens": 100 + i,
            "gen_ai.usage.output_tokens": draw(st.sampled_from((0, 20))),
            "taskcost.deployment": "self_hosted",
        }
        version, cluster, tp = draw(_CONFIGS)
        if version is not None:
            attrs["taskcost.engine.version"] = version
        if cluster is not None:
            attrs["taskcost.cluster.id"] = cluster
        if tp is not None:
            attrs |= {"taskcost.engine.decode_s": 0.5, "taskcost.parallel.tensor": tp}
        at, length = draw(_AT), draw(_LENGTH)
        error = "boom" if draw(st.integers(0, 4)) == 0 else None
        span = S("chat qwen3-32b", 100 + i, trace=1 + i % 2, start_ms=at, end_ms=at + length, attrs=attrs, error=error)
        out.append((draw(st.sampled_from(("default", "default", "other"))), span))
        if draw(st.integers(0, 3)) == 0:  # its engine's span, parented by it (a cluster where the call has none)
            e_attrs = {"gen_ai.request.id": f"r{i}", "gen_ai.latency.e2e": 0.4, "gen_ai.usage.cached_tokens": 7,
                       "gen_ai.latency.time_in_model_decode": 0.3, "taskcost.cluster.id": "gpu-b"}  # fmt: skip
            engine = S("llm_request", 500 + i, parent=100 + i, trace=1 + i % 2, scope="vllm.llm_engine",
                       start_ms=at + 1, end_ms=at + 1 + length // 2, attrs=e_attrs)  # fmt: skip
            out.append((out[-1][0], engine))
    return out


_KEY = ", ".join(("project", "hour", *ENGINE_CONFIG, "call_engine", "call_cluster_id"))
_PER_CALL = f"""
SELECT {_KEY}, {", ".join(f"sum({e})" for _, e in ENGINE_HOUR_MEASURES)}
FROM (SELECT c.project, date_trunc('hour', c.start_time) AS hour, c.model, c.provider,
        coalesce(c.engine, f.span_engine) AS engine, c.engine_version, c.quantization, c.gpu_type, c.gpu_count,
        coalesce(c.cluster_id, f.span_cluster_id) AS cluster_id, c.deployment,
        {", ".join(f"f.{col}" for col in ENGINE_CONFIG[9:])}, c.engine AS call_engine, c.cluster_id AS call_cluster_id,
        c.status, c.cost_usd, c.input_tokens, c.output_tokens, c.cache_read_tokens, c.duration_s AS latency_s, c.ttft_s,
        f.engine_source, f.decode_s, f.engine_cached_tokens, f.spec_draft_tokens, f.spec_accepted_tokens
      FROM llm_calls AS c LEFT JOIN engine_call_figures AS f USING (project, trace_id, span_id))
GROUP BY {_KEY}
"""
_CONFIG = ", ".join(ENGINE_CONFIG)


def _hours(store: DuckDBStore) -> list[tuple[Any, ...]]:
    measures = ", ".join(n for n, _ in ENGINE_HOUR_MEASURES)
    rows = store.query(f"SELECT {_KEY}, {measures} FROM engine_config_hours").rows
    return sorted(rows, key=repr)


def _union_us(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for lo, hi in sorted(intervals):
        if end is None or lo > end:
            total, end = total + hi - lo, hi
        elif hi > end:
            total, end = total + hi - end, hi
    return total


def _busy(store: DuckDBStore, lo: Any, hi: Any) -> tuple[dict[Any, int], dict[Any, int]]:
    """Per configuration, the busy microseconds of the calls that started in hours [lo, hi): from the parts, and
    from the calls (``engine_config_busy``'s own configuration, read from a dirty hour's calls, is checked by the
    hours' equality above; here the calls' intervals come from ``llm_calls``)."""
    parts: dict[Any, list[tuple[int, int]]] = {}
    for *config, a, b in store.query(
        f"SELECT {_CONFIG}, lo_us, hi_us FROM engine_config_busy WHERE hour >= ? AND hour < ?", [lo, hi]
    ).rows:
        parts.setdefault(tuple(config), []).append((a, b))
    calls: dict[Any, list[tuple[int, int]]] = {}
    rows = store.query(
        f"""SELECT c.model, c.provider, coalesce(c.engine, f.span_engine), c.engine_version, c.quantization,
            c.gpu_type, c.gpu_count, coalesce(c.cluster_id, f.span_cluster_id), c.deployment,
            {", ".join(f"f.{col}" for col in ENGINE_CONFIG[9:])}, epoch_us(c.start_time), epoch_us(c.end_time)
        FROM llm_calls AS c LEFT JOIN engine_call_figures AS f USING (project, trace_id, span_id)
        WHERE date_trunc('hour', c.start_time) >= ? AND date_trunc('hour', c.start_time) < ?""",
        [lo, hi],
    ).rows
    for *config, a, b in rows:
        if b > a:
            calls.setdefault(tuple(config), []).append((a, b))
    return ({k: _union_us(v) for k, v in parts.items()}, {k: _union_us(v) for k, v in calls.items()})


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    traffic=_traffic(),
    order=st.randoms(use_true_random=False),
    commits=st.integers(1, 4),
    settle=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_the_kept_hours_are_the_calls_settled_or_not(
    tmp_path_factory: Any, traffic: list[tuple[str, S]], order: Any, commits: int, settle: list[bool]
) -> None:
    order.shuffle(traffic)
    db = Path(tmp_path_factory.mktemp("hours")) / "h.duckdb"
    with DuckDBStore.open(db) as store:
        for k in range(commits):
            for project in ("default", "other"):
                spans = [s for p, s in traffic[k::commits] if p == project]
                if spans:
                    store.write(prepare_batch(normalize_request(request(*spans)), 1 + k, project=project))
            if settle[k]:  # every dirty hour settled now; later commits mark some of them again
                store.fold_rollups()
        kept = _hours(store)
        assert kept == sorted(store.query(_PER_CALL).rows, key=repr)
        hours = [r[0] for r in store.query("SELECT DISTINCT date_trunc('hour', start_time) FROM llm_calls").rows]
        runs = [(a, b + timedelta(hours=1)) for a in hours for b in hours if a <= b]  # every run of whole hours
        busy = {(a, b): _busy(store, a, b) for a, b in runs}
        for (a, b), (from_parts, from_calls) in busy.items():
            assert from_parts == from_calls, (a, b)
        store.fold_rollups()
        assert store.admin_query("SELECT count(*) FROM engine_hours_dirty").rows == [(0,)]
        assert _hours(store) == kept
        for (a, b), (from_parts, _) in busy.items():
            assert _busy(store, a, b)[0] == from_parts


def _plain(span: int, at: int, length: int) -> S:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "qwen3-32b", "gen_ai.provider.name": "vllm",
             "taskcost.task.id": "t", "gen_ai.usage.output_tokens": 20}  # fmt: skip
    return S("chat qwen3-32b", span, start_ms=at, end_ms=at + length, attrs=attrs)


def test_an_hours_parts_that_calls_of_other_hours_overlap_stay_apart(tmp_path: Path) -> None:
    """One configuration: a call of T0's hour runs 10 s into the next hour, over the first of that hour's three
    pieces; the last piece runs 5 s into the hour after, over its call. The busy time is the union of all of them,
    whichever hours are settled, and the next hour keeps the piece the earlier call overlaps and the one running on
    as they are (the third, alone, is the part for the rest)."""
    spans = [
        _plain(101, _NEXT - 30_000, 40_000),  # T0's hour, into the next: to _NEXT + 10 s
        _plain(102, _NEXT + 3_000, 2_000),  # inside it
        _plain(103, _NEXT + 20_000, 2_000),
        _plain(104, _NEXT + _HOUR_MS - 10_000, 15_000),  # to 5 s into the hour after
        _plain(105, _NEXT + _HOUR_MS + 1_000, 2_000),  # inside that
    ]
    with DuckDBStore.open(tmp_path / "p.duckdb") as store:
        store.write(prepare_batch(normalize_request(request(*spans[:2])), 1))
        store.fold_rollups()  # T0's hour and the next settled, then the next marked again
        store.write(prepare_batch(normalize_request(request(*spans[2:])), 2))
        hours = [r[0] for r in store.query("SELECT DISTINCT hour FROM engine_config_hours ORDER BY 1").rows]
        assert len(hours) == 3
        for settled in (False, True):
            parts, calls = _busy(store, hours[0], hours[2] + timedelta(hours=1))
            assert parts == calls and list(calls.values()) == [(40 + 2 + 15) * 1_000_000], settled
            for a, b in ((0, 1), (1, 2), (1, 3), (2, 3)):
                parts, calls = _busy(store, hours[a], hours[b - 1] + timedelta(hours=1))
                assert parts == calls, (settled, a, b)
            store.fold_rollups()
        kept = store.admin_query(
            "SELECT lo_us - epoch_us(hour), hi_us - epoch_us(hour) FROM engine_busy_rows WHERE hour = ? ORDER BY 1",
            [hours[1]],
        ).rows
        assert kept == [(3_000_000, 5_000_000), (20_000_000, 22_000_000), (3_590_000_000, 3_605_000_000)]


def test_the_writer_settles_the_hours_no_commit_marked_for_a_while(tmp_path: Path, monkeypatch: Any) -> None:
    """Without ``fold_rollups``: a commit settles the dirty hours whose last mark is old enough, oldest first, a few
    at a time (here: at once, one); the others stay dirty, and the views are the calls either way. The writer looks
    again only ``SETTLE_CHECK_S`` later (here: not in this test), nor settles anything idle before then."""
    monkeypatch.setattr(_engine_hours, "SETTLE_AFTER_S", 0.0)
    monkeypatch.setattr(_engine_hours, "SETTLE_CHECK_S", 1_000.0)
    monkeypatch.setattr(_engine_hours, "SETTLE_PER_COMMIT", 1)
    spans = [_plain(101, 0, 1_000), _plain(102, _NEXT + 1_000, 1_000), _plain(103, _NEXT + _HOUR_MS + 1_000, 1_000)]
    with DuckDBStore.open(tmp_path / "w.duckdb") as store:
        store.write(prepare_batch(normalize_request(request(*spans)), 1))
        hours = sorted(r[0] for r in store.query("SELECT DISTINCT hour FROM engine_config_hours").rows)
        dirty = "SELECT DISTINCT hour FROM engine_hours_dirty ORDER BY 1"
        settled = "SELECT DISTINCT hour FROM engine_hour_rows ORDER BY 1"
        assert len(hours) == 3
        assert [r[0] for r in store.admin_query(settled).rows] == hours[:1]
        assert [r[0] for r in store.admin_query(dirty).rows] == hours[1:]
        assert _hours(store) == sorted(store.query(_PER_CALL).rows, key=repr)
        store.write(prepare_batch(normalize_request(request(_plain(104, 2_000, 10))), 2))  # T0's hour marked again
        assert [r[0] for r in store.admin_query(settled).rows] == hours[:1]  # its rows stale: read from the calls
        assert [r[0] for r in store.admin_query(dirty).rows] == hours
        assert _hours(store) == sorted(store.query(_PER_CALL).rows, key=repr)


def test_an_idle_writer_settles_the_hours_itself(tmp_path: Path, monkeypatch: Any) -> None:
    """No commit after the last one: the writer settles its hours once they are due, in a transaction of its own."""
    monkeypatch.setattr(_engine_hours, "SETTLE_AFTER_S", 0.3)
    monkeypatch.setattr(_engine_hours, "SETTLE_CHECK_S", 0.05)
    with DuckDBStore.open(tmp_path / "i.duckdb") as store:
        store.write(prepare_batch(normalize_request(request(_plain(101, 0, 1_000), _plain(102, _NEXT, 10))), 1))
        assert store.admin_query("SELECT count(DISTINCT hour) FROM engine_hours_dirty").rows == [(2,)]
        deadline = time.monotonic() + 10
        while store.admin_query("SELECT count(*) FROM engine_hours_dirty").rows != [(0,)]:
            assert time.monotonic() < deadline, "the idle writer settled nothing"
            time.sleep(0.05)
        assert store.admin_query("SELECT count(DISTINCT hour) FROM engine_hour_rows").rows == [(2,)]
        assert _hours(store) == sorted(store.query(_PER_CALL).rows, key=repr)
