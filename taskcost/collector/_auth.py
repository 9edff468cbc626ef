"""API keys on every request, once any key exists: ingest keys send spans, read keys query.
The project always comes from the key, never from the request."""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass

from fastapi import Request

from taskcost.collector._errors import ApiError
from taskcost.store import Store

__all__ = ["PROJECT_HEADER", "Caller", "authenticate", "check_admin", "secret_from_headers"]

# Set by the server on requests it forwards to the dashboards (any client-sent value is removed first).
PROJECT_HEADER = "x-taskcost-project"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="taskcost", Basic realm="taskcost"'}


@dataclass(frozen=True)
class Caller:
    project: str | None  # None: auth is off, every project is visible
    key_id: str | None


def secret_from_headers(authorization: str | None, x_key: str | None) -> str | None:
    """The key from `Authorization: Bearer <key>`, `Authorization: Basic <user:key>` or `X-Taskcost-Key`."""
    if x_key:
        return x_key.strip()
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        return (password or user) or None
    return None


def authenticate(store: Store, headers: dict[str, str] | Request, kind: str, admin_token: str | None = None) -> Caller:
    """The caller of a request that needs a ``kind`` key ('ingest' or 'read'). The server's admin
    token also reads, across projects (whoever can read it owns the server anyway)."""
    if not store.auth_enabled:
        return Caller(None, None)
    h = headers.headers if isinstance(headers, Request) else headers
    secret = secret_from_headers(h.get("authorization"), h.get("x-taskcost-key"))
    if secret is None:
        raise ApiError(401, f"an API key is required (a {kind} key: Authorization: Bearer <key>)", headers=_CHALLENGE)
    if kind == "read" and admin_token and hmac.compare_digest(secret, admin_token):
        return Caller(None, "admin")
    key = store.verify_key(secret)
    if key is None:
        raise ApiError(401, "unknown or revoked API key", headers=_CHALLENGE)
    if key.kind != kind:
        raise ApiError(403, f"this is a {key.kind} key; this endpoint needs a {kind} key")
    return Caller(key.project, key.id)


def check_admin(request: Request, admin_token: str | None) -> None:
    """Key management needs the server's admin token (only the server's owner can read it)."""
    given = secret_from_headers(request.headers.get("authorization"), None)
    if not admin_token or not given or not hmac.compare_digest(given, admin_token):
        raise ApiError(401, "the admin token is required for key management", headers=_CHALLENGE)
