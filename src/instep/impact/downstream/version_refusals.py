"""Find the places where the downstream refuses an upstream version: a version check whose
refusing branch raises, ``assert``s false or exits.

DICP's ``if torch.__version__.startswith("2.0"): ... elif ...startswith("2.1"): ... else:
raise ValueError("unsupported dicp torch version")`` at module level makes the module fail
to import on every later torch; no upstream symbol changes, so no coupling reports it.
Each place becomes a :class:`Refusal`: the statement that refuses, the condition under
which it runs as a small version predicate, and its scope (``"module"``: the module no
longer imports; else the qualname of the function that fails when called).

Recognised version tests: ``<upstream>.__version__`` (sliced, parsed by ``Version``/
``parse``, or a module constant derived from it, e.g. ``TORCH_VERSION``) compared as
:mod:`version_gates` does, ``.startswith(prefix | (prefixes))``, ``in (…)`` lists, ``"2.1."
in torch.__version__``, version helpers (``is_torch_version_ge("2.1")``), ``not``/``and``/
``or``, and module flags set in a version branch (``is_torch_210 = True``). Anything else
is unknown: a refusal behind an unknown condition is never decided. Static only: this
module decides a refusal against given versions (:func:`new_refusals`) and renders nothing.
"""

from __future__ import annotations

import ast
import bisect
import re

from instep.impact.downstream import version_conditions as vc
from instep.impact.downstream.records import Refusal
from instep.impact.downstream.version_predicates import (
    All,
    AnyOf,
    Const,
    Contains,
    InRange,
    Not,
    OneOf,
    Predicate,
    Prefix,
    Unknown,
    Version,
    holds,
)
from instep.pyindex.registrations import dotted_name

_MAX_TEXT = 200


def _about_version(p: Predicate) -> bool:
    if isinstance(p, (InRange, Prefix, OneOf, Contains)):
        return True
    if isinstance(p, Not):
        return _about_version(p.inner)
    if isinstance(p, (All, AnyOf)):
        return any(_about_version(q) for q in p.parts)
    return False


def new_refusals(refusals: list[Refusal], old: Version, new: Version) -> list[Refusal]:
    """The refusals that let the old upstream through and refuse the new one; module-level
    ones first (the module no longer imports), then by place."""
    found = [r for r in refusals if holds(r.when, old) is False and holds(r.when, new) is True]
    return sorted(found, key=lambda r: (r.scope != "module", r.path, r.line))


def _short(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


_LINE_BREAKS = re.compile(r"\r\n?|\n")  # the parser's line breaks
_VERSION = re.compile("version", re.IGNORECASE)


class _Reader:
    """Turns test expressions into predicates, knowing the module's version constants."""

    def __init__(self, roots: tuple[str, ...], source: str | None = None) -> None:
        self.roots = roots
        self.flags: dict[str, Predicate] = {}
        self.derived: set[str] = set()  # module names bound from <root>.__version__
        self.source = source  # the module's text, to skip expressions that cannot mention
        self._starts: list[int] | None = None
        self._mentions: tuple[int, list[int]] | None = None  # (len(derived), lines)
        self.conds = vc.Conditions()  # the module's own version helpers, for their calls

    def is_current(self, node: ast.AST) -> bool:
        """``torch.__version__`` (sliced, parsed) or a name derived from it."""
        if isinstance(node, ast.Call):
            return (
                bool(node.args) and vc.callee(node) in vc.PARSERS and self.is_current(node.args[0])
            )
        if isinstance(node, ast.Subscript):
            return self.is_current(node.value)
        if isinstance(node, ast.Attribute) and node.attr == "__version__":
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            return isinstance(root, ast.Name) and root.id in self.roots
        if isinstance(node, ast.Name):
            low = node.id.lower()
            return node.id in self.derived or (
                vc.is_current_version(node) and any(r.lower() in low for r in self.roots)
            )
        return False

    def mentions_current(self, node: ast.AST) -> bool:
        if self.source is None:
            return any(self.is_current(n) for n in ast.walk(node))
        # the same question, asked only of the parts whose lines could hold a current
        # version: ``<root>.__version__`` and every version name say "version", a derived
        # name is named (``is_current`` holds for nothing else); one module-level literal
        # of 6,000 lines is thus not walked whole
        lines = self._mention_lines()
        todo = [node]
        while todo:
            n = todo.pop()
            start = getattr(n, "lineno", None)
            end = getattr(n, "end_lineno", None)
            if start is not None and end is not None:
                i = bisect.bisect_left(lines, start)
                if i == len(lines) or lines[i] > end:
                    continue
            if self.is_current(n):
                return True
            todo.extend(ast.iter_child_nodes(n))
        return False

    def _mention_lines(self) -> list[int]:
        """Sorted numbers of the lines saying "version" (any case) or a derived name."""
        src = self.source or ""
        if self._starts is None:  # where each line starts, at the parser's line breaks
            self._starts = [0, *(m.end() for m in _LINE_BREAKS.finditer(src))]
        if self._mentions is None or self._mentions[0] != len(self.derived):
            pattern = _VERSION
            if self.derived:
                words = "|".join(map(re.escape, sorted(self.derived)))
                pattern = re.compile(f"{_VERSION.pattern}|{words}", re.IGNORECASE)
            # (?i) matches wherever lower() would say "version", and the derived names
            # case-blind too: a few lines more to look at, none fewer
            starts = self._starts
            found = {bisect.bisect_right(starts, m.start()) for m in pattern.finditer(src)}
            self._mentions = (len(self.derived), sorted(found))
        return self._mentions[1]

    def predicate(self, node: ast.AST) -> Predicate:
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return Const(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Not(self.predicate(node.operand))
        if isinstance(node, ast.BoolOp):
            parts = tuple(self.predicate(v) for v in node.values)
            return All(parts) if isinstance(node.op, ast.And) else AnyOf(parts)
        if isinstance(node, ast.Name):
            return self.flags.get(node.id, Unknown())
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node.left, node.ops[0], node.comparators[0])
        return Unknown()

    def _call(self, call: ast.Call) -> Predicate:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "startswith" and self.is_current(f.value):
            if len(call.args) == 1:
                arg = call.args[0]
                elts = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]
                if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
                    return Prefix(tuple(e.value for e in elts))  # type: ignore[union-attr]
            return Unknown()
        rng = self.conds._helper_call(call)
        return InRange(*rng) if rng is not None else Unknown()

    def _compare(self, left: ast.AST, op: ast.cmpop, right: ast.AST) -> Predicate:
        if isinstance(op, (ast.In, ast.NotIn)):
            p = self._membership(left, right)
            return Not(p) if isinstance(op, ast.NotIn) and not isinstance(p, Unknown) else p
        if isinstance(op, ast.NotEq):
            eq = self._compare(left, ast.Eq(), right)
            return eq if isinstance(eq, Unknown) else Not(eq)
        if self.is_current(left) and (v := vc.literal_version(right)) is not None:
            rng = vc.range_of_compare(op, v)
        elif self.is_current(right) and (v := vc.literal_version(left)) is not None:
            rng = vc.range_of_compare(vc.flip(op), v)
        else:
            return Unknown()
        return InRange(*rng) if rng is not None else Unknown()

    def _membership(self, left: ast.AST, right: ast.AST) -> Predicate:
        if (
            isinstance(left, ast.Constant)
            and isinstance(left.value, str)
            and self.is_current(right)
            and not isinstance(right, ast.Call)
        ):
            return Contains(left.value)
        if self.is_current(left) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            values = [vc.literal_version(e) for e in right.elts]
            if values and all(v is not None for v in values):
                return OneOf(tuple(values))  # type: ignore[arg-type]
        return Unknown()


def _refusing(stmt: ast.stmt) -> str | None:
    """What a statement raises when it refuses: a raise, ``assert False``, an exit call."""
    if isinstance(stmt, ast.Raise):
        return _short(ast.unparse(stmt.exc)) if stmt.exc is not None else "raise"
    if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Constant) and not stmt.test.value:
        return "AssertionError" + (f"({_short(ast.unparse(stmt.msg))})" if stmt.msg else "")
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        name = dotted_name(stmt.value.func)  # what unparse gives for a dotted name
        if name in {"sys.exit", "exit", "quit", "os._exit", "os.abort"}:
            return _short(ast.unparse(stmt.value))
    return None


def _block_refuses(block: list[ast.stmt]) -> ast.stmt | None:
    """The first top-level statement of the block that refuses, unless an exit comes first."""
    for stmt in block:
        if _refusing(stmt) is not None:
            return stmt
        if isinstance(stmt, (ast.Return, ast.Continue, ast.Break)):
            return None
    return None


def _catches(handlers: list[ast.ExceptHandler]) -> bool:
    """A handler that would swallow the refusal (bare, Exception, BaseException, the common
    error types a version refusal raises)."""
    broad = {"Exception", "BaseException", "ValueError", "RuntimeError", "AssertionError"}
    for h in handlers:
        t = h.type
        names = t.elts if isinstance(t, ast.Tuple) else [t]
        for n in names:
            if n is None or getattr(n, "id", getattr(n, "attr", None)) in broad:
                return True
    return False


def _text(test: ast.expr, negated: bool) -> str:
    """The condition of a branch as shown: the walk keeps (test, negated), written out
    only for the conditions about the version of a refusal found."""
    return f"not ({ast.unparse(test)})" if negated else ast.unparse(test)


class _Walk:
    def __init__(self, reader: _Reader, path: str, collect: bool) -> None:
        self.reader, self.path, self.collect = reader, path, collect
        self.found: list[Refusal] = []

    def block(self, stmts: list, when: tuple, texts: tuple, scope: str, prefix: str) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if self.collect:
                    qual = f"{prefix}{stmt.name}"
                    self.block(stmt.body, (), (), qual, f"{qual}.<locals>.")
            elif isinstance(stmt, ast.ClassDef):
                self.block(stmt.body, when, texts, scope, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, ast.If):
                self._if(stmt, when, texts, scope, prefix)
                if _ends(stmt.body) and not stmt.orelse:  # `if refuse: raise` / early return
                    p = self.reader.predicate(stmt.test)
                    when, texts = (*when, Not(p)), (*texts, (stmt.test, True))
            elif isinstance(stmt, ast.Assert) and self.collect:
                p = self.reader.predicate(stmt.test)
                if _about_version(p) and scope is not None:
                    msg = f"({_short(ast.unparse(stmt.msg))})" if stmt.msg else ""
                    self._add(
                        stmt,
                        (*when, Not(p)),
                        (*texts, (stmt.test, True)),
                        f"AssertionError{msg}",
                        scope,
                    )
            elif isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                inner = None if _catches(stmt.handlers) else scope
                self.block(stmt.body, when, texts, inner, prefix)  # type: ignore[arg-type]
                for h in stmt.handlers:
                    self.block(h.body, when, texts, scope, prefix)
                self.block(stmt.orelse, when, texts, scope, prefix)
                self.block(stmt.finalbody, when, texts, scope, prefix)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                self.block(stmt.body, when, texts, scope, prefix)
            elif self.collect or scope != "module":
                continue  # constants and flags are read once, before any refusal
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self._flag(stmt, when)
            elif isinstance(stmt, ast.ImportFrom) and "version" in (stmt.module or "").lower():
                # from .._compat.version import CURRENT_VERSION
                self.reader.derived.update(
                    a.asname or a.name
                    for a in stmt.names
                    if vc.is_current_version(ast.Name(a.asname or a.name))
                )

    def _if(self, stmt: ast.If, when: tuple, texts: tuple, scope: str, prefix: str) -> None:
        p = self.reader.predicate(stmt.test)
        body = ((*when, p), (*texts, (stmt.test, False)))
        other = ((*when, Not(p)), (*texts, (stmt.test, True)))
        for branch, (w, t) in ((stmt.body, body), (stmt.orelse, other)):
            hit = _block_refuses(branch) if self.collect and scope is not None else None
            if hit is not None:
                self._add(hit, w, t, _refusing(hit) or "", scope)
            self.block(branch, w, t, scope, prefix)

    def _add(self, stmt: ast.stmt, when: tuple, texts: tuple, raises: str, scope: str) -> None:
        pred = All(when)
        if not _about_version(pred):
            return
        shown = [_text(*t) for t, w in zip(texts, when, strict=True) if _about_version(w)]
        self.found.append(
            Refusal(self.path, stmt.lineno, _short(" and ".join(shown)), raises, scope, pred)
        )

    def _flag(self, stmt: ast.Assign | ast.AnnAssign, when: tuple) -> None:
        """``IS_210 = torch.__version__.startswith("2.1")`` or ``IS_210 = True`` in a version
        branch; ``TORCH_VERSION = Version(torch.__version__)`` marks a derived name."""
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if stmt.value is None or not names:
            return
        reader = self.reader
        value = reader.predicate(stmt.value)
        for name in names:
            if isinstance(value, Const) and when:
                prior = reader.flags.get(name, Const(False))
                branch = All(when)
                if value.value:
                    reader.flags[name] = AnyOf((prior, branch))
                else:
                    reader.flags[name] = All((prior, Not(branch)))
            elif _about_version(value) or isinstance(value, Const):
                reader.flags[name] = value if not when else All((*when, value))
            elif not when and reader.mentions_current(stmt.value):
                reader.derived.add(name)  # TORCH_VERSION = Version(torch.__version__)
            else:
                reader.flags.pop(name, None)


def _ends(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _constants(
    tree: ast.Module,
    source: str,
    roots: tuple[str, ...],
    helpers: tuple[dict[str, vc.HelperSpec], set[str]] | None = None,
) -> _Reader | None:
    """The module's version constants and flags (the reader after its first pass), or
    None when the module never says "version" (then it has none). ``helpers``: the
    module's ``version_conditions.version_helpers``, where the caller has them."""
    if "version" not in source.lower():
        return None
    reader = _Reader(tuple(roots) or ("torch",), source)
    reader.conds.helpers, reader.conds.not_helpers = (
        helpers if helpers is not None else vc.version_helpers(tree)
    )
    _Walk(reader, "", collect=False).block(tree.body, (), (), "module", "")
    return reader


def _refusals(tree: ast.Module, path: str, source: str, reader: _Reader | None) -> list[Refusal]:
    if reader is None or not any(w in source for w in ("raise", "assert", "exit", "abort")):
        return []
    walk = _Walk(reader, path, collect=True)  # reads the constants, changes none
    walk.block(tree.body, (), (), "module", "")
    return walk.found


def _flags(reader: _Reader | None) -> dict[str, tuple[Predicate, Predicate]]:
    if reader is None:
        return {}
    return {k: (v, Not(v)) for k, v in reader.flags.items() if _about_version(v)}


def refusals_in(
    tree: ast.Module, path: str, source: str, upstream_roots: tuple[str, ...] = ("torch",)
) -> list[Refusal]:
    """Every version check of a module whose refusing branch raises, asserts or exits,
    undecided (:func:`new_refusals` decides them against two versions)."""
    return _refusals(tree, path, source, _constants(tree, source, upstream_roots))


def flags_and_refusals(
    tree: ast.Module,
    path: str,
    source: str,
    upstream_roots: tuple[str, ...] = ("torch",),
    helpers: tuple[dict[str, vc.HelperSpec], set[str]] | None = None,
) -> tuple[dict[str, tuple[Predicate, Predicate]], list[Refusal]]:
    """:func:`version_flags` and :func:`refusals_in` of one module, its constants read once
    (``helpers``: the module's ``version_conditions.version_helpers``, where the caller has
    them)."""
    reader = _constants(tree, source, upstream_roots, helpers)
    return _flags(reader), _refusals(tree, path, source, reader)


def version_flags(
    tree: ast.Module, source: str, upstream_roots: tuple[str, ...] = ("torch",)
) -> dict[str, tuple[Predicate, Predicate]]:
    """Module-level flags whose value is a version condition: ``IS_210 =
    torch.__version__.startswith("2.1")``, or ``is_torch_210 = True`` in the branch of a
    version ``if``/``elif`` chain (``False`` before it): name -> the conditions under which
    the flag is true and false. The gate reader (:mod:`version_gates`) gates ``if FLAG:``
    with them (the join decides them on the new upstream's version, ``facts.facts_for``)."""
    return _flags(_constants(tree, source, upstream_roots))
