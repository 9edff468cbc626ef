"""API keys on every request, once any key exists: ingest keys send spans, read keys query.
The project always comes from the key, never from the request."""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass

from fastapi import Request

from taskcost.collector._errors import ApiError
from taskcost.store import Store

__all__ = ["CALLER_PROJECT", "Caller", "authenticate", "check_admin", "secret_from_headers"]

# Where the server puts the checked caller's project for the dashboards: a key of the ASGI scope (WSGI:
# ``environ["asgi.scope"]``), which no client can write under any spelling, unlike a request header.
CALLER_PROJECT = "taskcost_caller_project"
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


def _same(given: str, expected: str) -> bool:
    """Constant-time equality of two secrets, whatever characters a client sent."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape"))


def authenticate(store: Store, headers: dict[str, str] | Request, kind: str, admin_token: str | None = None) -> Caller:
    """The caller of a request that needs a ``kind`` key ('ingest', 'read', or 'any' of them). The server's admin
    token also reads, across projects (whoever can read it owns the server anyway)."""
    if not store.auth_enabled:
        return Caller(None, None)
    h = headers.headers if isinstance(headers, Request) else headers
    secret = secret_from_headers(h.get("authorization"), h.get("x-taskcost-key"))
    if secret is None:
        raise ApiError(401, f"an API key is required (a {kind} key: Authorization: Bearer <key>)", headers=_CHALLENGE)
    if kind in ("read", "any") and admin_token and _same(secret, admin_token):
        return Caller(None, "admin")
    key = store.verify_key(secret)
    if key is None:
        raise ApiError(401, "unknown or revoked API key", headers=_CHALLENGE)
    if kind != "any" and key.kind != kind:
        raise ApiError(403, f"this is a {key.kind} key; this endpoint needs a {kind} key")
    return Caller(key.project, key.id)


def check_admin(request: Request, admin_token: str | None) -> None:
    """Key management needs the server's admin token (only the server's owner can read it)."""
    given = secret_from_headers(request.headers.get("authorization"), None)
    if not admin_token or not given or not _same(given, admin_token):
        raise ApiError(401, "the admin token is required for key management", headers=_CHALLENGE)
