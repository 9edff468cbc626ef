"""Rent vs API: when rented GPUs beat per-token prices. (Being built: see docs/analytics.md.)"""

from __future__ import annotations

from taskcost.analytics._answer import Answer
from taskcost.analytics._filters import Filters
from taskcost.analytics._question import NoOptions, Question
from taskcost.store import ReadStore

__all__ = ["QUESTION"]


def _run(store: ReadStore, filters: Filters, options: NoOptions) -> Answer:
    raise NotImplementedError("breakeven")


QUESTION = Question(
    name="breakeven", help="rent vs API: when rented GPUs beat per-token prices", run=_run, options=NoOptions
)
