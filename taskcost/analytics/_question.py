"""A question as the CLI, the HTTP API and the dashboards see it: a name, a function, its options, an exit code.

Each question module defines ``QUESTION``; ``taskcost.analytics.QUESTIONS`` lists them. The CLI makes one command
per question (``taskcost cost``) and the HTTP API one route (``GET /api/analytics/cost``), both from the
``Filters`` fields and the question's ``options`` model: a new option is one field, documented once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from taskcost.analytics._answer import Answer
from taskcost.analytics._filters import Filters, UsageError
from taskcost.store import ReadStore

__all__ = ["NoOptions", "Options", "Question", "UsageError"]


class Options(BaseModel):
    """Base of a question's own options (beyond ``Filters``): flat fields of plain types (str, int, float, bool,
    Decimal, datetime, Literal), each with a default and a description (the CLI's help, the OpenAPI schema)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class NoOptions(Options):
    pass


O = TypeVar("O", bound=Options)  # noqa: E741


@dataclass(frozen=True)
class Question(Generic[O]):
    name: str  # the CLI command and the URL path segment
    help: str  # one line: what it answers
    run: Callable[[ReadStore, Filters, O], Answer]
    options: type[O]
    exit_code: Callable[[dict[str, Any]], int] | None = None  # from the answer's JSON: 0 unless said otherwise

    def __post_init__(self) -> None:
        # every caller (the CLI, the HTTP API, the dashboards) asks through ``run``: the filters' time range is
        # checked here once, so a time out of range or a reversed range is a usage error everywhere, never a 500
        object.__setattr__(self, "run", _checked(self.run))


def _checked(run: Callable[[ReadStore, Filters, O], Answer]) -> Callable[[ReadStore, Filters, O], Answer]:
    @functools.wraps(run)
    def checked(store: ReadStore, filters: Filters, options: O) -> Answer:
        filters.check()
        return run(store, filters, options)

    return checked
