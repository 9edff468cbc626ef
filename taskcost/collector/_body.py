"""Request bodies are read only from a caller whose key was checked, and only up to a limit.

FastAPI reads and parses a route's JSON body before the route's own code (or any dependency) runs, so a check of
the key inside the route comes after the whole body is in memory. ``BodyGate`` runs before that, on every request
that has a body: it checks the caller's key (the admin token under ``/api/admin/``, a read key or the admin token
under ``/api/`` and ``/dash/``, any valid key elsewhere), then the declared size (``Content-Length`` over the
limit: 413 at once), then reads the body, counting as it comes (a chunked body is cut at the limit: 413), and hands
the app what it read. A refused body is never read. OTLP intake (``/v1/``) checks its key before it reads and has
its own limit (``max_body_bytes``, measured again after decompression); it reads with ``read_body``, the same
counting.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from taskcost.collector._auth import DASHBOARD_CHALLENGE, AuthPolicy, authenticate, check_admin
from taskcost.collector._errors import ApiError, error_body

__all__ = ["BodyGate", "read_body", "read_limited"]

Scope = dict[str, Any]
Receive = Any
Send = Any


async def read_limited(
    chunks: AsyncIterable[bytes], declared: str | None, limit: int, setting: str | None = None
) -> bytes:
    """The whole body of at most ``limit`` bytes: refused (413) before reading when ``declared`` (Content-Length)
    is over it, else counted as it arrives and cut as soon as it passes it. ``setting``: the limit's name."""
    named = f" ({setting})" if setting else ""
    if declared and declared.strip().isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body of {int(declared)} bytes exceeds the limit of {limit} bytes{named}")
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body exceeds the limit of {limit} bytes{named}")
        parts.append(chunk)
    return b"".join(parts)


async def read_body(request: Request, limit: int) -> bytes:
    """A route's body, read with ``read_limited`` (call it after the caller's key was checked)."""
    return await read_limited(request.stream(), request.headers.get("content-length"), limit)


async def _received(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


# The key a body needs, by path prefix (the route checks its own kind again); elsewhere any valid key
_KINDS = (("/api/admin/", "admin"), ("/api/", "read"), ("/dash/", "read"), ("/metrics", "read"))


def _has_body(headers: Mapping[str, str]) -> bool:
    declared = headers.get("content-length")
    return "transfer-encoding" in headers or (declared is not None and declared.strip() != "0")


class BodyGate:
    """ASGI middleware: a request with a body reaches the app only from a caller with a valid key (while the
    server requires keys) and only up to ``limit`` bytes (``api_max_body_bytes``), read here; ``limits`` gives other
    limits by path prefix (None: the route checks the key and the size itself before it reads, e.g. ``/v1/``).
    A refusal is the one JSON error shape."""

    def __init__(
        self,
        app: Any,
        *,
        auth: AuthPolicy,
        admin_token: str | None,
        limit: int,
        limits: Mapping[str, int | None] | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.admin_token = admin_token
        self.limit = limit
        self.limits = dict(limits or {})

    def _limit_of(self, path: str) -> int | None:
        for prefix, limit in self.limits.items():
            if path.startswith(prefix):
                return limit
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = self._limit_of(path)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if limit is None or not _has_body(headers):
            await self.app(scope, receive, send)
            return
        try:
            kind = next((k for prefix, k in _KINDS if path.startswith(prefix)), "any")
            if kind == "admin":
                check_admin(headers, self.admin_token)
            else:
                authenticate(self.auth, headers, kind, self.admin_token)
            setting = "api_max_body_bytes" if limit == self.limit else None
            body = await read_limited(_received(receive), headers.get("content-length"), limit, setting)
        except ApiError as exc:
            headers_out = dict(exc.headers or {})
            if exc.status == 401 and path.startswith("/dash/"):
                headers_out["WWW-Authenticate"] = DASHBOARD_CHALLENGE
            response = JSONResponse(error_body(exc.status, exc.message), exc.status, headers=headers_out or None)
            await response(scope, receive, send)
            return
        except ClientDisconnect:
            return
        await self.app(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the app: the body read, once, then the client's own messages (a disconnect...)."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = await receive()
        return message

    return replayed
