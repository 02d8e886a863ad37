"""FORK gaps on a real upstream commit: forked classes and files that lack what upstream
added, Shim only when upstream calls the new method and the fork stands in the class."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit


def _method(name: str, tag: str, changed: bool) -> str:
    """A method long enough for fork detection; ``changed`` edits its last line."""
    tail = f"return merged_{tag} or None" if changed else f"return merged_{tag}"
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


def _function(name: str, tag: str, changed: bool) -> str:
    return textwrap.dedent(_method(name, tag, changed)).replace("(self, ", "(")


def _class(name: str, tags: list[str], changed: bool, extra: str = "") -> str:
    body = "".join(_method(f"pass_{t}", t, changed) for t in tags)
    return f"class {name}:\n{body}{extra}\n"


NEW_METHOD = "\n    def prune_deps(self):\n        return None\n"
UP_OLD = _class("Scheduler", ["a", "b"], False) + "\n" + _class("Kernel", ["c", "d"], False)
UP_NEW = (
    _class("Scheduler", ["a", "b"], True, NEW_METHOD)
    + "\n"
    + _class("Kernel", ["c", "d"], True, NEW_METHOD.replace("prune_deps", "new_hook"))
)
GRAPH_OLD = "def run(graph):\n    return graph.scheduler.codegen()\n"
GRAPH_NEW = (
    "def run(graph):\n    graph.scheduler.prune_deps()\n    return graph.scheduler.codegen()\n"
)
LOW_OLD = _function("make_e", "e", False) + _function("make_f", "f", False)
LOW_NEW = (
    _function("make_e", "e", True)
    + _function("make_f", "f", True)
    + "\n\ndef make_g(x):\n    return x\n"
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
DOWN_LOW = _function("npu_make_e", "e", False) + _function("npu_make_f", "f", False)


@pytest.fixture(scope="module")
def gaps(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("forkgaps"),
        {
            "torch/_inductor/sched.py": UP_OLD,
            "torch/_inductor/graph.py": GRAPH_OLD,
            "torch/_inductor/low.py": LOW_OLD,
        },
        {
            "torch/_inductor/sched.py": UP_NEW,
            "torch/_inductor/graph.py": GRAPH_NEW,
            "torch/_inductor/low.py": LOW_NEW,
        },
        "scheduler: prune dependencies before codegen (#11)",
        {
            "torch_npu/_inductor/npu_sched.py": DOWN_SCHED,
            "torch_npu/_inductor/patches.py": DOWN_PATCH,
            "torch_npu/_inductor/npu_low.py": DOWN_LOW,
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


def test_a_fork_lacking_a_method_nobody_calls_outside_is_test(gaps):
    c = _one(gaps, "new_hook", "NPUKernel")
    assert (c["action"], c["rule"]) == ("Test", "fork.lacks_added")
    assert "no new-upstream call of it on another object" in c["evidence"]


def test_a_subclass_is_not_a_fork_and_inherits_what_upstream_adds(gaps):
    assert not [c for c in gaps if c["owner"] == "NPUSubKernel"]


def test_a_forked_file_lacking_a_function_upstream_added_is_test(gaps):
    c = _one(gaps, "make_g", "torch_npu/_inductor/npu_low.py")
    assert (c["action"], c["rule"]) == ("Test", "fork.lacks_added")
    assert "forks torch/_inductor/low.py" in c["evidence"]
