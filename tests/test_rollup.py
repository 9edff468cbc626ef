"""The writer's duplicate marker and task roll-up (taskcost/store/_rollup.py): whatever the batches, the
commits they are split into, re-sent spans, retries and re-prices, ``tasks`` and ``llm_calls`` say
exactly what a from-scratch aggregation of the stored rows (the views' old definition) says."""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskcost.normalize import SpanRecord
from taskcost.store import DuckDBStore, StoreUnavailableError, _hours
from tests.budget import examples
from tests.builders.rollup import T0, assert_exact, batch, llm, task_row, tool_row
from tests.conftest import copy_of


def test_one_response_reported_in_two_requests_counts_once(store: DuckDBStore) -> None:
    store.write(batch([llm("s2", response_id="resp-1"), llm("s9", response_id="resp-9")], 1))
    store.write(batch([llm("s1", response_id="resp-1")], 2))  # the same response, another request, a later commit
    store.write(batch([llm("s3", response_id="resp-1", trace="t2")], 3))  # another trace: another response
    [task] = assert_exact(store)
    assert store.query("SELECT span_id FROM llm_calls ORDER BY 1").rows == [("s2",), ("s3",), ("s9",)]
    assert store.admin_query("SELECT count(*) FILTER (WHERE duplicate) FROM llm_call_rows").rows == [(1,)]
    cols = store.query("SELECT * FROM tasks").columns
    assert dict(zip(cols, task, strict=True))["attempts"] == 3


def test_duplicates_within_one_commit_keep_the_first(store: DuckDBStore) -> None:
    store.write(batch([llm("s5", response_id="r"), llm("s4", response_id="r"), llm("s6", response_id="r")], 1))
    assert store.query("SELECT span_id FROM llm_calls").rows == [("s4",)]  # first by (received_ns, span_id)
    assert_exact(store)


def test_a_resent_batch_changes_nothing_and_a_mixed_one_adds_its_new_rows(store: DuckDBStore) -> None:
    first = [llm("a1", response_id="r1", call_id="c1"), task_row("root"), tool_row("tl1", cost=Decimal("0.01"))]
    store.write(batch(first, 1))
    before = assert_exact(store)
    again = store.write(batch(first, 2))
    assert (again.spans, again.deduplicated) == (0, 3)
    assert assert_exact(store) == before
    # re-sent spans with new ones, one of them a second report of a stored response, one a retry
    mixed = [*first, llm("a0", response_id="r1"), llm("a2", call_id="c1", attempt=2), tool_row("tl2")]
    info = store.write(batch(mixed, 3))
    assert (info.spans, info.deduplicated) == (3, 3)
    [task] = store.query("SELECT llm_calls, attempts, retries, tool_calls FROM tasks").rows
    assert task == (1, 2, 1, 2)
    assert_exact(store)


def test_retries_of_one_call_in_different_commits_are_one_call(store: DuckDBStore) -> None:
    store.write(batch([llm("a1", call_id="c1", status="error")], 1))
    store.write(batch([llm("b1", call_id="c2")], 2))
    store.write(batch([llm("a2", call_id="c1", attempt=2)], 3))
    store.write(batch([llm("a3", call_id="c1", attempt=3), task_row("root", outcome="failed")], 4))
    [task] = store.query("SELECT llm_calls, attempts, retries, failed_attempts, outcome FROM tasks").rows
    assert task == (2, 4, 2, 1, "failed")
    assert_exact(store)


def test_a_task_with_calls_but_no_task_span_yet_has_no_outcome(store: DuckDBStore) -> None:
    store.write(batch([llm("a1", task="running", model="no-such-model-anywhere")], 1))
    store.write(batch([tool_row("t1", task="tools-only")], 2))
    rows = store.query("SELECT task_id, outcome, llm_calls, cost_usd, unpriced_calls, start_time FROM tasks").rows
    assert sorted(rows, key=lambda r: r[0]) == [
        ("running", None, 1, None, 1, T0.replace(tzinfo=None)),
        ("tools-only", None, 0, None, 0, None),
    ]
    assert_exact(store)


# -- any batches, any commits ------------------------------------------------------------------------------
_KINDS = st.sampled_from(["llm", "llm", "llm", "task", "tool"])


@st.composite
def histories(draw: st.DrawFn) -> list[list[tuple[str, list[tuple[Any, SpanRecord]]]]]:
    """Commits, each a list of (project, records) batches; span ids unique unless a batch is re-sent."""
    n = draw(st.integers(1, 40))
    records: list[tuple[str, tuple[Any, SpanRecord]]] = []
    for i in range(n):
        kind = draw(_KINDS)
        project = draw(st.sampled_from(["alpha", "beta"]))
        task = draw(st.sampled_from(["t-a", "t-b", "t-c"]))
        trace = draw(st.sampled_from(["tr1", "tr2"]))
        if kind == "llm":
            rec = llm(
                f"s{i:03d}",
                task=task,
                trace=trace,
                call_id=draw(st.sampled_from(["c1", "c2", "c3", f"own-{i}"])),
                attempt=draw(st.integers(1, 3)),
                response_id=draw(st.sampled_from([None, "r1", "r2", "r3"])),
                minute=draw(st.integers(0, 150)),  # up to three hours: the hourly roll-up's keys
                model=draw(st.sampled_from(["gpt-4o", "gpt-4o-mini", "no-such-model-anywhere"])),
                # answered (a dated model, or the name asked for) or not (a 429): a task's model is the one answering
                response_model=draw(st.sampled_from([None, None, "gpt-4o-2024-08-06", "gpt-4o-mini"])),
                status=draw(st.sampled_from(["ok", "ok", "error"])),
                input_tokens=draw(st.sampled_from([None, 10, 2000])),
            )
        elif kind == "task":
            outcome = draw(st.sampled_from(["completed", "failed", "abandoned"]))
            minute = draw(st.integers(1, 500)) * 100 + i  # task spans end at distinct times (arg_max: no ties)
            start = draw(st.integers(0, 50))
            golden = draw(st.booleans())
            rec = task_row(
                f"s{i:03d}", task=task, trace=trace, outcome=outcome, minute=minute, start_minute=start, golden=golden
            )
        else:
            cost = draw(st.sampled_from([None, Decimal("0.005"), Decimal("0.125")]))
            rec = tool_row(f"s{i:03d}", task=task, trace=trace, cost=cost)
        records.append((project, rec))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=6)))
    commits = []
    for lo, hi in zip([0, *cuts], [*cuts, n], strict=True):
        part = records[lo:hi]
        if commits and draw(st.booleans()):  # a client re-sends part of what it sent before
            part = part + draw(st.lists(st.sampled_from(records[:lo]), max_size=4))
        by_project: dict[str, list[tuple[Any, SpanRecord]]] = {}
        for project, rec in part:
            by_project.setdefault(project, []).append(rec)
        commits.append(sorted(by_project.items()))
    return commits


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), fold_rows=st.sampled_from([1, 3, 10**9]))
def test_the_rollup_equals_a_from_scratch_aggregation_over_any_commits(
    migrated_db: Path, history: list[list[tuple[str, list[tuple[Any, SpanRecord]]]]], fold_rows: int
) -> None:
    """fold_rows 1: the delta is folded in at every commit; 3: now and then; 10**9: only when asked. Each example
    starts from a new empty database (a copy of one migrated once)."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        DuckDBStore.open(copy_of(migrated_db, Path(tmp) / "h.duckdb"), fold_rows=fold_rows) as store,
    ):
        for i, commit in enumerate(history, start=1):
            futures = [store.submit(batch(records, i, project)) for project, records in commit]
            for f in futures:
                f.result(30)
            if i % 2:
                assert_exact(store)
        tasks = assert_exact(store)
        store.fold_rollups()
        assert store.admin_query("SELECT count(*) FROM task_rollup_delta").rows == [(0,)]
        assert store.admin_query("SELECT count(*) FROM call_hours_delta").rows == [(0,)]
        assert assert_exact(store) == tasks
        store.rebuild_rollups()  # from scratch, by the store: the same
        assert assert_exact(store) == tasks


# -- migration 0006 over an existing database -----------------------------------------------------------
_OLD_ROWS = """
INSERT INTO llm_call_rows BY NAME
SELECT 'p' || (i % 2) AS project, 'tr' || (i % 3) AS trace_id, printf('%04d', i) AS span_id,
    'task-' || (i % 5) AS task_id, 'call-' || (i % 7) AS call_id, 1 + i % 2 AS attempt,
    1796000000000000000 + i * 1000000000 AS start_ns, 1796000000000000000 + i * 1000000000 + 5 AS end_ns,
    'chat' AS operation, 'openai' AS provider, 'gpt-4o' AS request_model,
    CASE WHEN i % 4 = 0 THEN NULL ELSE 'resp-' || (i % 6) END AS response_id,
    CASE WHEN i % 9 = 0 THEN NULL ELSE i * 10 END AS input_tokens, i AS output_tokens,
    CASE WHEN i % 2 = 0 THEN 'ok' ELSE 'error' END AS status,
    CASE WHEN i % 5 = 0 THEN NULL ELSE (i / 1000)::DECIMAL(38, 12) END AS cost_usd,
    (1000 - i) // 10 AS received_ns
FROM range(60) r(i);
INSERT INTO task_rows BY NAME
SELECT 'p' || (i % 2) AS project, 'tr0' AS trace_id, 'task' || i AS span_id, 'task-' || (i % 4) AS task_id,
    'review' AS kind, ['completed', 'failed'][1 + i % 2] AS outcome, 1796000000000000000 AS start_ns,
    1796000000000000000 + i * 7 AS end_ns, 'ok' AS status, 1 AS received_ns
FROM range(8) r(i);
INSERT INTO tool_call_rows BY NAME
SELECT 'p1' AS project, 'tr0' AS trace_id, 'tool' || i AS span_id, 'task-' || (i % 6) AS task_id,
    'search' AS tool_name, 0 AS start_ns, 1 AS end_ns, 'ok' AS status,
    CASE WHEN i % 2 = 0 THEN 0.01 END AS cost_usd, 1 AS received_ns
FROM range(9) r(i);
"""


def test_migration_0006_converts_an_existing_database(tmp_path: Path) -> None:
    import duckdb

    from taskcost.store import MIGRATIONS

    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    shipped = [m for m in MIGRATIONS if m.name < "0006"]
    assert len(shipped) == 5
    for m in shipped:  # a database as release 0005 left it
        con.execute(m.sql)
        con.execute("INSERT INTO schema_migrations VALUES (?, current_timestamp)", [m.name])
    con.execute(_OLD_ROWS)
    old_tasks = con.execute("SELECT * FROM tasks ORDER BY project, task_id").fetchall()
    old_calls = con.execute("SELECT * FROM llm_calls ORDER BY project, trace_id, span_id").fetchall()
    assert con.execute("SELECT count(*) FROM llm_call_rows").fetchone() != (len(old_calls),)  # some were duplicates
    con.close()

    with DuckDBStore.open(db) as store:
        # the columns later migrations added (0009: prompt fingerprint, golden; 0010: call dimensions; 0016: unpriced
        # tool calls) are new; the rest is unchanged
        dims = "model, provider, engine, engine_version, quantization, gpu_type, cluster_id, deployment"
        new = f"golden, {dims}, unpriced_tool_calls"
        tasks = store.query(f"SELECT * EXCLUDE ({new}) FROM tasks ORDER BY project, task_id").rows
        assert tasks == old_tasks
        later = "prompt_chars, stable_prefix_chars, prefix_break_block, prefix_break_kind"
        calls = store.query(f"SELECT * EXCLUDE ({later}) FROM llm_calls ORDER BY project, trace_id, span_id").rows
        assert calls == old_calls
        assert_exact(store)
        # the keys came along: a later report of a stored response is a duplicate, a retry is no new call
        later = [
            llm("late-dup", task="task-2", trace="tr2", response_id="resp-2"),
            llm("late-retry", task="task-0", call_id="call-0", attempt=3),
        ]
        store.write(batch(later, 10_000, project="p0"))
        assert store.query("SELECT count(*) FROM llm_calls WHERE span_id = 'late-dup'").rows == [(0,)]
        [(calls,)] = store.query("SELECT llm_calls FROM tasks WHERE project = 'p0' AND task_id = 'task-0'").rows
        assert calls == next(r[7] for r in old_tasks if r[:2] == ("p0", "task-0"))
        assert_exact(store)


# -- migrations 0011 to 0013 over a database as 0010 left it ---------------------------------------------------
def test_migrations_0011_to_0013_carry_golden_tasks_hourly_calls_and_answered_models_over(tmp_path: Path) -> None:
    import duckdb

    from taskcost.store._migrations import _ROLLUPS
    from taskcost.store._migrations_analytics import analytics_columns_0009, latest_view, task_dimensions_0010

    db = tmp_path / "old.duckdb"
    records = [
        llm("a1", task="gold", minute=5, response_id="r1"),
        llm("a1-again", task="gold", minute=6, response_id="r1"),  # a duplicate: not counted anywhere
        llm("a2", task="gold", minute=65, status="error"),
        llm("b1", task="plain", minute=130, model="no-such-model-anywhere"),
        # a 429 (no response: the name asked for), then its retry answered by the dated model: one model
        llm("r1", task="retried", minute=7, call_id="rc", status="error"),
        llm("r2", task="retried", minute=8, call_id="rc", attempt=2, response_model="gpt-4o-2024-08-06"),
        task_row("g", task="gold", golden=True, minute=70),
        task_row("p", task="plain", minute=140),
    ]
    with DuckDBStore.open(db) as store:
        store.write(batch(records, 1))
        want = assert_exact(store)
    # as 0010 left it: no golden column in the roll-up, no hourly roll-up, 0010's tasks view
    con = duckdb.connect(str(db))
    for t in ("task_rollup", "task_rollup_delta"):
        for column in ("golden", "answered_model_min", "answered_model_max"):
            con.execute(f"ALTER TABLE {t} DROP COLUMN {column}")
    con.execute("DROP VIEW llm_call_hours")
    con.execute("DROP TABLE call_hours")
    con.execute("DROP TABLE call_hours_delta")
    con.execute(latest_view(task_dimensions_0010(_ROLLUPS), "tasks"))
    con.execute("ALTER TABLE llm_call_rows DROP COLUMN answered_model")  # 0015's
    con.execute(latest_view(analytics_columns_0009(_ROLLUPS), "llm_calls"))
    # and none of the engine view's objects (0017, 0018): the upgrade makes them again
    for view in ("engine_calls", "engine_spans", "engine_span_match", "engine_span_once", "engine_metrics"):
        con.execute(f"DROP VIEW {view}")
    for table in ("engine_span_rows", "llm_call_engine_rows", "engine_metric_rows", "answer_open_tasks"):  # and 0019's
        con.execute(f"DROP TABLE {table}")
    for table in ("engine_match_rows", "engine_figure_rows", "engine_retracted"):  # and 0020's
        con.execute(f"DROP TABLE {table}")
    con.execute("DROP SEQUENCE engine_row_ids")
    for view in ("engine_call_figures", "engine_config_hours", "engine_config_busy"):  # and 0021's
        con.execute(f"DROP VIEW {view}")
    for table in ("engine_hour_rows", "engine_busy_rows", "engine_hours_dirty"):
        con.execute(f"DROP TABLE {table}")
    con.execute("DELETE FROM schema_migrations WHERE name >= '0011'")
    con.close()

    # a read (the CLI with no server) never upgrades the file: it says what is pending and how to apply it
    with pytest.raises(StoreUnavailableError) as refused:
        DuckDBStore.open(db, read_only=True)
    assert "0011_golden_in_the_task_rollup, 0012_hourly_call_rollup" in str(refused.value)
    assert f"taskcost serve --db {db}" in str(refused.value)

    with DuckDBStore.open(db) as store:
        assert assert_exact(store) == want
        assert store.query("SELECT task_id, golden, model FROM tasks ORDER BY 1").rows == [
            ("gold", True, "gpt-4o"),
            ("plain", False, "no-such-model-anywhere"),
            ("retried", False, "gpt-4o-2024-08-06"),  # 0010's view said 'mixed'
        ]
        hours = store.query("SELECT hour, model, priced, attempts, errors FROM llm_call_hours ORDER BY 1, 2").rows
        at = T0.replace(tzinfo=None, minute=0, second=0, microsecond=0)
        assert [(h - at).total_seconds() / 3600 for h, *_ in hours] == [0, 0, 1, 2]
        assert [tuple(r[1:]) for r in hours] == [
            ("gpt-4o", True, 1, 0),
            ("gpt-4o-2024-08-06", True, 2, 1),  # the 429 counted under the model that answered its call (0015)
            ("gpt-4o", True, 1, 1),
            ("no-such-model-anywhere", False, 1, 0),
        ]
    with DuckDBStore.open(db, read_only=True) as store:  # upgraded: reads open again
        assert store.query("SELECT count(*) FROM llm_call_hours").rows == [(4,)]


def test_a_move_that_nets_no_attempt_in_a_key_keeps_its_tokens(tmp_path: Path) -> None:
    """One attempt moved out of a key as another moved into it (answered models resolved again in one commit): the
    key nets no attempt and no cost, but the tokens differ, and the roll-up must take them (it dropped such a key)."""
    db = tmp_path / "m.duckdb"
    with DuckDBStore.open(db):
        pass
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "INSERT INTO llm_call_rows (trace_id, span_id, task_id, call_id, attempt, start_ns, end_ns, status, "
            "received_ns, request_model, input_tokens) VALUES "
            "('t', 'in', 'k', 'c1', 1, 1796202000000000000, 1796202001000000000, 'ok', 1, 'asked', NULL), "
            "('t', 'out', 'k', 'c2', 1, 1796202000000000000, 1796202001000000000, 'ok', 1, 'asked', 10)"
        )
        con.execute(
            "CREATE TEMP VIEW moves AS SELECT *, CASE WHEN span_id = 'in' THEN 1 ELSE -1 END AS sign FROM llm_call_rows"
        )
        _hours.move_hours(con, "moves")
        assert con.execute("SELECT model, attempts, input_tokens FROM call_hours_delta").fetchall() == [
            ("asked", 0, -10)
        ]
    finally:
        con.close()
