"""What the browser sends the dashboards: the page router's request to render a page from its address."""

from __future__ import annotations

from typing import Any


def page_render(pathname: str, search: str = "") -> dict[str, Any]:
    """The update request that renders the page at ``pathname`` (e.g. ``/dash/``) with its query ``search``."""
    return {
        "output": ".._pages_content.children..._pages_store.data..",
        "outputs": [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}],
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": pathname},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
        "changedPropIds": ["_pages_location.pathname"],
    }


def menu_options(layout: Any, key: str) -> list[str]:
    """The options of the URL-kept menu ``key`` in a rendered page's component tree."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for child in node:
                walk(child)
        elif isinstance(node, dict):
            props = node.get("props", {})
            if props.get("id") == {"type": "tc-url", "key": key}:
                found.extend(o if isinstance(o, str) else o["value"] for o in props.get("data") or [])
            walk(props.get("children"))

    walk(layout)
    return found
