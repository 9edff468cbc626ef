"""One module per page, in the order the navigation lists them. Each has ``register(app, ctx)``."""

from dashboards.pages import breakeven, cache, canary, cost, engines, health, overview, sql, tasks

PAGES = (overview, tasks, cost, cache, canary, breakeven, engines, sql, health)

__all__ = ["PAGES"]
