"""A construction ``C(...)`` reaches what constructing runs, not C's classmethods (#31, noise).

``ir.ConcatKernel(name=None, layout=..., inputs=[])`` runs ``__new__``, ``__init__`` and,
for a dataclass, ``__post_init__``; it never calls ``ConcatKernel.create``, a classmethod
only the class object reaches. A place that only constructs the class (no passing it on,
no attribute read of it) couples to none of its classmethods or staticmethods, even when
its file names them (``_patch_concatkernel_create`` replaces ``create`` and names it).
Its instance methods and ``__post_init__`` stay: the instance it built may run them.
Tuning rows: torch-npu 2.13.0 on torch 2.13.0 -> 2.14.1, ``codegen/ir_fx.py:579``
(``ConcatKernel(...)`` -> ``ConcatKernel.create``) and ``:505`` (``SliceView(...)`` ->
``SliceView.create``).
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_one_commit

IR_V1 = """\
from dataclasses import dataclass


@dataclass
class Kernel:
    name: str

    def __post_init__(self):
        self.origins = set()

    @classmethod
    def create(cls, inputs):
        return cls(str(inputs))

    @staticmethod
    def realize_into(src, dst):
        return dst

    def run(self):
        return self.name
"""

IR_V2 = (
    IR_V1.replace("self.origins = set()", "self.origins = {self.name}")
    .replace("return cls(str(inputs))", "return cls(repr(inputs))")
    .replace("return dst", "return src")
    .replace("return self.name", "return self.name.upper()")
)

DOWN = """\
from torch._inductor import ir


def builds(inputs):
    kernel = ir.Kernel(name=None)
    return kernel.run(), ir.Other.create(inputs), ir.Other.realize_into(inputs, kernel)


def calls_create(inputs):
    return ir.Kernel.create(inputs)
"""

# its own file: a class member reached through a use is one place per file
HANDS_ON = """\
from torch._inductor import ir


def hands_on(inputs):
    factory = ir.Kernel
    return factory(name=None).run(), getattr(factory, "create")
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> dict[tuple[str, str], str]:
    doc = impact_of_one_commit(
        tmp_path_factory.mktemp("constructions"),
        "torch/_inductor/ir.py",
        IR_V1,
        IR_V2,
        "[inductor] kernels (#11)",
        {"torch_npu/kernels.py": DOWN, "torch_npu/factories.py": HANDS_ON},
    )
    out = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            out[(c["upstream"].split("::")[1], c["owner"])] = c["action"]
    assert out, "the commit couples to nothing: the fixture is wrong"
    return out


@pytest.mark.parametrize("member", ["create", "realize_into"])
def test_a_construction_reaches_no_classmethod(rows, member):
    assert (f"Kernel.{member}", "builds") not in rows


@pytest.mark.parametrize("member", ["__post_init__", "run"])
def test_a_construction_keeps_what_the_instance_runs(rows, member):
    assert rows[(f"Kernel.{member}", "builds")] == "Test"


def test_a_class_handed_on_or_read_still_reaches_its_classmethods(rows):
    assert rows[("Kernel.create", "hands_on")] == "Test"  # its callers are elsewhere
    assert rows[("Kernel.create", "calls_create")] == "Test"
