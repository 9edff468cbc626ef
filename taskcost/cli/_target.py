"""Where the CLI gets its answers: the server that owns the file, or the file itself when no server
runs (DuckDB lets one process hold a file, so the server answers for it).

With the ``store`` setting (a ClickHouse URL) the data is there, not in ``db``: ``db`` only names the server info
file (and the server's spool), so a running server is still found by it; with none, the ClickHouse store is opened
in this process (chDB, like DuckDB, lets one process hold its directory)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskcost._internal.lazy import httpx, pa
from taskcost._internal.places import running_server, server_info_path, write_server_info
from taskcost.settings import Settings
from taskcost.store import ApiKey, QueryError, QueryResult, StoreUnavailableError

if TYPE_CHECKING:
    from taskcost.store import DuckDBStore, Store
    from taskcost.store.clickhouse import ClickHouseStore

__all__ = [
    "QuestionRefused",
    "PricingServer",
    "Remote",
    "RemoteStore",
    "error_message",
    "open_admin",
    "open_served",
    "open_target",
    "running_server",
    "server_for",
    "server_info_path",
    "shown_store",
    "write_server_info",
]


class QuestionRefused(QueryError):
    """The server's 400 or 422 to an analytics question: an option's value, not the server, is wrong."""


def error_message(resp: httpx.Response) -> str:
    try:
        return str(resp.json()["message"])
    except (ValueError, KeyError, TypeError):
        return resp.text[:500]


class Remote:
    def __init__(self, url: str, token: str | None, timeout_s: float = 60.0) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._client.request(method, f"{self.url}{path}", **kwargs)
        except httpx.HTTPError as exc:
            raise StoreUnavailableError(f"cannot reach the taskcost server at {self.url}: {exc}") from None

    def close(self) -> None:
        self._client.close()


class RemoteStore(Remote):
    """The query side of a running taskcost server, over its HTTP API."""

    def query(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        max_rows: int = 10_000,
        timeout_s: float = 10.0,
        project: str | None = None,
        max_bytes: int | None = None,
    ) -> QueryResult:
        """The server's /api/sql: its key decides the project and its limits (time, bytes) apply."""
        if project is not None:
            raise QueryError("a server decides the project by its key; ask it with that project's read key")
        resp = self._call("POST", "/api/sql", json={"sql": sql, "params": params or [], "max_rows": max_rows})
        if resp.status_code != 200:
            raise QueryError(f"server answered {resp.status_code}: {error_message(resp)}")
        doc = resp.json()
        decimal_cols = [i for i, t in enumerate(doc["types"]) if t.startswith("DECIMAL")]
        rows = []
        for row in doc["rows"]:
            for i in decimal_cols:
                if row[i] is not None:
                    row[i] = Decimal(row[i])
            rows.append(tuple(row))
        by = doc.get("truncated_by")
        return QueryResult(
            doc["columns"], doc["types"], rows, doc["truncated"], doc["elapsed_s"], {"truncated_by": by} if by else {}
        )

    def analytics(self, question: str, params: dict[str, Any]) -> dict[str, Any]:
        """The server's answer to ``GET /api/analytics/<question>`` (its JSON shape: taskcost.analytics.Answer);
        QuestionRefused when the server says the question cannot be asked that way (400, 422)."""
        resp = self._call("GET", f"/api/analytics/{question}", params=params)
        if resp.status_code in (400, 422):  # the question cannot be asked that way: a usage error, as on the file
            raise QuestionRefused(error_message(resp))
        if resp.status_code != 200:
            raise QueryError(f"server answered {resp.status_code}: {error_message(resp)}")
        doc: dict[str, Any] = resp.json()
        return doc

    def arrow(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        max_rows: int = 1_000_000,
        timeout_s: float = 10.0,
        project: str | None = None,
    ) -> pa.Table:
        """``query`` as an Arrow table, typed from the server's column types (within its row limit)."""
        res = self.query(sql, params, max_rows=max_rows, timeout_s=timeout_s, project=project)
        if res.truncated:
            raise QueryError(f"the answer has more rows than the server returns ({len(res.rows):,})")
        columns = list(zip(*res.rows, strict=True)) if res.rows else [() for _ in res.columns]
        return pa.table(
            {
                name: pa.array(list(col), type=_arrow_type(t))
                for name, t, col in zip(res.columns, res.types, columns, strict=True)
            }
        )


_ARROW_TYPES = {
    "BIGINT": "int64",
    "INTEGER": "int32",
    "DOUBLE": "float64",
    "FLOAT": "float32",
    "BOOLEAN": "bool_",
    "VARCHAR": "string",
    "DATE": "date32",
}


def _arrow_type(duckdb_type: str) -> pa.DataType | None:
    """The Arrow type of a DuckDB type name the server reported (None: let Arrow infer it)."""
    if duckdb_type.startswith("DECIMAL("):
        precision, scale = duckdb_type[len("DECIMAL(") : -1].split(",")
        return pa.decimal128(int(precision), int(scale))
    if duckdb_type == "HUGEINT":
        return pa.decimal128(38, 0)
    if duckdb_type == "TIMESTAMP":
        return pa.timestamp("us")
    name = _ARROW_TYPES.get(duckdb_type)
    return getattr(pa, name)() if name else None


class RemoteAdmin(Remote):
    """Key management on a running server (needs its admin token)."""

    def _keys(self, resp: httpx.Response, expect: int = 200) -> Any:
        if resp.status_code != expect:
            raise StoreUnavailableError(f"server answered {resp.status_code}: {error_message(resp)}")
        return resp.json()

    @staticmethod
    def _key(doc: dict[str, Any]) -> ApiKey:
        return ApiKey(doc["id"], doc["project"], doc["kind"], doc["prefix"], doc["created_at"], doc["revoked_at"])

    def create_key(self, project: str, kind: str) -> tuple[ApiKey, str]:
        resp = self._call("POST", "/api/admin/keys", json={"project": project, "kind": kind})
        if resp.status_code in (400, 422):
            raise ValueError(error_message(resp))
        doc = self._keys(resp, 201)
        return self._key(doc), doc["secret"]

    def list_keys(self) -> list[ApiKey]:
        return [self._key(d) for d in self._keys(self._call("GET", "/api/admin/keys"))]

    def revoke_key(self, key_id: str) -> bool:
        resp = self._call("DELETE", f"/api/admin/keys/{key_id}")
        if resp.status_code == 404:
            return False
        self._keys(resp)
        return True


def shown_store(url: str) -> str:
    """A store URL as it may be printed: without its password."""
    from urllib.parse import urlparse

    parts = urlparse(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def _open_clickhouse(url: str, *, read_only: bool) -> ClickHouseStore:
    from taskcost.store.clickhouse import ClickHouseStore

    return ClickHouseStore.open(url, read_only=read_only)


def open_target(
    db: Path, url: str | None, key: str | None = None, store: str | None = None
) -> RemoteStore | DuckDBStore | ClickHouseStore:
    """The server at ``url``; else the server that owns ``db``; else ``store`` (a ClickHouse URL) or ``db``
    opened read-only."""
    if url:
        return RemoteStore(url, key)
    running = running_server(db)
    if running:
        return RemoteStore(running["url"], key or running.get("admin_token"))
    if store:
        try:
            return _open_clickhouse(store, read_only=True)
        except StoreUnavailableError as exc:
            raise StoreUnavailableError(f"{exc}\n(no running server recorded in {server_info_path(db)})") from None
    try:
        from taskcost.store import DuckDBStore

        return DuckDBStore.open(db, read_only=True)
    except StoreUnavailableError as exc:
        raise StoreUnavailableError(f"{exc}\n(no running server recorded in {server_info_path(db)})") from None


def open_admin(
    db: Path, url: str | None, admin_token: str | None, store: str | None = None
) -> RemoteAdmin | DuckDBStore | ClickHouseStore:
    """Key management: the server at ``url`` (with ``admin_token``), the server that owns ``db``
    (its token is in the owner-only info file), or ``store`` (a ClickHouse URL) or ``db`` itself when no server
    runs."""
    if url:
        if not admin_token:
            raise ValueError("--url needs --admin-token (or TASKCOST_ADMIN_TOKEN) for key management")
        return RemoteAdmin(url, admin_token)
    running = running_server(db)
    if running:
        return RemoteAdmin(running["url"], admin_token or running.get("admin_token"))
    if store:
        return _open_clickhouse(store, read_only=False)
    from taskcost.store import DuckDBStore

    return DuckDBStore.open(db)


def open_served(settings: Settings, *, spool: bool) -> Store:
    """The database opened for writing as the server opens it: its writer's batch and queue bounds, the dedupe
    window and DuckDB's memory limit and threads, all from ``settings`` (raises StoreUnavailableError). With
    ``store`` (a ClickHouse URL): that ClickHouse database, with ``spool`` intake spooled in
    ``<db>.clickhouse-spool/`` (taskcost/store/clickhouse/_spool_writer.py)."""
    if settings.store:
        from taskcost.store.clickhouse import ClickHouseStore, clickhouse_spool_dir

        return ClickHouseStore.open(
            settings.store,
            max_queued_spans=settings.max_queued_spans,
            spool_dir=clickhouse_spool_dir(settings.db) if spool else None,
            spool_max_bytes=settings.spool_max_bytes,
            max_batch_spans=settings.writer_max_batch_spans,
            query_memory_bytes=settings.server_sql_memory_limit(),
        )
    from taskcost.store import DuckDBStore

    return DuckDBStore.open(
        settings.db,
        max_batch_spans=settings.writer_max_batch_spans,
        max_queued_spans=settings.max_queued_spans,
        max_queued_s=settings.max_queued_s,
        dedupe_window=settings.dedupe_window_spans,
        spool=spool,
        memory_limit=settings.server_memory_limit(),
        threads=settings.server_duckdb_threads(),
        sql_max_value_bytes=settings.sql_max_value_bytes,
        sql_memory_limit=settings.server_sql_memory_limit(),
    )


class PricingServer(Remote):
    """The pricing endpoints of a running server."""

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = self._call(method, path, **kwargs)
        if resp.status_code != 200:
            raise StoreUnavailableError(f"server answered {resp.status_code}: {error_message(resp)}")
        return resp.json()

    def get(self, path: str, **params: Any) -> Any:
        return self._json("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._json("POST", path, json=body)


def server_for(settings: Settings, *, admin: bool) -> PricingServer | None:
    """The server to ask: ``--url`` (with the admin token or key), else the one that owns ``--db``, else None.
    Raises ValueError when ``--url`` needs an admin token that was not given."""
    if settings.url:
        token = settings.admin_token if admin else (settings.key or settings.admin_token)
        if admin and not token:
            raise ValueError("--url needs --admin-token (or TASKCOST_ADMIN_TOKEN) to re-price or read cluster costs")
        return PricingServer(settings.url, token, timeout_s=3600.0)
    running = running_server(settings.db)
    if running:
        return PricingServer(running["url"], settings.admin_token or running.get("admin_token"), timeout_s=3600.0)
    return None
