"""A member named only on another class is not this class's member (issue #31, branch
``v215b``'s wrong row): torch-npu 2.14.0's ``npu_permute`` names ``ir.Reduction`` only in
``isinstance`` and calls ``ir.Pointwise.create``, so torch 2.15.0's change of
``Reduction.create`` cannot run there. A subclass that inherits the member
(``ir.WelfordReduction.create``), a receiver whose class is not written (``r.create``) or
a class the module does not define still count.
"""

from __future__ import annotations

import pytest

from instep.impact.downstream.scope import code_member_names, code_member_receivers

from .gitrepo import impact_of_commit

IR_V1 = """\
class Loops:
    @classmethod
    def create(cls, x):
        return cls()


class Pointwise(Loops):
    pass


class Reduction(Loops):
    @classmethod
    def create(cls, x):
        return cls()


class WelfordReduction(Reduction):
    pass
"""

IR_V2 = IR_V1.replace(
    "class Reduction(Loops):\n    @classmethod\n    def create(cls, x):\n        return cls()",
    "class Reduction(Loops):\n    @classmethod\n    def create(cls, x):\n"
    "        if x is None:\n            raise ValueError(x)\n        return cls()",
)

HEAD = "from torch._inductor import ir\nfrom vendor import Extern\n\n\n"
# one file each: a class use's member couples once per file
DOWN = {
    "permute": "def npu_permute(x):\n    inner = ir.Pointwise.create(x)\n"
    "    if isinstance(inner, (ir.Pointwise, ir.Reduction)):\n        return inner\n",
    "welford": "def npu_welford(x):\n    inner = ir.WelfordReduction.create(x)\n"
    "    if isinstance(inner, ir.Reduction):\n        return inner\n",
    "local": "def npu_local(x, r):\n    if isinstance(r, ir.Reduction):\n"
    "        return r.create(x)\n",
    "extern": "def npu_extern(x, r):\n    if isinstance(r, ir.Reduction):\n"
    "        return Extern.create(x)\n",
}


@pytest.fixture(scope="module")
def owners(tmp_path_factory) -> set[str]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("receivers"),
        {"torch/_inductor/ir.py": IR_V1},
        {"torch/_inductor/ir.py": IR_V2},
        "[inductor] Reduction.create checks x",
        {f"torch_npu/_inductor/{k}.py": HEAD + v for k, v in DOWN.items()},
    )
    return {
        c["owner"]
        for u in doc["units"]
        for c in u["couplings"]
        if c["upstream"].endswith("Reduction.create") and c["kind"] == "import_use"
    }


def test_a_member_named_only_on_a_sibling_class_is_not_reached(owners):
    assert "npu_permute" not in owners


@pytest.mark.parametrize("owner", ["npu_welford", "npu_local", "npu_extern"])
def test_a_subclass_an_untyped_receiver_or_another_module_s_class_still_count(owners, owner):
    assert owner in owners


def test_receivers_are_read_from_the_tokens():
    src = "def f(x, r):\n    return ir.Pointwise.create(x) or r().create # .hidden\n"
    got = code_member_receivers(src)
    assert got["create"] == frozenset({"ir.Pointwise", ""})
    assert set(got) == set(code_member_names(src))
