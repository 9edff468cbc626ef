"""What changed: the infra fingerprint of a task or a window, and, between two windows, which fingerprint values
changed and how cost per completed task and p95 latency moved with them.

The fingerprint of a selection is, for each field in ``FIELDS`` (engine, its version, quantization, GPU, container
image, cluster, harness and agent versions, model, provider, the price data's version, deployment), the distinct
values with their share of call attempts. Comparing two windows, a value *changed* when it appeared, disappeared or
its share moved by ``min_share_change``; each changed value still present is compared within the current window
(calls, and tasks whose calls all have it, against those without it; against the baseline window when it is on
every call; tasks whose calls mix it with other values are in neither group) and the changes are ranked by how
much cost per completed task or p95 moved. That is association, not causation: two
values that changed on the same calls move together, and the answer cannot tell which one did it.

Three queries of plain aggregates over ``call_scope`` / ``task_scope`` (every filter applies; a fourth lists one
task's calls): the calls grouped by window and combination of fingerprint values (each field's shares are summed
from it here: one hash of 12 keys costs less than 12 hashes of one), the tasks by window and by whether their
calls have each changed value, and the p95s. Dialect notes for another store: ``quantile_cont(x, 0.95)`` is
ClickHouse's ``quantileExactInclusive(0.95)(x)`` (the same linear interpolation); the p95 sample's
``hash(start_time)`` is ``cityHash64(start_time)`` there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, ClassVar

from pydantic import Field

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import Answer, Table, frame
from taskcost.analytics._changes_rank import FIELDS, change, rank, sentence, side_by_side
from taskcost.analytics._changes_scan import _join, _scan
from taskcost.analytics._filters import TIME_MAX, TIME_MIN, Filters, Sql, call_scope, task_scope, utc, utc_text
from taskcost.analytics._groups import MAX_GROUPS_LIMIT, OTHER, Top, max_groups_option
from taskcost.analytics._question import Options, Question, UsageError
from taskcost.store import ReadStore

__all__ = ["FIELDS", "P95", "QUESTION", "ChangesOptions", "Comparison", "Figures", "Fingerprint", "Window", "changes"]

P95 = 0.95
"""p95 latency: of successful call attempts (as the canary's), so that calls failing fast do not look fast."""
P95_SAMPLE = 50_000
"""Each window's p95s come from at most about this many of its successful calls: all of them below, above a
deterministic sample (``hash(start_time) % 10^6`` under the window's fraction, as the canary's). A quantile holds
every value it reads: exact over 10M calls it needs more memory than the server's DuckDB has."""
_HASH_SCALE = 1_000_000
MAX_TASK_CALLS = 1000
"""The task mode's per-call table stops here (a note says so)."""
_SCALE = Decimal("0.000000000001")  # money's 12 places (DECIMAL(38, 12))
_REST, _BASELINE = "rest of current window", "baseline window"


class ChangesOptions(Options):
    task: str | None = Field(None, description="A task id: its fingerprint, call by call (no comparison).")
    baseline_since: datetime | None = Field(
        None,
        description="Start of the window to compare with (default: as long as --since..--until, ending at --since).",
    )
    baseline_until: datetime | None = Field(None, description="End of the window to compare with (exclusive).")
    min_share_change: float = Field(
        0.05, ge=0, le=1, description="A share that moved at least this much is a change (0.05: 5 percentage points)."
    )
    max_changes: int = Field(
        20,
        ge=1,
        le=100,
        description="Compare and rank at most this many changed values (those whose share moved most).",
    )
    max_groups: int = max_groups_option()


@dataclass(frozen=True)
class Window:
    """``[since, until)`` by the start time of a call (a task: of the task)."""

    since: datetime
    until: datetime

    def text(self) -> str:
        return f"{utc_text(self.since)} .. {utc_text(self.until)}"


@dataclass(frozen=True)
class Figures:
    """A selection's headline figures. Spend is the finished tasks' (failed and abandoned included); unpriced_calls
    counts the call attempts in those tasks that have no price (not in the spend)."""

    calls: int
    p95_s: float | None
    finished_tasks: int
    completed_tasks: int
    running_tasks: int
    spend_usd: Decimal | None
    unpriced_calls: int

    @property
    def cost_per_completed_task_usd(self) -> Decimal | None:
        return _per_task(self.spend_usd, self.completed_tasks)

    def summary(self, prefix: str = "") -> dict[str, Any]:
        return {
            f"{prefix}calls": self.calls,
            f"{prefix}p95_s": self.p95_s,
            f"{prefix}cost_per_completed_task_usd": self.cost_per_completed_task_usd,
            f"{prefix}unpriced_calls": self.unpriced_calls,
            f"{prefix}completed_tasks": self.completed_tasks,
            f"{prefix}finished_tasks": self.finished_tasks,
            f"{prefix}running_tasks": self.running_tasks,
        }


@dataclass(frozen=True)
class Fingerprint(Answer):
    """One selection's fingerprint: a window (the filters) or one task (with its calls)."""

    question: ClassVar[str] = "changes"
    figures: Figures
    fingerprint: pl.DataFrame
    task: str | None = None
    task_row: dict[str, Any] | None = None
    calls: pl.DataFrame | None = None

    def summary(self) -> dict[str, Any]:
        head: dict[str, Any] = {"mode": "window" if self.task is None else "task"}
        if self.task is not None:
            row = self.task_row or {}
            head |= {"task": self.task, **{k: row.get(k) for k in ("kind", "outcome", "start_time", "cost_usd")}}
        return head | self.figures.summary()

    def tables(self) -> list[Table]:
        what = "the task" if self.task is not None else "the selection"
        out = [Table("fingerprint", f"Fingerprint of {what}: each field's values by share of calls", self.fingerprint)]
        if self.calls is not None:
            out.append(Table("calls", "The task's call attempts and their fingerprint", self.calls))
        return out


@dataclass(frozen=True)
class Comparison(Answer):
    """Two windows: both fingerprints side by side and the changed values ranked by how much moved with them."""

    question: ClassVar[str] = "changes"
    baseline: Window
    current: Window
    baseline_figures: Figures
    current_figures: Figures
    fingerprint: pl.DataFrame
    changes: pl.DataFrame
    top_change: str | None

    def summary(self) -> dict[str, Any]:
        return {
            "mode": "comparison",
            "baseline_since": self.baseline.since,
            "baseline_until": self.baseline.until,
            "current_since": self.current.since,
            "current_until": self.current.until,
            **self.baseline_figures.summary("baseline_"),
            **self.current_figures.summary("current_"),
            "changed_values": self.changes.height,
            "top_change": self.top_change,
        }

    def tables(self) -> list[Table]:
        return [
            Table("changes", "Changed values, ranked by how much cost per completed task or p95 moved", self.changes),
            Table(
                "fingerprint", "Fingerprint: each field's values by share of calls, in both windows", self.fingerprint
            ),
        ]


# -- SQL ---------------------------------------------------------------------------------------------------------
def _per_task(spend: Decimal | None, completed: int) -> Decimal | None:
    if spend is None or completed <= 0:
        return None
    return (spend / completed).quantize(_SCALE, rounding=ROUND_HALF_EVEN)


def _is(column: str, value: str | None) -> Sql:
    return Sql(f"{column} IS NULL") if value is None else Sql(f"{column} = ?", [value])


def _is_not(column: str, value: str | None) -> Sql:
    """NULL is a value of the fingerprint (the tag was not sent): "not v" includes it."""
    return Sql(f"{column} IS NOT NULL") if value is None else Sql(f"({column} IS NULL OR {column} <> ?)", [value])


def _between(w: Window) -> Sql:
    return Sql(
        "start_time >= CAST(? AS TIMESTAMP) AND start_time < CAST(? AS TIMESTAMP)",
        [utc_text(w.since), utc_text(w.until)],
    )


Windows = tuple[Window, Window] | None  # (baseline, current), or None: one selection (the filters), called current


def _scope(filters: Filters, windows: Windows) -> Filters:
    """The filters over both windows at once (one pass), each row labelled with its window by ``_label``."""
    if windows is None:
        return filters
    base, cur = windows
    return filters.narrowed(since=min(base.since, cur.since), until=max(base.until, cur.until))


def _label(windows: Windows) -> Sql:
    """A row's window by its start; 'between' for one in neither (windows that do not touch), never counted. (No
    filter on this label: the range filter of the scope alone lets the store skip the rest of the table.)"""
    if windows is None:
        return Sql("'current'")
    base, cur = windows
    label = Sql("CASE WHEN ") + _between(cur) + Sql(" THEN 'current' WHEN ") + _between(base)
    return label + Sql(" THEN 'baseline' ELSE 'between' END")


def _calls_cte(filters: Filters, windows: Windows, task: str | None) -> Sql:
    """``WITH ... win AS (...)``: the selected call attempts, each with its window ``w`` ('baseline' / 'current')."""
    where = Sql("TRUE") if task is None else Sql("task_id = ?", [task])
    body = (
        Sql("SELECT ") + _label(windows) + Sql(f" AS w, {', '.join(('start_time', 'duration_s', 'status', *FIELDS))}")
    )
    body += Sql(" FROM scoped_calls WHERE ") + where
    return Sql("WITH ") + call_scope(_scope(filters, windows)) + Sql(",\nwin AS (") + body + Sql(")\n")


def _candidate(f: str, v: str | None, tops: dict[str, Top]) -> tuple[Sql, Sql]:
    """The SQL conditions of a call with the value ``v`` of field ``f``, and of one without it; ``other`` is the
    values the fold added up."""
    top = tops.get(f)
    if v == OTHER and top is not None and top.folded:
        is_other = top.is_other(f)
        return is_other, Sql("NOT (") + is_other + Sql(")")
    return _is(f, v), _is_not(f, v)


def _p95s(
    store: ReadStore,
    filters: Filters,
    cte: Sql,
    counts: dict[str, dict[str, int]],
    cands: list[tuple[Sql, Sql]] | None = None,
) -> dict[str, Any]:
    """Each window's p95 (``p95_<w>``) and, for each candidate (field, value), the current window's p95 of the
    calls with it and of those without (``p95_with_<k>``, ``p95_without_<k>``): successful calls, sampled as
    ``P95_SAMPLE`` says (the same sample for every p95 of a window)."""

    def within(w: str) -> Sql:
        ok = counts.get(w, {}).get("ok_calls", 0)
        cond = Sql(f"w = '{w}' AND status = 'ok'")
        if ok <= P95_SAMPLE:
            return cond
        return cond + Sql(f" AND hash(start_time) % {_HASH_SCALE} < ?", [_HASH_SCALE * P95_SAMPLE // ok])

    q = f"quantile_cont(duration_s, {P95}) FILTER (WHERE "
    parts = [Sql(q) + within(w) + Sql(f") AS p95_{w}") for w in ("baseline", "current")]
    for k, (with_, without) in enumerate(cands or []):
        parts.append(Sql(q) + within("current") + Sql(" AND ") + with_ + Sql(f") AS p95_with_{k}"))
        parts.append(Sql(q) + within("current") + Sql(" AND ") + without + Sql(f") AS p95_without_{k}"))
    return frame(store, cte + Sql("SELECT ") + _join(parts) + Sql(" FROM win"), filters).row(0, named=True)


def _tasks(
    store: ReadStore,
    filters: Filters,
    windows: Windows,
    cands: list[tuple[Sql, Sql]] | None = None,
    task: str | None = None,
) -> list[dict[str, Any]]:
    """The tasks the filters select (by their start), by window and, for each candidate (field, value), whether the
    task's selected calls in the current window all have the value (``f<k>`` = 1), none has it (0: also a task
    without calls there) or some do (2: mixed, as a task's value of a call dimension is everywhere): how many are
    finished, completed, running; the spend and unpriced attempts of the finished ones; and, for one task, its
    kind, outcome, start and cost. A few rows (one per window and combination of flags), summed by ``_sum``."""
    cands = cands or []
    sql = Sql("WITH ") + task_scope(_scope(filters, windows))
    flags, join = [], Sql("")
    if cands:
        cur = filters if windows is None else filters.narrowed(since=windows[1].since, until=windows[1].until)
        cases = []
        for k, (with_, _) in enumerate(cands):
            has = Sql("CASE WHEN ") + with_ + Sql(" THEN 1 ELSE 0 END")
            cases.append(
                Sql("CASE WHEN min(")
                + has
                + Sql(") = 1 THEN 1 WHEN max(")
                + has
                + Sql(f") = 0 THEN 0 ELSE 2 END AS f{k}")
            )
        sql += Sql(",\n") + call_scope(cur) + Sql(",\nflags AS (SELECT project, task_id, ") + _join(cases)
        sql += Sql(" FROM scoped_calls GROUP BY project, task_id)")
        join = Sql(" LEFT JOIN flags AS f ON f.project = t.project AND f.task_id = t.task_id")
        flags = [f"f{k}" for k in range(len(cands))]
    inner = Sql("SELECT ") + _label(windows) + Sql(" AS w, ")
    inner += Sql("".join(f"coalesce(f.{x}, 0) AS {x}, " for x in flags))
    inner += Sql("t.outcome, t.cost_usd, t.unpriced_calls, t.kind, t.start_time FROM scoped_tasks AS t") + join
    inner += Sql(" WHERE TRUE") if task is None else Sql(" WHERE t.task_id = ?", [task])
    keys = ", ".join(["w", *flags])
    fin = "FILTER (WHERE outcome IS NOT NULL)"
    sql += Sql(
        f"\nSELECT {keys}, count(*) {fin} AS finished, count(*) FILTER (WHERE outcome = 'completed') AS completed, "
        f"count(*) FILTER (WHERE outcome IS NULL) AS running, count(cost_usd) {fin} AS priced, "
        f"sum(cost_usd) {fin} AS spend, coalesce(sum(unpriced_calls) {fin}, 0) AS unpriced, count(*) AS tasks, "
        "min(kind) AS kind, min(outcome) AS outcome, min(start_time) AS start_time, sum(cost_usd) AS cost_usd\n"
        "FROM ("
    )
    sql += inner + Sql(f") AS x GROUP BY {keys}")
    return frame(store, sql, filters).to_dicts()


def _sum(rows: list[dict[str, Any]], w: str, flag: str | None = None, value: int = 1) -> dict[str, Any]:
    """The task figures of window ``w`` (of its tasks with ``flag`` = ``value`` when given), summed exactly."""
    rows = [r for r in rows if r["w"] == w and (flag is None or r[flag] == value)]
    out: dict[str, Any] = {m: sum(int(r[m]) for r in rows) for m in ("finished", "completed", "running", "unpriced")}
    priced = [r["spend"] for r in rows if r["priced"]]
    out["spend"] = sum(priced, Decimal(0)) if priced else None  # nothing priced: unknown, not $0
    out["tasks"] = sum(int(r["tasks"]) for r in rows)
    return out


def _figures(counts: dict[str, dict[str, int]], p95s: dict[str, Any], tasks: dict[str, Any], w: str) -> Figures:
    return Figures(
        calls=counts.get(w, {}).get("calls", 0),
        p95_s=p95s[f"p95_{w}"],
        finished_tasks=tasks["finished"],
        completed_tasks=tasks["completed"],
        running_tasks=tasks["running"],
        spend_usd=tasks["spend"],
        unpriced_calls=tasks["unpriced"],
    )


# -- modes -------------------------------------------------------------------------------------------------------


def _windows(filters: Filters, options: ChangesOptions) -> tuple[Window, Window] | None:
    """(baseline, current), or None for one selection. Usage errors for a comparison asked wrongly."""
    asked = options.baseline_since is not None or options.baseline_until is not None
    if options.task is not None:
        if asked:
            raise UsageError("a task's fingerprint has no baseline window: leave out --baseline-since/--baseline-until")
        return None
    if filters.since is None or filters.until is None:
        if asked:
            raise UsageError("comparing with a baseline window needs the current window: give --since and --until")
        return None
    cur = Window(utc(filters.since, "since"), utc(filters.until, "until"))
    if cur.since >= cur.until:
        raise UsageError("--since must be before --until")
    length = cur.until - cur.since
    bs = None if options.baseline_since is None else utc(options.baseline_since, "baseline_since")
    bu = None if options.baseline_until is None else utc(options.baseline_until, "baseline_until")
    if bs is None:
        bs = (cur.since if bu is None else bu) - length
    base = Window(bs, bu if bu is not None else bs + length)
    if base.since >= base.until:
        raise UsageError("--baseline-since must be before --baseline-until")
    if base.since < TIME_MIN or base.until > TIME_MAX:
        raise UsageError(
            f"the baseline window ({base.since.isoformat(sep=' ')} .. {base.until.isoformat(sep=' ')}) would reach "
            f"outside {TIME_MIN.date()} .. {TIME_MAX.date()} (UTC), "
            "the range the store's timestamps cover: give --baseline-since and --baseline-until, or a shorter window"
        )
    if base.since < cur.until and cur.since < base.until:
        raise UsageError(f"the baseline window ({base.text()}) overlaps the current one ({cur.text()})")
    return base, cur


def _fold_notes(tops: dict[str, Top]) -> list[str]:
    """Which fields had values past max_groups added up in their ``other`` row."""
    folded = [(f, t) for f, t in tops.items() if t.folded]
    if not folded:
        return []
    which = ", ".join(f"{f} {t.folded:,} of {t.groups:,}" for f, t in sorted(folded, key=lambda x: FIELDS.index(x[0])))
    limit = folded[0][1].limit
    return [
        f"values with the fewest calls added up in one row per field, '{OTHER}' (compared and ranked as one value; a "
        f"value named '{OTHER}' is counted in it): {which}; to see one of them, filter on it or raise max_groups "
        f"(now {limit:,}, at most {MAX_GROUPS_LIMIT:,})"
    ]


def _fingerprint(store: ReadStore, filters: Filters, task: str | None, limit: int) -> Fingerprint:
    cte = _calls_cte(filters, None, task)
    long, counts, tops = _scan(store, filters, cte, limit)
    rows = _tasks(store, filters, None, task=task)
    tasks = _sum(rows, "current")
    figures = _figures(counts, _p95s(store, filters, cte, counts), tasks, "current")
    n = max(figures.calls, 1)
    table = long.sort(["field_order", "calls", "value"], descending=[False, True, False], nulls_last=True).select(
        "field", "value", "calls", (pl.col("calls") / n).alias("share"), "first_seen", "last_seen"
    )
    if task is None:
        return Fingerprint(
            filters, figures=figures, fingerprint=table, notes=_task_notes("", figures) + _fold_notes(tops)
        )
    if tasks["tasks"] > 1:
        raise UsageError(f"task {task!r} is in {tasks['tasks']} projects: give --project")
    cols = ", ".join(("span_id", "call_id", "attempt", "start_time", "duration_s", "status", "cost_usd", *FIELDS))
    pick = Sql(f" SELECT {cols} FROM scoped_calls WHERE task_id = ? ORDER BY start_time, span_id", [task])
    pick += Sql(f" LIMIT {MAX_TASK_CALLS}")
    call_table = frame(store, Sql("WITH ") + call_scope(filters) + pick, filters)
    notes = _fold_notes(tops)
    if not figures.calls:
        notes.append(f"no call attempts of task {task!r} in this selection")
    elif figures.calls > MAX_TASK_CALLS:
        notes.append(f"the calls table shows the first {MAX_TASK_CALLS} of {figures.calls} call attempts")
    row = {k: rows[0][k] for k in ("kind", "outcome", "start_time", "cost_usd")} if rows else None
    return Fingerprint(
        filters, figures=figures, fingerprint=table, task=task, task_row=row, calls=call_table, notes=notes
    )


def _task_notes(label: str, f: Figures) -> list[str]:
    out = []
    if f.unpriced_calls:
        out.append(f"{label}{f.unpriced_calls} call attempts in the finished tasks are unpriced and not in the spend")
    if f.running_tasks:
        out.append(f"{label}{f.running_tasks} tasks still running are left out of cost per completed task")
    return out


def _change_schema() -> dict[str, Any]:
    return {
        "rank": pl.Int64,
        "field": pl.String,
        "value": pl.String,
        "status": pl.String,
        "share_baseline": pl.Float64,
        "share_current": pl.Float64,
        "calls": pl.Int64,
        "compared_with": pl.String,
        "cost_per_completed_task_with_usd": pl.Decimal(38, 12),
        "cost_per_completed_task_without_usd": pl.Decimal(38, 12),
        "cost_per_completed_task_baseline_usd": pl.Decimal(38, 12),
        "cost_per_completed_task_delta_usd": pl.Decimal(38, 12),
        "cost_change": pl.Float64,
        "completed_tasks_with": pl.Int64,
        "completed_tasks_without": pl.Int64,
        "mixed_tasks": pl.Int64,
        "unpriced_calls_with": pl.Int64,
        "unpriced_calls_without": pl.Int64,
        "p95_with_s": pl.Float64,
        "p95_without_s": pl.Float64,
        "p95_baseline_s": pl.Float64,
        "p95_delta_s": pl.Float64,
        "p95_change": pl.Float64,
    }


def _compare(store: ReadStore, filters: Filters, options: ChangesOptions, base: Window, cur: Window) -> Comparison:
    cte = _calls_cte(filters, (base, cur), None)
    long, counts, tops = _scan(store, filters, cte, options.max_groups)
    n_base, n_cur = (counts.get(w, {}).get("calls", 0) for w in ("baseline", "current"))
    table = side_by_side(long, n_base, n_cur, options.min_share_change)
    changed = (
        table.filter(pl.col("status") != "unchanged")
        .with_columns(pl.col("share_change").abs().alias("size"))
        .sort(["size", "calls_current"], descending=True, maintain_order=True)
    )
    picked = changed.head(options.max_changes).to_dicts()
    cands = [_candidate(r["field"], r["value"], tops) for r in picked if r["calls_current"] > 0]
    tasks = _tasks(store, filters, (base, cur), cands)
    p95s = _p95s(store, filters, cte, counts, cands)
    bf = _figures(counts, p95s, _sum(tasks, "baseline"), "baseline")
    cf = _figures(counts, p95s, _sum(tasks, "current"), "current")
    rows, k = [], 0
    for r in picked:
        row: dict[str, Any] = dict.fromkeys(_change_schema())
        row |= {c: r[c] for c in ("field", "value", "status", "share_baseline", "share_current")}
        row |= {"calls": r["calls_current"], "p95_baseline_s": bf.p95_s}
        row["cost_per_completed_task_baseline_usd"] = bf.cost_per_completed_task_usd
        if r["calls_current"] > 0:
            with_, without = _sum(tasks, "current", f"f{k}", 1), _sum(tasks, "current", f"f{k}", 0)
            rest = r["calls_current"] < n_cur
            row |= {
                "compared_with": _REST if rest else _BASELINE,
                "cost_per_completed_task_with_usd": _per_task(with_["spend"], with_["completed"]),
                "cost_per_completed_task_without_usd": _per_task(without["spend"], without["completed"]),
                "completed_tasks_with": with_["completed"],
                "completed_tasks_without": without["completed"],
                "mixed_tasks": _sum(tasks, "current", f"f{k}", 2)["finished"],
                "unpriced_calls_with": with_["unpriced"],
                "unpriced_calls_without": without["unpriced"],
                "p95_with_s": p95s.get(f"p95_with_{k}"),
                "p95_without_s": p95s.get(f"p95_without_{k}"),
            }
            ref_cost = row["cost_per_completed_task_without_usd"] if rest else bf.cost_per_completed_task_usd
            ref_p95 = row["p95_without_s"] if rest else bf.p95_s
            cw, pw = row["cost_per_completed_task_with_usd"], row["p95_with_s"]
            row["cost_per_completed_task_delta_usd"] = None if cw is None or ref_cost is None else cw - ref_cost
            row["p95_delta_s"] = None if pw is None or ref_p95 is None else pw - ref_p95
            row["cost_change"], row["p95_change"] = change(cw, ref_cost), change(pw, ref_p95)
            k += 1
        rows.append(row)
    ranked = pl.DataFrame(rank(rows), schema=_change_schema())
    notes = [
        "association, not causation: a change's figures compare the calls, and the tasks whose calls all have the "
        "value, with the rest of the current window (with the baseline window when the value is on every call); "
        "values that changed together move together"
    ]
    if changed.height > options.max_changes:
        notes.append(f"{changed.height} values changed; the {options.max_changes} whose share moved most are ranked")
    if not bf.calls:
        notes.append("the baseline window has no call attempts: every value appeared")
    notes += _task_notes("baseline: ", bf) + _task_notes("current: ", cf) + _fold_notes(tops)
    return Comparison(
        filters, baseline=base, current=cur, baseline_figures=bf, current_figures=cf, fingerprint=table,
        changes=ranked, top_change=sentence(ranked, table), notes=notes,
    )  # fmt: skip


def changes(store: ReadStore, filters: Filters, options: ChangesOptions) -> Fingerprint | Comparison:
    """A task's fingerprint (``options.task``), a window's (the filters), or two windows compared (``--since`` and
    ``--until`` given: against ``baseline_since``/``baseline_until``, by default the window just before)."""
    windows = _windows(filters, options)
    if windows is None:
        return _fingerprint(store, filters, options.task, options.max_groups)
    return _compare(store, filters, options, *windows)


def _run(store: ReadStore, filters: Filters, options: ChangesOptions) -> Answer:
    return changes(store, filters, options)


QUESTION = Question(
    name="changes",
    help="what changed: the infra fingerprint, and what moved cost or p95",
    run=_run,
    options=ChangesOptions,
)
