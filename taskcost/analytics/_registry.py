"""Every question, by name, in the order the CLI's help and the docs list them."""

from __future__ import annotations

from typing import Any

from taskcost.analytics import _breakeven, _cache, _canary, _changes, _cost, _engines, _per_token, _reconcile
from taskcost.analytics._question import Question

__all__ = ["QUESTIONS"]

QUESTIONS: dict[str, Question[Any]] = {
    q.name: q
    for q in (
        _cost.QUESTION,
        _per_token.QUESTION,
        _cache.QUESTION,
        _canary.QUESTION,
        _breakeven.QUESTION,
        _changes.QUESTION,
        _reconcile.QUESTION,
        _engines.QUESTION,
    )
}
