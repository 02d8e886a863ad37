"""Recognise gates that ask upstream itself instead of its version number.

Two shapes, both static (nothing is imported or evaluated):

- *source probes*: ``"x" in inspect.getsource(torch.f)`` (``textwrap.dedent`` around it,
  ``not in``, several needles joined by ``and``/``or``), kept in a module constant
  (``HAS_X = "x" in inspect.getsource(c10d.f)``, also inside a module-level version
  ``if``: the constant is then the probe *and* that version range) or returned by a
  module-level function (``src = inspect.getsource(f); return "a" in src or "b" in src``);
- *extension probes*: ``hasattr(torch._C, "_x")`` (``torch._C._sub`` too): a name of the
  compiled extension, whose contents only its stubs (``torch/_C/*.pyi``) show.

An ``if`` whose test is such a probe, its negation, or a probe joined by ``and``/``or``
with one version comparison becomes a :class:`~instep.impact.model.VersionGate` of kind
``source_probe`` / ``c_probe`` carrying a :class:`~instep.impact.model.SourceProbe`;
its ``else`` branch gets the opposite gate. Deciding a probe needs the upstream sources:
``join/probe_outcomes.py`` does that.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from instep.impact.downstream.pruning import statements_in_walk_order
from instep.impact.model import SourceProbe, VersionGate
from instep.pyindex.registrations import dotted_name

_SOURCE_READERS = frozenset({"getsource", "getsourcelines"})


def module_aliases(tree: ast.Module, statements: Iterable[ast.AST] | None = None) -> dict[str, str]:
    """Every import of the module, at any depth: local name -> absolute dotted name (the
    last import of a name in ``ast.walk``'s order wins). ``statements``: ``tree``'s, in
    ``statements_in_walk_order``, where the caller has them."""
    out: dict[str, str] = {}
    for node in statements if statements is not None else statements_in_walk_order(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out.setdefault(a.name.split(".", 1)[0], a.name.split(".", 1)[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


class ProbeReader:
    """The probes a module defines and the probe an ``if`` test asks."""

    def __init__(self, tree: ast.Module, conds, statements: Iterable[ast.AST] | None = None):
        self.aliases = module_aliases(tree, statements)
        self.conds = conds  # version_conditions.Conditions: version comparisons -> ranges
        self.constants: dict[str, SourceProbe] = {}
        self.functions: dict[str, SourceProbe] = {}
        self._definitions(tree)

    # -- recognising ------------------------------------------------------------------

    def _resolve(self, node: ast.AST) -> str | None:
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, tail = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{tail}" if tail else base

    def _source_of(self, node: ast.AST, srcvars: dict[str, str]) -> str | None:
        """The upstream target whose source ``node`` holds."""
        if isinstance(node, ast.Name) and node.id in srcvars:
            return srcvars[node.id]
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in _SOURCE_READERS:
                return self._resolve(node.args[0])
            if name == "dedent":
                return self._source_of(node.args[0], srcvars)
        return None

    def _parameters_of(self, node: ast.AST) -> str | None:
        """The upstream target of ``inspect.signature(target).parameters``."""
        if not (
            isinstance(node, ast.Attribute)
            and node.attr == "parameters"
            and isinstance(node.value, ast.Call)
            and len(node.value.args) == 1
            and not node.value.keywords
        ):
            return None
        f = node.value.func
        reader = self._resolve(f)
        if reader not in ("inspect.signature", "inspect.Signature.from_callable"):
            return None
        return self._resolve(node.value.args[0])

    def probe_of(self, node: ast.AST, srcvars: dict[str, str] | None = None) -> SourceProbe | None:
        """The probe an expression asks, or None when it is not (only) a probe."""
        srcvars = srcvars or {}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.probe_of(node.operand, srcvars)
            return _flip(inner) if inner else None
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            needle, op = node.left, node.ops[0]
            if (
                isinstance(op, (ast.In, ast.NotIn))
                and isinstance(needle, ast.Constant)
                and isinstance(needle.value, str)
            ):
                runs_when = isinstance(op, ast.In)
                target = self._source_of(node.comparators[0], srcvars)
                if target:
                    return SourceProbe(target, (needle.value,), runs_when=runs_when)
                target = self._parameters_of(node.comparators[0])
                if target:
                    needles = (needle.value,)
                    return SourceProbe(target, needles, False, runs_when, reads="parameters")
            return None
        if isinstance(node, ast.BoolOp):
            parts = [self.probe_of(v, srcvars) for v in node.values]
            if (
                all(parts)
                and len({(p.target, p.reads) for p in parts}) == 1  # type: ignore[union-attr]
                and all(  # type: ignore[union-attr]
                    p.runs_when and p.needles
                    for p in parts  # type: ignore[union-attr]
                )
            ):
                needles = tuple(n for p in parts for n in p.needles)  # type: ignore[union-attr]
                return SourceProbe(
                    parts[0].target,  # type: ignore[union-attr]
                    needles,
                    isinstance(node.op, ast.And),
                    reads=parts[0].reads,  # type: ignore[union-attr]
                )
            return None
        if isinstance(node, ast.Call):
            f = node.func
            if (
                isinstance(f, ast.Name)
                and f.id == "hasattr"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                obj = self._resolve(node.args[0])
                if obj and (obj == "torch._C" or obj.startswith("torch._C.")):
                    return SourceProbe(f"{obj}.{node.args[1].value}")
                return None
            if isinstance(f, ast.Name) and not node.args and f.id in self.functions:
                return self.functions[f.id]
            return None
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        return None

    def _definitions(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                p = self._probe_function(stmt)
                if p is not None:
                    self.functions[stmt.name] = p
        self._constants(tree.body, None)

    def _constants(self, body: list[ast.stmt], rng) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                t = stmt.targets[0]
                p = self.probe_of(stmt.value)
                if isinstance(t, ast.Name) and p is not None:
                    if rng is not None and p.join == "":
                        p = _with_version(p, "and", rng)
                    self.constants[t.id] = p
            elif isinstance(stmt, ast.If):
                r = self.conds.range_of(stmt.test)
                if r is not None:
                    self._constants(stmt.body, r)

    def _probe_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> SourceProbe | None:
        """``def f(): src = inspect.getsource(T); return "x" in src ...`` -> its probe."""
        if fn.args.args or fn.args.posonlyargs or fn.args.kwonlyargs:
            return None
        srcvars: dict[str, str] = {}
        found = None
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                t = stmt.targets[0]
                target = self._source_of(stmt.value, {})
                if isinstance(t, ast.Name) and target:
                    srcvars[t.id] = target
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                p = self.probe_of(stmt.value, srcvars)
                if p is None or (found is not None and p != found):
                    return None
                found = p
        return found

    def gate_test(self, test: ast.AST) -> SourceProbe | None:
        """The probe an ``if`` test asks: a probe, or a probe and one version compare."""
        p = self.probe_of(test)
        if p is not None:
            return p
        if isinstance(test, ast.BoolOp) and len(test.values) == 2:
            a, b = test.values
            for probe_node, version_node in ((a, b), (b, a)):
                p = self.probe_of(probe_node)
                rng = self.conds.range_of(version_node) if p is not None else None
                if p is not None and rng is not None and p.join == "":
                    return _with_version(p, "and" if isinstance(test.op, ast.And) else "or", rng)
        return None


def _flip(p: SourceProbe) -> SourceProbe:
    if p.join:  # not (V and P) is not a probe of this shape
        return SourceProbe(p.target, (), runs_when=False, join="?")
    return SourceProbe(p.target, p.needles, p.all_of, not p.runs_when, reads=p.reads)


def _with_version(p: SourceProbe, join: str, rng) -> SourceProbe:
    return SourceProbe(
        p.target, p.needles, p.all_of, p.runs_when, join, rng[0], rng[1], reads=p.reads
    )


def negated(p: SourceProbe) -> SourceProbe | None:
    """The probe of an ``else`` branch: ``not (P)``; ``not (V and P)`` = ``not V or not P``."""
    if p.join == "?":
        return None
    if not p.join:
        return _flip(p)
    lo, hi = p.min_version, p.max_version
    if (lo is None) == (hi is None):
        return None  # a closed range has no single-range negation
    neg = (None, lo) if lo is not None else (hi, None)
    flipped = _flip(SourceProbe(p.target, p.needles, p.all_of, p.runs_when, reads=p.reads))
    return _with_version(flipped, "or" if p.join == "and" else "and", neg)


def probe_gate(path: str, line: int, text: str, probe: SourceProbe, note: str) -> VersionGate:
    kind = "source_probe" if probe.needles else "c_probe"
    return VersionGate(path, line, text, kind, note=note, probe=probe)
