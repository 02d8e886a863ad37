"""FORK gaps on a real upstream commit: forked classes and files that lack what upstream
added, Shim only when upstream calls the new method and the fork stands in the class."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit


def _method(name: str, tag: str, changed: bool, calls: str = "") -> str:
    """A method long enough for fork detection; ``changed`` edits its last line, ``calls``
    (``self.m`` or ``m``) adds a call before it."""
    tail = f"return merged_{tag} or None" if changed else f"return merged_{tag}"
    if calls:
        tail = f"{calls}(merged_{tag})\n{' ' * 16}{tail}"  # at the body's indent in the text
    return textwrap.indent(
        textwrap.dedent(
            f"""
            def {name}(self, nodes, limit=8):
                pending_{tag} = [n for n in nodes if n.is_reduction() and n.size < limit]
                groups_{tag} = {{}}
                for node in pending_{tag}:
                    key = (node.device, node.dtype, node.group_key())
                    groups_{tag}.setdefault(key, []).append(node)
                merged_{tag} = []
                for key, members in sorted(groups_{tag}.items(), key=lambda kv: str(kv[0])):
                    if len(members) > 1 and self.can_fuse_all(members):
                        merged_{tag}.append(self.fuse_group(members, key))
                    else:
                        merged_{tag}.extend(members)
                {tail}
            """
        ),
        "    ",
    )


def _function(name: str, tag: str, changed: bool, calls: str = "") -> str:
    return textwrap.dedent(_method(name, tag, changed, calls)).replace("(self, ", "(")


def _class(
    name: str, tags: list[str], changed: bool, extra: str = "", calls: dict | None = None
) -> str:
    body = "".join(_method(f"pass_{t}", t, changed, (calls or {}).get(t, "")) for t in tags)
    return f"class {name}:\n{body}{extra}\n"


NEW_METHOD = "\n    def prune_deps(self):\n        return None\n"
UP_OLD = _class("Scheduler", ["a", "b"], False) + "\n" + _class("Kernel", ["c", "d"], False)
UP_NEW = (
    _class("Scheduler", ["a", "b"], True, NEW_METHOD)
    + "\n"
    + _class(
        "Kernel",
        ["c", "d"],
        True,
        # new_hook: called by pass_c, which the fork copies; spare_hook: only by drain,
        # which the fork lacks too and nobody calls
        NEW_METHOD.replace("prune_deps(self)", "new_hook(self, merged)")
        + NEW_METHOD.replace("prune_deps", "drain").replace("None", "self.spare_hook()")
        + NEW_METHOD.replace("prune_deps", "spare_hook"),
        calls={"c": "self.new_hook"},
    )
)
# NPUGraph copies pass_g, pass_h (a fork of CUDAGraph) and wraps capture_end in one
# super() call: no copy of upstream's, which now calls capture_end_pre; NPUGraphSync's
# capture_end does something of its own first: a copy, so the gap stands
CAPTURE_OLD = "\n    def capture_end(self):\n        super().capture_end()\n"
CAPTURE_NEW = (
    "\n    def capture_end(self):\n        self.capture_end_pre()\n"
    "        super().capture_end()\n"
    "\n    def capture_end_pre(self):\n        return None\n"
)
GRAPHS_OLD = "class _CGraph:\n    pass\n\n\n" + _class(
    "CUDAGraph(_CGraph)", ["g", "h"], False, CAPTURE_OLD
)
GRAPHS_NEW = "class _CGraph:\n    pass\n\n\n" + _class(
    "CUDAGraph(_CGraph)", ["g", "h"], True, CAPTURE_NEW
)
DOWN_GRAPHS = (
    "class _NPUGraphBase:\n    pass\n\n\n"
    + _class("NPUGraph(_NPUGraphBase)", ["g", "h"], False, CAPTURE_OLD)
    + "\n"
    + _class(
        "NPUGraphSync(_NPUGraphBase)",
        ["g", "h"],
        False,
        CAPTURE_OLD.replace("        super()", "        self.sync()\n        super()"),
    )
)
# SIMD is extended by upstream's Triton(SIMD) in another file; NPUTriton(Triton) overrides
# SIMD's pass_s and pass_t with copies: a subclass through an upstream class, no fork
SIMD_OLD = _class("SIMD", ["s", "t"], False)
SIMD_NEW = _class(
    "SIMD", ["s", "t"], True, NEW_METHOD.replace("prune_deps", "plan"), calls={"s": "self.plan"}
)
TRITON = "from torch._inductor.simd import SIMD\n\n\nclass Triton(SIMD):\n    pass\n"
DOWN_TRITON = "from torch._inductor.triton import Triton\n\n\n" + _class(
    "NPUTriton(Triton)", ["s", "t"], False
)
GRAPH_OLD = "def run(graph):\n    return graph.scheduler.codegen()\n"
GRAPH_NEW = (
    "def run(graph):\n    graph.scheduler.prune_deps()\n    return graph.scheduler.codegen()\n"
)
LOW_OLD = _function("make_e", "e", False) + _function("make_f", "f", False)
LOW_NEW = (  # make_h: called by make_e, which npu_make_e forks; make_g: called by nobody;
    # make_k: called by make_f, which the downstream copies twice (make_f, npu_make_f)
    _function("make_e", "e", True, calls="make_h")
    + _function("make_f", "f", True, calls="make_k")
    + "\n\ndef make_g(x):\n    return x\n"
    + "\n\ndef make_h(x):\n    return x\n"
    + "\n\ndef make_k(x):\n    return x\n"
)

DOWN_SCHED = (
    _class("NPUScheduler", ["a", "b"], False)
    + "\n"
    + _class("NPUKernel", ["c", "d"], False)
    + "\nfrom torch._inductor.sched import Kernel\n\n\n"
    + _class("NPUSubKernel(Kernel)", ["c", "d"], False)
)
DOWN_PATCH = textwrap.dedent(
    """
    import torch._inductor.sched as sched

    from torch_npu._inductor.npu_sched import NPUScheduler

    sched.Scheduler = NPUScheduler
    """
)
DOWN_LOW = (
    _function("npu_make_e", "e", False)
    + _function("npu_make_f", "f", False)
    + _function("make_f", "f", False)
)


@pytest.fixture(scope="module")
def gaps(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("forkgaps"),
        {
            "torch/_inductor/sched.py": UP_OLD,
            "torch/_inductor/graph.py": GRAPH_OLD,
            "torch/_inductor/low.py": LOW_OLD,
            "torch/cuda/graphs.py": GRAPHS_OLD,
            "torch/_inductor/simd.py": SIMD_OLD,
            "torch/_inductor/triton.py": TRITON,
        },
        {
            "torch/_inductor/sched.py": UP_NEW,
            "torch/_inductor/graph.py": GRAPH_NEW,
            "torch/_inductor/low.py": LOW_NEW,
            "torch/cuda/graphs.py": GRAPHS_NEW,
            "torch/_inductor/simd.py": SIMD_NEW,
            "torch/_inductor/triton.py": TRITON,
        },
        "scheduler: prune dependencies before codegen (#11)",
        {
            "torch_npu/_inductor/npu_sched.py": DOWN_SCHED,
            "torch_npu/_inductor/patches.py": DOWN_PATCH,
            "torch_npu/_inductor/npu_low.py": DOWN_LOW,
            "torch_npu/npu/graphs.py": DOWN_GRAPHS,
            "torch_npu/_inductor/npu_triton.py": DOWN_TRITON,
        },
    )
    return [
        c
        for u in doc["units"]
        for c in u["couplings"]
        if c["kind"] == "fork" and c["detail"].startswith("fork lacks")
    ]


def _one(gaps, member: str, owner_or_path: str):
    found = [
        c
        for c in gaps
        if c["detail"] == f"fork lacks `{member}`"
        and owner_or_path in (c["owner"] or c["downstream"])
    ]
    assert len(found) == 1, gaps
    return found[0]


def test_a_patched_in_fork_lacking_a_method_upstream_calls_is_shim(gaps):
    c = _one(gaps, "prune_deps", "NPUScheduler")
    assert (c["action"], c["rule"]) == ("Shim", "fork.lacks_called")
    ev = c["evidence"]
    assert "torch/_inductor/graph.py:2" in ev and "graph.scheduler.prune_deps" in ev
    assert "torch_npu/_inductor/patches.py" in ev and "sched.py:" in ev


def test_a_fork_lacking_a_method_that_a_method_it_copies_now_calls_is_test(gaps):
    c = _one(gaps, "new_hook", "NPUKernel")
    assert (c["action"], c["rule"]) == ("Test", "fork.lacks_added")
    assert c["owner"] == "NPUKernel.pass_c"  # at the fork's copy of the caller
    assert "upstream's `Kernel.pass_c` now calls it (torch/_inductor/sched.py:" in c["evidence"]


def test_a_method_only_uncopied_upstream_code_or_nobody_calls_is_no_gap(gaps):
    lacked = {c["detail"] for c in gaps if c["owner"].startswith("NPUKernel")}
    assert lacked == {"fork lacks `new_hook`"}  # not spare_hook (drain calls it), not drain


def test_a_subclass_is_not_a_fork_and_inherits_what_upstream_adds(gaps):
    assert not [c for c in gaps if c["owner"] == "NPUSubKernel"]


def test_a_forked_file_lacking_a_function_its_copies_now_call_is_test(gaps):
    c = _one(gaps, "make_h", "npu_make_e")
    assert (c["action"], c["rule"]) == ("Test", "fork.lacks_added")
    assert c["downstream"] == "torch_npu/_inductor/npu_low.py:2"  # the copy: a fork, renamed
    assert "forks torch/_inductor/low.py" in c["evidence"]
    assert "upstream's `make_e` now calls it" in c["evidence"]


def test_a_gap_sits_at_the_same_named_copy_before_a_renamed_one(gaps):
    c = _one(gaps, "make_k", "make_f")  # one coupling, not one per copy
    assert c["owner"] == "make_f"


def test_a_forked_file_lacking_a_function_nobody_calls_is_no_gap(gaps):
    assert not [c for c in gaps if c["detail"] == "fork lacks `make_g`"]


def test_a_copy_that_only_delegates_to_its_base_is_no_copy_of_the_caller(gaps):
    lacked = [c for c in gaps if c["detail"] == "fork lacks `capture_end_pre`"]
    # NPUGraph.capture_end is `super().capture_end()`: no gap; NPUGraphSync's is a copy
    assert [c["owner"] for c in lacked] == ["NPUGraphSync.capture_end"], gaps


def test_a_subclass_through_an_upstream_intermediate_class_is_no_fork(gaps):
    assert not [c for c in gaps if c["owner"].startswith("NPUTriton")], gaps
