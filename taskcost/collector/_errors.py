"""One error shape for every HTTP answer that is not a success.

JSON: ``{"code": <gRPC status code>, "message": str, "status": <HTTP status>, "error": <slug>}`` --
a superset of ``google.rpc.Status`` in its JSON mapping, so OTLP/JSON clients read it as the spec's
Status and API clients get one shape everywhere. OTLP requests sent as protobuf get the same
``google.rpc.Status`` as protobuf (the spec's rule: answer in the request's content type).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from google.rpc import status_pb2
from starlette.exceptions import HTTPException as StarletteHTTPException

from taskcost.store import StoreUnavailableError

__all__ = ["PROTOBUF", "ApiError", "error_body", "install_error_handlers"]

PROTOBUF = "application/x-protobuf"
log = logging.getLogger("taskcost.collector")

_SLUGS = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    500: "internal",
    503: "unavailable",
}
# HTTP status -> google.rpc.Code
_GRPC = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 413: 3, 415: 3, 422: 3, 429: 8, 500: 13, 503: 14}


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "code": _GRPC.get(status, 2),
        "message": message,
        "status": status,
        "error": _SLUGS.get(status, "error"),
    }


def error_response(request: Request, status: int, message: str, headers: dict[str, str] | None = None):
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if request.url.path.startswith("/v1/") and ctype == PROTOBUF:
        body = status_pb2.Status(code=_GRPC.get(status, 2), message=message).SerializeToString()
        return Response(body, status_code=status, media_type=PROTOBUF, headers=headers)
    return JSONResponse(error_body(status, message), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return error_response(request, exc.status, exc.message, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return error_response(request, exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
            parts.append(f"{where or 'body'}: {err.get('msg')}")
        return error_response(request, 422, "invalid request: " + "; ".join(parts))

    @app.exception_handler(StoreUnavailableError)
    async def _unavailable(request: Request, exc: StoreUnavailableError) -> Response:
        # the store is closing, or reopening after a failure of its engine: a moment, not a fault of the request
        return error_response(request, 503, str(exc), {"Retry-After": "1"})

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        # Never a traceback to the client; the log has it.
        log.exception("unhandled error on %s", request.url.path)
        return error_response(request, 500, f"internal error ({type(exc).__name__}); see the server log")
