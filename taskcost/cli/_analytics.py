"""One command per analytics question (`taskcost cost`, `taskcost canary`, ...), made from the question's registry
entry: the same filter options everywhere, the question's own options, ``--format table|csv|json``.

Through the running server (``GET /api/analytics/<question>``, its key decides the project) or the file, as
`taskcost sql` does. Exit codes: 0, or the question's own (canary: 1 fail, 3 not enough data); 1 when the store
or server fails; 2 for a usage error (a bad option value).
"""

from __future__ import annotations

import inspect
import types
import typing
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from taskcost.analytics import QUESTIONS, Filters, Question
from taskcost.analytics import UsageError as QuestionUsageError
from taskcost.cli._common import app, fail, settings_or_exit
from taskcost.cli._options import StoreOption, opened
from taskcost.cli._render import Format, RenderError, render

__all__: list[str] = []  # the module registers a command per question on the app


# -- one command per question -----------------------------------------------------------------------------------
def _cli_type(annotation: Any) -> tuple[Any, str]:
    """The type typer parses an option as (pydantic validates it after), and a help suffix (the choices)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        annotation, origin = args[0], typing.get_origin(args[0])
    if origin is Literal:
        return str, f" (one of: {', '.join(map(str, typing.get_args(annotation)))})"
    if annotation is bool:
        return bool, ""
    if annotation in (int, float):
        return annotation, ""
    return str, ""  # str, Decimal, datetime, ...: validated by pydantic


def _option_params(model: type[BaseModel]) -> list[inspect.Parameter]:
    params = []
    for name, info in model.model_fields.items():
        params.append(_option(name, info))
    return params


def _option(name: str, info: FieldInfo) -> inspect.Parameter:
    cli_type, choices = _cli_type(info.annotation)
    flag = "--" + name.replace("_", "-")
    default = info.default if info.default is not None else None
    if isinstance(default, Decimal | datetime):
        default = str(default)
    if cli_type is bool:
        # an option on by default is turned off by its --no- form
        pair = f"{flag}/--no-{name.replace('_', '-')}" if default else flag
        option = typer.Option(pair, help=(info.description or "") + choices)
        annotation: Any = Annotated[bool, option]
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=bool(default), annotation=annotation)
    option = typer.Option(flag, help=(info.description or "") + choices, show_default=default is not None)
    annotation = Annotated[cli_type | None, option]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _common_params() -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter(
            "db",
            kw,
            default=None,
            annotation=Annotated[
                Path | None, typer.Option("--db", help="DuckDB file [env TASKCOST_DB]", show_default=False)
            ],
        ),
        inspect.Parameter(
            "url",
            kw,
            default=None,
            annotation=Annotated[
                str | None,
                typer.Option("--url", help="Ask this running server instead [env TASKCOST_URL]", show_default=False),
            ],
        ),
        inspect.Parameter(
            "key",
            kw,
            default=None,
            annotation=Annotated[
                str | None, typer.Option("--key", help="API key for --url [env TASKCOST_KEY]", show_default=False)
            ],
        ),
        inspect.Parameter("store", kw, default=None, annotation=StoreOption),
        inspect.Parameter(
            "fmt", kw, default=Format.table, annotation=Annotated[Format, typer.Option("--format", "-f")]
        ),
        inspect.Parameter(
            "table",
            kw,
            default=None,
            annotation=Annotated[
                str | None,
                typer.Option("--table", help="Only this table of the answer (CSV: which one)", show_default=False),
            ],
        ),
    ]


def _validated(model: type[BaseModel], values: dict[str, Any]) -> Any:
    given = {k: v for k, v in values.items() if v is not None and v != model.model_fields[k].default}
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        problems = "; ".join(f"--{'.'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}" for e in exc.errors())
        raise fail(problems, code=2) from None


def _answer(question: Question[Any], filters: Filters, options: Any, settings: Any) -> dict[str, Any]:
    from taskcost.cli._target import QuestionRefused, RemoteStore, open_target

    with opened(lambda: open_target(settings.db, settings.url, settings.key, settings.store)) as target:
        if isinstance(target, RemoteStore):
            params = {
                **filters.model_dump(mode="json", exclude_defaults=True),
                **options.model_dump(mode="json", exclude_defaults=True),
            }
            try:
                return target.analytics(question.name, params)
            except QuestionRefused as exc:
                raise fail(str(exc), code=2) from None
        try:
            return question.run(target, filters, options).to_json()
        except QuestionUsageError as exc:
            raise fail(str(exc), code=2) from None


def _make_command(question: Question[Any]) -> None:
    filter_names = list(Filters.model_fields)
    option_names = list(question.options.model_fields)
    clash = set(filter_names) & set(option_names)
    assert not clash, f"{question.name}: options named like filters: {clash}"

    def command(**values: Any) -> None:
        settings = settings_or_exit(db=values["db"], url=values["url"], key=values["key"], store=values["store"])
        filters = _validated(Filters, {k: values[k] for k in filter_names})
        options = _validated(question.options, {k: values[k] for k in option_names})
        doc = _answer(question, filters, options, settings)
        try:
            render(doc, values["fmt"], values["table"])
        except RenderError as exc:
            raise fail(str(exc), code=2) from None
        code = question.exit_code(doc) if question.exit_code else 0
        if code:
            raise typer.Exit(code)

    params = _common_params() + _option_params(Filters) + _option_params(question.options)
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = question.help[:1].upper() + question.help[1:] + "."
    app.command(name=question.name)(command)


for _question in QUESTIONS.values():
    _make_command(_question)
