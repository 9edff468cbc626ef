"""Values whose size an argument sets are bounded before DuckDB builds them: the first, friendly layer.

DuckDB keeps the strings and lists of the vectors it computes outside its ``memory_limit``: ``repeat('x', 1e6)``
over 2,048 rows (one vector) is 2 GB of memory before any row reaches the caller, and no interrupt acts inside one
vector. So in the parse tree of user SQL, each call of a function that builds a value of a size its argument sets is
rewritten to check that size first: past ``max_value_bytes`` (per value), the query fails with a message that names
the function, instead of allocating. Each argument is evaluated once, whatever its form (a nested guarded call, a
``random()``): the call becomes

    list_transform([struct_pack(a0 := <arg 0>, a1 := <arg 1>, ...)], lambda s: f(s.a0, <checked s.a1>, ...))[1]

so a check never evaluates an argument a second time (nesting N guarded calls costs N checks, not 2^N evaluations)
and checks the very value the function then gets. This layer knows these functions only; what it does not know is
bounded by the query watchdog and the process's memory limit (taskcost/store/_watchdog.py, docs/security.md).
Scalar ``range()`` and ``generate_series()`` (a whole list as one value) are refused by the check in favour of the
table functions of the same names, which stream rows.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from taskcost.store._base import QueryError

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
_PLACEHOLDER = "__taskcost_a"


def guard_template(max_value_bytes: int, function: str, arity: int) -> str:
    """The checked call of ``function`` with ``arity`` arguments, as SQL whose placeholder strings ``__taskcost_aK__``
    stand for the arguments (each once). A function whose size is its size argument alone (``lpad``, ``list_resize``,
    ...) keeps its call and gets that argument checked inside a one-element list (the value is built outside it: no
    copy); ``repeat``, whose size is its count times its string's, is called inside the lambda with both."""
    cap = int(max_value_bytes)
    size_at, unit_at = GUARDED[function]
    refused = f"error('{function}(): a value of more than {cap} bytes would be built (sql_max_value_bytes)')"
    if unit_at is None:
        checked = (
            f"list_transform([{_slot(size_at)}], lambda n: CASE WHEN CAST(n AS DOUBLE) > {cap} THEN {refused} "
            "ELSE n END)[1]"
        )
        args = ", ".join(checked if i == size_at else _slot(i) for i in range(arity))
        return f"SELECT {function}({args})"
    checked = (
        f"CASE WHEN CAST(s.a{size_at} AS DOUBLE) * greatest(strlen(CAST(s.a{unit_at} AS VARCHAR)), 1) > {cap} "
        f"THEN {refused} ELSE s.a{size_at} END"
    )
    args = ", ".join(checked if i == size_at else f"s.a{i}" for i in range(arity))
    packed = ", ".join(f"a{i} := {_slot(i)}" for i in range(arity))
    return f"SELECT list_transform([struct_pack({packed})], lambda s: {function}({args}))[1]"


def _slot(i: int) -> str:
    return f"'{_PLACEHOLDER}{i}__'"


def _arguments(node: dict[str, Any]) -> list[Any]:
    """A function node's argument slots: DuckDB's JSON has ``arguments`` ({name, expression}) or ``children``."""
    if isinstance(node.get("arguments"), list):
        return [a for a in node["arguments"] if isinstance(a, dict) and "expression" in a]
    return node.get("children") or []


def _arg(slot: Any) -> Any:
    return slot["expression"] if isinstance(slot, dict) and "expression" in slot else slot


def _filled(template: dict[str, Any], args: list[Any]) -> dict[str, Any]:
    out = copy.deepcopy(template)
    stack: list[Any] = [out]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in list(items):
            text = (value.get("literal") or {}).get("text") if isinstance(value, dict) else None
            if isinstance(text, str) and text.startswith(_PLACEHOLDER):
                node[key] = args[int(text[len(_PLACEHOLDER) : -2])]  # moved, not copied: each argument once
            elif isinstance(value, dict | list):
                stack.append(value)
    return out


def guard_sizes(tree: dict[str, Any], template: Callable[[str, int], dict[str, Any]]) -> int:
    """Rewrite, in place, every ``GUARDED`` call in ``tree`` into its checked form (innermost first: a guarded
    argument carries its own check); ``template(function, arity)`` is the parsed expression of ``guard_template``.
    Returns how many calls were guarded."""
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
        function = str(node["function_name"]).lower()
        slots = _arguments(node)
        if len(slots) <= GUARDED[function][0]:
            continue  # a form DuckDB will refuse anyway
        if any(isinstance(slot, dict) and slot.get("name") for slot in slots) or node.get("distinct"):
            raise QueryError(f"call {function}() with plain positional arguments here")
        checked = _filled(template(function, len(slots)), [_arg(slot) for slot in slots])
        node.clear()
        node.update(checked)  # (for a call kept as it is, its name as the template spells it: the same function)
    return len(found)
