"""The Overview's "what moved since the previous period": both periods' figures and the infra changes that came
with them, from the ``changes`` question's answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import dash_mantine_components as dmc

from dashboards._charts import pct
from taskcost.analytics import format_usd

__all__ = [
    "change_count",
    "change_money",
    "change_points",
    "change_ratio",
    "changes_table",
    "prefixed",
    "seconds_text",
    "unpriced_text",
    "when_text",
]

_MOVED_ROWS = 5


def prefixed(s: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k.removeprefix(prefix): v for k, v in s.items() if k.startswith(prefix)}


def unpriced_text(f: Mapping[str, Any]) -> str:
    n = f.get("unpriced_calls") or 0
    return f"{n:,} unpriced attempts not in it" if n else "all attempts priced"


def when_text(v: Any) -> str:
    text = str(v).replace("T", " ")
    return text[:19]


def seconds_text(v: Any) -> str:
    """Seconds as they read: under one second in milliseconds, so that two latencies a change compares never both
    show as 0.00 s beside a change of +60%."""
    if v is None:
        return "—"
    s = float(v)
    return f"{s * 1000:.1f} ms" if abs(s) < 1 else f"{s:.2f} s"


def change_money(before: Any, after: Any) -> str:
    if before is None or after is None:
        return "—"
    b, a = Decimal(str(before)), Decimal(str(after))
    rel = f" ({(a / b - 1) * 100:+.1f}%)" if b else ""
    return format_usd(a - b, sign=True) + rel


def change_count(b: Mapping[str, Any], c: Mapping[str, Any], key: str) -> str:
    before, after = int(b.get(key) or 0), int(c.get(key) or 0)
    rel = f" ({(after / before - 1) * 100:+.1f}%)" if before else ""
    return f"{after - before:+,}{rel}"


def change_points(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "—"
    return f"{(after - before) * 100:+.1f} points"


def change_ratio(before: Any, after: Any) -> str:
    if before is None or after is None or not before:
        return "—"
    return f"{(float(after) / float(before) - 1) * 100:+.1f}%"


def share_text(v: Any) -> str:
    """A share of calls in whole percent. One that rounds to 0% or 100% without being it reads <1% or >99%: a value
    that appeared on 1 call of 948 read "0% → 0%", as if it were on none."""
    if v is None:
        return "—"
    text = pct(v, 0)
    if text == "0%" and float(v) > 0:
        return "<1%"
    if text == "100%" and float(v) < 1:
        return ">99%"
    return text


def changes_table(changes: Mapping[str, Any]) -> Any:
    rows = changes["rows"][:_MOVED_ROWS]
    if not rows:
        return None
    cols = changes["columns"]

    def cell(r: Sequence[Any], name: str) -> Any:
        return r[cols.index(name)]

    head = dmc.TableThead(
        dmc.TableTr(
            [dmc.TableTh(h) for h in ("field", "value", "status", "share of calls", "cost / completed task", "p95")]
        )
    )
    body = dmc.TableTbody(
        [
            dmc.TableTr(
                [
                    dmc.TableTd(cell(r, "field")),
                    dmc.TableTd("(not set)" if cell(r, "value") is None else str(cell(r, "value"))),
                    dmc.TableTd(cell(r, "status")),
                    dmc.TableTd(f"{share_text(cell(r, 'share_baseline'))} → {share_text(cell(r, 'share_current'))}"),
                    dmc.TableTd(_signedpct(cell(r, "cost_change"))),
                    dmc.TableTd(_signedpct(cell(r, "p95_change"))),
                ]
            )
            for r in rows
        ]
    )
    more = len(changes["rows"]) - len(rows)
    return dmc.Stack(
        [
            dmc.Table([head, body], withTableBorder=True, striped=True, fz="sm", id="overview-changes"),
            dmc.Text(
                "cost and p95: the calls with the value against the rest of the window (against the previous window "
                "when it is on every call)" + (f"; {more} more changed values" if more > 0 else ""),
                size="xs",
                c="dimmed",
            ),
        ],
        gap=2,
    )


def _signedpct(v: Any) -> str:
    return "—" if v is None else f"{float(v) * 100:+.1f}%"
