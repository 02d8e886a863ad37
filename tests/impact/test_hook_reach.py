"""HOOK_NAME reach on a real upstream commit: the scheduling object the scheduler hands
out (``self.get_backend(device)``, only the classes the backend registers), an inherited
member reading an attribute that only an upstream ``__init__`` sets, skipped by the
downstream ``__init__``, and a read whose only caller the downstream class overrides."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit

SCHEDULER_OLD = textwrap.dedent(
    """
    class BaseScheduling:
        def __init__(self, scheduler):
            self.scheduler = scheduler

        def group_fn(self, sizes):
            return sizes


    class Scheduler:
        def __init__(self):
            self.backends = {}

        def get_backend(self, device):
            return self.backends[device]

        def can_fuse(self, node1, node2):
            return self.get_backend(node1.get_device()).group_fn(node1)
    """
)
SCHEDULER_NEW = SCHEDULER_OLD.replace(
    "        return self.get_backend(node1.get_device()).group_fn(node1)\n",
    textwrap.indent(
        textwrap.dedent(
            """
            if self.blocked(node1, node2):
                return False
            backend = self.get_backend(node1.get_device())
            if not self.get_backend(node1.get_device()).can_fuse_reduction_pair(node1, node2):
                return False
            ready = self.get_backend(node1.get_device()).check_ready(node1)
            unset = ready and self.get_backend(node1.get_device()).check_unset(node1)
            if not node1.is_template():
                own = self.get_backend(node1.get_device()).has_epilogue([node1])
                stream = self.get_backend(node1.get_device()).stream_of([node1])
                return backend.group_fn(node1) and ready and unset and own and stream
            return self.get_backend(node1.get_device()).can_fuse_epilogue(node1, node2)
            """
        ),
        "        ",
    ),
)
COMBINED_OLD = textwrap.dedent(
    """
    from torch._inductor.scheduler import BaseScheduling


    class GemmScheduling(BaseScheduling):
        def has_conflict(self, node1, node2):
            return False


    class CombinedScheduling(BaseScheduling):
        _ready = True

        def __init__(self, scheduler):
            super().__init__(scheduler)
            self._gemm_scheduling = GemmScheduling(scheduler)

        def group_fn(self, sizes):
            return self._gemm_scheduling.group_fn(sizes)
    """
)
COMBINED_NEW = COMBINED_OLD + textwrap.indent(
    textwrap.dedent(
        """
        def can_fuse_reduction_pair(self, node1, node2):
            return not self._gemm_scheduling.has_conflict(node1, node2)

        def can_fuse_epilogue(self, node1, node2):
            return self._gemm_scheduling.has_conflict(node1, node2)

        def check_ready(self, node):
            return self._ready

        def check_unset(self, node):
            return getattr(self, "_gemm_scheduling", None) is None
        """
    ),
    "    ",
)
KERNEL_OLD = textwrap.dedent(
    """
    class Kernel:
        def codegen_kernel(self):
            return self.meta()

        def codegen_template(self):
            return "template"

        def codegen_kernel_body(self):
            return "body"

        def meta(self):
            return {}

        def header(self):
            return {}
    """
)
KERNEL_NEW = textwrap.dedent(
    """
    class Kernel:
        def codegen_kernel(self):
            return self.meta()

        def codegen_template(self):
            return self.header() + self._template_hint()

        def codegen_kernel_body(self):
            return self._body_hint()

        def meta(self):
            return {"block": self._block_hint()}

        def header(self):
            return {"block": self._header_hint()}

        def _header_hint(self):
            return 16

        def _block_hint(self):
            return 8

        def _template_hint(self):
            return 4

        def _body_hint(self):
            return 2
    """
)
CUDA_OLD = textwrap.dedent(
    """
    from torch._inductor.scheduler import BaseScheduling


    class CUDAScheduling(BaseScheduling):
        def __init__(self, scheduler):
            super().__init__(scheduler)
            self._triton = BaseScheduling(scheduler)
    """
)
CUDA_NEW = CUDA_OLD + textwrap.indent(
    textwrap.dedent(
        """
        def has_epilogue(self, nodes):
            return self._triton.group_fn(nodes)

        def stream_of(self, nodes):
            return self._stream.group_fn(nodes)
        """
    ),
    "    ",
)
DOWN = textwrap.dedent(
    """
    from torch._inductor.codegen.common import register_backend_for_device
    from torch._inductor.codegen.cuda_scheduling import CUDAScheduling
    from torch._inductor.codegen.gpu_combined_scheduling import CombinedScheduling
    from torch._inductor.scheduler import BaseScheduling


    class SkipsInit(CombinedScheduling):
        def __init__(self, scheduler):
            BaseScheduling.__init__(self, scheduler)
            self._npu_scheduling = None


    class NoBaseInit(CombinedScheduling):
        def __init__(self, scheduler):
            self._npu_scheduling = None


    class CallsSuper(CombinedScheduling):
        def __init__(self, scheduler):
            super().__init__(scheduler)


    class SetsItself(CombinedScheduling):
        def __init__(self, scheduler):
            BaseScheduling.__init__(self, scheduler)
            self.setup()

        def setup(self):
            self._gemm_scheduling = None


    class NoInit(CombinedScheduling):
        pass


    class OwnDelegate(CUDAScheduling):
        def __init__(self, scheduler):
            BaseScheduling.__init__(self, scheduler)
            self._triton = None


    class NotRegistered(CombinedScheduling):
        def __init__(self, scheduler):
            BaseScheduling.__init__(self, scheduler)


    register_backend_for_device("npu", SkipsInit, None)
    register_backend_for_device("npu1", CallsSuper, None)
    register_backend_for_device("npu2", SetsItself, None)
    register_backend_for_device("npu3", NoInit, None)
    register_backend_for_device("npu5", OwnDelegate, None)
    register_backend_for_device("npu4", device_scheduling=NoBaseInit, device_wrapper_codegen=None)
    """
)
DOWN_KERNEL = textwrap.dedent(
    """
    from torch._inductor.codegen.kernel import Kernel


    class OwnCodegen(Kernel):
        def codegen_kernel(self):
            return "npu"

        def codegen_template(self):
            return "npu " + super().codegen_template()

        def codegen_kernel_body(self):
            return "npu body"


    class PlainKernel(Kernel):
        pass
    """
)

WRAPPER_OLD = textwrap.dedent(
    """
    class PythonWrapperCodegen:
        def write_prologue(self):
            return "prologue"


    def write_streams(V):
        return V.graph.wrapper_code.write_prologue()


    class Sched:
        def codegen_sync(self):
            return None


    class Combined:
        def codegen_sync(self):
            return self._triton.codegen_sync()


    def run_nodes(self, config):
        if config.debug_sync:
            self.get_backend(0).codegen_sync()
    """
)
WRAPPER_NEW = (
    WRAPPER_OLD.replace(
        "return V.graph.wrapper_code.write_prologue()",
        "V.graph.wrapper_code.codegen_stream_prologue()\n"
        "    return V.graph.wrapper_code.write_prologue()",
    )
    .replace(
        '        return "prologue"\n',
        '        return "prologue"\n\n'
        "    def codegen_stream_prologue(self):\n"
        "        raise NotImplementedError\n\n"
        "    def debug_sync(self):\n"
        "        raise NotImplementedError\n",
    )
    .replace(
        "        return None\n",
        "        V.graph.wrapper_code.debug_sync()\n",
    )
)
DOWN_WRAPPER = textwrap.dedent(
    """
    from torch._inductor.codegen.common import register_backend_for_device
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen


    class NpuWrapper(PythonWrapperCodegen):
        pass


    class NpuCppWrapper(NpuWrapper):
        pass


    class UnusedWrapper(PythonWrapperCodegen):
        pass


    register_backend_for_device("npu7", None, NpuWrapper, device_cpp_wrapper_codegen=NpuCppWrapper)
    """
)


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("reach"),
        {
            "torch/_inductor/codegen/__init__.py": "",
            "torch/_inductor/codegen/common.py": "def register_backend_for_device(*a, **k):\n"
            "    pass\n",
            "torch/_inductor/scheduler.py": SCHEDULER_OLD,
            "torch/_inductor/codegen/gpu_combined_scheduling.py": COMBINED_OLD,
            "torch/_inductor/codegen/kernel.py": KERNEL_OLD,
            "torch/_inductor/codegen/cuda_scheduling.py": CUDA_OLD,
            "torch/_inductor/codegen/wrapper.py": WRAPPER_OLD,
        },
        {
            "torch/_inductor/codegen/cuda_scheduling.py": CUDA_NEW,
            "torch/_inductor/scheduler.py": SCHEDULER_NEW,
            "torch/_inductor/codegen/gpu_combined_scheduling.py": COMBINED_NEW,
            "torch/_inductor/codegen/kernel.py": KERNEL_NEW,
            "torch/_inductor/codegen/wrapper.py": WRAPPER_NEW,
        },
        "scheduler: reduction contracts (#9)",
        {
            "torch_npu/_inductor/scheduling.py": DOWN,
            "torch_npu/_inductor/kernel.py": DOWN_KERNEL,
            "torch_npu/_inductor/wrapper.py": DOWN_WRAPPER,
        },
    )
    out = {}
    for u in doc["units"]:
        for c in u["couplings"]:
            if c["kind"] == "hook_name":
                member = c["detail"].split("`")[1]
                out[(member, c["owner"])] = c
    return out


def test_a_skipped_init_under_the_schedulers_handle_is_shim_with_all_three_places(hooks):
    c = hooks[("can_fuse_reduction_pair", "SkipsInit")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    ev = c["evidence"]
    # the read through the handle, the attribute read, the setter, the skipping __init__
    assert "torch/_inductor/scheduler.py:" in ev and "Scheduler.can_fuse" in ev
    assert "reads `self._gemm_scheduling` (torch/_inductor/codegen/gpu_combined_scheduling" in ev
    assert "only `CombinedScheduling.__init__`" in ev
    assert "`SkipsInit.__init__` (torch_npu/_inductor/scheduling.py:9)" in ev
    assert "calls `BaseScheduling.__init__` instead" in ev and "AttributeError" in ev
    c = hooks[("can_fuse_reduction_pair", "NoBaseInit")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    assert "calls no base `__init__`" in c["evidence"]
    # a bail-out on a special case before the call leaves it on the common path
    assert "blocked" not in c["evidence"]


def test_a_read_after_an_exit_unless_a_condition_holds_is_conditional(hooks):
    c = hooks[("can_fuse_epilogue", "SkipsInit")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_conditional")
    assert "only under `if node1.is_template()" in c["evidence"]


def test_an_init_that_reaches_the_setter_or_sets_it_or_none_is_usable(hooks):
    for owner in ("CallsSuper", "SetsItself", "NoInit"):
        c = hooks[("can_fuse_reduction_pair", owner)]
        assert (c["action"], c["rule"]) == ("Test", "hook.default_usable"), owner
        assert "AttributeError" not in c["evidence"]


def test_a_class_default_or_a_getattr_with_default_is_no_skipped_init(hooks):
    for member in ("check_ready", "check_unset"):
        c = hooks[(member, "SkipsInit")]
        assert (c["action"], c["rule"]) == ("Test", "hook.default_usable"), member
    # a call in the second operand of `and` runs only if the first holds
    assert "reads it only under `if ready`" in hooks[("check_unset", "SkipsInit")]["evidence"]


def test_the_handle_hands_out_only_the_registered_scheduling(hooks):
    # the default fails on it too, but the scheduler never hands it out
    c = hooks[("can_fuse_reduction_pair", "NotRegistered")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_unproven")
    assert "no new-upstream call reaching it was found" in c["evidence"]
    assert "calls `BaseScheduling.__init__` instead" in c["evidence"]


def test_a_read_whose_only_caller_the_class_overrides_does_not_reach_it(hooks):
    # `_block_hint` is read in `meta`, called only by `codegen_kernel`: overridden here
    assert ("_block_hint", "OwnCodegen") not in hooks
    c = hooks[("_block_hint", "PlainKernel")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")
    assert "Kernel.meta" in c["evidence"]
    # an override that calls super() still runs the inherited caller
    c = hooks[("_header_hint", "OwnCodegen")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")


def test_a_cuda_file_default_that_delegates_to_what_the_class_sets_is_usable(hooks):
    c = hooks[("has_epilogue", "OwnDelegate")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")
    assert "only delegates to `self._triton`, which `OwnDelegate` sets itself" in c["evidence"]
    # a delegate it does not set stays a failing default (read under a condition here)
    c = hooks[("stream_of", "OwnDelegate")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_conditional")
    assert "cuda_scheduling.py:" in c["evidence"] and "is CUDA-specific" in c["evidence"]


def test_a_read_in_a_method_the_class_overrides_reaches_it_only_through_super(hooks):
    # read directly in `codegen_template`, which `OwnCodegen` overrides calling super()
    c = hooks[("_template_hint", "OwnCodegen")]
    assert (c["action"], c["rule"]) == ("Test", "hook.default_usable")
    assert "Kernel.codegen_template" in c["evidence"]
    # read directly in `codegen_kernel_body`, overridden without super(): it never runs
    assert ("_body_hint", "OwnCodegen") not in hooks
    assert "Kernel.codegen_kernel_body" in hooks[("_body_hint", "PlainKernel")]["evidence"]


def test_the_graphs_wrapper_code_hands_out_the_registered_wrappers(hooks):
    # registered as the wrapper (positional) and as the C++ wrapper (keyword)
    for owner in ("NpuWrapper", "NpuCppWrapper"):
        c = hooks[("codegen_stream_prologue", owner)]
        assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks"), owner
        assert "torch/_inductor/codegen/wrapper.py:" in c["evidence"]
        assert "`V.graph.wrapper_code.codegen_stream_prologue(…)`" in c["evidence"]
        assert "raises NotImplementedError" in c["evidence"]
    # a wrapper subclass the downstream never registers is not handed out
    c = hooks[("codegen_stream_prologue", "UnusedWrapper")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_unproven")
    assert "no new-upstream call reaching it was found" in c["evidence"]


def test_a_read_in_a_method_called_only_under_a_condition_is_conditional(hooks):
    # `Sched.codegen_sync` reads it unconditionally, but is called only under a debug flag
    # (the delegating `Combined.codegen_sync` runs only when another one is called)
    c = hooks[("debug_sync", "NpuWrapper")]
    assert (c["action"], c["rule"]) == ("Test", "hook.missing_conditional")
    assert "only under `if config.debug_sync (`codegen_sync` is called only so" in c["evidence"]
    assert "`V.graph.wrapper_code.debug_sync(…)`, in `Sched.codegen_sync`" in c["evidence"]
