"""The engine matches the DuckDB store's writer keeps commit by commit (taskcost/store/_engine_match.py) against the
same rule decided over everything at once (the rebuild) and against the rule written out here in Python:
generated calls and engine spans (parents, request ids as sent and with vLLM's prefix, shared ids, starts on both
sides of the hour, engine records, re-sent spans beyond a tiny dedupe window), split into commits in any order,
through the real normaliser and writer into a real DuckDB file."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import patch

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskcost.normalize import normalize_request
from taskcost.store import DuckDBStore, _engine_match, prepare_batch
from taskcost.store._engine_match import BOUND_NS, rebuild
from tests.budget import examples
from tests.interop.otlp import S, request

_HOUR_MS = BOUND_NS // 1_000_000
_IDS = ("a", "b", "chatcmpl-a", "chatcmpl-b")  # response ids of calls
_REQUESTS = ("a", "b", "z")  # request ids of engine spans ("chatcmpl-" + a matches a call's "chatcmpl-a")
_TIMINGS = {"taskcost.engine.prefill_s": 0.25, "taskcost.engine.decode_s": 1.5, "taskcost.parallel.tensor": 2}

# a time in ms after T0: around the start, on either side of one hour from it, and two hours on
_AT = st.sampled_from((0, 10, 500, _HOUR_MS - 5, _HOUR_MS + 5, 2 * _HOUR_MS))


@st.composite
def _traffic(draw: st.DrawFn) -> list[tuple[str, S]]:
    """(project, span) of calls and engine spans; engine spans and calls may be sent twice."""
    out: list[tuple[str, S]] = []
    calls = draw(st.integers(1, 6))
    for i in range(calls):
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "qwen3-32b",
            "gen_ai.provider.name": "vllm",
            "taskcost.task.id": f"t{i % 2}",
            "taskcost.call.id": f"c{i}",
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 20,
        }
        if (rid := draw(st.sampled_from((None, *_IDS)))) is not None:
            attrs["gen_ai.response.id"] = rid
        if draw(st.booleans()):
            attrs.update(_TIMINGS)
        at = draw(_AT)
        span = S("chat qwen3-32b", 100 + i, trace=draw(st.integers(1, 3)), start_ms=at, end_ms=at + 50, attrs=attrs)
        out.append((draw(st.sampled_from(("default", "default", "other"))), span))
    for j in range(draw(st.integers(0, 6))):
        parent = draw(st.sampled_from((None, *(100 + i for i in range(calls)))))
        at = draw(_AT)
        attrs = {
            "gen_ai.request.id": draw(st.sampled_from(_REQUESTS)),
            "gen_ai.latency.e2e": 0.01 * (j + 1),
            "gen_ai.latency.time_in_queue": 0.001 * j,
            "gen_ai.usage.cached_tokens": j,
        }
        span = S("llm_request", 500 + j, parent=parent, trace=draw(st.integers(1, 4)), scope="vllm.llm_engine",
                 start_ms=at + 1, end_ms=at + 40, attrs=attrs)  # fmt: skip
        out.append((draw(st.sampled_from(("default", "default", "other"))), span))
    resent = draw(st.lists(st.sampled_from(out), max_size=2))
    return out + resent


_VIEWS = {
    "engine_spans": "SELECT project, trace_id, span_id, matched, task_id, call_id, attempt FROM engine_spans",
    "engine_calls": "SELECT * FROM engine_calls",
}


def _views(store: DuckDBStore) -> dict[str, list[tuple[Any, ...]]]:
    return {name: sorted(store.query(sql).rows, key=repr) for name, sql in _VIEWS.items()}


def _expected(store: DuckDBStore) -> dict[tuple[str, str, str], tuple[str, str] | None]:
    """Each engine span's call by the documented rule, decided here in Python over the stored rows."""
    calls = store.admin_query(
        "SELECT project, trace_id, span_id, start_ns, response_id FROM llm_call_rows WHERE NOT duplicate"
    ).rows
    spans = store.admin_query(
        "SELECT project, trace_id, span_id, parent_span_id, request_id, start_ns FROM engine_span_rows "
        "QUALIFY row_number() OVER (PARTITION BY project, trace_id, span_id ORDER BY received_ns) = 1"
    ).rows
    out: dict[tuple[str, str, str], tuple[str, str] | None] = {}
    for project, trace, span, parent, req, start in spans:
        ranked = []
        for c_project, c_trace, c_span, c_start, response in calls:
            if c_project != project or abs(c_start - start) > BOUND_NS:
                continue
            if c_trace == trace and c_span == parent:
                rule = 0
            elif req is not None and response in (req, f"chatcmpl-{req}"):
                rule = 1 if c_trace == trace else 2
            else:
                continue
            ranked.append((rule, c_start, c_trace, c_span))
        out[(project, trace, span)] = min(ranked)[2:] if ranked else None
    return out


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(traffic=_traffic(), order=st.randoms(use_true_random=False), commits=st.integers(1, 4), fold=st.booleans())
def test_matches_kept_commit_by_commit_are_the_rule(
    tmp_path_factory: Any, traffic: list[tuple[str, S]], order: Any, commits: int, fold: bool
) -> None:
    order.shuffle(traffic)
    db = Path(tmp_path_factory.mktemp("match")) / "m.duckdb"
    # a dedupe window of 1 span: a span sent again is stored again (as beyond the window): its first row counts
    with DuckDBStore.open(db, dedupe_window=1, fold_rows=1 if fold else 5_000) as store:
        for k in range(commits):
            part = traffic[k::commits]
            for project in ("default", "other"):
                spans = [s for p, s in part if p == project]
                if spans:
                    batch = prepare_batch(normalize_request(request(*spans)), 1 + k, project=project)
                    store.write(batch)
        kept = _views(store)
        matched = {
            (p, t, s): (ct, cs)
            for p, t, s, ct, cs in store.admin_query(
                "SELECT project, trace_id, span_id, call_trace_id, call_span_id FROM engine_span_match"
            ).rows
        }
        expected = _expected(store)
        assert {k: v for k, v in expected.items() if v is not None} == matched
        assert {r[:3] for r in kept["engine_spans"]} == set(expected)
    assert _rebuilt(db) == kept


def _rebuilt(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The views after the matches were decided again over everything stored, in parts of one span and one call
    (as ``rebuild_rollups`` does, without deciding duplicates again: a dedupe window of one span missed some at write
    time, which a rebuild would find)."""
    con = duckdb.connect(str(db))
    try:
        con.execute("BEGIN TRANSACTION")
        with patch.object(_engine_match, "CHUNK_SPANS", 1), patch.object(_engine_match, "CHUNK_CALLS", 1):
            rebuild(con)
        con.execute("COMMIT")
    finally:
        con.close()
    with DuckDBStore.open(db) as store:
        return _views(store)


def _call(span: int, at: int, **extra: Any) -> S:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "qwen3-32b"}
    attrs["gen_ai.provider.name"] = "vllm"
    attrs |= {"taskcost.task.id": "t", "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20}
    return S("chat qwen3-32b", span, start_ms=at, end_ms=at + 50, attrs={**attrs, **extra})


def test_an_engine_record_sent_again_with_its_call_counts_for_the_stored_call(tmp_path: Path) -> None:
    """A call span sent again beyond the dedupe window, now with engine timings: its row is a duplicate of the stored
    call (the same response), and its engine record is that call's (found by key, as over everything at once)."""
    with DuckDBStore.open(tmp_path / "a.duckdb", dedupe_window=1) as store:
        store.write(prepare_batch(normalize_request(request(_call(102, 0, **{"gen_ai.response.id": "a"}))), 1))
        for k in (2, 3):  # past the window of one span (two generations of it)
            store.write(prepare_batch(normalize_request(request(_call(101 + k, 5))), k))
        again = _call(102, 0, **{"gen_ai.response.id": "a"}, **_TIMINGS)
        store.write(prepare_batch(normalize_request(request(again)), 4))
        assert store.admin_query("SELECT count(*) FILTER (duplicate) FROM llm_call_rows").rows == [(1,)]
        kept = _views(store)
        figures = [(r[2], r[29], r[31], r[32]) for r in kept["engine_calls"]]  # span, source, prefill, decode
        assert figures == [("0000000000000066", "response", 0.25, 1.5)]
    assert _rebuilt(tmp_path / "a.duckdb") == kept
