"""Cost per completed task: what every task spent (failed and abandoned ones too), per task finished."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from taskcost.store import ReadStore

__all__ = ["OutcomeRow", "TaskSummary", "summarise_outcomes", "task_summary"]


@dataclass(frozen=True)
class OutcomeRow:
    outcome: str
    tasks: int
    llm_calls: int
    attempts: int
    cost_usd: Decimal | None
    unpriced_calls: int


@dataclass(frozen=True)
class TaskSummary:
    by_outcome: list[OutcomeRow]
    tasks: int
    completed: int
    total_cost_usd: Decimal | None
    cost_per_completed_task_usd: Decimal | None
    unpriced_calls: int
    attempts: int

    @property
    def priced_share(self) -> float | None:
        """Share of call attempts that carry a price (cost coverage)."""
        if not self.attempts:
            return None
        return (self.attempts - self.unpriced_calls) / self.attempts


_SQL = """
SELECT coalesce(outcome, 'in_progress') AS outcome,
       count(*) AS tasks,
       sum(llm_calls)::BIGINT AS llm_calls,
       sum(attempts)::BIGINT AS attempts,
       sum(cost_usd) AS cost_usd,
       sum(unpriced_calls)::BIGINT AS unpriced_calls
FROM tasks GROUP BY 1 ORDER BY 1
"""


def task_summary(store: ReadStore) -> TaskSummary:
    """Tasks by outcome and the cost per completed task.

    Tasks with no task span yet (calls seen, task not finished) are counted as ``in_progress``.
    The cost per completed task divides the cost of *all* tasks by the completed ones: failures and
    retries are part of what a finished task really costs.
    """
    rows = [
        OutcomeRow(
            outcome=r["outcome"],
            tasks=int(r["tasks"]),
            llm_calls=int(r["llm_calls"] or 0),
            attempts=int(r["attempts"] or 0),
            cost_usd=None if r["cost_usd"] is None else Decimal(r["cost_usd"]),
            unpriced_calls=int(r["unpriced_calls"] or 0),
        )
        for r in store.query(_SQL).dicts()
    ]
    return summarise_outcomes(rows)


def summarise_outcomes(rows: list[OutcomeRow]) -> TaskSummary:
    """Tasks by outcome summed up: all spend / completed tasks (a priced part of the spend when some is unpriced)."""
    costs = [r.cost_usd for r in rows if r.cost_usd is not None]
    total = sum(costs, Decimal(0)) if costs else None
    completed = sum(r.tasks for r in rows if r.outcome == "completed")
    return TaskSummary(
        by_outcome=rows,
        tasks=sum(r.tasks for r in rows),
        completed=completed,
        total_cost_usd=total,
        cost_per_completed_task_usd=(total / completed) if (total is not None and completed) else None,
        unpriced_calls=sum(r.unpriced_calls for r in rows),
        attempts=sum(r.attempts for r in rows),
    )
