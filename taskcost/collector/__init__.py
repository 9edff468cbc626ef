"""The collector: OTLP intake, the query API, the app factory.

Its names are imported on first use: a decode worker process imports ``taskcost.collector._decoders`` without
loading the web framework, gRPC or DuckDB."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskcost.collector._app import create_app
    from taskcost.collector._auth import CALLER_PROJECT, DASHBOARD_CHALLENGE, AuthPolicy, authenticate
    from taskcost.collector._errors import ApiError, error_body
    from taskcost.collector._gate import QueryGate, QueryGateFull
    from taskcost.collector._grpc import start_grpc_server
    from taskcost.collector._ingest import Intake, intake_from_settings

__all__ = [
    "CALLER_PROJECT",
    "DASHBOARD_CHALLENGE",
    "ApiError",
    "AuthPolicy",
    "Intake",
    "QueryGate",
    "QueryGateFull",
    "authenticate",
    "create_app",
    "error_body",
    "intake_from_settings",
    "start_grpc_server",
]

_WHERE = {
    "create_app": "_app",
    "error_body": "_errors",
    "ApiError": "_errors",
    "start_grpc_server": "_grpc",
    "authenticate": "_auth",
    "AuthPolicy": "_auth",
    "CALLER_PROJECT": "_auth",
    "DASHBOARD_CHALLENGE": "_auth",
    "QueryGate": "_gate",
    "QueryGateFull": "_gate",
    "Intake": "_ingest",
    "intake_from_settings": "_ingest",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
