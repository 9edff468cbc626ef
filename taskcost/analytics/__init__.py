"""The questions taskcost answers, over the store's SQL views. No DuckDB here: only ``Store.query``."""

from taskcost.analytics._tasks import OutcomeRow, TaskSummary, task_summary

__all__ = ["OutcomeRow", "TaskSummary", "task_summary"]
