"""HOOK_NAME on a real upstream commit, where a guard decides: a default that leaves early
on any device other than the in-tree ones is usable; a read after ``if not c: return`` runs
only under ``c``."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit

COMMON_OLD = textwrap.dedent(
    """
    class DeviceOpOverrides:
        def set_device(self, device_idx):
            raise NotImplementedError
    """
)
COMMON_NEW = COMMON_OLD + textwrap.indent(
    textwrap.dedent(
        """
        def current_device_idx_expr(self):
            raise RuntimeError("compile-on-one-rank is not supported on this device")

        def launcher_expr(self):
            raise NotImplementedError

        def both_ways_expr(self):
            raise NotImplementedError

        def or_guarded_expr(self):
            raise NotImplementedError

        def bail_out_expr(self):
            raise NotImplementedError
        """
    ),
    "    ",
)
KERNEL_OLD = textwrap.dedent(
    """
    import torch

    from torch._inductor import config
    from torch._inductor.virtualized import V


    class Kernel:
        def codegen(self, name):
            return name
    """
)
KERNEL_NEW = textwrap.dedent(
    """
    import torch

    from torch._inductor import config
    from torch._inductor.virtualized import V


    class Kernel:
        def codegen(self, name):
            return (
                self._check_alignment(name),
                self._needs_sm90(name),
                self._raises_off_cuda(name),
                self._pdl(name),
                self._cuda_first(name),
                self._context_type(),
                self._own_device(),
            )

        def _context_type(self):
            \"\"\"The type this context stands for.\"\"\"
            return torch.cuda.StreamContext

        def _own_device(self):
            return self.cuda

        def _check_alignment(self, name):
            \"\"\"The CUtensorMap alignment is CUDA-specific: only on CUDA.\"\"\"
            if not config.use_tensor_descriptor:
                return False
            if V.graph.get_current_device_or_throw().type != "cuda":
                return False
            return torch.cuda.get_device_capability()[0] >= 9

        def _needs_sm90(self, name):
            return torch.cuda.get_device_capability()[0] >= 9

        @staticmethod
        def _pdl(name):
            if not config.enable_pdl:
                return False
            if torch.version.hip:
                return False
            return (
                V.graph.get_current_device_or_throw().type == "cuda"
                and torch.cuda.get_device_capability()[0] >= 9
            )

        def _cuda_first(self, name):
            return (
                torch.cuda.get_device_capability()[0] >= 9
                and V.graph.get_current_device_or_throw().type == "cuda"
            )

        def _raises_off_cuda(self, name):
            if V.graph.get_current_device_or_throw().type not in ("cuda", "xpu"):
                raise NotImplementedError(name)
            return torch.cuda.current_stream()
    """
)
STREAMS_NEW = textwrap.dedent(
    """
    from torch._inductor.virtualized import V


    def _coor_enabled():
        return False


    def benchmark_device_idx(device_idx):
        if not _coor_enabled():
            return None, device_idx
        return V.graph.device_ops.current_device_idx_expr()


    def launcher(device_idx):
        if device_idx is None:
            device_idx = 0
        return V.graph.device_ops.launcher_expr()


    def both_ways(device_idx):
        for idx in range(device_idx):
            if idx:
                continue
        return V.graph.device_ops.both_ways_expr()


    def or_guarded(inputs):
        for inp in inputs:
            if not _coor_enabled() or inp is None:
                continue
            return V.graph.device_ops.or_guarded_expr()


    def bail_out(inputs):
        for inp in inputs:
            if inp is None or inp.is_meta:
                continue
            return V.graph.device_ops.bail_out_expr()
    """
)
DOWN = textwrap.dedent(
    """
    from torch._inductor.codegen.common import DeviceOpOverrides
    from torch._inductor.codegen.triton import Kernel


    class NPUDeviceOpOverrides(DeviceOpOverrides):
        def set_device(self, device_idx):
            return f"torch.npu.set_device({device_idx})"


    class NPUKernel(Kernel):
        pass
    """
)


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("hook_guards"),
        {
            "torch/_inductor/codegen/__init__.py": "",
            "torch/_inductor/codegen/common.py": COMMON_OLD,
            "torch/_inductor/codegen/triton.py": KERNEL_OLD,
        },
        {
            "torch/_inductor/codegen/common.py": COMMON_NEW,
            "torch/_inductor/codegen/triton.py": KERNEL_NEW,
            "torch/_inductor/stream_utils.py": STREAMS_NEW,
        },
        "compile-on-one-rank device index; TMA alignment check (#9)",
        {"torch_npu/_inductor/overrides.py": DOWN},
    )
    out = {}
    for u in doc["units"]:
        for c in u["couplings"]:
            if c["kind"] == "hook_name":
                out[(c["upstream"].rsplit(".", 1)[-1], c["owner"])] = c
    return out


def test_a_default_that_returns_early_off_cuda_is_usable_and_quotes_the_guard(hooks):
    c = hooks[("_check_alignment", "NPUKernel")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")
    assert "returns `False` on a device other than the in-tree ones" in c["evidence"]
    assert "get_current_device_or_throw().type != 'cuda'" in c["evidence"]


def test_a_default_returning_a_test_led_by_a_device_check_is_usable(hooks):
    # `return dev.type == "cuda" and torch.cuda...`: off CUDA the `and` stops at its
    # first operand and returns False (torch 2.11's TritonKernel._enable_pdl_codegen)
    c = hooks[("_pdl", "NPUKernel")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")
    assert "returns `False` on a device other than the in-tree ones" in c["evidence"]
    # the CUDA call comes first: it runs on the backend too
    c = hooks[("_cuda_first", "NPUKernel")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    assert "is CUDA-specific" in c["evidence"]


def test_a_default_doing_cuda_work_unguarded_or_raising_off_cuda_still_breaks(hooks):
    c = hooks[("_needs_sm90", "NPUKernel")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    assert "is CUDA-specific" in c["evidence"]
    c = hooks[("_raises_off_cuda", "NPUKernel")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    assert "raises NotImplementedError" in c["evidence"]


def test_a_default_returning_a_module_level_cuda_value_is_usable(hooks):
    # torch 2.12's StreamContextVariable.python_type: CUDA's answer, but nothing runs
    c = hooks[("_context_type", "NPUKernel")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")
    assert "returns `torch.cuda.StreamContext`, CUDA's answer" in c["evidence"]
    # reading the object is no module-level value: it can fail, and it names CUDA
    c = hooks[("_own_device", "NPUKernel")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    assert "is CUDA-specific" in c["evidence"]


def test_a_read_after_an_early_return_is_conditional_and_quotes_the_condition(hooks):
    c = hooks[("current_device_idx_expr", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_conditional")
    assert "only under `if _coor_enabled() (line 10 returns otherwise)`" in c["evidence"]
    assert "stream_utils.py:12" in c["evidence"]


def test_a_read_after_an_or_exit_led_by_a_negation_is_conditional(hooks):
    # torch 2.5's _check_triton_bf16_support: `if (not is_gpu(...)) or ...: continue`
    c = hooks[("or_guarded_expr", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_conditional")
    assert "only under `if _coor_enabled() (line" in c["evidence"]
    # an `or` of special cases is a bail-out: the read stays on the normal path
    c = hooks[("bail_out_expr", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")


def test_a_guard_that_does_not_leave_or_leaves_a_loop_only_keeps_the_read_unconditional(hooks):
    for member in ("launcher_expr", "both_ways_expr"):
        c = hooks[(member, "NPUDeviceOpOverrides")]
        assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks"), member
