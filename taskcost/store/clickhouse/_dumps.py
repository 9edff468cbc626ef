"""ClickHouse's EXPLAIN dumps as trees, for the sandbox's checks (``_sandbox``): ``EXPLAIN AST``'s lines rebuilt
from their ``(children N)`` counts and indentation, ``EXPLAIN QUERY TREE``'s from its indentation, the fields of a
query-tree line that carry no user text, and the rows of a dump read as TabSeparated."""

from __future__ import annotations

import re

from taskcost.store._base import QueryError

__all__ = ["ID", "TSV_ESCAPE", "Node", "field", "filter_lines", "indented", "tree", "tsv_char", "walk"]


TSV_ESCAPE = re.compile(r"\\(.)", re.S)


_TSV_CHARS = {"t": "\t", "n": "\n", "r": "\r", "0": "\0", "b": "\b", "f": "\f", "\\": "\\", "'": "'"}


def tsv_char(m: re.Match[str]) -> str:
    """A TabSeparated escape as its character."""
    return _TSV_CHARS.get(m.group(1), m.group(1))


_CHILDREN = re.compile(r" \(children (\d+)\)$")


ID = re.compile(r"\b(id|source_id): (\d+)|, alias: __table\d+")


class Node:
    __slots__ = ("children", "kind", "line", "parent", "text")

    def __init__(self, kind: str, text: str, line: str, parent: Node | None) -> None:
        self.kind, self.text, self.line, self.parent = kind, text, line, parent
        self.children: list[Node] = []


def tree(lines: list[str]) -> Node:
    """``EXPLAIN AST``'s tree from its lines, rebuilt from the ``(children N)`` counts and checked against the
    indentation (one space a level). Any inconsistency (a name with a line break in it) is refused."""
    broken = QueryError("this query form is not supported here (a name with a line break in it?)")
    pos = 0

    def node(depth: int, parent: Node | None) -> Node:
        nonlocal pos
        if pos >= len(lines):
            raise broken
        line = lines[pos]
        pos += 1
        body = line[depth:]
        if line[:depth].strip() or not body or body[0] == " ":
            raise broken
        match = _CHILDREN.search(body)
        count = int(match.group(1)) if match else 0
        if match:
            body = body[: match.start()]
        kind, _, text = body.partition(" ")
        out = Node(kind, text, line, parent)
        out.children = [node(depth + 1, out) for _ in range(count)]
        return out

    root = node(0, None)
    if pos != len(lines):
        raise broken
    return root


def indented(lines: list[str]) -> Node:
    """``EXPLAIN QUERY TREE``'s tree: two spaces a level, a node's parent the last line one level up. Column names
    are printed raw there, so lines can be forged; the checks below rest only on lines that cannot be (see the
    module's docstring): every line is visited, and a filtered read is recognised from lines without user text."""
    root = Node("", "", "", None)
    chain = [root]
    for line in lines:
        if not line:
            continue  # the dump puts an empty line after an empty list (a grouping set ``()``): no node
        body = line.lstrip(" ")
        depth, extra = divmod(len(line) - len(body), 2)
        if extra or depth + 1 > len(chain) or not body:
            raise QueryError("this query form is not supported here (a name with a line break in it?)")
        kind, _, text = body.partition(" ")
        node = Node(kind, text, line, chain[depth])
        chain[depth].children.append(node)
        del chain[depth + 1 :]
        chain.append(node)
    if len(root.children) != 1:
        raise QueryError("this query form is not supported here (a name with a line break in it?)")
    return root.children[0]


def walk(root: Node) -> list[Node]:
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.children))
    return out


def field(line: str, name: str) -> str | None:
    """A ``name: value`` field of a query-tree line. A ``TABLE`` line has no user text (its alias is the analyzer's
    ``__tableN`` or none: any other form gives None, so the table is refused); a ``TABLE_FUNCTION`` line has the
    user's alias before its name, so the name is the line's last field (a forged one can only come before it)."""
    stripped = line.strip()
    table = re.fullmatch(r"TABLE id: \d+(?:, alias: __table\d+)?, table_name: (\S+)", stripped)
    if table and name == "table_name":
        return table.group(1)
    function = re.fullmatch(r"TABLE_FUNCTION id: \d+(?:, alias: .*)?, table_function_name: (\S+)", stripped)
    if function and name == "table_function_name":
        return function.group(1)
    if name == "cte_name":
        # a CTE (a QUERY or a UNION) read in FROM (is_cte: 1) or after IN
        found = re.match(r"(?:QUERY|UNION) id: .*?, cte_name: ([^,]+)(?:,|$)", stripped)
        return found.group(1) if found else None
    return None


def filter_lines(join_tree: Node) -> list[str]:
    """A ``JOIN TREE`` of one table and the ``WHERE`` right after it (its next sibling), ids renumbered; [] if the
    JOIN TREE is not one table followed by a WHERE."""
    parent = join_tree.parent
    if parent is None or len(join_tree.children) != 1 or join_tree.children[0].children:
        return []
    at = parent.children.index(join_tree)
    if at + 1 >= len(parent.children) or parent.children[at + 1].line.strip() != "WHERE":
        return []
    lines = [n.line.strip() for n in (*walk(join_tree), *walk(parent.children[at + 1]))]
    numbers: dict[str, str] = {}

    def renumber(m: re.Match[str]) -> str:
        if m.group(0).startswith(", alias"):
            return ""  # a folded scalar subquery's tables have none
        return f"{m.group(1)}: #{numbers.setdefault(m.group(2), str(len(numbers)))}"

    return [ID.sub(renumber, line) for line in lines]
