"""The collector: OTLP intake, the query API, the app factory."""

from taskcost.collector._app import create_app
from taskcost.collector._errors import error_body
from taskcost.collector._grpc import start_grpc_server

__all__ = ["create_app", "error_body", "start_grpc_server"]
