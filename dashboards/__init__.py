"""taskcost's Dash dashboards (one file per page under ``pages/``), thin over ``taskcost.analytics``."""

from dashboards.app import create_dash_app

__all__ = ["create_dash_app"]
