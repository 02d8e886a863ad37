"""Typing-only upstream changes and type-position uses are no Test (issue #31, noise).

* A class that gains typing bases (``Generic[T]``, a file's typing stubs: torch 2.14's
  ``SymInt(_SymTypingMagic[builtins.int, "SymInt", ...])``) changes nothing a caller sees:
  ANNOTATION, ``annotation.only`` (Check). A new base with real members stays SIGNATURE.
* A place that names a class only where nothing runs it (an annotation, ``isinstance``,
  ``except``) couples only to its removal: the class's members and call paths are not its
  business (``use.type_position`` for a change of the class itself). The same place with
  a call of the class, or a member reached one attribute step behind the annotated
  parameter, stays a use.

Tuning rows: torch-npu 2.13.0 on torch 2.13.0 -> 2.14.1 (``isinstance(s, torch.SymInt)``,
``_compat/inductor.py:39``), and the issue's ``gm: torch.fx.GraphModule`` annotation.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

SYM_V1 = """\
class SymInt:
    def __init__(self, node):
        self.node = node

    def __int__(self):
        return self.node.int_()


class Plain:
    def __init__(self, node):
        self.node = node
"""

SYM_V2 = """\
import typing
from typing import Generic, TypeVar

_T = TypeVar("_T")
_TypeAlias = typing.TypeAlias


class _TypingMagicAlsoBool(Generic[_T]):
    __LikeType: _TypeAlias = int

    @typing.overload
    def __eq__(self, other: int) -> bool: ...

    def __eq__(self, other: object) -> bool:
        raise TypeError("type stub not overridden")


class _TypingMagic(_TypingMagicAlsoBool[_T], Generic[_T]):
    def __ge__(self, other: object) -> bool:
        raise TypeError("type stub not overridden")


class _RealBase:
    def __ge__(self, other):
        return self.node >= other


class SymInt(_TypingMagic[int]):
    def __init__(self, node: "object") -> None:
        self.node = typing.cast("SymNode", node)

    def __int__(self):
        return self.node.int_()


class Plain(_RealBase):
    def __init__(self, node):
        self.node = node
"""

GM_V1 = """\
class Module:
    def register_buffer(self, name, value):
        setattr(self, name, value)


class GraphModule(Module):
    def __init__(self, root):
        self.register_buffer("root", root)

    def recompile(self):
        return None
"""

GM_V2 = GM_V1.replace("setattr(self, name, value)", "self._buffers[name] = value").replace(
    "return None", "return self"
)

DOWN = """\
import torch
from torch.fx.graph_module import GraphModule


def hint(s):
    return s.node.expr if isinstance(s, torch.SymInt) else s


def plain_hint(s):
    return s if isinstance(s, torch.Plain) else None


def make_sym(node):
    return torch.SymInt(node)


def make_plain(node):
    return torch.Plain(node)


def annotated(x: torch.SymInt | None) -> None:
    return None


def passes(gm: GraphModule, example_inputs):
    return example_inputs


def rebuilds(gm: GraphModule):
    gm.recompile()
    return GraphModule(gm)
"""


ANNOTATED_ONLY = """\
from torch.fx.graph_module import GraphModule


def passes(gm: GraphModule, example_inputs):
    return example_inputs
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("typing"),
        {
            "torch/__init__.py": SYM_V1,
            "torch/fx/__init__.py": "",
            "torch/fx/graph_module.py": GM_V1,
        },
        {"torch/__init__.py": SYM_V2, "torch/fx/graph_module.py": GM_V2},
        "typing stubs for SymInt; buffers (#9)",
        {"torch_npu/passes.py": DOWN, "torch_npu/annotated.py": ANNOTATED_ONLY},
    )
    out: dict[tuple[str, str], list[dict]] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            owner = c["owner"] or c["downstream"].split(":")[0]
            out.setdefault((c["upstream"].split("::")[1], owner), []).append(c)
    assert out, "the commit couples to nothing: the fixture is wrong"
    return out


def test_typing_bases_are_an_annotation_change(rows):
    (c,) = rows[("SymInt", "make_sym")]
    assert (c["rule"], c["action"]) == ("annotation.only", "Check")
    assert "bases (typing only)" in c["detail"] or c["detail"]


def test_a_real_new_base_stays_a_signature_change(rows):
    (c,) = rows[("Plain", "make_plain")]
    assert c["action"] == "Test"


def test_a_type_position_is_no_use(rows):
    (c,) = rows[("Plain", "plain_hint")]  # a real base: a signature change, but isinstance
    assert (c["rule"], c["action"]) == ("use.type_position", "Check")
    (c,) = rows[("SymInt", "hint")]  # typing bases: Check either way
    assert c["action"] == "Check"


def test_cast_and_annotations_leave_the_body_unchanged(rows):
    assert ("SymInt.__init__", "hint") not in rows  # annotation-only, and type-only place


def test_an_annotation_reaches_no_member(rows):
    assert not [k for k in rows if k[1] in ("passes", "torch_npu/annotated.py")]


def test_a_call_of_the_annotated_class_is_a_use(rows):
    # rebuilds() calls GraphModule: the import line answers for the member it never names
    (c,) = rows[("GraphModule.recompile", "torch_npu/passes.py")]
    assert (c["rule"], c["action"]) == ("use.behaviour", "Test")


FN_V1 = """\
class Function:
    @classmethod
    def apply(cls, *args):
        return cls.forward(*args)
"""

FN_V2 = FN_V1.replace("return cls.forward(*args)", "return cls.forward(*args, **{})")

# ``apply`` is named in this file (``runs``), so a place that answers for the whole file
# would take the annotations below for uses of ``Function.apply``
FN_DOWN = """\
from typing import Optional

import torch


def factory(
    name: str,
    base: Optional[torch.autograd.Function] = None,
    other: "torch.autograd.Function | None" = None,
) -> type[torch.autograd.Function]:
    return base


class Holder:
    def make(
        self,
        fn: torch.autograd.Function | None,
    ) -> type[torch.autograd.Function]:
        return fn


def runs(x):
    return torch.autograd.Function.apply(x)


def names_it(
    fn: type[torch.autograd.Function],
):
    return fn.apply(1)
"""


@pytest.fixture(scope="module")
def fn_rows(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("annotations"),
        {
            "torch/__init__.py": "",
            "torch/autograd/__init__.py": "from torch.autograd.function import Function\n",
            "torch/autograd/function.py": FN_V1,
        },
        {"torch/autograd/function.py": FN_V2},
        "[autograd] apply passes kwargs (#10)",
        {"torch_npu/factories.py": FN_DOWN},
    )
    return {
        (c["owner"], c["downstream"]): c["action"]
        for unit in doc["units"]
        for c in unit["couplings"]
        if c["upstream"].endswith("::Function.apply")
    }


def test_a_def_s_annotations_on_any_line_are_no_use(fn_rows):
    # parameters and returns, on the def line or a continuation line, subscripted,
    # Optional, `X | None`, strings: the def's own place, which never names `apply`
    assert not [k for k in fn_rows if k[0] in (None, "factory", "Holder", "Holder.make")]


def test_a_def_that_names_the_member_stays_a_use(fn_rows):
    assert fn_rows[("runs", "torch_npu/factories.py:23")] == "Test"
    assert fn_rows[("names_it", "torch_npu/factories.py:27")] == "Test"  # `fn: type[...]`
