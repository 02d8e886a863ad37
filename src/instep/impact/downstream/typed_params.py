"""Member uses one attribute step behind an annotated parameter.

``def call(self, gm: torch.fx.GraphModule)`` … ``gm.graph.call_function(...)`` calls
``Graph.call_function`` when upstream declares ``GraphModule.graph``'s type (a property
annotated ``-> Graph``, a class-level ``graph: Graph``). This module only finds the
chains ``p.attr.member`` of a def's annotated parameters; whether ``attr`` has a declared
type, and which class it names, is the join's question (the upstream snapshot knows it:
``UpstreamResolver.declared_type``). Nothing here reads upstream code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from instep.impact.downstream.ast_children import children

# nested scopes: their names are their own (a parameter of the same name, a rebinding)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def annotation_chain(node: ast.expr | None) -> ast.expr | None:
    """The Name/Attribute chain an annotation names: itself, or the expression inside a
    string annotation (``"torch.fx.GraphModule"``); None for anything else (unions,
    subscripts: the parameter's type is not one class)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    return node if isinstance(node, (ast.Name, ast.Attribute)) else None


def _body_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    todo: list[ast.AST] = list(reversed(body))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _NESTED):
            todo.extend(reversed(children(node)))  # (no ctx leaves: never yielded here)


def attribute_steps(
    body: list[ast.stmt], params: frozenset[str]
) -> Iterator[tuple[str, str, str, ast.Attribute, ast.Call | None]]:
    """``(param, attr, member, node, call)`` for every ``param.attr.member`` in ``body``
    (nested defs, lambdas and classes left out) whose ``param`` the body never rebinds;
    ``call`` is the call whose function the chain is, else None."""
    nodes = list(_body_nodes(body))
    rebound = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    typed = params - rebound
    if not typed:
        return
    called = {id(n.func): n for n in nodes if isinstance(n, ast.Call)}
    for n in nodes:
        if (
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Attribute)
            and isinstance(n.value.value, ast.Name)
            and n.value.value.id in typed
        ):
            yield n.value.value.id, n.value.attr, n.attr, n, called.get(id(n))
