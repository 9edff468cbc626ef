"""The Cost page's per-token section: rank by $/1M tokens against rank by $/completed task (the ranking flip made
visible), the two measures side by side, and the flips in words. Presentation only, over the ``per-token`` answer's
JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash_mantine_components as dmc

from dashboards._charts import Fig, graph, notes_list, num, pct, pretty, rows_of, usd
from dashboards._ui import answer_table, coverage_text
from taskcost.analytics import format_usd

__all__ = ["per_token_view"]

RANK_UP, RANK_DOWN, RANK_SAME = "#e03131", "#2f9e44", "#868e96"  # dearer per task, cheaper, the same rank


def _slope(ranked: list[dict[str, Any]], by: str) -> Any:
    """Rank by $/1M tokens (left) against rank by $/completed task (right), one line per group: a line that falls
    to the right is a group dearer per finished task than its token price suggests."""
    fig = Fig()
    for r in ranked:
        change = r["rank_change"] or 0
        color = RANK_UP if change > 0 else RANK_DOWN if change < 0 else RANK_SAME
        word = f"+{change}" if change > 0 else str(change)
        fig.add_scatter(
            x=["$/1M tokens", "$/completed task"],
            y=[r["per_token_rank"], r["per_task_rank"]],
            mode="lines+markers+text",
            line={"color": color, "width": 3 if change else 1.5},
            marker={"size": 10},
            text=[
                f"{r[by]}  {format_usd(r['per_mtok_usd'], places=3)}/M",
                f"{usd(r['per_completed_task_usd'])}  {r[by]}  ({word})",
            ],
            textposition=["middle left", "middle right"],
            name=f"{r[by]} ({word})",
            hovertemplate=f"<b>{r[by]}</b><br>%{{x}} rank %{{y}}<br>rank change {word}<extra></extra>",
        )
    n = max([len(ranked), 1])
    fig.update_layout(title="Rank (1 = cheapest): per token vs per completed task", showlegend=False)
    fig.update_yaxes(dtick=1, title="rank", range=[n + 0.5, 0.5])
    fig.update_xaxes(range=[-1.6, 2.6])
    return graph(fig, "cost-slope", height=max(280, 90 + 45 * n))


def _two_bars(ranked: list[dict[str, Any]], by: str) -> Any:
    """The two figures behind the ranks, in the same order (per-token rank): where one climbs and the other does not,
    the ranking flips."""
    names = [str(r[by]) for r in ranked]
    tok = Fig().add_bar(
        y=names,
        x=[num(r["per_mtok_usd"]) for r in ranked],
        orientation="h",
        marker={"color": "#868e96"},
        text=[usd(r["per_mtok_usd"]) for r in ranked],
        textposition="auto",
        customdata=[[r["unpriced_attempts"]] for r in ranked],
        hovertemplate="<b>%{y}</b><br>%{text} per 1M tokens<br>unpriced attempts %{customdata[0]:,}<extra></extra>",
    )
    tok.update_layout(title="$ per 1M tokens (blended)", yaxis={"autorange": "reversed"})
    tok.update_xaxes(tickprefix="$")
    vals = [num(r["per_completed_task_usd"]) or 0.0 for r in ranked]
    colors = [
        RANK_UP if (r["rank_change"] or 0) > 0 else RANK_DOWN if (r["rank_change"] or 0) < 0 else "#1c7ed6"
        for r in ranked
    ]
    task = Fig().add_bar(
        y=names,
        x=vals,
        orientation="h",
        marker={"color": colors},
        error_x={
            "type": "data",
            "array": [(num(r["per_completed_task_high_usd"]) or v) - v for r, v in zip(ranked, vals, strict=True)],
            "arrayminus": [v - (num(r["per_completed_task_low_usd"]) or v) for r, v in zip(ranked, vals, strict=True)],
            "color": "#495057",
        },
        customdata=[
            [
                r["completed_tasks"],
                pct(r["success_rate"]),
                r["task_unpriced_attempts"],
                r["attempts_per_completed_task"],
            ]
            for r in ranked
        ],
        hovertemplate=(
            "<b>%{y}</b><br>%{x:$.6f} per completed task<br>%{customdata[0]:,} completed, success %{customdata[1]}"
            "<br>%{customdata[3]:.2f} attempts per completed task<br>unpriced attempts %{customdata[2]:,}"
            "<extra></extra>"
        ),
    )
    task.update_layout(title="$ per completed task (with its interval)", yaxis={"autorange": "reversed"})
    task.update_xaxes(tickprefix="$")
    task.update_yaxes(
        tickvals=names,
        ticktext=[f"{n} · {usd(r['per_completed_task_usd'])}" for n, r in zip(names, ranked, strict=True)],
    )
    h = max(240, 60 + 34 * len(ranked))
    return dmc.SimpleGrid(
        [graph(tok, "cost-per-mtok", height=h), graph(task, "cost-per-task", height=h)],
        cols={"base": 1, "md": 2},
        spacing="sm",
    )


def per_token_view(ans: Mapping[str, Any]) -> Any:
    s = ans["summary"]
    by = s["by"]
    table = ans["tables"]["ranking"]
    ranked = [r for r in rows_of(table) if r["per_token_rank"] is not None]
    cover = coverage_text(int(s["call_attempts"]), int(s["unpriced_attempts"]))
    flips = [
        dmc.ListItem(
            [
                dmc.Badge(
                    "clear" if f["clear"] else "may be noise" if f["clear"] is False else "no interval",
                    color="red" if f["clear"] else "gray",
                    variant="light",
                    mr="xs",
                ),
                f["sentence"],
            ]
        )
        for f in s.get("flips") or []
    ]
    body: list[Any] = [
        dmc.Text(s["headline"] if not flips else "Where the rankings disagree:", fw=600, id="cost-flip-headline"),
    ]
    if flips:
        body.append(dmc.List(flips, size="sm", id="cost-flips"))
    body.append(
        dmc.Text(
            f"coverage: {cover}; of the finished tasks' attempts, {s['task_unpriced_attempts']:,} unpriced",
            size="xs",
            c="dimmed",
        )
    )
    if ranked:
        body.append(dmc.SimpleGrid([_slope(ranked, by), _two_bars(ranked, by)], cols=1, spacing="sm"))
    else:
        body.append(
            dmc.Alert("No group can be ranked yet (none has a priced call and a completed task).", color="gray")
        )
    # the terminal's columns but the interval (the bar chart above draws it), the fully loaded ranks and the counts the
    # notes give: they fit the card
    hidden = ("per_completed_task_low_usd", "per_completed_task_high_usd", "loaded_per_token_rank",
              "loaded_per_task_rank", "unpriced_tasks", "attempts_per_completed_task")  # fmt: skip
    shown = [c for c in table["display"] if c not in hidden]
    body.append(answer_table(pretty(table, shown, first=by), id="cost-ranking-table", prose=("unranked_because",)))
    body.append(notes_list(ans["notes"], "cost-pertoken-notes"))
    return dmc.Stack(body, gap="sm")
