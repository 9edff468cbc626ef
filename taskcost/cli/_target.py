"""Where `taskcost sql` and `taskcost tasks` get their answers: the server that owns the file, or the
file itself when no server runs (DuckDB lets one process hold a file, so the server answers for it)."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from taskcost.store import DuckDBStore, QueryError, QueryResult, StoreUnavailableError

__all__ = ["RemoteStore", "open_target", "server_info_path", "write_server_info"]


def server_info_path(db: Path) -> Path:
    """The file a running server leaves beside its database: its pid and URL."""
    return db.with_name(db.name + ".serve.json")


def write_server_info(db: Path, url: str) -> Path:
    path = server_info_path(db)
    path.write_text(json.dumps({"pid": os.getpid(), "url": url, "db": str(db.resolve())}))
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _running_server(db: Path) -> str | None:
    path = server_info_path(db)
    try:
        info = json.loads(path.read_text())
        pid, url = int(info["pid"]), str(info["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return url if _pid_alive(pid) else None


class RemoteStore:
    """The query side of a running taskcost server, over its HTTP API."""

    def __init__(self, url: str, timeout_s: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(timeout=timeout_s)

    def query(
        self, sql: str, params: list[Any] | None = None, *, max_rows: int = 10_000, timeout_s: float = 10.0
    ) -> QueryResult:
        try:
            resp = self._client.post(
                f"{self.url}/api/sql", json={"sql": sql, "params": params or [], "max_rows": max_rows}
            )
        except httpx.HTTPError as exc:
            raise StoreUnavailableError(f"cannot reach the taskcost server at {self.url}: {exc}") from None
        if resp.status_code != 200:
            try:
                message = resp.json()["message"]
            except (ValueError, KeyError, TypeError):
                message = resp.text[:500]
            raise QueryError(f"server answered {resp.status_code}: {message}")
        doc = resp.json()
        decimal_cols = [i for i, t in enumerate(doc["types"]) if t.startswith("DECIMAL")]
        rows = []
        for row in doc["rows"]:
            for i in decimal_cols:
                if row[i] is not None:
                    row[i] = Decimal(row[i])
            rows.append(tuple(row))
        return QueryResult(doc["columns"], doc["types"], rows, doc["truncated"], doc["elapsed_s"])

    def close(self) -> None:
        self._client.close()


def open_target(db: Path, url: str | None) -> RemoteStore | DuckDBStore:
    """The server at ``url``; else the server that owns ``db``; else ``db`` opened read-only."""
    if url:
        return RemoteStore(url)
    running = _running_server(db)
    if running:
        return RemoteStore(running)
    try:
        return DuckDBStore.open(db, read_only=True)
    except StoreUnavailableError as exc:
        raise StoreUnavailableError(f"{exc}\n(no running server recorded in {server_info_path(db)})") from None
