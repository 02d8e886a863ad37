"""REGISTRATION: a downstream registration of an op or key (``@register_lowering(aten.x)``,
``make_fallback(aten.x)``, table writes), as recognised by
:mod:`instep.pyindex.registrations`, recorded as a reference keyed ``op:aten.x``.
"""

from __future__ import annotations

import ast

from instep.impact.downstream.scope import Scope, line_snippet
from instep.impact.model import CouplingKind, Reference
from instep.pyindex.model import Registration
from instep.pyindex.registrations import registrars


class RegistrationSites(Scope):
    def registration(self, r: Registration, note: str = "") -> int:
        """Record a registration; returns the reference's index. ``note`` ends the
        detail (``make_fallback [override_decomp]``)."""
        target = r.key if ":" in r.key else f"op:{r.key}"
        detail = r.registrar + (f" (.{r.overload})" if r.overload else "")
        detail += f" [{note}]" if note else ""
        self.refs.append(
            Reference(
                CouplingKind.REGISTRATION,
                target,
                self.path,
                r.line,
                line_snippet(self.lines, r.line),
                detail=detail,
                owner=r.symbol or self.owner(),
            )
        )
        return len(self.refs) - 1

    def unaliased(self, call: ast.Call) -> ast.Call:
        """``rl(aten.x)`` where ``rl`` is ``register_lowering`` imported under an alias."""
        func = call.func
        if isinstance(func, ast.Name) and func.id not in registrars():
            b = self.lookup(func.id)
            if b and type(b) is str:
                last = b.rsplit(".", 1)[-1]
                if last in registrars():
                    new = ast.Call(ast.Name(last, ast.Load()), call.args, call.keywords)
                    return ast.copy_location(new, call)
        return call
