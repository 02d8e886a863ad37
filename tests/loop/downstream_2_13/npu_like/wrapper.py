"""Pattern 2: subclass overriding a method whose upstream caller changed.

Like torch_npu's ``NPUWrapperCodeGen``, we subclass Inductor's Python wrapper
codegen and register it for a device. The override of
``codegen_input_symbol_assignment`` keeps the 2.13.0 signature
``(self, name, value, bound_vars)``. In 2.14.1 ``PythonWrapperCodegen.codegen_inputs``
calls it with a fourth positional argument (``deferred_symbol_assignments``).
"""

from __future__ import annotations

from torch._inductor.codegen import common as _common
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.wrapper import PythonWrapperCodegen

SEEN_INPUTS: list[str] = []
_saved = {}


class NpuLikeWrapperCodegen(PythonWrapperCodegen):
    """Wrapper codegen that records which graph inputs it bound."""

    @classmethod
    def create(cls, is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return super().create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
        return cls()

    def codegen_input_symbol_assignment(self, name, value, bound_vars):
        SEEN_INPUTS.append(name)
        return super().codegen_input_symbol_assignment(name, value, bound_vars)


def install(device: str = "cpu") -> None:
    _common.init_backend_registration()
    _saved[device] = _common.device_codegens.get(device)
    _common.register_backend_for_device(device, CppScheduling, NpuLikeWrapperCodegen)


def uninstall(device: str = "cpu") -> None:
    if device in _saved:
        old = _saved.pop(device)
        if old is None:
            _common.device_codegens.pop(device, None)
        else:
            _common.device_codegens[device] = old
