"""What changed: the infra fingerprint, and what moved cost or p95. (Being built: see docs/analytics.md.)"""

from __future__ import annotations

from taskcost.analytics._answer import Answer
from taskcost.analytics._filters import Filters
from taskcost.analytics._question import NoOptions, Question
from taskcost.store import ReadStore

__all__ = ["QUESTION"]


def _run(store: ReadStore, filters: Filters, options: NoOptions) -> Answer:
    raise NotImplementedError("changes")


QUESTION = Question(
    name="changes", help="what changed: the infra fingerprint, and what moved cost or p95", run=_run, options=NoOptions
)
