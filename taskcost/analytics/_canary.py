"""Baseline vs candidate, with a verdict (exit 0 pass, 1 fail, 3 not enough data)."""

from __future__ import annotations

from taskcost.analytics._answer import Answer
from taskcost.analytics._filters import Filters
from taskcost.analytics._question import NoOptions, Question
from taskcost.store import ReadStore

__all__ = ["QUESTION"]


def _run(store: ReadStore, filters: Filters, options: NoOptions) -> Answer:
    raise NotImplementedError("canary")


QUESTION = Question(
    name="canary",
    help="baseline vs candidate, with a verdict (exit 0 pass, 1 fail, 3 not enough data)",
    run=_run,
    options=NoOptions,
)
