"""HOOK_NAME on a changed upstream member: an inherited method whose new body newly reads
``self.<attr>`` that only an upstream ``__init__`` sets, on a downstream class whose own
``__init__`` skips that one (a real upstream commit, a real downstream tree)."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit

SCHEDULER = textwrap.dedent(
    """
    class BaseScheduling:
        def __init__(self, scheduler):
            self.scheduler = scheduler


    class Scheduler:
        def get_backend(self, device):
            return self.backends[device]

        def can_fuse(self, node1, node2):
            backend = self.get_backend(node1.get_device())
            pair = self.get_backend(node1.get_device()).fuse_pair(node1, node2)
            again = self.get_backend(node1.get_device()).fuse_again(node1, node2)
            ready = self.get_backend(node1.get_device()).ready(node1)
            early = self.get_backend(node1.get_device()).early(node1)
            return backend and pair and again and ready and early
    """
)
COMBINED_OLD = textwrap.dedent(
    """
    from torch._inductor.scheduler import BaseScheduling


    class CombinedScheduling(BaseScheduling):
        _ready = True

        def __init__(self, scheduler):
            super().__init__(scheduler)
            self._gemm = scheduler

        def fuse_pair(self, node1, node2):
            return node1 is node2

        def fuse_again(self, node1, node2):
            if node1 is None:
                return self._gemm is node2
            return False

        def ready(self, node):
            return node

        def early(self, node):
            return node
    """
)
COMBINED_NEW = (
    COMBINED_OLD.replace(
        "        return node1 is node2\n",
        "        return self._gemm.conflict(node1, node2) or node1 is node2\n",
    )
    .replace(
        "        return False\n",
        "        return self._gemm.conflict(node1, node2)\n",
    )
    .replace(
        "    def ready(self, node):\n        return node\n",
        "    def ready(self, node):\n        return self._ready and node\n",
    )
    .replace(
        "    def early(self, node):\n        return node\n",
        "    def early(self, node):\n"
        "        if not node.is_template():\n"
        "            return None\n"
        "        return self._gemm.early(node)\n",
    )
)
DOWN = textwrap.dedent(
    """
    from torch._inductor.codegen.common import register_backend_for_device
    from torch._inductor.codegen.gpu_combined_scheduling import CombinedScheduling
    from torch._inductor.scheduler import BaseScheduling


    class SkipsInit(CombinedScheduling):
        def __init__(self, scheduler):
            BaseScheduling.__init__(self, scheduler)


    class CallsSuper(CombinedScheduling):
        def __init__(self, scheduler):
            super().__init__(scheduler)


    class Overrides(CombinedScheduling):
        def __init__(self, scheduler):
            BaseScheduling.__init__(self, scheduler)

        def fuse_pair(self, node1, node2):
            return False


    register_backend_for_device("npu", SkipsInit, None)
    register_backend_for_device("npu1", CallsSuper, None)
    register_backend_for_device("npu2", Overrides, None)
    """
)


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("changed"),
        {
            "torch/_inductor/codegen/__init__.py": "",
            "torch/_inductor/codegen/common.py": "def register_backend_for_device(*a, **k):\n"
            "    pass\n",
            "torch/_inductor/scheduler.py": SCHEDULER,
            "torch/_inductor/codegen/gpu_combined_scheduling.py": COMBINED_OLD,
        },
        {"torch/_inductor/codegen/gpu_combined_scheduling.py": COMBINED_NEW},
        "combined scheduling: ask the gemm scheduling (#10)",
        {"torch_npu/_inductor/scheduling.py": DOWN},
    )
    out = {}
    for u in doc["units"]:
        for c in u["couplings"]:
            if c["kind"] == "hook_name":
                member = c["upstream"].rsplit(".", 1)[1]
                out[(member, c["detail"].split("`")[1], c["owner"])] = c
    return out


def test_a_changed_body_newly_reading_an_attribute_a_skipped_init_sets_is_shim(hooks):
    c = hooks[("fuse_pair", "_gemm", "SkipsInit")]
    assert (c["action"], c["rule"]) == ("Shim", "hook.missing_breaks")
    ev = c["evidence"]
    # the call reaching it, the new read, the setter, the skipping __init__
    assert "calls the changed `fuse_pair` at torch/_inductor/scheduler.py:" in ev
    assert "in `Scheduler.can_fuse`" in ev and "does not set `_gemm`" in ev
    assert "reads `self._gemm` (torch/_inductor/codegen/gpu_combined_scheduling.py:13)" in ev
    assert "only `CombinedScheduling.__init__` (torch/_inductor/codegen/gpu_combined" in ev
    assert "`SkipsInit.__init__` (torch_npu/_inductor/scheduling.py:8)" in ev
    assert "calls `BaseScheduling.__init__` instead" in ev and "AttributeError" in ev


def test_a_read_the_old_body_had_already_is_no_new_break(hooks):
    assert not [k for k in hooks if k[0] == "fuse_again"]


def test_an_init_that_calls_super_or_an_override_or_a_class_default_is_nothing(hooks):
    assert not [k for k in hooks if k[2] in ("CallsSuper", "Overrides")]
    assert not [k for k in hooks if k[0] == "ready"]


def test_a_read_after_an_early_exit_is_off_the_normal_path(hooks):
    assert not [k for k in hooks if k[0] == "early"]
