"""The child nodes of an AST node, faster than ``ast.iter_child_nodes``.

``ast.iter_child_nodes`` runs two generators per node (its own and ``iter_fields``); the
indexer walks every expression of 1,700 files several times. Here a node type's fields
are looked up once, and the fields holding only a context or an operator (``Load()``,
``Add()``, ``[Eq()]``: leaves that no recogniser looks at) are left out. Nothing here
knows what a node means.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator

LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def fields_of(t: type) -> tuple[str, ...]:
    """The fields of node type ``t`` that may hold child nodes, in ``_fields`` order."""
    fields = _FIELDS.get(t)
    if fields is None:
        names: tuple[str, ...] = getattr(t, "_fields", ())
        fields = _FIELDS[t] = tuple(n for n in names if n not in LEAF_FIELDS)
    return fields


def children(node: ast.AST) -> list[ast.AST]:
    """``list(ast.iter_child_nodes(node))`` less the context and operator leaves."""
    out: list[ast.AST] = []
    for name in fields_of(type(node)):
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out.extend([item for item in value if isinstance(item, ast.AST)])
    return out


_BODIES = ("body", "handlers", "orelse", "finalbody", "cases")


def statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement under ``node``, breadth first through statement bodies (in the order
    ``ast.walk`` gives them) without visiting an expression node."""
    todo: deque[ast.AST] = deque([node])
    while todo:
        cur = todo.popleft()
        if isinstance(cur, ast.stmt) and cur is not node:
            yield cur
        for field in _BODIES:
            todo.extend(getattr(cur, field, None) or ())
