"""Per token vs per task, by model: the ranking flip. (Being built: see docs/analytics.md.)"""

from __future__ import annotations

from taskcost.analytics._answer import Answer
from taskcost.analytics._filters import Filters
from taskcost.analytics._question import NoOptions, Question
from taskcost.store import ReadStore

__all__ = ["QUESTION"]


def _run(store: ReadStore, filters: Filters, options: NoOptions) -> Answer:
    raise NotImplementedError("per-token")


QUESTION = Question(
    name="per-token", help="per token vs per task, by model: the ranking flip", run=_run, options=NoOptions
)
