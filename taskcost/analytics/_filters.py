"""``Filters``: which tasks and calls every question looks at, and the SQL that selects them.

Two kinds of dimension (docs/analytics.md, "Which tasks and calls a filter selects"):

- task dimensions (``project``, ``kind``, ``agent_name``, ``agent_version``, ``harness_version``, the time of the
  task's start, ``golden``): a task is in or out;
- call dimensions (``model``, ``provider``, ``engine``, ``engine_version``, ``quantization``, ``gpu_type``,
  ``cluster``, ``deployment``): a *call* is in or out by its own value; a *task* takes the value its calls share,
  or ``mixed`` when they disagree (a task whose calls all lack the value has none): the ``tasks`` view carries
  those values, kept by the roll-up, so selecting tasks by a call dimension never groups the calls.

The SQL is plain aggregates over the public views, with positional ``?`` parameters, so that another store can run
it (any dialect difference lives in ``_dialect.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "any_of",
    "CALL_DIMENSIONS",
    "DIMENSIONS",
    "HOUR_COLUMNS",
    "MIXED",
    "TASK_DIMENSIONS",
    "TIME_MAX",
    "TIME_MIN",
    "Filters",
    "Sql",
    "UsageError",
    "WholeHours",
    "by_task",
    "call_scope",
    "hours_scope",
    "naive_utc",
    "task_scope",
    "utc",
    "utc_text",
    "whole_hours",
]

MIXED = "mixed"
"""The value of a call dimension for a task whose calls disagree on it."""

TIME_MIN = datetime(1678, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(2262, 1, 1, tzinfo=UTC)
"""The instants a filter (``since``, ``until``) or a time option may name, inclusive. The store keeps a span's times
as OTLP's 64-bit nanoseconds since 1970, which reach from 1677-09-21 to 2262-04-11: no stored time is outside, and
every date arithmetic of the questions (a window's hours, a baseline window before ``since``) stays representable
inside it. A time outside is refused (``UsageError``: HTTP 400, CLI exit 2, a message on a dashboard page), never
clamped."""


class UsageError(ValueError):
    """The question cannot be asked this way (an unknown dimension, a baseline equal to the candidate...): the CLI
    exits 2, the HTTP API answers 400, both with this message."""


TASK_DIMENSIONS: dict[str, str] = {
    "project": "project",
    "kind": "kind",
    "agent_name": "agent_name",
    "agent_version": "agent_version",
    "harness_version": "harness_version",
}
"""Task dimension -> its column in ``tasks``."""

CALL_DIMENSIONS: dict[str, str] = {
    "model": "model",
    "provider": "provider",
    "engine": "engine",
    "engine_version": "engine_version",
    "quantization": "quantization",
    "gpu_type": "gpu_type",
    "cluster": "cluster_id",
    "deployment": "deployment",
}
"""Call dimension -> its column in ``llm_calls``."""

DIMENSIONS: tuple[str, ...] = (*TASK_DIMENSIONS, *CALL_DIMENSIONS)
"""Every dimension a question can filter on or group by."""


class Filters(BaseModel):
    """What a question looks at. Every field is optional; unset means "all". Shared by every question, the CLI's
    options (``--model gpt-4o``) and the HTTP API's query parameters (``?model=gpt-4o``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    since: datetime | None = Field(None, description="From this time, inclusive (UTC unless an offset is given).")
    until: datetime | None = Field(None, description="Up to this time, exclusive.")
    project: str | None = Field(None, description="Project (a read key always sees its own project only).")
    kind: str | None = Field(None, description="Task kind (`taskcost.task.kind`).")
    agent_name: str | None = Field(None, description="Agent name (`gen_ai.agent.name`).")
    agent_version: str | None = Field(None, description="Agent version (`gen_ai.agent.version`).")
    harness_version: str | None = Field(None, description="Agent harness version (`taskcost.harness.version`).")
    model: str | None = Field(None, description="Model (the one priced).")
    provider: str | None = Field(None, description="Provider (`openai`, `anthropic`, ...).")
    engine: str | None = Field(None, description="Inference engine (`vllm`, `sglang`, ...).")
    engine_version: str | None = Field(None, description="Inference engine version.")
    quantization: str | None = Field(None, description="Weights quantization (`fp8`, `bf16`, ...).")
    gpu_type: str | None = Field(None, description="GPU type (`H100-SXM`, ...).")
    cluster: str | None = Field(None, description="Cluster id (`taskcost.cluster.id`).")
    deployment: Literal["api", "self_hosted"] | None = Field(None, description="`api` or `self_hosted`.")
    golden: bool = Field(False, description="Only tasks tagged golden (`taskcost.task.golden`).")

    def task_values(self) -> dict[str, str]:
        """The task dimensions set: dimension -> value."""
        return {d: v for d in TASK_DIMENSIONS if (v := getattr(self, d)) is not None}

    def call_values(self) -> dict[str, str]:
        """The call dimensions set: dimension -> value."""
        return {d: v for d in CALL_DIMENSIONS if (v := getattr(self, d)) is not None}

    def narrowed(self, **values: Any) -> Filters:
        """These filters with some fields set (e.g. one canary arm: ``narrowed(engine_version="0.6.0")``)."""
        return self.model_copy(update=values)

    def check(self) -> None:
        """A ``UsageError`` when ``since`` or ``until`` is outside ``TIME_MIN`` .. ``TIME_MAX``, or ``since`` is not
        before ``until``: every question checks its filters first (``Question.run``)."""
        since = None if self.since is None else utc(self.since, "since")
        until = None if self.until is None else utc(self.until, "until")
        if since is not None and until is not None and since >= until:
            raise UsageError(
                f"since ({since.isoformat(sep=' ')}) must be before until ({until.isoformat(sep=' ')}): "
                "the time range is empty or reversed"
            )

    def describe(self) -> str:
        """``model=gpt-4o, since=2026-12-01 00:00:00`` (or ``all data``): for headings."""
        parts = [f"{k}={v}" for k, v in self.model_dump(exclude_defaults=True).items()]
        return ", ".join(parts) if parts else "all data"


def utc(at: datetime, name: str = "time") -> datetime:
    """``at`` as an aware UTC time (a naive time is UTC already): the one conversion of a time a question is given. A
    ``UsageError`` naming the range when ``at`` is outside ``TIME_MIN`` .. ``TIME_MAX`` (``name``: what it is, for the
    message), also when the conversion itself would overflow (``0001-01-01T00:00:00+01:00``)."""
    try:
        aware = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    except OverflowError:  # an offset that moves the time out of the year 1..9999
        aware = None
    if aware is None or not TIME_MIN <= aware <= TIME_MAX:
        raise UsageError(
            f"{name} {at.isoformat()} is out of range: give a time from {TIME_MIN.date()} to {TIME_MAX.date()} (UTC), "
            "the range the store's timestamps cover"
        )
    return aware


def naive_utc(at: datetime) -> datetime:
    """``at`` as the views hold times: a UTC wall time without a zone (an aware time is converted first; a time out of
    range is a ``UsageError``, see ``utc``)."""
    return utc(at).replace(tzinfo=None)


def utc_text(at: datetime) -> str:
    """The views' TIMESTAMPs are UTC wall times; parameters travel as text (also over the HTTP API)."""
    return naive_utc(at).isoformat(sep=" ")


@dataclass
class Sql:
    """SQL text with its positional parameters, in order."""

    text: str
    params: list[Any] = field(default_factory=list)

    def __add__(self, other: Sql) -> Sql:
        return Sql(self.text + other.text, self.params + other.params)


def any_of(conditions: Iterable[Sql]) -> Sql:
    """The conditions joined by OR, in parentheses (FALSE for none)."""
    parts = list(conditions)
    if not parts:
        return Sql("FALSE")
    return Sql("(" + " OR ".join(f"({p.text})" for p in parts) + ")", [x for p in parts for x in p.params])


def _where(conditions: Iterable[Sql]) -> Sql:
    parts = list(conditions)
    if not parts:
        return Sql("TRUE")
    return Sql(" AND ".join(p.text for p in parts), [x for p in parts for x in p.params])


def _time(column: str, filters: Filters) -> list[Sql]:
    out = []
    if filters.since is not None:
        out.append(Sql(f"{column} >= CAST(? AS TIMESTAMP)", [utc_text(filters.since)]))
    if filters.until is not None:
        out.append(Sql(f"{column} < CAST(? AS TIMESTAMP)", [utc_text(filters.until)]))
    return out


def _task_conditions(filters: Filters, alias: str) -> list[Sql]:
    conds = [Sql(f"{alias}.{TASK_DIMENSIONS[d]} = ?", [v]) for d, v in filters.task_values().items()]
    conds += _time(f"{alias}.start_time", filters)
    if filters.golden:
        conds.append(Sql(f"{alias}.golden"))
    return conds


def task_scope(filters: Filters, dimensions: Sequence[str] = (), name: str = "scoped_tasks") -> Sql:
    """A CTE (``<name> AS (...)``, no ``WITH``) of the selected tasks: every column of ``tasks``, which holds each
    call dimension as the value the task's calls share (``mixed`` when they disagree; NULL when they have none),
    plus a ``cluster`` column (the dimension's name for ``cluster_id``). ``dimensions``: kept for callers that
    name what they group by (every dimension is a column already). Tasks still running (no outcome) are included:
    a question that counts per-task figures leaves them out itself and says how many there were."""
    del dimensions
    conds = _task_conditions(filters, "t")
    conds += [Sql(f"t.{CALL_DIMENSIONS[d]} = ?", [v]) for d, v in filters.call_values().items()]
    body = Sql("SELECT t.*, t.cluster_id AS cluster FROM tasks AS t WHERE ") + _where(conds)
    return Sql(f"{name} AS (") + body + Sql(")")


def _by_task(filters: Filters) -> list[Sql]:
    """The conditions a call meets through its task (task dimensions but the project, and ``golden``)."""
    task_only = filters.model_copy(
        update={"since": None, "until": None, "project": None, **dict.fromkeys(CALL_DIMENSIONS)}
    )
    return _task_conditions(task_only, "t")


def _call_conditions(filters: Filters, *, time: bool = True) -> list[Sql]:
    conds = [Sql(f"c.{CALL_DIMENSIONS[d]} = ?", [v]) for d, v in filters.call_values().items()]
    if time:
        conds += _time("c.start_time", filters)
    if filters.project is not None:
        conds.append(Sql("c.project = ?", [filters.project]))
    tconds = _by_task(filters)
    if tconds:
        conds.append(
            Sql("EXISTS (SELECT 1 FROM tasks AS t WHERE t.project = c.project AND t.task_id = c.task_id AND ")
            + _where(tconds)
            + Sql(")")
        )
    return conds


def call_scope(filters: Filters, name: str = "scoped_calls", *, within: Sql | None = None) -> Sql:
    """A CTE (``<name> AS (...)``) of the selected LLM call attempts (``llm_calls`` columns): call dimensions and the
    time range (the call's start) on the call itself; task dimensions (and ``golden``) through its task. ``within``:
    a condition on ``c.start_time`` that replaces the time range."""
    conds = _call_conditions(filters, time=within is None) + ([within] if within is not None else [])
    return Sql(f"{name} AS (SELECT c.* FROM llm_calls AS c WHERE ") + _where(conds) + Sql(")")


def by_task(filters: Filters) -> bool:
    """Whether the filters select calls through their task (task dimensions but the project, or ``golden``)."""
    return bool(_by_task(filters))


HOUR_COLUMNS = (
    "project, hour, provider, model, deployment, engine, engine_version, quantization, gpu_type, cluster_id, priced, "
    "attempts, errors, cost_usd, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens"
)
"""The columns of ``llm_call_hours``, which ``hours_scope`` gives."""
_TOKENS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
# one call as a row of llm_call_hours (its ``hour`` at the grain given)
_CALL_AS_HOUR = (
    "c.project, date_trunc('{grain}', c.start_time) AS hour, c.provider, c.model, c.deployment, c.engine, "
    "c.engine_version, c.quantization, c.gpu_type, c.cluster_id, c.cost_usd IS NOT NULL AS priced, 1 AS attempts, "
    "CASE WHEN c.status = 'error' THEN 1 ELSE 0 END AS errors, c.cost_usd, "
    + ", ".join(f"coalesce(c.{t}, 0) AS {t}" for t in _TOKENS)
)
_HOUR = timedelta(hours=1)


def _floor_hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def hours_scope(filters: Filters, name: str = "scoped_hours", *, grain: Literal["hour", "minute"] = "hour") -> Sql:
    """A CTE (``<name> AS (...)``) of the selected call attempts added up per hour, in the columns of
    ``llm_call_hours`` (``HOUR_COLUMNS``; a key may repeat: sum the rows), for questions of traffic and spend that need
    no single call. The whole hours between ``since`` and ``until`` are read from ``llm_call_hours`` (a row per hour
    and key); the calls of a partial hour at either end are read one by one from ``llm_calls``, as are all of them when
    a task dimension or ``golden`` selects (the hourly roll-up does not know a call's task). Selects exactly the calls
    of ``call_scope``. ``grain="minute"``: every call, its ``hour`` column the start of its minute (finer than the
    roll-up)."""

    def calls(conds: list[Sql]) -> Sql:
        return Sql(f"SELECT {_CALL_AS_HOUR.format(grain=grain)} FROM llm_calls AS c WHERE ") + _where(conds)

    hours = None if by_task(filters) or grain != "hour" else whole_hours(filters)
    if hours is None:
        body = calls(_call_conditions(filters))
        return Sql(f"{name} AS (") + body + Sql(")")
    body = Sql(f"SELECT {HOUR_COLUMNS} FROM llm_call_hours AS c WHERE ") + _where(
        _call_conditions(filters, time=False) + [hours.hours("c.hour")]
    )
    for edge in hours.edges:
        body += Sql(" UNION ALL ") + calls(_call_conditions(filters.model_copy(update=edge)))
    return Sql(f"{name} AS (") + body + Sql(")")


@dataclass(frozen=True)
class WholeHours:
    """The whole hours [lo, hi) of a selection (None: open), which an hourly roll-up answers, and its ``edges``: the
    partial hours at either end (``since``/``until`` updates of the filters), read call by call."""

    lo: datetime | None
    hi: datetime | None
    edges: tuple[dict[str, datetime], ...]

    def hours(self, column: str) -> Sql:
        """The condition that ``column`` (an hour) is one of the whole hours."""
        conds = [Sql(f"{column} >= CAST(? AS TIMESTAMP)", [utc_text(self.lo)])] if self.lo is not None else []
        conds += [Sql(f"{column} < CAST(? AS TIMESTAMP)", [utc_text(self.hi)])] if self.hi is not None else []
        return _where(conds)

    def in_edges(self, column: str) -> Sql:
        """The condition that ``column`` (a call's start) is in one of the edges (FALSE: there is none)."""
        return any_of(
            Sql(f"{column} >= CAST(? AS TIMESTAMP) AND {column} < CAST(? AS TIMESTAMP)",
                [utc_text(e["since"]), utc_text(e["until"])])
            for e in self.edges
        )  # fmt: skip


def whole_hours(filters: Filters) -> WholeHours | None:
    """The selection's whole hours and its edges (None: it holds no whole hour). Task conditions are the caller's:
    an hourly roll-up does not know a call's task."""
    since = None if filters.since is None else naive_utc(filters.since)
    until = None if filters.until is None else naive_utc(filters.until)
    lo = None if since is None else (since if since == _floor_hour(since) else _floor_hour(since) + _HOUR)
    hi = None if until is None else _floor_hour(until)
    if lo is not None and hi is not None and lo >= hi:  # no whole hour
        return None
    edges = tuple(
        {"since": start, "until": end}
        for start, end in ((since, lo), (hi, until))
        if start is not None and end is not None and start < end
    )
    return WholeHours(lo, hi, edges)
