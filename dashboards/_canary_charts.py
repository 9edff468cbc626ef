"""The Canary page's distributions: both arms' latency and TTFT as ECDFs, the canary's quantiles marked on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash_mantine_components as dmc
from dash import dcc

from dashboards._charts import rows_of

__all__ = ["ARM_COLOURS", "distributions"]

ARM_COLOURS = {"baseline": "#1c7ed6", "candidate": "#e8590c"}


def distributions(samples: Any, ans: Mapping[str, Any], baseline: str, candidate: str, sample_per_arm: int) -> Any:
    """ECDFs of both arms' sampled latency and TTFT, the canary's p50/p95/p99 marked on them."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    metrics = {r["metric"]: r for r in rows_of(ans["tables"]["metrics"])}
    names = {"baseline": baseline, "candidate": candidate}
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("Latency of successful calls (s)", "Time to first token (s)"),
        horizontal_spacing=0.08,
    )
    in_legend: set[str] = set()
    for col, (column, metric) in enumerate((("duration_s", "latency"), ("ttft_s", "ttft")), start=1):
        drawn = 0
        xs_all: list[float] = []
        for arm in ("baseline", "candidate"):
            xs = sorted(
                float(x) for x in samples.filter(samples["arm"] == arm)[column].drop_nulls().to_list() if x is not None
            )
            if not xs:
                continue
            drawn += 1
            xs_all += xs
            first = arm not in in_legend
            in_legend.add(arm)
            n = len(xs)
            fig.add_trace(
                go.Scatter(
                    x=[xs[0], *xs],
                    y=[0.0, *((i + 1) / n for i in range(n))],
                    mode="lines",
                    line={"shape": "hv", "color": ARM_COLOURS[arm], "width": 2},
                    name=f"{arm} {names[arm]} (n={n:,})",
                    legendgroup=arm,
                    showlegend=first,
                    hovertemplate="%{x:.3g} s: %{y:.0%} of calls at or below<extra>" + arm + "</extra>",
                ),
                row=1,
                col=col,
            )
            qx, qy, qt = [], [], []
            for label, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
                v = metrics.get(f"{metric}_{label}", {}).get(arm)
                if v is not None:
                    qx.append(float(v))
                    qy.append(q)
                    qt.append(label)
            fig.add_trace(
                go.Scatter(
                    x=qx,
                    y=qy,
                    mode="markers+text",
                    text=qt,
                    textposition="middle left" if arm == "baseline" else "middle right",
                    textfont={"size": 10, "color": ARM_COLOURS[arm]},
                    marker={"color": ARM_COLOURS[arm], "size": 8, "symbol": "diamond"},
                    legendgroup=arm,
                    showlegend=False,
                    hovertemplate="%{text} %{x:.3g} s<extra>" + arm + "</extra>",
                ),
                row=1,
                col=col,
            )
        if not drawn:
            fig.add_annotation(
                text="no call reports a time to first token" if metric == "ttft" else "no successful calls",
                showarrow=False,
                xref="x domain" if col == 1 else "x2 domain",
                yref="y domain" if col == 1 else "y2 domain",
                x=0.5,
                y=0.5,
            )
        positive = [x for x in xs_all if x > 0]
        if positive and max(positive) / min(positive) >= 20:
            fig.update_xaxes(type="log", row=1, col=col)
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", title_text="share of calls at or below")
    fig.update_yaxes(title_text=None, row=1, col=2)
    fig.update_layout(
        height=360,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        legend={"orientation": "h", "y": -0.18},
        template="plotly_white",
    )
    sampled = {arm: samples.filter(samples["arm"] == arm).height for arm in ("baseline", "candidate")}
    return dmc.Stack(
        [
            dmc.Text("Distributions, both arms overlaid", fw=600),
            dcc.Graph(figure=fig, id="canary-distributions", config={"displaylogo": False}),
            dmc.Text(
                f"Cumulative share of successful calls (ECDF) of a deterministic sample of at most about "
                f"{sample_per_arm:,} calls per arm ({sampled['baseline']:,} baseline, {sampled['candidate']:,} "
                "candidate); the diamonds are the canary's quantiles (from its own sample of up to 10,000). A curve "
                "further right is slower.",
                size="xs",
                c="dimmed",
            ),
        ],
        gap=4,
    )
