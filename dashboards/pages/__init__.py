"""One module per page, in the order the navigation lists them. Each has ``register(app, ctx)``."""

from dashboards.pages import overview

PAGES = (overview,)

__all__ = ["PAGES"]
