"""Cache economics: hit rate, dollars saved and missed, prefix stability. (Being built: see docs/analytics.md.)"""

from __future__ import annotations

from taskcost.analytics._answer import Answer
from taskcost.analytics._filters import Filters
from taskcost.analytics._question import NoOptions, Question
from taskcost.store import ReadStore

__all__ = ["QUESTION"]


def _run(store: ReadStore, filters: Filters, options: NoOptions) -> Answer:
    raise NotImplementedError("cache")


QUESTION = Question(
    name="cache",
    help="cache economics: hit rate, dollars saved and missed, prefix stability",
    run=_run,
    options=NoOptions,
)
