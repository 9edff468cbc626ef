"""Values whose size an argument sets are bounded before DuckDB builds them.

DuckDB keeps the strings and lists of the vectors it computes outside its ``memory_limit``: ``repeat('x', 1e6)``
over 2,048 rows (one vector) is 2 GB of memory before any row reaches the caller. A query's result is cut by rows
and bytes as it is fetched (taskcost/store/_results.py), but a vector is built whole first. So in the parse tree
of user SQL, the count argument of each function that builds a value of that size is wrapped in a check DuckDB
evaluates: past ``max_value_bytes`` (per value), the query fails with a message that names the function, instead
of allocating. Scalar ``range()`` and ``generate_series()`` (a whole list as one value) are refused by the check in
favour of the table functions of the same names, which stream rows.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["GUARDED", "guard_sizes", "guard_template"]

# function -> (index of the argument that sets the size, index of the argument repeated, or None)
GUARDED: dict[str, tuple[int, int | None]] = {
    "repeat": (1, 0),
    "lpad": (1, None),
    "rpad": (1, None),
    "list_resize": (1, None),
    "array_resize": (1, None),
    "bar": (3, None),
}
_N, _U = "__taskcost_n__", "__taskcost_u__"


def guard_template(max_value_bytes: int) -> str:
    """The check, as SQL with placeholders for the size argument (``_N``) and the repeated one (``_U``)."""
    cap = int(max_value_bytes)
    return (
        f"SELECT CASE WHEN CAST('{_N}' AS DOUBLE) * greatest(strlen(CAST('{_U}' AS VARCHAR)), 1) > {cap} "
        f"THEN error('a value of more than {cap} bytes would be built (sql_max_value_bytes)') ELSE '{_N}' END"
    )


def _arguments(node: dict[str, Any]) -> list[Any]:
    """A function node's argument slots: DuckDB's JSON has ``arguments`` ({name, expression}) or ``children``."""
    if isinstance(node.get("arguments"), list):
        return [a for a in node["arguments"] if isinstance(a, dict) and "expression" in a]
    return node.get("children") or []


def _arg(slot: Any) -> Any:
    return slot["expression"] if isinstance(slot, dict) and "expression" in slot else slot


def _filled(template: dict[str, Any], n: Any, u: Any) -> dict[str, Any]:
    out = copy.deepcopy(template)
    stack: list[Any] = [out]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in list(items):
            text = (value.get("literal") or {}).get("text") if isinstance(value, dict) else None
            if text in (_N, _U):
                node[key] = copy.deepcopy(n if text == _N else u)
            elif isinstance(value, dict | list):
                stack.append(value)
    return out


def guard_sizes(tree: dict[str, Any], template: dict[str, Any]) -> int:
    """Wrap, in place, the size argument of every ``GUARDED`` call in ``tree`` (innermost first, so a guarded
    argument carries its own guard); ``template`` is the parsed CASE expression of ``guard_template``. Returns how
    many calls were guarded."""
    found: list[dict[str, Any]] = []
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if node.get("class") == "FUNCTION" and str(node.get("function_name", "")).lower() in GUARDED:
                found.append(node)
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
    for node in reversed(found):
        size_at, unit_at = GUARDED[str(node["function_name"]).lower()]
        slots = _arguments(node)
        if len(slots) <= size_at:
            continue  # a form DuckDB will refuse anyway
        n = _arg(slots[size_at])
        u = _arg(slots[unit_at]) if unit_at is not None else _EMPTY_STRING
        guarded = _filled(template, n, u)
        if isinstance(slots[size_at], dict) and "expression" in slots[size_at]:
            slots[size_at]["expression"] = guarded
        else:
            slots[size_at] = guarded
            node["children"] = slots
    return len(found)


_EMPTY_STRING = {
    "class": "CONSTANT",
    "type": "VALUE_CONSTANT",
    "alias": "",
    "query_location": 18446744073709551615,
    "query_location_length": 0,
    "literal": {"kind": "STRING", "text": ""},
}
