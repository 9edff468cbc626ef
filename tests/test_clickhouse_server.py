"""The ClickHouse store against a real ClickHouse server: the wire, the HTTP client, a server's own database.

These run where ``TASKCOST_CLICKHOUSE_URL`` names a server the tests may create and drop databases on, e.g.
``clickhouse://default:@127.0.0.1:8123/default`` (the database in the URL is only where the connection starts: each
test works in a database of its own, dropped afterwards). Elsewhere they are skipped, saying so; the same store is
tested in full on chDB (tests/test_clickhouse_store.py, test_clickhouse_parity.py, test_clickhouse_sandbox.py).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from taskcost.store import DuckDBStore
from taskcost.store.clickhouse._store import ClickHouseStore
from tests.test_clickhouse_store import _batches, _fleet, _same_views, _sample

URL = os.environ.get("TASKCOST_CLICKHOUSE_URL")
pytestmark = pytest.mark.skipif(not URL, reason="TASKCOST_CLICKHOUSE_URL is not set: no ClickHouse server to test on")


@pytest.fixture
def server_dsn() -> Iterator[str]:
    assert URL is not None
    parts = urlsplit(URL)
    name = f"taskcost_test_{uuid.uuid4().hex[:12]}"
    yield urlunsplit(parts._replace(path=f"/{name}"))
    import clickhouse_connect

    admin = clickhouse_connect.get_client(
        host=parts.hostname,
        port=parts.port or 8123,
        username=parts.username or "default",
        password=parts.password or "",
    )
    admin.command(f"DROP DATABASE IF EXISTS {name}")


def test_a_server_holds_the_same_views_as_duckdb(server_dsn: str, tmp_path: Path) -> None:
    with ClickHouseStore.open(server_dsn) as ch, DuckDBStore.open(tmp_path / "d.duckdb") as duck:
        for b in [*_batches(_fleet("srv")), _sample()]:
            ch.write(b)
            duck.write(b)
        _same_views(ch, duck)


def test_two_collectors_on_a_server_store_each_span_once(server_dsn: str) -> None:
    batches = _batches(_fleet("two", n=3))
    with ClickHouseStore.open(server_dsn) as a, ClickHouseStore.open(server_dsn) as b:
        for batch in batches:
            a.write(batch)
            b.write(batch)  # the same spans re-sent to the other collector
        n = sum(x.span_count for x in batches)
        assert a.admin_query("SELECT count() FROM spans").rows == [(n,)]


def test_keys_on_a_server(server_dsn: str) -> None:
    with ClickHouseStore.open(server_dsn) as a, ClickHouseStore.open(server_dsn) as b:
        key, secret = a.create_key("p1", "read")
        b._keys_fresh(force=True)  # the other collector reads the keys again (after KEY_CACHE_S on its own)
        found = b.verify_key(secret)
        assert found is not None and (found.id, found.project) == (key.id, "p1")
        assert a.revoke_key(key.id)
        b._keys_fresh(force=True)
        assert b.verify_key(secret) is None


# -- the reader user and row policies (taskcost/store/clickhouse/_access.py) -------------------------------------------
# These need a connecting user that may manage access (CREATE USER, CREATE ROW POLICY, GRANT ... WITH GRANT OPTION:
# the server's `default` user with access_management on); without it they are skipped, saying why. The reader's
# password is given in the dsn (`reader_password`): the URL's user may have none.


@pytest.fixture
def reader_dsn(server_dsn: str) -> Iterator[str]:
    from taskcost.store.clickhouse._access import drop_statements

    parts = urlsplit(server_dsn)
    yield urlunsplit(parts._replace(query="reader_password=reader-test-secret"))
    import clickhouse_connect

    admin = clickhouse_connect.get_client(
        host=parts.hostname,
        port=parts.port or 8123,
        username=parts.username or "default",
        password=parts.password or "",
    )
    for statement in drop_statements(parts.path.strip("/")):  # users and policies outlive the dropped database
        with contextlib.suppress(Exception):
            admin.command(statement)


def _with_reader(dsn: str) -> ClickHouseStore:
    store = ClickHouseStore.open(dsn)
    if not store.access.summary["row_policies"]:
        reason = store.access.summary["reason"]
        store.close()
        pytest.skip(f"no reader on this server: {reason}")
    return store


def _as_reader(store: ClickHouseStore, sql: str, project: str | None = "default", **extra: Any) -> set[Any]:
    """Raw SQL as the reader, past the store's query check: only the request's own settings, as the store sends."""
    settings: dict[str, Any] = {"SQL_taskcost_project": project} if project is not None else {}
    settings.update(extra)
    settings["readonly"] = 1
    return {r[0] for r in store.access.client.query(sql, settings=settings).result_rows}


def test_the_reader_sees_one_project_even_past_the_check(reader_dsn: str) -> None:
    from clickhouse_connect.driver.exceptions import ClickHouseError

    with _with_reader(reader_dsn) as ch:
        for b in _batches(_fleet("rp")):
            ch.write(b)
        assert {r[0] for r in ch.admin_query("SELECT DISTINCT project FROM llm_calls").rows} == {"default", "other"}
        for relation in ("llm_call_rows", "span_rows", "tool_call_rows", "task_rows", "llm_calls", "tasks", "spans"):
            assert _as_reader(ch, f"SELECT DISTINCT project FROM {relation}") == {"default"}, relation
            assert _as_reader(ch, f"SELECT DISTINCT project FROM {relation}", "other") == {"other"}, relation
        assert _as_reader(ch, "SELECT count() FROM llm_call_rows WHERE project = 'other'") == {0}
        # the query's text cannot change the project (readonly=1 was set by the request) ...
        with pytest.raises(ClickHouseError):
            _as_reader(ch, "SELECT DISTINCT project FROM llm_call_rows SETTINGS SQL_taskcost_project = 'other'")
        # ... and a request without it reads nothing: it fails
        with pytest.raises(ClickHouseError):
            _as_reader(ch, "SELECT DISTINCT project FROM llm_call_rows", None)
        # the private tables are not the reader's at all
        with pytest.raises(ClickHouseError):
            _as_reader(ch, "SELECT count() FROM api_keys")
        # through the store: the check, then the reader
        assert {r[0] for r in ch.query("SELECT DISTINCT project FROM llm_calls", project="other").rows} == {"other"}
        # the connecting user (the collectors' writes and the server's own analytics) still reads every project
        assert {r[0] for r in ch.query("SELECT DISTINCT project FROM tasks").rows} == {"default", "other"}


def test_the_reader_cannot_write_or_change_the_schema(reader_dsn: str) -> None:
    from clickhouse_connect.driver.exceptions import ClickHouseError

    with _with_reader(reader_dsn) as ch:
        reader = ch.access.client
        refused = [
            "INSERT INTO task_rows (project, trace_id, span_id, task_id, outcome, start_ns, end_ns, status, "
            "received_ns) VALUES ('other', 't', 's', 'k', 'ok', 1, 2, 'ok', 3)",
            "CREATE TABLE reader_made (x Int8) ENGINE = Memory",
            "DROP TABLE llm_call_rows",
            "ALTER TABLE llm_call_rows DELETE WHERE 1",
            "CREATE USER reader_made_user",
            "DROP ROW POLICY taskcost_project ON llm_call_rows",
        ]
        for sql in refused:
            with pytest.raises(ClickHouseError):
                reader.command(sql, settings={"SQL_taskcost_project": "other"})
        assert ch.admin_query("SELECT count() FROM task_rows WHERE trace_id = 't'").rows == [(0,)]
        assert ch.admin_query("EXISTS TABLE llm_call_rows").rows == [(1,)]


def test_setting_the_reader_up_again_is_a_no_op(reader_dsn: str) -> None:
    with _with_reader(reader_dsn) as a, _with_reader(reader_dsn) as b:  # two collectors, one database
        for batch in _batches(_fleet("again", n=1)):
            a.write(batch)
        assert _as_reader(a, "SELECT DISTINCT project FROM llm_calls") == {"default"}
        assert _as_reader(b, "SELECT DISTINCT project FROM llm_calls", "other") == {"other"}
