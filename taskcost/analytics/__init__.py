"""The questions taskcost answers, over the store's SQL views. No DuckDB here: only ``ReadStore``.

Each question is a plain function ``(store, filters, options) -> answer`` (see ``QUESTIONS``); answers are typed and
hold polars DataFrames, and all turn into one JSON shape (``Answer.to_json``). docs/analytics.md defines each one.
"""

from typing import TYPE_CHECKING

from taskcost._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from taskcost.analytics._answer import Answer, Table, frame
    from taskcost.analytics._calls import CallCost, call_costs
    from taskcost.analytics._canary_samples import GpuOffer, canary_samples, gpu_offers
    from taskcost.analytics._console import (
        RELATIONS,
        IngestActivity,
        PriceSourceUse,
        Relation,
        SqlAnswer,
        ingest_activity,
        price_sources,
        run_sql,
        sql_schema,
    )
    from taskcost.analytics._cost import CostAnswer, CostOptions
    from taskcost.analytics._coverage import Coverage, MissingPrice, MissingPrices, cost_coverage, missing_prices
    from taskcost.analytics._dimensions import dimension_values
    from taskcost.analytics._facts import DataExtent, DemoMarks, check_dimension, data_extent, demo_marks
    from taskcost.analytics._filters import (
        CALL_DIMENSIONS,
        DIMENSIONS,
        MIXED,
        TASK_DIMENSIONS,
        TIME_MAX,
        TIME_MIN,
        Filters,
        utc,
    )
    from taskcost.analytics._question import NoOptions, Options, Question, UsageError
    from taskcost.analytics._registry import QUESTIONS
    from taskcost.analytics._task_detail import TASK_SORTS, TaskDetail, TaskList, explain_call, task_detail, task_list
    from taskcost.analytics._tasks import OutcomeRow, TaskSummary, summarise_outcomes, task_summary
    from taskcost.pricing import format_usd  # the one money formatter (the dashboards reach pricing through here)
    from taskcost.store import ReadStore  # what every question reads with (the dashboards type against it)

__getattr__, __dir__ = lazy_exports(__name__)


__all__ = [
    "CALL_DIMENSIONS",
    "DIMENSIONS",
    "MIXED",
    "QUESTIONS",
    "TASK_DIMENSIONS",
    "TIME_MAX",
    "TIME_MIN",
    "Answer",
    "CallCost",
    "CostAnswer",
    "CostOptions",
    "Coverage",
    "Filters",
    "GpuOffer",
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
    "canary_samples",
    "check_dimension",
    "cost_coverage",
    "dimension_values",
    "format_usd",
    "frame",
    "gpu_offers",
    "missing_prices",
    "summarise_outcomes",
    "utc",
    "task_summary",
    # browsing tasks, facts about the data (the dashboards' Overview and Tasks pages)
    "TASK_SORTS",
    "DataExtent",
    "DemoMarks",
    "TaskDetail",
    "TaskList",
    "data_extent",
    "demo_marks",
    "explain_call",
    "task_detail",
    "task_list",
    # the SQL console and the stored spans' health (the dashboards' SQL and Data health pages)
    "RELATIONS",
    "IngestActivity",
    "PriceSourceUse",
    "Relation",
    "SqlAnswer",
    "ingest_activity",
    "price_sources",
    "run_sql",
    "sql_schema",
]
