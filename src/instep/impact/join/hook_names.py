"""HOOK_NAME: a member that the new upstream reads from an object the backend provides,
and that the backend's class does not define.

Two shapes of the same coupling:

- upstream *adds* a method ``m`` to a class ``C`` (``DeviceInterface``,
  ``DeviceOpOverrides``, any upstream class a downstream class subclasses, through
  downstream bases too) and the downstream subclass ``D`` defines no ``m``: ``D`` gets
  whatever its upstream ancestors give, the new default of ``C`` (or an upstream subclass
  in between, such as a CUDA one);
- a changed upstream function *newly* reads a name by string from such an object:
  ``getattr(obj, "_name")``, ``getattr(obj, "_name", None)``, ``hasattr(obj, "_name")``,
  where ``obj`` is ``self``/``cls``/``type(self)`` of an upstream class, or a handle that
  hands out the backend's object (``V.graph.device_ops``, ``get_interface_for_device(…)``:
  ``data/backend_hooks.toml``), and neither ``D`` nor an upstream ancestor defines it;
- a changed upstream method that ``D`` inherits (and does not override) *newly* reads
  ``self.<attr>`` on its normal path, set only by an upstream ``__init__`` that ``D``'s
  ``__init__`` skips (``join/skipped_init.py``): ``D`` lacks ``<attr>``.

Facts for the rules (``hook.*`` in ``verdict_rules.toml``): ``hook_default_fails`` (the
inherited default raises unconditionally or is CUDA-specific, or ``getattr`` has no
default), ``hook_call_reaches`` (a new-upstream call or read reaches ``D`` outside any
``if``), ``hook_call_conditional`` (every reaching call sits under an ``if``: the
condition is quoted). The evidence names the read with ``file:line``, the downstream class
with ``file:line`` and the default's behaviour. Nothing here picks a verdict.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from instep.impact.downstream.subclasses import members_defined
from instep.impact.join.backend_handles import load_handles, load_registrars, registered_names
from instep.impact.join.call_conditions import on_backend
from instep.impact.join.fact_names import Fact
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.join.skipped_init import (
    SkippedInit,
    downstream_mros,
    unconditional_self_reads,
)
from instep.impact.join.upstream_calls import holds_needle, needle_lines
from instep.impact.model import ChangeKind, CouplingKind, Reference, SymbolChange, UpstreamChange
from instep.pyindex.model import SymbolKind, module_of

Lines = Callable[[UpstreamChange, SymbolChange], tuple[list[str] | None, list[str] | None]]
UpClass = tuple[str, str]  # (module, class qualname) in the new upstream

_SELF = frozenset({"self", "cls", "type(self)", "self.__class__"})
_ARGS = re.compile(r"\((?:[^()]|\([^()]*\))*\)")
_MAX_SITES = 200
# the fields of a node that hold statements (a def is found only there)
_BODIES = frozenset({"body", "handlers", "orelse", "finalbody", "cases"})
# a string read as text: (receiver, name); only files with a new one are parsed
_TEXT_READ = re.compile(r"""\b(?:get|has)attr\(\s*([\w.()]+?)\s*,\s*["'](\w+)["']""")
# the names read as attributes (``x.name``, ``x.\\n name``, a comment between in brackets):
# a call ``x.name(…)`` is in a file only if ``name`` is one of them (ASCII names)
_ATTRIBUTE = re.compile(rb"\.(?:\s|\\|#[^\r\n]*)*([A-Za-z_]\w*)")


def _receiver_key(text: str) -> str:
    return _ARGS.sub("(*)", text)


@dataclass(frozen=True)
class Read:
    """One place in the new upstream that reads the member from an object."""

    at: str  # path:line
    text: str  # the call or read as written, cut
    receiver: str
    how: str  # 'call' | 'getattr' | 'getattr_default' | 'hasattr'
    condition: str | None  # innermost enclosing `if` inside its def (None: unconditional)
    caller: str | None
    cls: str | None  # class qualname enclosing the read


class _Reads(ast.NodeVisitor):
    """getattr/hasattr reads with a literal name, and calls of ``.name(...)``, each with
    its enclosing class, def and innermost ``if`` test inside that def."""

    def __init__(
        self,
        path: str,
        call_names: frozenset[str] | None = frozenset(),
        lines: list[str] | None = None,
        calls_only: bool = False,
        text: bytes | None = None,
    ) -> None:
        self.path = path
        self.call_names = call_names
        # with the file's lines, a def or class whose text has none of these is skipped
        self.lines = lines
        # calls only: getattr/hasattr reads are not wanted, nor the defs only they name
        self.calls_only = calls_only
        self.needles = (*(() if calls_only else ("attr(",)), *(call_names or ()))
        # calls only, with the file's bytes: the lines holding a needle, sorted; a statement
        # (a def or class with its decorators) that spans none holds no call wanted and is
        # not visited (the parser's lines: ``lines`` may have more, see needle_lines)
        self.hits: list[int] | None = None
        if calls_only and lines is not None and call_names is not None and text is not None:
            self.hits = needle_lines(text, self.needles)
        self.classes: list[str] = []
        self.defs: list[str] = []
        self.conds: list[list[str]] = [[]]
        self.out: list[tuple[str, Read]] = []  # (member name, read)

    def _skip(self, node) -> bool:
        if self.lines is None or self.call_names is None:
            return False
        if self.hits is not None:
            return not holds_needle(self.hits, node)
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        text = "\n".join(self.lines[start - 1 : node.end_lineno])
        return not any(n in text for n in self.needles)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self._skip(node):
            return
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node) -> None:
        if self._skip(node):
            return
        self.defs.append(node.name)
        self.conds.append([])
        self.generic_visit(node)
        self.conds.pop()
        self.defs.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        for branch, label in (
            (node.body, ("if {}", node.test)),
            (node.orelse, ("not ({})", node.test)),
        ):
            self.conds[-1].append(label)
            self._block(branch)
            self.conds[-1].pop()

    def generic_visit(self, node: ast.AST) -> None:
        for _, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._block(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def _block(self, stmts: list[ast.stmt]) -> None:
        """Visit statements in order; after ``if not c: return`` (or raise, continue,
        break) the rest of the block runs only under ``c``, as if inside ``if c:``."""
        pushed = 0
        for stmt in stmts:
            if self.hits is None or holds_needle(self.hits, stmt):
                self.visit(stmt)
            guard = _early_exit(stmt) if isinstance(stmt, ast.If) else None
            if guard is not None:
                self.conds[-1].append(guard)
                pushed += 1
        del self.conds[-1][len(self.conds[-1]) - pushed :]

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        """``a and f()`` calls ``f`` only if ``a``; ``a or f()`` only if not ``a``."""
        self.visit(node.values[0])
        form = "if {}" if isinstance(node.op, ast.And) else "not ({})"
        for i, value in enumerate(node.values[1:], 1):
            before = node.values[:i]
            test = before[0] if i == 1 else ast.BoolOp(op=node.op, values=before)
            self.conds[-1].append((form, test))
            self.visit(value)
            self.conds[-1].pop()

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        self.conds[-1].append(("if {}", node.test))
        self.visit(node.body)
        self.visit(node.orelse)
        self.conds[-1].pop()

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if (
            not self.calls_only
            and isinstance(f, ast.Name)
            and f.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            how = f.id if f.id == "hasattr" or len(node.args) == 2 else "getattr_default"
            self._add(node.args[1].value, node, ast.unparse(node.args[0]), how)
        elif isinstance(f, ast.Attribute) and (
            self.call_names is None or f.attr in self.call_names
        ):
            self._add(f.attr, node, ast.unparse(f.value), "call")
        self.generic_visit(node)

    def _add(self, name: str, node: ast.Call, receiver: str, how: str) -> None:
        cond = _label(self.conds[-1][-1]) if self.conds[-1] else None
        self.out.append(
            (
                name,
                Read(
                    f"{self.path}:{node.lineno}",
                    _cut(ast.unparse(node), 100),
                    receiver,
                    how,
                    cond,
                    ".".join(self.classes + self.defs[:1]) if self.defs else None,
                    ".".join(self.classes) or None,
                ),
            )
        )


_LEAVES = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _label(cond) -> str:
    """An enclosing condition as quoted: a label, or (format, test) unparsed only now."""
    if isinstance(cond, str):
        return cond
    form, test = cond
    return form.format(_cut(ast.unparse(test), 80))


def _negated(test: ast.expr) -> ast.expr | None:
    """``c`` of ``not c``, else None."""
    return test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None


def _early_exit(stmt: ast.stmt) -> str | None:
    """The condition the statements after ``stmt`` run under when ``stmt`` is an ``if``
    with one branch that leaves (``if not c: return`` -> ``c``; ``if not c or d:
    continue`` -> ``c`` too: torch 2.5's ``_check_triton_bf16_support`` reads the device's
    ``is_bf16_supported`` only ``if is_gpu(device.type)``), else None. A bail-out on a
    special case (``if blocked(a, b): return False``, ``if x is None: continue``) leaves the
    rest on the path taken whenever the case does not hold: no condition, unless the test
    is a device test that holds on an out-of-tree backend (:func:`on_backend`)."""
    if not isinstance(stmt, ast.If):
        return None
    body_leaves = bool(stmt.body) and isinstance(stmt.body[-1], _LEAVES)
    else_leaves = bool(stmt.orelse) and isinstance(stmt.orelse[-1], _LEAVES)
    if body_leaves == else_leaves:
        return None  # neither leaves, or both do (nothing after it runs)
    test = stmt.test
    if body_leaves:
        kept = _negated(test)
        if kept is None and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            # `if not c or d: continue`: the rest runs only where c holds (and d does not)
            kept = next((c for c in map(_negated, test.values) if c is not None), None)
        if kept is None and on_backend(test) is not True:
            return None  # a bail-out: the rest is the path where it does not hold
        text = f"if {ast.unparse(kept)}" if kept is not None else f"not ({ast.unparse(test)})"
    else:
        text = f"if {ast.unparse(test)}"
    leave = (stmt.body if body_leaves else stmt.orelse)[-1]
    return f"{_cut(text, 80)} (line {stmt.lineno} {type(leave).__name__.lower()}s otherwise)"


def _ran_on_backend(fn: ast.FunctionDef | ast.AsyncFunctionDef):
    """What of ``fn``'s body runs on an out-of-tree backend (its docstring left out), and
    the device-type guard it leaves by (:func:`_backend_path`)."""
    body = [
        s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return _backend_path(body)


def _backend_path(stmts: list[ast.stmt]) -> tuple[list[ast.stmt], ast.If | None]:
    """The statements of ``stmts`` that run on an out-of-tree backend, in order, up to the
    first that leaves the function: the branch a device test takes on the backend
    (:func:`on_backend`) replaces the test, any other statement is kept whole. With the
    device test that made it leave, if one did."""
    out: list[ast.stmt] = []
    for stmt in stmts:
        value = on_backend(stmt.test) if isinstance(stmt, ast.If) else None
        if isinstance(stmt, ast.If) and value is not None:
            taken, guard = _backend_path(stmt.body if value else stmt.orelse)
            out.extend(taken)
            if taken and isinstance(taken[-1], (ast.Return, ast.Raise)):
                return out, guard or stmt
            continue
        decided = _returned_on_backend(stmt)
        if decided is not None:  # `return dev.type == "cuda" and …`: False off CUDA
            out.append(ast.copy_location(ast.Return(ast.Constant(decided)), stmt))
            return out, ast.copy_location(ast.If(stmt.value, [], []), stmt)  # type: ignore[union-attr]
        out.append(stmt)
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return out, None
    return out, None


def _returned_on_backend(stmt: ast.stmt) -> bool | None:
    """What ``return <test>`` gives on an out-of-tree backend when a device test decides it
    before anything else runs: the operands of ``and``/``or`` in order, each decided by
    :func:`on_backend` (an undecided one runs first, so nothing is decided)."""
    if not isinstance(stmt, ast.Return) or stmt.value is None:
        return None
    value = stmt.value
    if not isinstance(value, ast.BoolOp):
        return on_backend(value)
    stop = isinstance(value.op, ast.Or)  # an `or` stops at True, an `and` at False
    for operand in value.values:
        got = on_backend(operand)
        if got is None:
            return None
        if got is stop:
            return stop
    return not stop


def _module_value(fn: ast.FunctionDef | ast.AsyncFunctionDef, value: ast.expr | None) -> bool:
    """``value`` is a constant or a dotted name that is no parameter of ``fn``
    (``torch.cuda.StreamContext``): computing it calls nothing and reads nothing of the
    object or the arguments, so a default returning it cannot fail, even when the value
    is CUDA's (torch 2.12's ``StreamContextVariable.python_type``)."""
    if value is None:
        return True
    args = fn.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for node in ast.walk(value):
        if isinstance(node, ast.Name):
            if node.id in params:
                return False
        elif not isinstance(node, (ast.Attribute, ast.Constant, ast.Tuple, ast.Load)):
            return False
    return True


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _reads_in(path: str, source: str, call_names: frozenset[str] = frozenset()):
    try:
        tree = ast.parse(source, path)
    except (SyntaxError, ValueError):
        return []
    v = _Reads(path, call_names, source.splitlines())
    v.visit(tree)
    return v.out


class HookNames:
    """Match new upstream hooks to the downstream classes that lack them."""

    def __init__(self, inputs: JoinInputs) -> None:
        self.resolver = inputs.resolver
        self.units = inputs.units
        self.lines_of = inputs.lines_of
        self.down = inputs.down
        self.calls = inputs.calls
        self.names_in = inputs.names_in  # attribute names and quoted identifiers of a file
        self.handles = {k: tuple(v.rsplit(".", 1)) for k, v in load_handles().items()}
        self._texts: dict[str, ast.Module | None] = {}
        self._reads_of: dict[str, list[Read]] = defaultdict(list)  # member -> calls of it
        self._defs: dict[str, dict[str, list]] = {}
        self._defaults: dict[tuple[str, str, str], tuple[bool, str]] = {}
        self._normal: dict[tuple[str, str], list[tuple[str, int]] | None] = {}
        self._file_reads: dict[tuple[str, str], tuple[str, list, list]] = {}
        self._sub_modules: frozenset[str] = frozenset()
        self.read_down = inputs.read_down  # __init__ bodies, registrations
        self._down_trees: dict[str, ast.Module | None] = {}
        self._down_name: dict[tuple[str, str], str] = {}  # (path, qualname) -> module.qualname
        self._handed: dict[UpClass, frozenset[str]] | None = None
        self._callers: dict[str, list[Read] | None] = {}
        self._attributes: dict[str, frozenset[bytes]] = {}  # path -> names read as attributes
        self._supers: dict[tuple[str, str], set[str]] | None = None
        self.skipped = SkippedInit(self.resolver, self._tree, self._down_tree, {})

    # -- the downstream side ---------------------------------------------------------

    def _subclassers(self) -> dict[UpClass, list[tuple[object, frozenset[str], list[UpClass]]]]:
        """Upstream class -> the downstream classes with it in their upstream MRO, each
        with the member names it (or a downstream base) defines and that MRO."""
        cmap = self.down._class_map()
        self.skipped.down_classes = cmap
        out: dict[UpClass, list] = defaultdict(list)
        for name, info, mro in downstream_mros(self.down, self.resolver, cmap):
            defined = members_defined(name, cmap)
            self._down_name[(info.path, info.qualname)] = name
            for up in mro:
                out[up].append((info, defined, mro))
        return out

    # -- the upstream side -------------------------------------------------------------

    def _tree(self, path: str) -> ast.Module | None:
        if self.calls is not None and path in self.calls.texts():
            return self.calls.tree(path)  # parsed once for every user of the calls
        if path not in self._texts:
            data = None
            if self.calls is not None:
                try:
                    data = self.calls.read(path)
                except (OSError, KeyError):
                    data = None
            try:
                self._texts[path] = ast.parse(data.decode("utf-8", "replace")) if data else None
            except (SyntaxError, ValueError):
                self._texts[path] = None
        return self._texts[path]

    def _provider(self, mro: list[UpClass], member: str) -> tuple[UpClass, str] | None:
        """The first class of ``mro`` defining ``member``, with its path."""
        for mod, qual in mro:
            idx = self.resolver.index(mod)
            sym = idx.symbols.get(f"{qual}.{member}") if idx is not None else None
            if sym is not None:
                return (mod, qual), f"{sym.path}:{sym.line}"
        return None

    def _def_at(self, where: str, member: str):
        """The def of ``member`` at ``where`` (path:line) in the new upstream, or None."""
        path, _, line = where.rpartition(":")
        tree = self._tree(path)
        fn = None
        if tree is not None:
            if path not in self._defs:  # every def of the file by name, collected once
                # breadth first through statement bodies only (a def is a statement), so
                # in the order of ast.walk without visiting every expression node
                defs: dict[str, list] = defaultdict(list)
                todo = deque([tree])
                while todo:
                    node = todo.popleft()
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        defs[node.name].append(node)
                    for field in node._fields:
                        if field in _BODIES:
                            todo.extend(getattr(node, field))
                self._defs[path] = defs
            fn = next(
                (
                    node
                    for node in self._defs[path].get(member, ())
                    if node.lineno <= int(line) <= (node.end_lineno or node.lineno)
                ),
                None,
            )
        return fn

    def _default(self, where: str, qual: str, member: str) -> tuple[bool, str]:
        """(the default fails, what it does) for ``qual.member`` defined at ``where``
        (memoised: many downstream classes share one upstream default)."""
        key = (where, qual, member)
        if key not in self._defaults:
            self._defaults[key] = self._read_default(where, qual, member)
        return self._defaults[key]

    def _read_default(self, where: str, qual: str, member: str) -> tuple[bool, str]:
        path = where.rpartition(":")[0]
        fn = self._def_at(where, member)
        if fn is None:
            return False, f"`{qual}.{member}` ({where}), body not read"
        ran, guard = _ran_on_backend(fn)
        for s in ran:
            if isinstance(s, ast.Raise):
                exc = s.exc.func if isinstance(s.exc, ast.Call) else s.exc
                name = ast.unparse(exc) if exc is not None else "again"
                return True, f"the default `{qual}.{member}` ({where}) raises {name}"
        code = "\n".join(ast.unparse(s) for s in ran)
        in_cuda_file = guard is None and "cuda" in path.lower()
        if in_cuda_file or re.search(r"\bcuda\b|\bCUDA\b|torch\.cuda", code):
            if len(ran) == 1 and isinstance(ran[0], ast.Return) and _module_value(fn, ran[0].value):
                value = ast.unparse(ran[0].value) if ran[0].value is not None else "None"
                return False, (
                    f"the default `{qual}.{member}` ({where}) returns `{_cut(value, 60)}`, "
                    "CUDA's answer, but a value named at module level: nothing is called and "
                    "nothing of the object is read, so it cannot fail"
                )
            return True, f"the default `{qual}.{member}` ({where}) is CUDA-specific"
        if guard is not None:
            leave = ran[-1]
            value = (
                ast.unparse(leave.value)
                if isinstance(leave, ast.Return) and leave.value
                else "None"
            )
            return False, (
                f"the default `{qual}.{member}` ({where}) returns `{_cut(value, 60)}` on a device "
                f"other than the in-tree ones (`if {_cut(ast.unparse(guard.test), 80)}`, "
                f"line {guard.lineno})"
            )
        if len(ran) == 1 and isinstance(ran[0], ast.Return):
            value = ast.unparse(ran[0].value) if ran[0].value is not None else "None"
            return False, f"the default `{qual}.{member}` ({where}) returns `{_cut(value, 60)}`"
        if all(isinstance(s, ast.Pass) for s in ran):
            return False, f"the default `{qual}.{member}` ({where}) does nothing"
        return False, f"the default `{qual}.{member}` ({where}) runs upstream's generic code"

    def _down_tree(self, path: str) -> ast.Module | None:
        if path not in self._down_trees:
            data = self.read_down(path) if self.read_down is not None else None
            try:
                self._down_trees[path] = ast.parse(data) if data else None
            except (SyntaxError, ValueError):
                self._down_trees[path] = None
        return self._down_trees[path]

    def _handed_to(self, up: UpClass, info) -> bool:
        """Can a handle of ``up`` hand out the downstream class ``info``? Where the handle
        has a registrar (``registered_by`` in ``backend_hooks.toml``), only the classes the
        downstream passes to it (by last name); else, or when one of the names passed is no
        downstream class (a variable), any subclass."""
        if self._handed is None:
            regs = load_registrars()
            self._handed = {}
            for dotted, reg in regs.items():
                up_ = tuple(dotted.rsplit(".", 1))
                raw = reg.function.encode()
                names: set[str] = set()
                for path in getattr(self.down, "files", {}):
                    data = self.read_down(path) if self.read_down is not None else None
                    tree = self._down_tree(path) if data and raw in data else None
                    if tree is not None:
                        names |= registered_names(tree, reg)
                known = {n.rsplit(".", 1)[-1] for n in self.skipped.down_classes}
                if names <= known:  # a name that is no downstream class: not followed
                    self._handed[up_] = frozenset(names)  # type: ignore[index]
        names = self._handed.get(up)
        return names is None or info.qualname.rsplit(".", 1)[-1] in names

    def _normal_path(self, where: str, member: str) -> list[ast.stmt] | None:
        """The statements of ``member`` (defined at ``where``) that run on an out-of-tree
        backend whenever it is called: the backend's branch of device tests, up to the
        first return, raise or early exit that sets a condition (``if not c: return``: the
        rest runs only under ``c``, see :func:`_early_exit`), that ``if`` included."""
        fn = self._def_at(where, member)
        if fn is None:
            return None
        ran, _ = _ran_on_backend(fn)
        for k, stmt in enumerate(ran):
            if _early_exit(stmt) is not None:
                return ran[: k + 1]
        return ran

    def _skipped_init(
        self,
        info,
        mro: list[UpClass],
        where: str,
        member: str,
        old_reads: frozenset[str] = frozenset(),
    ) -> tuple[str, str] | None:
        """(attribute, evidence) when the inherited ``member`` (defined at ``where``) reads,
        on its normal path, an attribute on ``info`` that only an upstream ``__init__`` it
        skips would set (skipped_init); reads of ``old_reads`` are not looked at."""
        name = self._down_name.get((info.path, info.qualname))
        normal = self._normal_reads(where, member) if name is not None else None
        if normal is None or name is None or self.read_down is None:
            return None
        reads = [(a, n) for a, n in normal if a not in old_reads]
        return self.skipped.first_break(name, mro, where, reads)

    def _normal_reads(self, where: str, member: str) -> list[tuple[str, int]] | None:
        """:func:`unconditional_self_reads` of :meth:`_normal_path` (None: no def found),
        memoised: every holder of an inherited member asks for the same def's reads."""
        key = (where, member)
        if key not in self._normal:
            ran = self._normal_path(where, member)
            self._normal[key] = None if ran is None else unconditional_self_reads(ran)
        return self._normal[key]

    def _own_delegate(self, info, where: str, member: str) -> str | None:
        """The attribute a default read as CUDA-specific only for its file delegates to,
        when its code names no CUDA, reads nothing else of ``self`` and the downstream
        class sets that attribute itself (``return self._triton_scheduling.m(…)``)."""
        name = self._down_name.get((info.path, info.qualname))
        fn = self._def_at(where, member) if name is not None else None
        if fn is None or self.read_down is None:
            return None
        ran, _ = _ran_on_backend(fn)
        code = "\n".join(ast.unparse(s) for s in ran)
        if not ran or re.search(r"\bcuda\b|\bCUDA\b|torch\.cuda", code):
            return None
        reads = {
            n.attr
            for s in ran
            for n in ast.walk(s)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        }
        sets = self.skipped.down_sets(name)
        if len(reads) != 1 or sets is None or not reads <= sets:
            return None
        return next(iter(reads))

    def _may_lack(self, receiver: str, name: str, enclosing: list[UpClass], subs) -> bool:
        """Can a textual read of ``name`` from ``receiver`` find a downstream class that
        lacks it? ``self`` inside an upstream class the downstream subclasses (one of
        ``enclosing``), or a handle of such a class, and a downstream class that neither
        defines nor inherits ``name`` from upstream nor names it in its file."""
        if receiver in _SELF:
            ups = [up for up in enclosing if up in subs]
        else:
            handed = self.handles.get(_receiver_key(receiver))
            ups = [handed] if handed in subs else []
        return any(
            (receiver in _SELF or self._handed_to(up, info))
            and name not in defined
            and name not in self.names_in(info.path)
            and self._provider(mro, name) is None
            for up in ups
            for info, defined, mro in subs[up]
        )

    def _receiver_class(self, read: Read, path: str) -> UpClass | None:
        if read.receiver in _SELF and read.cls:
            return module_of(path), read.cls
        dotted = self.handles.get(_receiver_key(read.receiver))
        return (dotted[0], dotted[1]) if dotted else None

    # -- matching ----------------------------------------------------------------------

    def find(self) -> list[Found]:
        """The HOOK_NAME couplings, in the order they are to be added. It reads the
        resolver, ``names_in`` and the indexes, never a late service of the inputs, so it
        runs in a child forked before the references are matched."""
        self._found: list[Found] = []
        subs = self._subclassers()
        if not subs:
            return self._found
        self._sub_modules = frozenset(mod for mod, _ in subs)
        changed = [
            (i, c, found)
            for i, u in enumerate(self.units)
            for c in u.changes
            if (found := self._changed_member(u, c, subs))
        ]
        if self.calls is not None:  # the calls of every added member a holder lacks: one pass
            where: dict[str, set[str]] = defaultdict(set)  # member -> modules of its MROs
            for u in self.units:
                for c in u.changes:
                    if c.kind is ChangeKind.ADDED and c.symbol_kind is SymbolKind.METHOD:
                        cls_q, member = c.qualname.rsplit(".", 1)
                        for _, defined, mro in subs.get((c.module, cls_q), ()):
                            if member not in defined:
                                where[member].update(mod for mod, _ in mro)
            for _, c, found in changed:  # and of every changed one that newly fails
                for _, _, mro, *_ in found:
                    where[c.qualname.rsplit(".", 1)[1]].update(mod for mod, _ in mro)
            self._member_reads(where)
        for i, u in enumerate(self.units):
            for c in u.changes:
                if c.kind is ChangeKind.ADDED and c.symbol_kind is SymbolKind.METHOD:
                    self._added_member(i, c, subs)
                if c.aspects & {ChangeKind.BODY, ChangeKind.ADDED} and c.symbol_kind in (
                    SymbolKind.FUNCTION,
                    SymbolKind.METHOD,
                ):
                    self._new_reads(i, u, c, subs)
        for i, c, found in changed:
            member = c.qualname.rsplit(".", 1)[1]
            reads = self._reads_of.get(member, [])
            for info, defined, mro, where, pqual, attr, why in found:
                reaching = [
                    self._called_under(r, info)
                    for r in reads[:_MAX_SITES]
                    if self._reaches(r, info, mro, defined)
                ]
                default = f"the changed `{pqual}.{member}` ({where}) fails on it: {why}"
                capped = len(reads) > _MAX_SITES
                self._emit(i, c, info, attr, True, default, reaching, capped, via=member)
        return self._found

    def _changed_member(self, u: UpstreamChange, c: SymbolChange, subs) -> list[tuple]:
        """The downstream classes on which a body change of an upstream method they inherit
        (and do not override) newly reads, on its normal path, an attribute that only an
        upstream ``__init__`` they skip sets: (info, defined, mro, where, provider
        qualname, attribute, evidence) each. The read is new when the old body read no
        ``self.<attribute>`` anywhere."""
        if (
            ChangeKind.BODY not in c.aspects
            or c.kind is ChangeKind.ADDED
            or c.symbol_kind is not SymbolKind.METHOD
            or c.old is None
            or c.new is None
        ):
            return []
        cls_q, member = c.qualname.rsplit(".", 1)
        holders = subs.get((c.module, cls_q))
        if not holders or (member.startswith("__") and member.endswith("__")):
            return []
        out: list[tuple] = []
        old_reads: frozenset[str] | None = None
        for info, defined, mro in holders:
            if member in defined:
                continue  # the downstream class overrides it: the change does not run there
            prov = self._provider(mro, member)
            if prov is None or prov[0] != (c.module, cls_q):
                continue  # it inherits another definition
            if self._skipped_init(info, mro, prov[1], member) is None:
                continue
            if old_reads is None:
                old_reads = self._old_self_reads(u, c)
                if old_reads is None:
                    return out  # the old body was not read: nothing proven new
            found = self._skipped_init(info, mro, prov[1], member, old_reads)
            if found is not None:
                out.append((info, defined, mro, prov[1], cls_q, *found))
        return out

    def _old_self_reads(self, u: UpstreamChange, c: SymbolChange) -> frozenset[str] | None:
        """Every ``self.<attr>`` the old body of ``c`` loads (any path); None if not read."""
        old_lines, _ = self.lines_of(u, c)
        if old_lines is None or c.old is None:
            return None
        text = textwrap.dedent("\n".join(old_lines[c.old.line - 1 : c.old.end_line]))
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
        return frozenset(
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        )

    def _added_member(self, i: int, c: SymbolChange, subs) -> None:
        cls_q, member = c.qualname.rsplit(".", 1)
        if member.startswith("__") and member.endswith("__"):
            return
        holders = subs.get((c.module, cls_q))
        if not holders:
            return
        for info, defined, mro in holders:
            if member in defined:
                continue  # added.collides decides that one
            prov = self._provider(mro, member)
            if prov is None:
                continue
            (_, pqual), where = prov
            fails, default = self._default(where, pqual, member)
            skipped = self._skipped_init(info, mro, where, member)
            if skipped is not None:
                fails = True
                default = f"the default `{pqual}.{member}` ({where}) fails: {skipped[1]}"
            elif fails and default.endswith("is CUDA-specific"):
                own = self._own_delegate(info, where, member)
                if own is not None:
                    fails, default = (
                        False,
                        (
                            f"the default `{pqual}.{member}` ({where}), in a CUDA file, only "
                            f"delegates to `self.{own}`, which `{info.qualname}` sets itself"
                        ),
                    )
            reads = self._reads_of.get(member, [])
            reaching = [
                self._called_under(r, info)
                for r in reads[:_MAX_SITES]
                if self._reaches(r, info, mro, defined)
            ]
            if not fails and not reaching:
                continue  # a usable default nothing reaches: nothing to test
            self._emit(i, c, info, member, fails, default, reaching, len(reads) > _MAX_SITES)

    def _member_reads(self, where: dict[str, set[str]]) -> None:
        """Calls ``x.name(…)`` of each name of ``where`` that can reach a downstream
        object, with their conditions: only in files of the modules ``where`` gives for it
        (its holders' upstream MRO: ``self.name()``) or files that name a handle
        (``V.graph.device_ops``), only in the defs whose text names it; each file parsed
        once."""
        assert self.calls is not None
        handles = _shortest({h.split("(", 1)[0].encode() for h in self.handles})
        raws = [(n, n.encode()) for n in where]
        by_module: dict[str, list[tuple[str, bytes]]] = defaultdict(list)
        for n, raw in raws:
            for mod in where[n]:
                by_module[mod].append((n, raw))
        plain = [(n, raw) for n, raw in raws if n.isascii() and n.isidentifier()]
        other = [(n, raw) for n, raw in raws if not (n.isascii() and n.isidentifier())]
        for path, text in self.calls.texts().items():
            if any(h in text for h in handles):
                # every name: a set lookup among the file's attribute names each (what
                # _called_in keeps of them, and a name read as an attribute is in the
                # text) rather than a search of the text each
                read = self._attribute_names(path, text)
                here = frozenset(
                    [n for n, raw in plain if raw in read] + [n for n, raw in other if raw in text]
                )
            else:
                named = by_module.get(module_of(path), ())
                here = self._called_in(path, text, frozenset(n for n, raw in named if raw in text))
            # trees not parsed yet are not kept: this pass visits many files once each
            tree = self.calls.tree(path, keep=False) if here else None
            if tree is None:
                continue
            lines = self.calls.lines(path, keep=False)
            reads = _reads_in_tree(path, tree, here, lines, True, text)
            if any(r.caller and "." in r.caller for _, r in reads):
                self.calls.keep(path, tree, lines)  # _callers_of reads it for the method's callers
            for name, r in reads:
                if r.how == "call" and name in here:
                    text_ = f"{r.receiver}.{name}(…)"
                    self._reads_of[name].append(
                        Read(r.at, text_, r.receiver, "call", r.condition, r.caller, r.cls)
                    )

    def _called_in(self, path: str, text: bytes, names: frozenset[str]) -> frozenset[str]:
        """The names of ``names`` that ``text`` (the file at ``path``) reads as attributes
        (a call ``x.name(…)`` is such a read): the others have no call to find there, and
        a file left with none is not parsed. A name that is no ASCII identifier is kept."""
        if not names:
            return names
        read = self._attribute_names(path, text)
        return frozenset(
            n for n in names if n.encode() in read or not (n.isascii() and n.isidentifier())
        )

    def _attribute_names(self, path: str, text: bytes) -> frozenset[bytes]:
        """The names ``text`` (the file at ``path``) reads as attributes (memoised)."""
        if path not in self._attributes:
            self._attributes[path] = frozenset(_ATTRIBUTE.findall(text))
        return self._attributes[path]

    def _reaches(self, r: Read, info, mro: list[UpClass], defined: frozenset[str]) -> bool:
        path = r.at.rsplit(":", 1)[0]
        up = self._receiver_class(r, path)
        if up is None or up not in mro:
            return False
        if r.receiver not in _SELF:
            return self._handed_to(up, info)
        if not r.caller or "." not in r.caller:
            return True
        # a caller the downstream class overrides does not run on it, unless the class (or
        # a downstream base) calls ``super().caller()``: then its callers decide, as below
        caller = r.caller.rsplit(".", 1)[-1]
        if caller in defined and caller not in self._super_called(info):
            return False
        # nor does one whose only callers (``self.caller()`` in its MRO) it overrides without
        # ``super().caller()``, unless downstream code of the class names it itself
        if self._down_names(info, caller):
            return True
        callers = self._callers_of(caller)
        if not callers:
            return True  # none found, or a use that is not such a call: assume it runs
        return any(
            c.receiver not in _SELF
            or c.caller is None
            or (
                (module_of(c.at.rsplit(":", 1)[0]), c.cls or "") in mro
                and (
                    c.caller.rsplit(".", 1)[-1] not in defined
                    or c.caller.rsplit(".", 1)[-1] in self._super_called(info)
                )
            )
            for c in callers
        )

    def _called_under(self, r: Read, info) -> Read:
        """``r`` with the condition its enclosing method ``m`` is called under, one level
        up, when ``r`` itself is unconditional: every call ``x.m(…)`` of the new upstream
        sits under an ``if`` (calls inside a def named ``m``, a delegation such as
        ``return self._triton_scheduling.m()``, run only when another ``m`` is called),
        no file of the class names ``m``; the first such condition is quoted."""
        if r.condition is not None or not r.caller or "." not in r.caller:
            return r
        name = r.caller.rsplit(".", 1)[-1]
        if self._down_names(info, name):
            return r
        callers = [
            c
            for c in self._callers_of(name) or ()
            if not (c.caller and c.caller.rsplit(".", 1)[-1] == name)
        ]
        if not callers or any(c.condition is None for c in callers):
            return r
        first = callers[0]
        cond = f"{first.condition} (`{name}` is called only so, e.g. {first.at})"
        return Read(r.at, r.text, r.receiver, r.how, cond, r.caller, r.cls)

    def _chain_of(self, info) -> list:
        name = self._down_name.get((info.path, info.qualname))
        return [i for _, i in self.skipped._down_chain(name)] if name else [info]

    def _down_names(self, info, member: str) -> bool:
        """Does a file of the class or of a downstream base name ``member``?"""
        return any(member in self.names_in(i.path) for i in self._chain_of(info))

    def _super_called(self, info) -> frozenset[str]:
        """Method names the class and its downstream bases call as ``super().name``."""
        if self._supers is None:
            self._supers = defaultdict(set)
            for f in self.down.functions():
                owner = f.qualname.rsplit(".", 1)[0] if "." in f.qualname else ""
                self._supers[(f.path, owner)].update(f.super_calls)
        out: set[str] = set()
        for i in self._chain_of(info):
            out |= self._supers.get((i.path, i.qualname), set())
        return frozenset(out)

    def _callers_of(self, name: str) -> list[Read] | None:
        """Every call ``x.name(…)`` in the new upstream; None when ``name`` is also used
        otherwise (passed as a value, read by string) or no calls were read."""
        if name in self._callers:
            return self._callers[name]
        out: list[Read] | None = []
        raw = name.encode()
        word = re.compile(rf"\b{re.escape(name)}\b".encode())
        for path, text in self.calls.texts().items() if self.calls is not None else ():
            if raw not in text:
                continue
            uses = len(word.findall(text)) - len(re.findall(rb"def\s+" + raw + rb"\b", text))
            if uses and not self._called_in(path, text, frozenset({name})):
                out = None  # used, and no call of it here (as if parsed and none found)
                break
            tree = self.calls.tree(path) if self.calls is not None else None
            if tree is None:
                out = None
                break
            # calls only: the getattr reads are dropped below anyway, and a def whose text
            # lacks the name holds none of its calls (so it is skipped)
            found = [
                r
                for n, r in _reads_in_tree(
                    path, tree, frozenset({name}), self.calls.lines(path), True, text
                )
                if n == name and r.how == "call"
            ]
            if uses != len(found):
                out = None
                break
            out.extend(found)
            if len(out) > _MAX_SITES:
                out = None
                break
        self._callers[name] = out
        return out

    def _new_reads(self, i: int, u: UpstreamChange, c: SymbolChange, subs) -> None:
        if c.new is None:
            return
        old_lines, new_lines = self.lines_of(u, c)
        if new_lines is None:
            return
        # a textual pre-filter on the changed def alone: a string read it did not have,
        # of a name some downstream class behind that receiver lacks
        new_def = "\n".join(new_lines[c.new.line - 1 : c.new.end_line])
        if "attr(" not in new_def:
            return
        old_def = ""
        if c.old is not None and old_lines is not None:
            old_def = "\n".join(old_lines[c.old.line - 1 : c.old.end_line])
        fresh = set(_TEXT_READ.findall(new_def)) - set(_TEXT_READ.findall(old_def))
        module, parts = module_of(c.path), c.qualname.split(".")
        enclosing = [(module, ".".join(parts[:k])) for k in range(1, len(parts))]
        if not any(self._may_lack(recv, name, enclosing, subs) for recv, name in fresh):
            return
        memo_key = (u.id, c.path)
        if memo_key not in self._file_reads:
            new_src = "\n".join(new_lines)
            old_src = "\n".join(old_lines) if old_lines is not None else ""
            self._file_reads[memo_key] = (
                new_src,
                _reads_in(c.path, new_src),
                _reads_in(c.path, old_src) if "attr(" in old_src else [],
            )
        new_src, new_all, old_all = self._file_reads[memo_key]
        new = list(new_all)
        if not new:
            return
        new.sort(key=lambda nr: nr[1].how != "getattr")  # one coupling per place: worst first
        span = (c.new.line, c.new.end_line)
        old_keys: set[tuple[str, str]] = set()
        if c.old is not None:
            for name, r in old_all:
                line = int(r.at.rsplit(":", 1)[1])
                if c.old.line <= line <= c.old.end_line:
                    old_keys.add((name, r.receiver))
        for name, r in new:
            line = int(r.at.rsplit(":", 1)[1])
            if not (span[0] <= line <= span[1]) or (name, r.receiver) in old_keys:
                continue
            up = self._receiver_class(r, c.path)
            holders = subs.get(up) if up is not None else None
            if not holders or re.search(rf"\bself\.{re.escape(name)}\s*[:=]", new_src):
                continue  # not a backend object, or an instance attribute upstream sets
            for info, defined, mro in holders:
                if name in defined or name in self.names_in(info.path):
                    continue
                if r.receiver not in _SELF and up is not None and not self._handed_to(up, info):
                    continue  # the handle never hands this class out
                if self._provider(mro, name) is not None:
                    continue  # an upstream ancestor defines it: the read finds that
                if r.how == "getattr":
                    fails, default = True, "no default: AttributeError when it is missing"
                elif r.how == "getattr_default":
                    fails, default = False, "read with a default when it is missing"
                else:
                    fails, default = False, "`hasattr` is False when it is missing"
                self._emit(i, c, info, name, fails, default, [r], False)

    def _emit(self, i, c, info, member, fails, default, reaching, capped, via=None) -> None:
        """One coupling: ``info`` lacks ``member`` (with ``via``: an attribute the changed
        member ``via`` reads, ``reaching`` being the calls of ``via``)."""
        facts = set()
        if fails:
            facts.add(Fact.HOOK_DEFAULT_FAILS)
        verb = f"calls the changed `{via}`" if via else "reads it"
        unconditional = [r for r in reaching if r.condition is None]
        if unconditional:
            facts.add(Fact.HOOK_CALL_REACHES)
            first = unconditional[0]
            how = f"{verb} at {first.at} (`{first.text}`"
            how += f", in `{first.caller}`)" if first.caller else ")"
        elif reaching:
            facts.add(Fact.HOOK_CALL_CONDITIONAL)
            first = reaching[0]
            how = f"{verb} only under `{first.condition}`: {first.at} (`{first.text}`" + (
                f", in `{first.caller}`)" if first.caller else ")"
            )
        else:
            how = "no new-upstream call reaching it was found" + (
                f" (more than {_MAX_SITES} calls of the name: not followed)" if capped else ""
            )
        if len(reaching) > 1:
            how += f" and at {len(reaching) - 1} more place(s)"
        evidence = (
            f"upstream {how}; `{info.qualname}` ({info.path}:{info.line}) does not "
            f"{'set' if via else 'define'} `{member}`; {default}"
        )
        ref = Reference(
            CouplingKind.HOOK_NAME,
            f"{c.module}.{c.qualname}",
            info.path,
            info.line,
            info.snippet,
            detail=f"lacks `{member}`",
            owner=info.qualname,
        )
        self._found.append(
            Found(
                i,
                c,
                ref,
                CouplingKind.HOOK_NAME,
                detail=f"lacks `{member}`",
                extra=frozenset(facts),
                evidence=evidence,
            )
        )


def _shortest(needles: set[bytes]) -> list[bytes]:
    """``needles`` less those holding another (a text holds one of them iff it holds one
    of these)."""
    return sorted(n for n in needles if not any(m != n and m in n for m in needles))


def _reads_in_tree(
    path: str,
    tree: ast.Module,
    names: frozenset[str] | None,
    lines=None,
    calls_only: bool = False,
    text: bytes | None = None,
):
    """The reads of ``names`` in ``tree``; ``lines`` and ``text`` (the file's bytes) let
    the visit skip what cannot hold one (:class:`_Reads`)."""
    v = _Reads(path, names, lines, calls_only, text)
    v.visit(tree)
    return v.out


class HookNamePass(JoinPass):
    """hook_name couplings (see the module's docstring); in a forked child."""

    name = "hook names"
    kinds = frozenset({CouplingKind.HOOK_NAME})
    forked = True
    counted_as = "hook_name_couplings"

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        return Findings(HookNames(inputs).find())
