"""MONKEYPATCH and CONFIG writes: assignments, augmented assignments, item assignments
and ``setattr`` onto upstream modules, classes and config, with what replaces the
original (a local def, a wrapper, a value); ``unittest.mock``'s ``patch.object`` and
``patch`` with a replacement (as ``setattr``); ``config.patch(...)`` keys; and which
downstream functions are patch helpers (``setattr`` on their parameters). Local aliases
of upstream names (``orig = X.f``) are bound here too.
"""

from __future__ import annotations

import ast

from instep.impact.downstream.handles import config_key
from instep.impact.downstream.records import HelperSpec, Local, LocalKind
from instep.impact.downstream.registration_sites import RegistrationSites
from instep.impact.downstream.scope import line_snippet
from instep.impact.model import CouplingKind, Reference
from instep.pyindex.registrations import dotted_name, item_assignment, registry_entries

# unittest.mock's patchers (and the ``mock`` backport's) -> the form, which sets their
# positional parameters
MOCK_PATCHERS = {
    "unittest.mock.patch": "patch",
    "unittest.mock.patch.object": "patch.object",
    "mock.patch": "patch",
    "mock.patch.object": "patch.object",
}
_MOCK_PARAMS = {"patch": ("target", "new"), "patch.object": ("target", "attribute", "new")}


class Monkeypatches(RegistrationSites):
    # assignments
    def v_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self.assign_target(t, node.value, node)

    def v_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.type_position(node.annotation)
        if node.value is not None:
            self.assign_target(node.target, node.value, node)
        elif isinstance(node.target, ast.Name):
            self.bind(node.target.id, None)

    def v_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        t = node.target
        if isinstance(t, ast.Attribute):
            dotted, via_handle = self.resolve(t)
            if dotted and self.is_up(dotted) and not via_handle:
                if config_key(dotted):
                    self.use(dotted, node.lineno, write=True)
                else:
                    self.ref(
                        CouplingKind.MONKEYPATCH,
                        dotted,
                        node.lineno,
                        detail="augmented assignment: value",
                    )
                return
        if isinstance(t, ast.Name):
            return
        self.visit(t)

    def v_Return(self, node: ast.Return) -> None:
        if node.value is None:
            return
        if self.frames and isinstance(node.value, (ast.Name, ast.Attribute)):
            dotted, via = self.resolve(node.value)
            if dotted and self.is_up(dotted) and not via:
                self.frames[-1].returns = dotted
        self.visit(node.value)

    def v_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.bind(node.target.id, None)

    def assign_target(self, t: ast.AST, value: ast.AST, stmt: ast.stmt) -> None:
        if isinstance(t, ast.Name):
            self._assign_name(t, value)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                if isinstance(e, ast.Name):
                    self.bind(e.id, None)
                elif isinstance(e, ast.Starred) and isinstance(e.value, ast.Name):
                    self.bind(e.value.id, None)
                else:
                    self.assign_target(e, value, stmt)
        elif isinstance(t, ast.Attribute):
            self._assign_attribute(t, value, stmt)
        elif isinstance(t, ast.Subscript):
            self._assign_item(t, stmt)
        else:
            self.visit(t)

    def _assign_name(self, t: ast.Name, value: ast.AST) -> None:
        """``name = <value>``: a local alias of upstream (``orig = X.f``, ``lowering =
        _get_inductor_lowering()``), a value derived from parameters, or a registry."""
        dotted: str | Local | None = None
        if isinstance(value, (ast.Name, ast.Attribute)):
            dotted, via_handle = self.resolve(value)
            if via_handle:
                dotted = None
        elif isinstance(value, ast.Call) and not value.args and not value.keywords:
            fn, _ = self.resolve(value.func)  # lowering = _get_inductor_lowering()
            if type(fn) is Local and fn.kind is LocalKind.DEF:
                dotted = self.returns.get(fn.qualname)
        self.bind(t.id, dotted)
        if self.is_up(dotted):
            self.add_name(t.id)
        if self.frames and dotted is None:
            frame = self.frames[-1]
            deps = self.deps(value)
            if deps:
                frame.derived[t.id] = deps
        for r in registry_entries(t.id, value, self.path):
            self.registration(r)

    def _assign_attribute(self, t: ast.Attribute, value: ast.AST, stmt: ast.stmt) -> None:
        """``X.f = <value>``: a monkey-patch, a config write, or object state via a handle."""
        if t.attr == "__bases__" and isinstance(value, (ast.Tuple, ast.List)) and value.elts:
            self._base_mixin(t.value, value.elts[0], stmt.lineno)
        dotted, via_handle = self.resolve(t)
        if dotted and self.is_up(dotted) and via_handle:  # V.graph.x = ...: object state
            self.ref(
                CouplingKind.MONKEYPATCH,
                dotted,
                stmt.lineno,
                detail="instance attribute write via a handle: value",
            )
            return
        if dotted and self.is_up(dotted) and not via_handle:
            if config_key(dotted):
                self.use(dotted, stmt.lineno, write=True)
            else:
                self.monkeypatch(dotted, value, stmt.lineno, "assign")
            return
        if dotted_name(t) is None:
            self.visit(t.value)

    def _base_mixin(self, cls: ast.AST, first: ast.AST, line: int) -> None:
        """``U.__bases__ = (Mixin, ...)`` with ``Mixin`` a class of this file: each method
        of ``Mixin`` now comes first in ``U``'s MRO, a patch of ``U`` by that name
        (:func:`~instep.impact.downstream.patch_helpers.base_mixin_patches` emits them)."""
        up, via_handle = self.resolve(cls)
        if not (isinstance(up, str) and self.is_up(up)) or via_handle:
            return
        mixin, _ = self.resolve(first)
        if mixin is None:
            mixin = self.late_binding(first)
        if type(mixin) is Local and mixin.kind is LocalKind.CLASS:
            self.base_mixins.append((up, mixin.qualname, line, self.owner()))

    def _assign_item(self, t: ast.Subscript, stmt: ast.stmt) -> None:
        """``table[key] = <value>``: a registration, or an entry of an upstream table."""
        regs = item_assignment(t, self.path, self.owner())
        for r in regs:
            self.registration(r)
        self.visit(t.slice)
        if regs:
            return
        dotted, via_handle = self.resolve(t.value)
        if dotted and self.is_up(dotted) and not config_key(dotted):
            how = "of an upstream object via a handle" if via_handle else "of an upstream table"
            self.ref(
                CouplingKind.MONKEYPATCH,
                dotted,
                stmt.lineno,
                detail=f"item assignment: entry {how}",
            )
        else:
            self.visit(t.value)

    def value_info(self, value: ast.AST, target: str) -> tuple[str, str | Local | None, bool]:
        """(description, binding of the replacement if a def/class, calls the original)."""
        if isinstance(value, (ast.Name, ast.Attribute)):
            dotted, _ = self.resolve(value)
            if dotted is None:
                dotted = self.late_binding(value)
            if dotted is None:
                return "value", None, False
            if type(dotted) is Local:
                return "replaced by", dotted, False
            if self.is_up(dotted):
                return f"value: upstream {dotted}", None, dotted == target
            return "replaced by", dotted, False
        if isinstance(value, ast.Lambda):
            return "replaced by a lambda", None, target in self.chains_in(value)
        if isinstance(value, ast.Call):
            calls_orig = target in self.chains_in(value)
            fn, _ = self.resolve(value.func)
            if type(fn) is Local and fn.kind is LocalKind.CLASS:
                return "value: instance", None, False
            return "replaced by a wrapper", None, calls_orig
        return "value", None, False

    def chains_in(self, node: ast.AST) -> set[str]:
        out = set()
        for n in ast.walk(node):
            if isinstance(n, (ast.Name, ast.Attribute)):
                d, _ = self.resolve(n)
                if d:
                    out.add(d)
        return out

    def monkeypatch(self, target: str, value: ast.AST, line: int, how: str) -> None:
        desc, binding, calls_orig = self.value_info(value, target)
        idx = self.ref(
            CouplingKind.MONKEYPATCH,
            target,
            line,
            detail=f"{how}: {desc}",
            calls_original=calls_orig,
        )
        if binding is None:
            return
        if type(binding) is Local:
            self.local_patches.append((idx, binding))
        else:
            self.patch_values.append((idx, binding))

    def config_patch(self, node: ast.Call, module: str) -> None:
        keys: list[str] = []
        if node.args:
            a0 = node.args[0]
            if isinstance(a0, ast.Dict):
                keys += [
                    k.value
                    for k in a0.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                ]
            elif isinstance(a0, ast.Constant) and isinstance(a0.value, str):
                keys.append(a0.value)
        keys += [kw.arg for kw in node.keywords if kw.arg]
        for k in keys:
            self.refs.append(
                Reference(
                    CouplingKind.CONFIG,
                    f"{module}.{k}",
                    self.path,
                    node.lineno,
                    line_snippet(self.lines, node.lineno),
                    detail="patch",
                    owner=self.owner(),
                )
            )

    def mock_patch(self, node: ast.Call, form: str) -> None:
        """``patch.object(obj, "name", new)`` / ``patch("dotted.name", new)`` (``new=`` too),
        whether a context manager, a decorator or ``.start()``: the call is the same, and
        while active it replaces the attribute as ``setattr(obj, "name", new)`` does. Without
        a replacement (no ``new``, or ``new_callable``) the patcher puts a ``MagicMock``
        there, which takes any arguments and runs no upstream code: no signature or body
        change can break it, so it is not recorded. The detail keeps the form: unlike an
        assignment, the patcher reads the original when it starts (AttributeError when the
        name is gone), unless ``create=True``."""
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if "new_callable" in kw:
            return
        params = _MOCK_PARAMS[form]
        args: dict[str, ast.expr] = dict(zip(params, node.args, strict=False))
        args.update((p, kw[p]) for p in params if p in kw)
        value, target = args.get("new"), args.get("target")
        if value is None or target is None:
            return
        if form == "patch.object":
            name = args.get("attribute")
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                return
            obj, via_handle = self.resolve(target)
            if not (obj and self.is_up(obj)) or via_handle or type(obj) is Local:
                return
            dotted = f"{obj}.{name.value}"
        elif isinstance(target, ast.Constant) and isinstance(target.value, str):
            dotted = target.value
            if not self.is_up(dotted):
                return
        else:
            return
        create = kw.get("create")
        how = form + ("(create=True)" if isinstance(create, ast.Constant) and create.value else "")
        if config_key(dotted):
            self.use(dotted, node.lineno, write=True)
        else:
            self.monkeypatch(dotted, value, node.lineno, how)

    def setattr_call(self, node: ast.Call) -> None:
        if len(node.args) != 3:
            return
        obj, name, value = node.args
        dotted, via_handle = self.resolve(obj)
        if dotted and self.is_up(dotted) and not via_handle:
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                target = f"{dotted}.{name.value}"
                if config_key(target):
                    self.use(target, node.lineno, write=True)
                else:
                    self.monkeypatch(target, value, node.lineno, "setattr")
            else:
                self.ref(
                    CouplingKind.MONKEYPATCH,
                    dotted,
                    node.lineno,
                    detail="setattr (dynamic name): value",
                )
            return
        if not self.frames:
            return
        # a patch helper? setattr(<from a parameter>, <from a parameter>, value)
        obj_deps, name_deps = self.deps(obj), self.deps(name)
        for frame in self.frames:
            o = [p for p in frame.params if p in obj_deps]
            n = [p for p in frame.params if p in name_deps]
            if not n or not (o_only := [p for p in o if p not in n] or o):
                continue
            val = value.id if isinstance(value, ast.Name) and value.id in frame.params else None
            frame.helper = HelperSpec(frame.params, o_only[0], n[0], val, dotted_name=n[0] in o)
            break
