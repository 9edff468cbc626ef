"""The questions taskcost answers, over the store's SQL views. No DuckDB here: only ``ReadStore``.

Each question is a plain function ``(store, filters, options) -> answer`` (see ``QUESTIONS``); answers are typed and
hold polars DataFrames, and all turn into one JSON shape (``Answer.to_json``). docs/analytics.md defines each one.
"""

from taskcost.analytics._answer import Answer, Table, frame
from taskcost.analytics._calls import CallCost, call_costs
from taskcost.analytics._coverage import Coverage, MissingPrice, MissingPrices, cost_coverage, missing_prices
from taskcost.analytics._dimensions import dimension_values
from taskcost.analytics._filters import CALL_DIMENSIONS, DIMENSIONS, MIXED, TASK_DIMENSIONS, Filters
from taskcost.analytics._question import NoOptions, Options, Question, UsageError
from taskcost.analytics._registry import QUESTIONS
from taskcost.analytics._tasks import OutcomeRow, TaskSummary, task_summary
from taskcost.pricing import format_usd  # the one money formatter (the dashboards reach pricing through here)
from taskcost.store import ReadStore  # what every question reads with (the dashboards type against it)

__all__ = [
    "CALL_DIMENSIONS",
    "DIMENSIONS",
    "MIXED",
    "QUESTIONS",
    "TASK_DIMENSIONS",
    "Answer",
    "CallCost",
    "Coverage",
    "Filters",
    "MissingPrice",
    "MissingPrices",
    "NoOptions",
    "Options",
    "OutcomeRow",
    "Question",
    "ReadStore",
    "Table",
    "TaskSummary",
    "UsageError",
    "call_costs",
    "cost_coverage",
    "dimension_values",
    "format_usd",
    "frame",
    "missing_prices",
    "task_summary",
]
