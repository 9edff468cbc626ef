"""The reader user and row policies of a ClickHouse server (``_access``), as far as chDB can check them: every
statement is ClickHouse SQL by ClickHouse's own parser, the tables they cover are the ones that hold rows by project,
a store without access management opens and says so, and a project's SQL is routed with its settings. The statements
running on a server: tests/test_clickhouse_server.py (skipped without a server)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskcost.store.clickhouse import _access
from taskcost.store.clickhouse._access import (
    INTERNAL_VIEWS,
    PROJECT_SETTING,
    ROW_TABLES,
    ReaderAccess,
    drop_statements,
    reader_password,
    setup_statements,
)
from taskcost.store.clickhouse._sandbox import PUBLIC_RELATIONS, _literal
from taskcost.store.clickhouse._store import ClickHouseStore
from tests.test_clickhouse_store import _batches, _fleet


@pytest.fixture
def ch(tmp_path: Path) -> Iterator[ClickHouseStore]:
    with ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}") as s:
        yield s


def test_every_statement_parses_as_clickhouse_sql(ch: ClickHouseStore) -> None:
    client = ch._client
    statements = setup_statements("tc`odd'db", "pw") + drop_statements("tc`odd'db")
    assert statements
    for statement in statements:
        formatted = client.query(f"SELECT formatQuery({_literal(statement)})").result_rows[0][0]
        assert formatted.split()[0] in ("CREATE", "ALTER", "GRANT", "DROP"), formatted
        assert client.query(f"EXPLAIN AST {statement}").result_rows, statement
        # ClickHouse's rendering parses again to itself (nothing was read past or dropped)
        again = client.query(f"SELECT formatQuery({_literal(formatted)})").result_rows[0][0]
        assert again == formatted


def test_the_policies_are_read_only_and_cover_every_project_table(ch: ClickHouseStore) -> None:
    statements = setup_statements("taskcost", "pw")
    policies = [s for s in statements if s.startswith("CREATE ROW POLICY")]
    assert len(policies) == 2 * len(ROW_TABLES)
    assert all(" FOR SELECT USING " in s for s in policies)
    assert sum(f"getSetting('{PROJECT_SETTING}')" in s for s in policies) == len(ROW_TABLES)
    grants = [s for s in statements if s.startswith("GRANT")]
    assert grants and all(s.startswith("GRANT SELECT ON `taskcost`.") for s in grants)
    # the policies come before any grant: the reader never holds SELECT on a table without its policy
    assert statements.index(grants[0]) > statements.index(policies[-1])
    db = ch.database
    with_project = {
        r[0]
        for r in ch._client.query(
            f"SELECT table FROM system.columns WHERE database = {_literal(db)} AND name = 'project'"
        ).result_rows
    }
    views = {
        r[0]
        for r in ch._client.query(
            f"SELECT name FROM system.tables WHERE database = {_literal(db)} AND engine = 'View'"
        ).result_rows
    }
    tables = with_project - views
    assert tables - {"api_keys"} == set(ROW_TABLES)  # api_keys: never granted to the reader
    assert views == set(PUBLIC_RELATIONS) | set(INTERNAL_VIEWS)


def test_the_readers_password() -> None:
    a = reader_password("clickhouse://app:s3cret@h:8123/db", "db")
    assert a is not None and len(a) == 64
    assert a == reader_password("clickhouse://app:s3cret@other:9000/db", "db")  # every collector derives the same
    assert a != reader_password("clickhouse://app:other@h:8123/db", "db")
    assert a != reader_password("clickhouse://app:s3cret@h:8123/db2", "db2")
    assert reader_password("clickhouse://app:s3cret@h/db?reader_password=given", "db") == "given"
    assert reader_password("clickhouse://default:@h:8123/db", "db") is None  # guessable: not set up


def test_chdb_opens_without_access_management_and_says_so(ch: ClickHouseStore) -> None:
    assert ch.access.summary["row_policies"] is False
    assert "chDB" in ch.access.summary["reason"]
    for b in _batches(_fleet("acc")):
        ch.write(b)
    # the query check alone: still one project's rows
    projects = {r[0] for r in ch.query("SELECT DISTINCT project FROM llm_calls").rows}
    assert projects
    one = sorted(projects)[0]
    assert {r[0] for r in ch.query("SELECT DISTINCT project FROM llm_calls", project=one).rows} == {one}


class _Refusing:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def command(self, sql: str) -> None:
        self.ran.append(sql)
        raise RuntimeError("Code: 497. DB::Exception: app: Not enough privileges. (ACCESS_DENIED)\nmore")

    def query_arrow(self, sql: str, settings: dict[str, Any] | None = None) -> tuple[str, Any]:
        return ("admin", settings)


def test_a_user_without_access_management_warns_once_and_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    admin = _Refusing()
    with caplog.at_level(logging.WARNING, logger="taskcost.store"):
        access = ReaderAccess.open(admin, "clickhouse://app:pw@127.0.0.1:8123/db", "db", manage=True)
    assert len(admin.ran) == 1  # stopped at the first refusal
    assert access.summary == {"row_policies": False, "reason": access.reason}
    assert "refused access management" in access.reason and "ACCESS_DENIED" in access.reason
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    # user SQL goes on through the connecting user, unchanged
    assert access.query_arrow(admin, "SELECT 1", {"readonly": 1}, "p1") == ("admin", {"readonly": 1})


def test_no_password_no_reader(caplog: pytest.LogCaptureFixture) -> None:
    admin = _Refusing()
    access = ReaderAccess.open(admin, "clickhouse://default:@127.0.0.1:8123/db", "db", manage=True)
    assert admin.ran == [] and access.summary["row_policies"] is False and "no password" in access.reason


class _Reader:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any] | None]] = []

    def query(self, sql: str, settings: dict[str, Any] | None = None) -> Any:
        self.calls.append((sql, settings))
        return type("R", (), {"result_rows": [((settings or {}).get(PROJECT_SETTING),)]})()

    def query_arrow(self, sql: str, settings: dict[str, Any] | None = None) -> tuple[str, Any]:
        self.calls.append((sql, settings))
        return ("reader", settings)

    def close(self) -> None:
        pass


class _Granting(_Refusing):
    def command(self, sql: str) -> None:
        self.ran.append(sql)


def test_a_projects_sql_runs_as_the_reader_with_its_project(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = _Reader()
    made: list[tuple[str, str, str]] = []

    def fake_client(dsn: str, database: str, password: str) -> _Reader:
        made.append((dsn, database, password))
        return reader

    monkeypatch.setattr(_access, "_reader_client", fake_client)
    admin = _Granting()
    dsn = "clickhouse://app:pw@127.0.0.1:8123/db?reader_password=rp"
    access = ReaderAccess.open(admin, dsn, "db", manage=True)
    assert admin.ran == setup_statements("db", "rp")
    assert made == [(dsn, "db", "rp")]
    assert access.summary == {"row_policies": True, "reader": "db_reader", "project_setting": PROJECT_SETTING}
    got = access.query_arrow(admin, "SELECT 1", {"max_result_rows": 5, "readonly": 1}, "p'1")
    assert got[0] == "reader"
    settings = got[1]
    assert settings[PROJECT_SETTING] == "p'1" and settings["max_result_rows"] == 5
    assert list(settings)[-1] == "readonly" and settings["readonly"] == 1
    # the server's own analytics (no project) stay on the connecting user
    assert access.query_arrow(admin, "SELECT 1", {"readonly": 1}, None) == ("admin", {"readonly": 1})
    access.close()


def test_a_read_only_open_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_access, "_reader_client", lambda *a: _Reader())
    admin = _Granting()
    access = ReaderAccess.open(admin, "clickhouse://app:pw@127.0.0.1:8123/db", "db", manage=False)
    assert admin.ran == [] and access.summary["row_policies"] is True
