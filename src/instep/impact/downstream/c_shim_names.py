"""C_SHIM (best effort): AOTI C shim names (``aoti_torch_*``) in the strings of a
downstream file, keyed ``c_shim:<op>`` like the upstream header declarations.
"""

from __future__ import annotations

import ast

from instep.impact.downstream.scope import Scope
from instep.impact.model import CouplingKind


class CShimNames(Scope):
    def v_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, str) and "aoti_torch_" in v:
            for op in dict.fromkeys(self.shim.findall(v)):
                if op.endswith("_") and v.endswith(op):  # f"aoti_torch_item_{dtype}"
                    op += "*"
                self.ref(
                    CouplingKind.C_SHIM,
                    f"c_shim:{op}",
                    node.lineno,
                    detail="C shim name in a string",
                    best_effort=True,
                )
