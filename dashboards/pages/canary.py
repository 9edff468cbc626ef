"""Canary: baseline vs candidate on one dimension (engine version, model, GPU type...), with the verdict first.

Controls (all in the URL): the dimension, the baseline and candidate values (menus list the values present under the
filters; with none chosen, the two most common: the more common is the baseline), and the golden set only. The page
shows the verdict (pass / fail / not enough data, and the sample it would need), every metric with its interval and
coloured outcome, the arms, and the latency and TTFT distributions of both arms overlaid (ECDFs of a capped sample
of each arm's successful calls, with the canary's own quantiles marked).
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import Dash, Input, Output, html

from dashboards._canary_charts import ARM_COLOURS, distributions
from dashboards._charts import rows_of
from dashboards._context import PageContext
from dashboards._ui import (
    FILTER_DIMENSIONS,
    PageError,
    empty_state,
    filter_bar,
    filters_from_query,
    money,
    page,
    safe_callback,
    url_id,
)
from taskcost.analytics import QUESTIONS, Filters, ReadStore, canary_samples, dimension_values, format_usd

__all__ = ["register"]

NAME = "canary"
SAMPLE_PER_ARM = 2_000
"""Calls per arm drawn in the distributions (the canary's deterministic sample, capped: fast at any store size)."""

LABELS = {
    "engine_version": "Engine version",
    "engine": "Engine",
    "harness_version": "Harness version",
    "agent_version": "Agent version",
    "model": "Model",
    "quantization": "Quantization",
    "gpu_type": "GPU type",
    "cluster": "Cluster",
    "provider": "Provider",
    "deployment": "Deployment",
}
METRIC_LABELS = {
    "latency_p50": "Latency p50",
    "latency_p95": "Latency p95",
    "latency_p99": "Latency p99",
    "ttft_p50": "TTFT p50",
    "ttft_p95": "TTFT p95",
    "ttft_p99": "TTFT p99",
    "error_rate": "Error rate",
    "task_success_rate": "Task success rate",
    "cost_per_completed_task": "Cost per completed task",
    "tokens_per_task": "Tokens per task",
}
OUTCOME_COLOURS = {"better": "green", "within_margin": "teal", "worse": "red", "inconclusive": "orange"}
OUTCOME_WORDS = {"better": "better", "within_margin": "within margin", "worse": "worse", "inconclusive": "inconclusive"}
VERDICTS = {
    "pass": ("PASS", "green"),
    "fail": ("FAIL", "red"),
    "not_enough_data": ("NOT ENOUGH DATA", "orange"),
}
NOWRAP = {"whiteSpace": "nowrap"}


def _dimensions() -> list[str]:
    """The canary's dimensions, in the order its options list them."""
    annotation = QUESTIONS[NAME].options.model_fields["dimension"].annotation
    return [v for arg in typing.get_args(annotation) for v in typing.get_args(arg)]


@dataclass(frozen=True)
class Choice:
    """What the page compares: read from the URL, the gaps filled with the most common values present."""

    dimension: str
    baseline: str | None
    candidate: str | None
    values: list[str]  # the dimension's values under the filters, most common first
    counts: dict[str, int]  # dimension -> how many values it has under the filters
    filters: Filters
    dropped_filter: str | None  # the URL's filter on the dimension itself, left out (it would leave one arm)


def choose(store: ReadStore, query: Mapping[str, str]) -> Choice:
    dims = _dimensions()
    asked = query.get("dimension")
    if asked and asked not in dims:
        raise PageError(f"unknown canary dimension {asked!r}: one of {', '.join(dims)}")
    probe = asked or "engine_version"
    rest = {k: v for k, v in query.items() if k != probe}
    filters = filters_from_query(rest)
    values = dimension_values(store, dims, filters)
    dim = probe
    if not asked and len(values[dim]) < 2:  # no dimension asked for: the first that has two values to compare
        dim = next((d for d in dims if len(values[d]) >= 2 and not query.get(d)), dim)
        rest = {k: v for k, v in query.items() if k != dim}
        filters = filters_from_query(rest)
    present = values[dim]
    base = query.get("baseline") if query.get("baseline") in present else None
    base = base or (present[0] if present else None)
    cand = query.get("candidate") if query.get("candidate") in present and query.get("candidate") != base else None
    cand = cand or next((v for v in present if v != base), None)
    return Choice(
        dimension=dim,
        baseline=base,
        candidate=cand,
        values=present,
        counts={d: len(v) for d, v in values.items()},
        filters=filters,
        dropped_filter=dim if query.get(dim) else None,
    )


def controls(choice: Choice, query: Mapping[str, str]) -> Any:
    dims = [
        {"value": d, "label": f"{LABELS.get(d, d)} ({choice.counts.get(d, 0)})"} for d in _dimensions()
    ]  # the count: values present, so a dimension with one value is seen as such before it is picked
    return dmc.Paper(
        dmc.Group(
            [
                dmc.Select(
                    id=url_id("dimension"),
                    label="Compare by",
                    data=dims,
                    value=choice.dimension,
                    allowDeselect=False,
                    w=200,
                ),
                dmc.Select(
                    id=url_id("baseline"),
                    label="Baseline",
                    data=choice.values,
                    value=choice.baseline,
                    allowDeselect=False,
                    searchable=True,
                    w=220,
                ),
                dmc.Select(
                    id=url_id("candidate"),
                    label="Candidate",
                    data=choice.values,
                    value=choice.candidate,
                    allowDeselect=False,
                    searchable=True,
                    w=220,
                ),
                dmc.ChipGroup(
                    [dmc.Chip("Golden set only", value="1", id="canary-golden-chip")],
                    id=url_id("golden"),
                    value="1" if filters_golden(query) else None,
                    multiple=False,
                    deselectable=True,
                ),
            ],
            gap="md",
            align="flex-end",
        ),
        withBorder=True,
        p="sm",
        radius="md",
    )


def filters_golden(query: Mapping[str, str]) -> bool:
    return str(query.get("golden") or "").lower() in ("1", "true", "yes", "on")


# -- formatting ---------------------------------------------------------------------------------------------------
def _value(v: Any, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "usd":
        return format_usd(Decimal(str(v)))
    x = float(v)
    if unit == "s":
        return f"{x:.3g} s"
    if unit == "%":
        return f"{x:.1f}%"
    return f"{x:,.0f}"


def _effect(v: float | None, kind: str) -> str:
    if v is None or not math.isfinite(v):
        return "—"
    return f"×{v:.3f}" if kind == "ratio" else f"{v:+.1f} pp"


def _interval(lo: float | None, hi: float | None, kind: str) -> str:
    """``0.114 – 1.822`` (a ratio) or ``-47.6 – +24.2 pp``; an end the interval could not bound is left open."""

    def end(x: float) -> str:
        return f"{x:.3f}" if kind == "ratio" else f"{x:+.1f}"

    unit = "" if kind == "ratio" else " pp"
    if lo is not None and hi is not None:
        return f"{end(lo)} – {end(hi)}{unit}"
    if lo is not None:
        return f"≥ {end(lo)}{unit}"
    if hi is not None:
        return f"≤ {end(hi)}{unit}"
    return "—"


def _margin(m: float, kind: str) -> str:
    if kind == "ratio":
        return f"≤ ×{m:.2f}"
    return f"≥ {m:+.1f} pp" if m < 0 else f"≤ {m:+.1f} pp"


def _n(v: int | None) -> str:
    return "—" if v is None else f"{v:,}"


# -- the answer's parts -------------------------------------------------------------------------------------------
def verdict_banner(ans: dict[str, Any], choice: Choice) -> Any:
    s = ans["summary"]
    word, colour = VERDICTS.get(s["verdict"], (s["verdict"], "gray"))
    dim = LABELS.get(choice.dimension, choice.dimension)
    if s["verdict"] == "fail":
        worse = ", ".join(METRIC_LABELS.get(m, m) for m in _split(s["worse_metrics"]))
        why = f"Worse than the baseline beyond the margin: {worse}."
    elif s["verdict"] == "pass":
        why = (
            f"No metric is worse beyond its margin: {s['metrics_better']} better, {s['metrics_within_margin']} within "
            "the margin."
        )
    else:
        held = _split(s["holding_verdict_metrics"])
        if not held:
            why = "No metric passed."
        elif len(held) == len(METRIC_LABELS):
            why = f"All {len(held)} metrics are undecided."
        else:
            why = f"Undecided: {', '.join(METRIC_LABELS.get(m, m) for m in held)}."
        need = [
            f"{n:,} {what}"
            for n, what in ((s.get("needed_calls_per_arm"), "calls"), (s.get("needed_tasks_per_arm"), "finished tasks"))
            if n
        ]
        if need:
            why += (
                f" About {' and '.join(need)} per arm would decide it; the arms have {s['baseline_calls']:,} and "
                f"{s['candidate_calls']:,} calls, {s['baseline_finished_tasks']:,} and "
                f"{s['candidate_finished_tasks']:,} finished tasks."
            )
    return dmc.Alert(
        [
            dmc.Group(
                [
                    dmc.Text(word, fw=800, size="xl", id="canary-verdict", c=f"{colour}.9"),
                    dmc.Text(
                        f"{dim}: {s['candidate']} (candidate) against {s['baseline']} (baseline)"
                        + (", golden set only" if choice.filters.golden else ""),
                        size="lg",
                        fw=500,
                    ),
                ],
                gap="lg",
                align="baseline",
            ),
            dmc.Text(why, size="sm", mt=6, id="canary-why"),
            dmc.Group(
                [
                    dmc.Text("The same gate on the command line (exit 0 pass, 1 fail, 3 not enough data):", size="xs"),
                    dmc.Code(_cli(choice), id="canary-cli"),
                ],
                gap=6,
                mt=6,
            ),
        ],
        color=colour,
        variant="light",
        radius="md",
        id="canary-verdict-box",
    )


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _cli(choice: Choice) -> str:
    """The same question on the command line (a deployment gate: exit 0 pass, 1 fail, 3 not enough data)."""
    args = [f"--dimension {choice.dimension}", f"--baseline {choice.baseline}", f"--candidate {choice.candidate}"]
    for k, v in choice.filters.model_dump(mode="json", exclude_defaults=True).items():
        args.append(f"--{k.replace('_', '-')}" if v is True else f"--{k.replace('_', '-')} {v}")
    return "taskcost canary " + " ".join(args)


def metrics_table(ans: dict[str, Any]) -> Any:
    arms = {r["arm"]: r for r in rows_of(ans["tables"]["arms"])}
    head = dmc.TableThead(
        dmc.TableTr(
            [
                dmc.TableTh(h)
                for h in (
                    "Metric",
                    "Baseline",
                    "Candidate",
                    "Effect",
                    f"{ans['summary']['confidence']:.0%} interval",
                    "Margin",
                    "Outcome",
                    "n (baseline / candidate)",
                    "Needed per arm",
                    "Rule",
                )
            ]
        )
    )
    body = []
    for r in rows_of(ans["tables"]["metrics"]):
        unit, kind = r["unit"], r["effect_unit"]
        colour = OUTCOME_COLOURS.get(r["outcome"], "gray")
        if unit == "usd":  # money: with its coverage beside it
            cells = [_money_cell(r[a], arms.get(a)) for a in ("baseline", "candidate")]
        else:
            cells = [_value(r["baseline"], unit), _value(r["candidate"], unit)]
        label = [dmc.Text(METRIC_LABELS.get(r["metric"], r["metric"]), size="sm", fw=500)]
        if r["critical"]:
            label.append(dmc.Badge("critical", size="xs", variant="outline", color="gray"))
        body.append(
            dmc.TableTr(
                [
                    dmc.TableTd(dmc.Group(label, gap=6)),
                    dmc.TableTd(cells[0]),
                    dmc.TableTd(cells[1]),
                    dmc.TableTd(dmc.Text(_effect(r["effect"], kind), size="sm", fw=600), style=NOWRAP),
                    dmc.TableTd(_interval(r["ci_low"], r["ci_high"], kind), style=NOWRAP),
                    dmc.TableTd(_margin(r["margin"], kind), style=NOWRAP),
                    dmc.TableTd(
                        dmc.Badge(
                            OUTCOME_WORDS.get(r["outcome"], r["outcome"]),
                            color=colour,
                            variant="light",
                            tt="none",
                            style={"minWidth": "max-content"},  # else its label may shrink to an ellipsis
                        ),
                        style=NOWRAP,
                    ),
                    dmc.TableTd(f"{_n(r['n_baseline'])} / {_n(r['n_candidate'])}"),
                    dmc.TableTd(f"{_n(r['needed_n'])} {r['needed_per'] or ''}".strip() if r["needed_n"] else "—"),
                    dmc.TableTd(dmc.Text(r["rule"] or "", size="xs", c="dimmed")),
                ],
                id=f"canary-row-{r['metric']}",
            )
        )
    return dmc.Stack(
        [
            dmc.Text("Metrics: candidate against baseline", fw=600),
            dmc.TableScrollContainer(
                dmc.Table([head, dmc.TableTbody(body)], highlightOnHover=True, withTableBorder=True, fz="sm"),
                minWidth=900,
            ),
        ],
        gap=4,
        id="canary-metrics",
    )


def _per_task_cover(arm: Mapping[str, Any]) -> str | None:
    """A cost per completed task is over the arm's fully priced tasks: the ones left out are counted, never $0."""
    left_out = arm.get("unpriced_tasks") or 0
    if not left_out:
        unpriced, attempts = arm["unpriced_calls"] or 0, arm["attempts"] or 0
        return f"{attempts - unpriced:,} of {attempts:,} attempts priced" if attempts else None
    return (
        f"over {arm.get('priced_completed_tasks') or 0:,} of {arm['completed_tasks']:,} completed tasks; "
        f"{left_out:,} tasks with an unpriced call or tool call left out, not $0"
    )


def _money_cell(v: Any, arm: Mapping[str, Any] | None) -> Any:
    if arm is None:
        return money(v)
    return money(v, _per_task_cover(arm))


def arms_table(ans: dict[str, Any]) -> Any:
    head = dmc.TableThead(
        dmc.TableTr(
            [
                dmc.TableTh(h)
                for h in (
                    "Arm",
                    "Value",
                    "Calls",
                    "Errors",
                    "Finished tasks",
                    "Completed",
                    "Running",
                    "Spend",
                    "Cost per completed task",
                    "First call",
                    "Last call",
                )
            ]
        )
    )
    body = []
    for a in rows_of(ans["tables"]["arms"]):
        unpriced, attempts = a["unpriced_calls"] or 0, a["attempts"] or 0
        cover = f"{attempts - unpriced:,} of {attempts:,} attempts priced" if attempts else None
        body.append(
            dmc.TableTr(
                [
                    dmc.TableTd(dmc.Text(a["arm"], c=ARM_COLOURS[a["arm"]], fw=600, size="sm")),
                    dmc.TableTd(a["value"]),
                    dmc.TableTd(f"{a['calls']:,}"),
                    dmc.TableTd(f"{a['errors']:,}"),
                    dmc.TableTd(f"{a['finished_tasks']:,}"),
                    dmc.TableTd(f"{a['completed_tasks']:,}"),
                    dmc.TableTd(f"{a['running_tasks']:,}"),
                    dmc.TableTd(money(a["cost_usd"], cover)),
                    dmc.TableTd(money(a["cost_per_completed_task_usd"], _per_task_cover(a))),
                    dmc.TableTd(_time(a["first_call"])),
                    dmc.TableTd(_time(a["last_call"])),
                ],
                id=f"canary-arm-{a['arm']}",
            )
        )
    return dmc.Stack(
        [
            dmc.Text("The arms", fw=600),
            dmc.TableScrollContainer(
                dmc.Table([head, dmc.TableTbody(body)], withTableBorder=True, fz="sm"), minWidth=900
            ),
        ],
        gap=4,
        id="canary-arms",
    )


def _time(v: Any) -> str:
    return "—" if v is None else str(v).replace("T", " ")[:19]


def notes(ans: dict[str, Any]) -> Any:
    return dmc.Stack(
        [
            dmc.Text("How it was judged", fw=600),
            dmc.List([dmc.ListItem(dmc.Text(n, size="sm")) for n in ans["notes"]], size="sm", spacing=2),
        ],
        gap=4,
        id="canary-notes",
    )


def prompt(title: str, text: str) -> Any:
    return dmc.Alert(dmc.Text(text), title=title, color="blue", className="tc-prompt")


def given(query: Mapping[str, str]) -> Choice | None:
    """The arms as the layout resolved them into the page's query (no look-up of the values again), if it did."""
    dim, base, cand = query.get("dimension"), query.get("baseline"), query.get("candidate")
    if not (dim in _dimensions() and base and cand and base != cand):
        return None
    filters = filters_from_query({k: v for k, v in query.items() if k != dim})
    return Choice(dim, base, cand, [base, cand], {dim: 2}, filters, dim if query.get(dim) else None)


def body(store: ReadStore, query: Mapping[str, str]) -> Any:
    choice = given(query) or choose(store, query)
    if not any(choice.counts.values()):
        return empty_state()
    dim = LABELS.get(choice.dimension, choice.dimension)
    if choice.baseline is None or choice.candidate is None:
        only = f" (only {choice.values[0]})" if choice.values else ""
        return prompt(
            "Pick a dimension with two values",
            f"{dim} has fewer than two values under these filters{only}: a canary compares two. Pick another "
            "dimension (the menu gives how many values each has) or widen the filters.",
        )
    q = QUESTIONS[NAME]
    options = q.options.model_validate(
        {"dimension": choice.dimension, "baseline": choice.baseline, "candidate": choice.candidate}
    )
    ans = q.run(store, choice.filters, options).to_json()
    samples = canary_samples(
        store, choice.filters, choice.dimension, choice.baseline, choice.candidate, size=SAMPLE_PER_ARM
    )
    parts: list[Any] = [verdict_banner(ans, choice)]
    if choice.dropped_filter:
        parts.append(
            dmc.Text(f"The {dim} filter is left out here: it is what the arms differ by.", size="xs", c="dimmed")
        )
    parts += [
        metrics_table(ans),
        distributions(samples, ans, choice.baseline, choice.candidate, SAMPLE_PER_ARM),
        arms_table(ans),
        notes(ans),
    ]
    return dmc.Stack(parts, gap="lg")


def layout_for(store: ReadStore, query: Mapping[str, str]) -> Any:
    """The filter bar (without the compared dimension: it is what differs), the canary's own controls, and the body;
    the page's query carries the arms resolved here, so that its callback need not look the values up again."""
    try:
        choice = choose(store, query)
    except PageError:  # a bad filter or dimension in the address: the body says what is wrong
        return page(NAME, "Canary", query, store, html.Div(id=f"{NAME}-body"))
    resolved = {k: v for k, v in query.items() if k not in ("baseline", "candidate")}
    resolved["dimension"] = choice.dimension
    if choice.baseline and choice.candidate:
        resolved |= {"baseline": choice.baseline, "candidate": choice.candidate}
    dims = [d for d in FILTER_DIMENSIONS if d[0] != choice.dimension]
    return page(
        NAME,
        "Canary",
        resolved,
        store,
        filter_bar(store, query, dims),
        controls(choice, query),
        html.Div(id=f"{NAME}-body"),
        filters=False,
    )


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        return layout_for(ctx.store, query)

    dash.register_page(NAME, path="/canary", name="Canary", layout=layout)

    @app.callback(Output(f"{NAME}-body", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh(query: dict[str, str] | None) -> Any:
        return body(ctx.store, query or {})
