"""The ClickHouse store against a real ClickHouse server: the wire, the HTTP client, a server's own database.

These run where ``TASKCOST_CLICKHOUSE_URL`` names a server the tests may create and drop databases on, e.g.
``clickhouse://default:@127.0.0.1:8123/default`` (the database in the URL is only where the connection starts: each
test works in a database of its own, dropped afterwards). Elsewhere they are skipped, saying so; the same store is
tested in full on chDB (tests/test_clickhouse_store.py, test_clickhouse_parity.py, test_clickhouse_sandbox.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
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
