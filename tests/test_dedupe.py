"""The dedupe window (taskcost/store/_dedupe.py): re-sent spans and repeated responses are recognised while
their keys are in the current or the previous generation, and the key tables carry no in-memory index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from taskcost.store import DuckDBStore
from taskcost.store._dedupe import RESPONSE_KEY, span_key
from taskcost.store._migrations import MIGRATIONS
from tests.builders.rollup import batch, llm

WINDOW = 4  # keys per generation: a span is recognised while fewer than 4 (at most 8) spans were stored after it


@pytest.fixture
def small(tmp_path: Path) -> Iterator[DuckDBStore]:
    with DuckDBStore.open(tmp_path / "d.duckdb", dedupe_window=WINDOW) as s:
        yield s


def _counts(store: DuckDBStore) -> dict[str, int]:
    tables = ("span_keys", "span_keys_old", "response_keys", "response_keys_old", "llm_call_rows")
    row = store.admin_query("SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in tables)).rows[0]
    return dict(zip(tables, row, strict=True))


def test_a_span_resent_after_a_new_generation_is_still_recognised(small: DuckDBStore) -> None:
    first = batch([llm(f"a{i}") for i in range(3)], 1)
    small.write(first)
    small.write(batch([llm(f"b{i}") for i in range(3)], 2))  # 6 keys: the writer starts a new generation
    assert _counts(small)["span_keys"] == 0 and _counts(small)["span_keys_old"] == 6
    again = small.write(batch([llm(f"a{i}") for i in range(3)] + [llm("c0")], 3))
    assert (again.spans, again.deduplicated) == (1, 3)
    assert small.query("SELECT count(*) FROM llm_calls").rows == [(7,)]


def test_beyond_two_generations_a_resent_span_is_stored_again(small: DuckDBStore) -> None:
    small.write(batch([llm("a0")], 1))
    small.write(batch([llm(f"b{i}") for i in range(4)], 2))  # 5 keys: rotated, a0 is in the old generation
    small.write(batch([llm(f"c{i}") for i in range(4)], 3))  # rotated again: a0 has left the window
    late = small.write(batch([llm("a0")], 4))
    assert (late.spans, late.deduplicated) == (1, 0)  # the documented horizon
    assert small.query("SELECT count(*) FROM llm_calls WHERE span_id = 'a0'").rows == [(2,)]


def test_a_response_in_the_old_generation_is_still_a_duplicate(small: DuckDBStore) -> None:
    small.write(batch([llm("s1", response_id="r1", call_id="c1")], 1))
    small.write(batch([llm(f"x{i}", response_id=f"rx{i}") for i in range(4)], 2))  # responses rotate too
    counts = _counts(small)
    assert counts["response_keys"] == 0 and counts["response_keys_old"] == 5
    small.write(batch([llm("s2", response_id="r1", call_id="c1")], 3))  # the same response, another span
    dup = small.admin_query("SELECT span_id, duplicate FROM llm_call_rows WHERE response_id = 'r1' ORDER BY 1")
    assert dup.rows == [("s1", False), ("s2", True)]
    assert small.query("SELECT count(*) FROM llm_calls").rows == [(5,)]


def test_repeats_within_one_commit_are_stored_once(small: DuckDBStore) -> None:
    info = small.write(batch([llm("a0"), llm("a0"), llm("a1", response_id="r"), llm("a2", response_id="r")], 1))
    assert (info.spans, info.deduplicated) == (3, 1)
    rows = small.admin_query("SELECT span_id, duplicate FROM llm_call_rows ORDER BY 1").rows
    assert rows == [("a0", False), ("a1", False), ("a2", True)]


def test_the_key_tables_have_no_index(small: DuckDBStore) -> None:
    # an ART index must fit in memory (about 58 bytes a key): over every span ever stored, commits ran out of it
    found = small.admin_query(
        "SELECT table_name, constraint_type FROM duckdb_constraints() "
        "WHERE table_name LIKE '%_keys%' AND constraint_type IN ('PRIMARY KEY', 'UNIQUE') "
        "UNION ALL SELECT table_name, 'INDEX' FROM duckdb_indexes() WHERE table_name LIKE '%_keys%'"
    ).rows
    assert [r for r in found if r[0] != "api_keys"] == []


def test_a_store_from_before_the_window_keeps_its_keys_as_the_old_generation(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with DuckDBStore.open(path) as s:
        s.write(batch([llm("a0", response_id="r0"), llm("a1")], 1))
    con = duckdb.connect(str(path))  # back to the schema before the window: keys under a primary key
    con.execute(
        "DROP TABLE span_keys_old; DROP TABLE span_keys; DROP TABLE response_keys_old; DROP TABLE response_keys"
    )
    con.execute("CREATE TABLE span_keys (k UHUGEINT PRIMARY KEY); CREATE TABLE response_keys (k UHUGEINT PRIMARY KEY)")
    con.execute(f"INSERT INTO span_keys SELECT {span_key()} FROM spans")
    con.execute(f"INSERT INTO response_keys SELECT {RESPONSE_KEY} FROM llm_call_rows WHERE response_id IS NOT NULL")
    con.execute("DELETE FROM schema_migrations WHERE name = ?", ["0008_dedupe_window"])
    con.close()
    assert "0008_dedupe_window" in [m.name for m in MIGRATIONS]
    with DuckDBStore.open(path, dedupe_window=WINDOW) as s:
        counts = _counts(s)
        assert [counts[t] for t in ("span_keys", "span_keys_old", "response_keys", "response_keys_old")] == [0, 2, 0, 1]
        again = s.write(batch([llm("a0", response_id="r0"), llm("a2", response_id="r0")], 2))
        assert (again.spans, again.deduplicated) == (1, 1)
        rows = s.admin_query("SELECT span_id, duplicate FROM llm_call_rows ORDER BY 1").rows
        assert rows == [("a0", False), ("a1", False), ("a2", True)]


def test_the_settings_default_window_is_the_stores() -> None:
    # written twice: the settings cannot import the store module (it loads DuckDB, and decode workers import settings)
    from taskcost.settings import Settings
    from taskcost.store._dedupe import DEFAULT_WINDOW

    assert Settings.model_fields["dedupe_window_spans"].default == DEFAULT_WINDOW
