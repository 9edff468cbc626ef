"""``GET /api/analytics/<question>``: every analytics question over HTTP, under the read keys and project isolation
of ``/api/sql`` and through the same query slots. Part of the composition root: it joins the collector's access
control with ``taskcost.analytics``, which the collector itself must not import.

Query parameters are the ``Filters`` fields and the question's options (``?model=gpt-4o&by=kind``); an unknown or
bad one is a 422, a question that cannot be asked that way a 400, both in the one JSON error shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, create_model

from taskcost.analytics import QUESTIONS, Filters, Question, UsageError
from taskcost.collector import ApiError, AuthPolicy, QueryGate, QueryGateFull, authenticate
from taskcost.store import QueryError, Store

__all__ = ["analytics_router"]


class AnswerTable(BaseModel):
    title: str
    columns: list[str]
    rows: list[list[Any]]
    display: list[str] | None = Field(None, description="The columns a terminal shows, when not all.")


class AnswerDoc(BaseModel):
    """Every question's answer (money as decimal strings; a key or column ending in `_usd` is money)."""

    question: str
    filters: dict[str, Any] = Field(description="The filters that applied (a read key's project included).")
    summary: dict[str, Any] = Field(description="The headline figures.")
    tables: dict[str, AnswerTable]
    notes: list[str] = Field(description="What a reader must know: coverage, estimates used, why there is no answer.")
    terminal_keys: list[str] | None = Field(None, description="The summary keys a terminal shows, when not all.")


def _endpoint(
    question: Question[Any], store: Store, gate: QueryGate, admin_token: str | None, auth: AuthPolicy
) -> Callable[..., Awaitable[Response]]:
    model = create_model(f"{question.options.__name__}Query", __base__=(Filters, question.options))
    filter_fields = set(Filters.model_fields)

    async def answer(request: Request, query: Any) -> Response:
        caller = authenticate(auth, request, "read", admin_token)
        values = query.model_dump(exclude_defaults=True)
        filters = Filters.model_validate({k: v for k, v in values.items() if k in filter_fields})
        if caller.project is not None:
            filters = filters.narrowed(project=caller.project)
        options = question.options.model_validate({k: v for k, v in values.items() if k not in filter_fields})
        try:
            result = await gate.run_async(caller.project, question.run, store, filters, options)
        except QueryGateFull as exc:
            raise ApiError(429, str(exc), headers={"Retry-After": "1"}) from None
        except (UsageError, QueryError) as exc:
            raise ApiError(400, str(exc)) from None
        return Response(orjson.dumps(result.to_json()), media_type="application/json")

    # the query model is made here, at run time: its annotation cannot be a name the module's text resolves
    answer.__annotations__ = {"request": Request, "query": Annotated[model, Query()], "return": Response}
    answer.__doc__ = question.help[:1].upper() + question.help[1:] + ". Definitions: docs/analytics.md."
    return answer


def analytics_router(store: Store, gate: QueryGate, admin_token: str | None, auth: AuthPolicy) -> APIRouter:
    router = APIRouter(prefix="/api/analytics", tags=["analytics"])
    for question in QUESTIONS.values():
        router.add_api_route(
            f"/{question.name}",
            _endpoint(question, store, gate, admin_token, auth),
            methods=["GET"],
            name=f"analytics_{question.name.replace('-', '_')}",
            summary=question.help,
            responses={
                200: {"model": AnswerDoc, "description": "The answer."},
                400: {"description": "The question cannot be asked this way (the message says why)."},
                429: {"description": "Every query slot and queue place is taken; retry after Retry-After seconds."},
            },
        )
    return router
