"""Shim only with a breaking path: a signature change under an override or a patch is Shim
when a call in the new upstream passes the new argument shape and reaches the downstream
object, and Test (saying why) when no such call exists or its target cannot be read.

One real upstream git commit adds parameters to a method, a constructor, a function and
a same-op lowering; the new upstream calls them in ways that reach the downstream object
and ways that do not. The downstream overrides, patches and registers them.
"""

from __future__ import annotations

import pytest

from .e2e_fixture import REGISTER_LOWERING
from .gitrepo import impact_of_commit

SCHED_V1 = """\
class Base:
    def gen(self, nodes, bench=False):
        return nodes

    def run_public(self, nodes):
        return self.gen(nodes, bench=True)

    def _tune(self, nodes):
        return self.gen(nodes)

    def combo(self, nodes):
        return self._tune(nodes)


class Features:
    def __init__(self, nodes):
        self.nodes = nodes


def make_features(nodes):
    return Features(nodes)


class Other:
    def emit(self, nodes):
        return nodes


def use_other(holder):
    return holder.other.emit(1)


class Scheduling:
    def emit_kernel_for_nodes(self, nodes):
        return nodes


class Driver:
    def __init__(self, backend):
        self.backend = backend

    def codegen(self, nodes):
        return self.backend.emit_kernel_for_nodes(nodes)


class Renderer:
    def render_group(self, nodes):
        return nodes


class Printer:
    def render_group(self, nodes):
        return nodes


def draw(backend, nodes):
    return backend.render_group(nodes)
"""

SCHED_V2 = (
    SCHED_V1.replace(
        "def gen(self, nodes, bench=False):", "def gen(self, nodes, bench=False, coalesce=None):"
    )
    .replace("return self.gen(nodes, bench=True)", "return self.gen(nodes, bench=True, coalesce=1)")
    .replace("return self.gen(nodes)", "return self.gen(nodes, coalesce=2)")
    .replace("def __init__(self, nodes):", "def __init__(self, nodes, scores=None):")
    .replace("return Features(nodes)", "return Features(nodes, scores=1)")
    .replace("def emit(self, nodes):", "def emit(self, nodes, *, fast=False):")
    .replace("return holder.other.emit(1)", "return holder.other.emit(1, fast=True)")
    .replace(
        "def emit_kernel_for_nodes(self, nodes):",
        "def emit_kernel_for_nodes(self, nodes, hint=None):",
    )
    .replace(
        "self.backend.emit_kernel_for_nodes(nodes)",
        "self.backend.emit_kernel_for_nodes(nodes, hint=1)",
    )
    .replace("def render_group(self, nodes):", "def render_group(self, nodes, hint=None):", 1)
    .replace("return backend.render_group(nodes)", "return backend.render_group(nodes, hint=1)")
)

LOWERING_V1 = (
    "import torch\naten = torch.ops.aten\nlowerings = {}\n\n\n"
    + REGISTER_LOWERING
    + """

def make_reduction(kind, dtype=None):
    def inner(x):
        return x
    return inner


def sum_(x):
    return make_reduction("sum")(x)


def helper(x):
    return x


def use_helper(x):
    return helper(x)


@register_lowering(aten.expand)
def expand(x, sizes):
    return x
"""
)

LOWERING_V2 = (
    LOWERING_V1.replace(
        "def make_reduction(kind, dtype=None):",
        "def make_reduction(kind, dtype=None, *, strict=False):",
    )
    .replace('return make_reduction("sum")(x)', 'return make_reduction("sum", strict=True)(x)')
    .replace("def helper(x):", "def helper(x, *, flag=False):")
    .replace("def expand(x, sizes):", "def expand(x, sizes, *, implicit=False):")
)

DOWN_SCHED = """\
from torch._inductor.sched import Base, Features, Other, Renderer, Scheduling


class Reached(Base):
    def gen(self, nodes, bench=False):
        return nodes


class Shielded(Base):
    def gen(self, nodes, bench=False):
        return nodes

    def run_public(self, nodes):
        return self.gen(nodes)

    def combo(self, nodes):
        return nodes


class NPUFeatures(Features):
    def __init__(self, nodes):
        self.nodes = nodes


def _emit(self, nodes):
    return nodes


Other.emit = _emit


class NPUScheduling(Scheduling):
    def emit_kernel_for_nodes(self, nodes):
        return nodes


class NPURenderer(Renderer):
    def render_group(self, nodes):
        return nodes
"""

DOWN_LOWERING = """\
import torch
from torch._inductor import lowering
from torch._inductor.lowering import register_lowering

aten = torch.ops.aten


def npu_make_reduction(kind, dtype=None):
    def inner(x):
        return x
    return inner


def npu_helper(x):
    return x


lowering.make_reduction = npu_make_reduction
lowering.helper = npu_helper


@register_lowering(aten.expand)
def expand(x, sizes):
    return x
"""


# a class of the same name in another file, overriding only `gen`: nothing shields it
DOWN_SAME_NAME = """\
from torch._inductor.sched import Base


class Shielded(Base):
    def gen(self, nodes, bench=False):
        return nodes
"""


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, dict]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("breaking"),
        {"torch/_inductor/sched.py": SCHED_V1, "torch/_inductor/lowering.py": LOWERING_V1},
        {"torch/_inductor/sched.py": SCHED_V2, "torch/_inductor/lowering.py": LOWERING_V2},
        "new parameters",
        {
            "torch_npu/_inductor/sched.py": DOWN_SCHED,
            "torch_npu/_inductor/lowering.py": DOWN_LOWERING,
            "torch_npu/_inductor/sched2.py": DOWN_SAME_NAME,
        },
    )
    out: dict[str, dict] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["kind"] in ("subclass_override", "monkeypatch", "registration"):
                owner = c["owner"] or c["downstream"]
                if c["downstream"].startswith("torch_npu/_inductor/sched2.py"):
                    owner = f"sched2:{owner}"
                out[f"{c['upstream'].split('::')[1]}@{owner}"] = c
    return out


def test_an_inherited_caller_passing_the_new_keyword_makes_the_override_shim(couplings):
    c = couplings["Base.gen@Reached.gen"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    # the call is quoted with file:line in the new upstream, and the downstream place
    assert "torch/_inductor/sched.py:6" in c["evidence"]
    assert "torch_npu/_inductor/sched.py:5" in c["evidence"]
    assert "`coalesce`" in c["evidence"] and "run_public" in c["evidence"]


def test_callers_the_subclass_overrides_do_not_reach_it(couplings):
    # run_public is overridden; _tune is private and only called from combo, overridden
    c = couplings["Base.gen@Shielded.gen"]
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call")
    assert "no new-upstream call passes `coalesce` to it" in c["evidence"]
    assert "Shielded overrides the caller `Base.run_public`" in c["evidence"]


def test_a_constructor_called_by_the_base_class_name_never_builds_the_subclass(couplings):
    c = couplings["Features.__init__@NPUFeatures.__init__"]
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call")
    assert "never NPUFeatures" in c["evidence"] and "sched.py:21" in c["evidence"]


def test_a_patched_module_function_called_by_its_global_name_is_shim(couplings):
    c = couplings["make_reduction@torch_npu/_inductor/lowering.py:18"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "torch/_inductor/lowering.py:20" in c["evidence"] and "`strict`" in c["evidence"]
    assert "module global" in c["evidence"]


def test_a_new_keyword_that_no_call_passes_is_test(couplings):
    c = couplings["helper@torch_npu/_inductor/lowering.py:19"]
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call")
    assert c["evidence"] == "no new-upstream call passes `flag` to it"


def test_a_receiver_whose_type_is_not_written_down_stays_test_and_says_so(couplings):
    c = couplings["Other.emit@torch_npu/_inductor/sched.py:29"]
    assert (c["action"], c["rule"]) == ("Test", "signature.path_unproven")
    assert "receiver `holder.other` not resolved" in c["evidence"]
    assert "sched.py:" in c["evidence"]


def test_a_same_op_lowering_that_cannot_bind_the_new_kwargs_is_shim(couplings):
    c = next(
        v for k, v in couplings.items() if k.startswith("expand@") and v["kind"] == "registration"
    )
    assert (c["action"], c["rule"]) == ("Shim", "signature.registration_breaks")
    assert "implicit" in " ".join(c["problems"])


def test_overrides_count_in_the_class_of_the_same_file_only(couplings):
    c = couplings["Base.gen@sched2:Shielded.gen"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "torch_npu/_inductor/sched2.py:5" in c["evidence"]


def test_an_untyped_receiver_of_a_method_only_the_hierarchy_defines_reaches_the_override(
    couplings,
):
    # `self.backend` is not typed, but only Scheduling (and the downstream subclass)
    # defines emit_kernel_for_nodes: upstream reaches the backend's object this way
    c = couplings["Scheduling.emit_kernel_for_nodes@NPUScheduling.emit_kernel_for_nodes"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "receiver `self.backend` is not typed" in c["evidence"]
    assert "only `Scheduling`'s class hierarchy defines" in c["evidence"]


def test_an_untyped_receiver_of_a_name_another_class_defines_stays_test(couplings):
    # Printer.render_group, outside Renderer's hierarchy, could be the receiver
    c = couplings["Renderer.render_group@NPURenderer.render_group"]
    assert (c["action"], c["rule"]) == ("Test", "signature.path_unproven")
    assert "receiver `backend` not resolved" in c["evidence"]


def test_act_now_quotes_the_breaking_path(tmp_path):
    """The report for people shows, on each Shim line, the new-upstream call that reaches
    the downstream object (its evidence), in English and Chinese."""
    files = (
        {"torch/_inductor/sched.py": SCHED_V1, "torch/_inductor/lowering.py": LOWERING_V1},
        {"torch/_inductor/sched.py": SCHED_V2, "torch/_inductor/lowering.py": LOWERING_V2},
        "new parameters",
        {"torch_npu/_inductor/lowering.py": DOWN_LOWERING},
    )
    md = impact_of_commit(tmp_path / "en", *files, fmt="md")
    act_now = md.split("## Act now\n", 1)[1].split("\n## ", 1)[0]
    line = next(ln for ln in act_now.splitlines() if "lowering.py:18**" in ln)
    assert "; breaking path: the new upstream calls it at torch/_inductor/lowering.py:20" in line
    assert line.endswith("[signature.replacement_breaks]")
