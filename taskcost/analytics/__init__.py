"""The questions taskcost answers, over the store's SQL views. No DuckDB here: only ``Store.query``."""

from taskcost.analytics._calls import CallCost, call_costs
from taskcost.analytics._coverage import Coverage, MissingPrice, MissingPrices, cost_coverage, missing_prices
from taskcost.analytics._tasks import OutcomeRow, TaskSummary, task_summary
from taskcost.pricing import format_usd  # the one money formatter (the dashboards reach pricing through here)
from taskcost.store import ReadStore  # what every question reads with (the dashboards type against it)

__all__ = [
    "CallCost",
    "call_costs",
    "format_usd",
    "Coverage",
    "MissingPrice",
    "MissingPrices",
    "OutcomeRow",
    "ReadStore",
    "TaskSummary",
    "cost_coverage",
    "missing_prices",
    "task_summary",
]
