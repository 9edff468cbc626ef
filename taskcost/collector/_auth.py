"""API keys on every request while authentication is on (``AuthPolicy``): ingest keys send spans, read keys query.
The project always comes from the key, never from the request."""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from fastapi import Request

from taskcost.collector._errors import ApiError
from taskcost.store import Store

if TYPE_CHECKING:
    from taskcost.settings import Settings

__all__ = [
    "CALLER_PROJECT",
    "DASHBOARD_CHALLENGE",
    "AuthPolicy",
    "Caller",
    "authenticate",
    "check_admin",
    "secret_from_headers",
]

# Where the server puts the checked caller's project for the dashboards: a key of the ASGI scope (WSGI:
# ``environ["asgi.scope"]``), which no client can write under any spelling, unlike a request header.
CALLER_PROJECT = "taskcost_caller_project"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="taskcost", Basic realm="taskcost"'}
# The dashboards' challenge (under /dash/): a browser offers its password prompt only for the first scheme of a
# challenge it can answer, and Chromium reads only the first one: the pages ask for Basic alone (any user name, the
# key as password).
DASHBOARD_CHALLENGE = 'Basic realm="taskcost dashboards: a read key as the password", charset="UTF-8"'


@dataclass(frozen=True)
class AuthPolicy:
    """Whether the server requires a key, asked at every request (a key created while it runs counts at once).

    ``mode`` (the ``auth`` setting): ``on``; ``off``, honoured on a loopback address only (beyond it, on);
    ``auto``: on once any key was ever created in the store, revoked ones included, and whenever the server listens
    beyond loopback (unless ``allow_unauthenticated`` and no key was ever created). Never read from the active keys
    alone: revoking the last key leaves authentication on, and only the admin token gets in until a key is created."""

    store: Store
    mode: Literal["auto", "on", "off"] = "auto"
    public: bool = False  # the server listens beyond loopback
    allow_unauthenticated: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, store: Store) -> AuthPolicy:
        return cls(store, settings.auth, settings.listens_beyond_loopback(), settings.allow_unauthenticated)

    @property
    def required(self) -> bool:
        if self.mode == "on":
            return True
        if self.mode == "off":
            return self.public  # fails closed: `taskcost serve` refuses auth = off beyond loopback anyway
        return self.store.keys_ever_created or (self.public and not self.allow_unauthenticated)


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


def _way_in(store: Store, kind: str) -> str:
    """What a refused caller is told when no active key exists (every key was revoked, or none was created yet)."""
    if store.has_active_keys:
        return ""
    kinds = "ingest|read" if kind == "any" else kind
    return (
        ". No active API key exists (every key was revoked, or none was created yet): the server's owner creates one "
        f"with `taskcost keys create PROJECT --kind {kinds}` beside the server (--db <its database>), or with "
        "--url <this server> --admin-token <its admin token>"
    )


def authenticate(
    auth: AuthPolicy, headers: Mapping[str, str] | Request, kind: str, admin_token: str | None = None
) -> Caller:
    """The caller of a request that needs a ``kind`` key ('ingest', 'read', or 'any' of them). The server's admin
    token also reads, across projects (whoever can read it owns the server anyway)."""
    if not auth.required:
        return Caller(None, None)
    h = headers.headers if isinstance(headers, Request) else headers
    secret = secret_from_headers(h.get("authorization"), h.get("x-taskcost-key"))
    if secret is None:
        what = "an ingest or read key" if kind == "any" else f"{_a(kind)} key"
        raise ApiError(
            401,
            f"an API key is required ({what}: Authorization: Bearer <key>){_way_in(auth.store, kind)}",
            headers=_CHALLENGE,
        )
    if kind in ("read", "any") and admin_token and _same(secret, admin_token):
        return Caller(None, "admin")
    key = auth.store.verify_key(secret)
    if key is None:
        raise ApiError(401, "unknown or revoked API key" + _way_in(auth.store, kind), headers=_CHALLENGE)
    if kind != "any" and key.kind != kind:
        raise ApiError(403, f"this is {_a(key.kind)} key; this endpoint needs {_a(kind)} key")
    return Caller(key.project, key.id)


def check_admin(headers: Mapping[str, str] | Request, admin_token: str | None) -> None:
    """Key management needs the server's admin token (only the server's owner can read it)."""
    h = headers.headers if isinstance(headers, Request) else headers
    given = secret_from_headers(h.get("authorization"), None)
    if not admin_token or not given or not _same(given, admin_token):
        raise ApiError(401, "the admin token is required for key management", headers=_CHALLENGE)


def _a(kind: str) -> str:
    """The article and the key kind: "an ingest", "a read"."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"
