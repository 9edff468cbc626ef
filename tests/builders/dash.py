"""What the browser sends the dashboards: the overview page's update request."""

from __future__ import annotations

from typing import Any

OVERVIEW_UPDATE: dict[str, Any] = {
    "output": "..overview-headline.children...overview-table.children..",
    "outputs": [
        {"id": "overview-headline", "property": "children"},
        {"id": "overview-table", "property": "children"},
    ],
    "inputs": [{"id": "overview-tick", "property": "n_intervals", "value": None}],
    "changedPropIds": [],
}
