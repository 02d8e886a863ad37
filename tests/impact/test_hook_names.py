"""HOOK_NAME on a real upstream commit: members upstream adds to a base the backend
subclasses, and names it newly reads by string from the backend's object."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit

COMMON_OLD = textwrap.dedent(
    """
    class DeviceOpOverrides:
        def set_device(self, device_idx):
            raise NotImplementedError

        def synchronize(self):
            raise NotImplementedError
    """
)
COMMON_NEW = (
    COMMON_OLD
    + textwrap.dedent(
        """
        def current_device_idx_expr(self):
            raise RuntimeError("compile-on-one-rank is not supported on this device")

        def stream_expr(self):
            raise NotImplementedError

        def device_count_expr(self):
            return "1"

        def never_called(self):
            raise NotImplementedError

        def quiet_default(self):
            return None
    """
    )
    .replace("\n", "\n    ")
    .rstrip()
    + "\n"
)
WRAPPER_OLD = textwrap.dedent(
    """
    from torch._inductor import config
    from torch._inductor.virtualized import V


    class Wrapper:
        def write_header(self):
            return V.graph.device_ops.set_device(0)

        def write_rank(self):
            return None
    """
)
WRAPPER_NEW = textwrap.dedent(
    """
    from torch._inductor import config
    from torch._inductor.virtualized import V


    class Wrapper:
        def write_header(self):
            idx = V.graph.device_ops.current_device_idx_expr()
            launcher = getattr(V.graph.device_ops, "_kernel_launcher")
            extra = getattr(V.graph.device_ops, "_extra_headers", None)
            return V.graph.device_ops.set_device(idx), launcher, extra

        def write_rank(self):
            if config.one_rank:
                return V.graph.device_ops.stream_expr()
            return V.graph.device_ops.device_count_expr()

        def write_footer(self):
            footer = getattr(V.graph.device_ops, "_footer", None)
            has_sync = hasattr(V.graph.device_ops, "synchronize")
            named = getattr(V.graph.device_ops, "_npu_named", None)
            return footer, has_sync, named
    """
)
DOWN = textwrap.dedent(
    """
    from torch._inductor.codegen.common import DeviceOpOverrides


    class NPUDeviceOpOverrides(DeviceOpOverrides):
        def set_device(self, device_idx):
            return f"torch.npu.set_device({device_idx})"

        def synchronize(self):
            return "torch.npu.synchronize()"


    class ReadyNPUOverrides(NPUDeviceOpOverrides):
        def current_device_idx_expr(self):
            return "torch.npu.current_device()"


    NPU_ONLY = "_npu_named"


    class Unrelated:
        def stream_expr(self):
            return None
    """
)


def hook_commit(root, extra_args: tuple[str, ...] = ()) -> dict:
    """The report of the commit above (the new hooks of ``common.py`` and their readers in
    ``wrapper.py``) on the device op overrides of ``DOWN``."""
    return impact_of_commit(
        root,
        {
            "torch/_inductor/codegen/__init__.py": "",
            "torch/_inductor/codegen/common.py": COMMON_OLD,
            "torch/_inductor/wrapper.py": WRAPPER_OLD,
        },
        {
            "torch/_inductor/codegen/common.py": COMMON_NEW,
            "torch/_inductor/wrapper.py": WRAPPER_NEW,
        },
        "device op overrides: compile-on-one-rank hooks (#7)",
        {"torch_npu/_inductor/device_op_overrides.py": DOWN},
        extra_args=extra_args,
    )


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    doc = hook_commit(tmp_path_factory.mktemp("hooks"))
    out = {}
    for u in doc["units"]:
        for c in u["couplings"]:
            if c["kind"] == "hook_name":
                out[(c["upstream"].rsplit(".", 1)[-1].split("::")[-1], c["owner"])] = c
    return out


def test_a_new_raising_member_called_unconditionally_is_shim_with_both_places(hooks):
    c = hooks[("current_device_idx_expr", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    ev = c["evidence"]
    assert "torch/_inductor/wrapper.py:8" in ev and "Wrapper.write_header" in ev
    assert "torch_npu/_inductor/device_op_overrides.py:5" in ev
    assert "common.py:9) raises RuntimeError" in ev


def test_a_class_that_implements_the_member_is_not_a_hook_coupling(hooks):
    assert ("current_device_idx_expr", "ReadyNPUOverrides") not in hooks
    assert not any(owner == "Unrelated" for _, owner in hooks)


def test_a_raising_member_called_only_under_a_flag_is_test_and_names_the_flag(hooks):
    c = hooks[("stream_expr", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_conditional")
    assert "only under `if config.one_rank`" in c["evidence"]
    assert "wrapper.py:15" in c["evidence"]
    # the subclass inherits the gap too
    assert hooks[("stream_expr", "ReadyNPUOverrides")]["rule"] == "hook.missing_conditional"


def test_a_harmless_default_or_a_member_nobody_calls_is_test(hooks):
    c = hooks[("device_count_expr", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")
    assert "returns `'1'`" in c["evidence"]
    c = hooks[("never_called", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_unproven")
    assert "no new-upstream call reaching it was found" in c["evidence"]
    # a usable default that no call reaches is not a coupling at all
    assert ("quiet_default", "NPUDeviceOpOverrides") not in hooks


def test_a_new_getattr_without_default_on_the_backend_object_is_shim(hooks):
    # two new reads in one function: one coupling per (change, class), the worst read
    c = hooks[("write_header", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    assert c["detail"] == "lacks `_kernel_launcher`"
    assert "wrapper.py:9" in c["evidence"] and "AttributeError" in c["evidence"]


def test_a_read_with_a_default_is_test_and_defined_or_named_members_are_not_hooks(hooks):
    c = hooks[("write_footer", "NPUDeviceOpOverrides")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")
    # `synchronize` is defined, `_npu_named` is named by the downstream file: not couplings
    assert c["detail"] == "lacks `_footer`" and "read with a default" in c["evidence"]
