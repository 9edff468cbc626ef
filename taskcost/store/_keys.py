"""API keys: per project, kind ``ingest`` (send spans) or ``read`` (query). Only a SHA-256 of the
secret is stored; keys are 256-bit random, so a fast hash is enough (nothing to brute-force)."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "KEY_KINDS",
    "ApiKey",
    "create_key",
    "created_any",
    "hash_secret",
    "list_keys",
    "load_active",
    "revoke_key",
]

KEY_KINDS = ("ingest", "read")
_PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class ApiKey:
    id: str
    project: str
    kind: str
    prefix: str
    created_at: datetime | None = None
    revoked_at: datetime | None = None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(cur: duckdb.DuckDBPyConnection, project: str, kind: str) -> tuple[ApiKey, str]:
    """A new key; returns it and its secret (shown once, never stored)."""
    if kind not in KEY_KINDS:
        raise ValueError(f"key kind must be one of {', '.join(KEY_KINDS)}, not {kind!r}")
    if not _PROJECT.match(project):
        raise ValueError("project names are 1-64 letters, digits, '_', '.', '-', starting with a letter or digit")
    key_id = "key_" + secrets.token_hex(6)
    secret = f"tc_{kind}_{secrets.token_urlsafe(32)}"
    prefix = secret[: len(f"tc_{kind}_") + 6]
    cur.execute(
        "INSERT INTO api_keys (id, project, kind, secret_sha256, prefix) VALUES (?, ?, ?, ?, ?)",
        [key_id, project, kind, hash_secret(secret), prefix],
    )
    return ApiKey(key_id, project, kind, prefix), secret


def list_keys(cur: duckdb.DuckDBPyConnection) -> list[ApiKey]:
    rows = cur.execute(
        "SELECT id, project, kind, prefix, created_at, revoked_at FROM api_keys ORDER BY created_at, id"
    ).fetchall()
    return [ApiKey(*r) for r in rows]


def revoke_key(cur: duckdb.DuckDBPyConnection, key_id: str) -> bool:
    row = cur.execute(
        "UPDATE api_keys SET revoked_at = current_timestamp WHERE id = ? AND revoked_at IS NULL RETURNING id",
        [key_id],
    ).fetchone()
    return row is not None


def load_active(cur: duckdb.DuckDBPyConnection) -> dict[str, ApiKey]:
    """Active keys by the hash of their secret."""
    rows = cur.execute(
        "SELECT secret_sha256, id, project, kind, prefix, created_at FROM api_keys WHERE revoked_at IS NULL"
    ).fetchall()
    return {r[0]: ApiKey(r[1], r[2], r[3], r[4], r[5]) for r in rows}


def created_any(cur: duckdb.DuckDBPyConnection) -> bool:
    """Whether a key was ever created in this database: revoked keys stay in the table (nothing deletes a row), so
    this never turns false again, and the server's authentication with it (``auth = auto``)."""
    # fetchall: a result left half-read would keep the connection's transaction open (a CHECKPOINT then waits)
    (row,) = cur.execute("SELECT EXISTS (SELECT 1 FROM api_keys)").fetchall()
    return bool(row[0])
