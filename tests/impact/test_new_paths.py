"""A breaking call on a path the new upstream adds whole (#31 Shim pattern 1): the new
upstream passes a new keyword only from new defs that its scheduler enters only for a
node of a class it adds too (torch 2.15.0's ``elif isinstance(node,
FusedStagedReduction): backend.codegen_staged_reduction(node)``). Whether that new
feature takes effect on the backend is not read from the code: the override is Test,
high, not Shim. A new def reached from a def that ran before, or a new path entered for
a class the old upstream had, stays Shim.

One real upstream git commit; the downstream overrides the three changed methods with
their old signatures.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

SCHED_V1 = """\
class BaseSchedulerNode:
    device = None


class FusedSchedulerNode(BaseSchedulerNode):
    pass


class FusedTemplateNode(FusedSchedulerNode):
    pass


class Scheduler:
    def __init__(self, backend):
        self.backend = backend

    def get_backend(self, device):
        return self.backend

    def codegen(self, nodes):
        for node in nodes:
            device = node.device
            if isinstance(node, FusedSchedulerNode):
                self.get_backend(device).codegen_node(node)


class BaseScheduling:
    def codegen_node(self, node):
        raise NotImplementedError
"""

SCHED_V2 = SCHED_V1.replace(
    "class Scheduler:",
    "class FusedStagedReduction(FusedSchedulerNode):\n    pass\n\n\nclass Scheduler:",
).replace(
    "            if isinstance(node, FusedSchedulerNode):\n",
    "            if isinstance(node, FusedStagedReduction):\n"
    "                self.get_backend(device).codegen_staged_reduction(node)\n"
    "            elif isinstance(node, FusedTemplateNode):\n"
    "                self.get_backend(device).codegen_template(node)\n"
    "            elif isinstance(node, FusedSchedulerNode):\n",
)

SIMD_V1 = """\
from torch._inductor.scheduler import BaseScheduling


class SIMDScheduling(BaseScheduling):
    def generate_node_schedule(self, nodes, numel, rnumel):
        return nodes

    def generate_kernel(self, nodes):
        return nodes

    def plan_tiles(self, nodes):
        return nodes

    def codegen_node(self, node):
        self.plan_tiles([node])
        return self.generate_node_schedule([node], 1, 1)
"""

SIMD_V2 = """\
from torch._inductor.scheduler import BaseScheduling


class SIMDScheduling(BaseScheduling):
    def generate_node_schedule(self, nodes, numel, rnumel, *, required_post_reduction_index=None):
        return nodes

    def generate_kernel(self, nodes, *, fast=False):
        return nodes

    def plan_tiles(self, nodes, *, split=None):
        return nodes

    def codegen_node(self, node):
        self.plan_tiles([node])
        self._emit_fast([node])
        return self.generate_node_schedule([node], 1, 1)

    def _emit_fast(self, nodes):
        return self.generate_kernel(nodes, fast=True)

    def codegen_staged_reduction(self, node):
        plan = self._find_plan([node])
        if plan is None:
            raise AssertionError("plan lost")
        return self._codegen_with_epilogue([node], plan)

    def _find_plan(self, nodes):
        return len(nodes) or None

    def _codegen_with_epilogue(self, nodes, plan):
        return self.generate_node_schedule(nodes, 1, 1, required_post_reduction_index=plan)

    def codegen_template(self, node):
        return self.plan_tiles([node], split=2)


class CombinedScheduling(BaseScheduling):
    def __init__(self):
        self._triton_scheduling = SIMDScheduling()

    def codegen_staged_reduction(self, node):
        return self._triton_scheduling.codegen_staged_reduction(node)
"""

DOWN = """\
from torch._inductor.codegen.simd import SIMDScheduling


class NPUScheduling(SIMDScheduling):
    def generate_node_schedule(self, nodes, numel, rnumel):
        return nodes

    def generate_kernel(self, nodes):
        return nodes

    def plan_tiles(self, nodes):
        return nodes
"""


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, dict]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("newpaths"),
        {
            "torch/_inductor/scheduler.py": SCHED_V1,
            "torch/_inductor/codegen/__init__.py": "",
            "torch/_inductor/codegen/simd.py": SIMD_V1,
        },
        {"torch/_inductor/scheduler.py": SCHED_V2, "torch/_inductor/codegen/simd.py": SIMD_V2},
        "staged reductions",
        {"torch_npu/_inductor/scheduling.py": DOWN},
    )
    out: dict[str, dict] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["kind"] == "subclass_override":
                out[f"{c['upstream'].split('::')[1]}@{c['downstream']}"] = c
    return out


def test_a_break_only_on_a_path_added_for_a_new_class_is_test(couplings):
    c = couplings["SIMDScheduling.generate_node_schedule@torch_npu/_inductor/scheduling.py:5"]
    assert (c["action"], c["risk"], c["rule"]) == ("Test", "high", "signature.new_path_call")
    ev = c["evidence"]
    assert "torch/_inductor/codegen/simd.py:32" in ev  # the call passing the keyword
    path = "`SIMDScheduling._codegen_with_epilogue` ← `SIMDScheduling.codegen_staged_reduction`"
    assert path in ev
    # the entry: the scheduler's new branch, not the combined scheduling passing it on
    assert "torch/_inductor/scheduler.py:28 runs it only for a `FusedStagedReduction`" in ev
    assert "cuda_combined" not in ev and "CombinedScheduling" not in ev


def test_a_new_def_called_from_an_old_one_stays_shim(couplings):
    c = couplings["SIMDScheduling.generate_kernel@torch_npu/_inductor/scheduling.py:8"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "torch/_inductor/codegen/simd.py:20" in c["evidence"]


def test_a_new_path_entered_for_a_class_the_old_upstream_had_stays_shim(couplings):
    c = couplings["SIMDScheduling.plan_tiles@torch_npu/_inductor/scheduling.py:11"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "torch/_inductor/codegen/simd.py:35" in c["evidence"]
