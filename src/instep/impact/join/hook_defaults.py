"""What an upstream member a downstream class inherits does on an out-of-tree device.

:func:`ran_on_backend` is the part of a def that runs there: the branch a device-type test
takes on the backend (``call_conditions.on_backend``) in place of the test, up to the first
return or raise. :class:`UpstreamDefaults` (a part of the hook-name pass) reads the new
upstream's defs: which class of an MRO provides a member, whether its default fails on
the backend (it raises, does CUDA work, or reads an attribute only an upstream
``__init__`` the downstream class skips sets: ``join/skipped_init.py``) and what it
does, memoised per def. Nothing here finds a coupling.
"""

from __future__ import annotations

import ast
import re
from collections import OrderedDict, defaultdict

from instep.impact.downstream.ast_children import statements
from instep.impact.join.call_conditions import on_backend
from instep.impact.join.hook_reads import cut, early_exit
from instep.impact.join.skipped_init import SkippedInit, unconditional_self_reads
from instep.impact.join.upstream_calls import UpstreamCalls
from instep.impact.upstream.resolver import UpstreamResolver

UpClass = tuple[str, str]  # (module, class qualname) in the new upstream

# the fields of a node that hold statements (a def is found only there)
# how many files' defs by name are kept: they hold most of each file's tree (their bodies)
_DEF_FILES = 4


def ran_on_backend(fn: ast.FunctionDef | ast.AsyncFunctionDef):
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


def module_value(fn: ast.FunctionDef | ast.AsyncFunctionDef, value: ast.expr | None) -> bool:
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


class UpstreamDefaults:
    """The hook-name pass's reading of the new upstream's defaults (a mixin of
    :class:`~instep.impact.join.hook_names.HookNames`, whose ``__init__`` sets these)."""

    resolver: UpstreamResolver
    calls: UpstreamCalls
    skipped: SkippedInit
    read_down: object
    _texts: dict[str, ast.Module | None]
    _defs: OrderedDict[str, dict[str, list]]
    _fns: dict[tuple[str, str], ast.FunctionDef | ast.AsyncFunctionDef | None]
    _defaults: dict[tuple[str, str, str], tuple[bool, str]]
    _normal: dict[tuple[str, str], list[tuple[str, int]] | None]
    _down_name: dict[tuple[str, str], str]

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
        """The def of ``member`` at ``where`` (path:line) in the new upstream, or None
        (memoised: the defs found are kept, not every def of their files)."""
        key = (where, member)
        if key not in self._fns:
            self._fns[key] = self._find_def(where, member)
        return self._fns[key]

    def _find_def(self, where: str, member: str):
        path, _, line = where.rpartition(":")
        tree = self._tree(path)
        fn = None
        if tree is not None:
            if path in self._defs:
                self._defs.move_to_end(path)
            else:  # every def of the file by name, collected once while the file is recent
                # breadth first through statement bodies only (a def is a statement), so
                # in the order of ast.walk without visiting every expression node
                defs: dict[str, list] = defaultdict(list)
                for node in statements(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        defs[node.name].append(node)
                self._defs[path] = defs
                if len(self._defs) > _DEF_FILES:  # the defs hold the file's tree: drop the oldest
                    self._defs.popitem(last=False)
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
        ran, guard = ran_on_backend(fn)
        for s in ran:
            if isinstance(s, ast.Raise):
                exc = s.exc.func if isinstance(s.exc, ast.Call) else s.exc
                name = ast.unparse(exc) if exc is not None else "again"
                return True, f"the default `{qual}.{member}` ({where}) raises {name}"
        code = "\n".join(ast.unparse(s) for s in ran)
        in_cuda_file = guard is None and "cuda" in path.lower()
        if in_cuda_file or re.search(r"\bcuda\b|\bCUDA\b|torch\.cuda", code):
            if len(ran) == 1 and isinstance(ran[0], ast.Return) and module_value(fn, ran[0].value):
                value = ast.unparse(ran[0].value) if ran[0].value is not None else "None"
                return False, (
                    f"the default `{qual}.{member}` ({where}) returns `{cut(value, 60)}`, "
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
                f"the default `{qual}.{member}` ({where}) returns `{cut(value, 60)}` on a device "
                f"other than the in-tree ones (`if {cut(ast.unparse(guard.test), 80)}`, "
                f"line {guard.lineno})"
            )
        if len(ran) == 1 and isinstance(ran[0], ast.Return):
            value = ast.unparse(ran[0].value) if ran[0].value is not None else "None"
            return False, f"the default `{qual}.{member}` ({where}) returns `{cut(value, 60)}`"
        if all(isinstance(s, ast.Pass) for s in ran):
            return False, f"the default `{qual}.{member}` ({where}) does nothing"
        return False, f"the default `{qual}.{member}` ({where}) runs upstream's generic code"

    def _normal_path(self, where: str, member: str) -> list[ast.stmt] | None:
        """The statements of ``member`` (defined at ``where``) that run on an out-of-tree
        backend whenever it is called: the backend's branch of device tests, up to the
        first return, raise or early exit that sets a condition (``if not c: return``: the
        rest runs only under ``c``, see :func:`early_exit`), that ``if`` included."""
        fn = self._def_at(where, member)
        if fn is None:
            return None
        ran, _ = ran_on_backend(fn)
        for k, stmt in enumerate(ran):
            if early_exit(stmt) is not None:
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
        ran, _ = ran_on_backend(fn)
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
