"""INHERITED_ATTRIBUTE: a downstream subclass reads ``self.<attr>`` that an upstream base's
``__init__`` no longer sets (a real upstream commit, a real downstream tree; the shape of
torch 2.5.0 -> 2.7.1 ``BuildOptionsBase._definations`` -> ``_definitions``)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from instep.impact.join.dropped_attributes import dropped_attributes

from .gitrepo import impact_of_commit

BUILDER_OLD = textwrap.dedent(
    """
    class BuildOptionsBase:
        def __init__(self, definitions=None, passthrough_args=None):
            self._definations = definitions or []
            self._passthough_args = passthrough_args or []
            self._cache = None
            self._flag = True
            self._kept = 1

        def finalize(self):
            self._definations = list(self._definations)


    class CppOptions(BuildOptionsBase):
        pass


    class Config:
        def __post_init__(self):
            self._resolved = True
    """
)
BUILDER_NEW = textwrap.dedent(
    """
    class BuildOptionsBase:
        _flag = True

        def __init__(self, definitions=None, passthrough_args=None):
            self._definitions = definitions or []
            self._passthrough_args = passthrough_args or []
            self._kept = 1

        def finalize(self):
            self._definitions = list(self._definitions)

        def setup(self):
            self._cache = {}


    class CppOptions(BuildOptionsBase):
        pass


    class Config:
        def __post_init__(self):
            self.resolved = True
    """
)
DOWN = textwrap.dedent(
    """
    from torch._inductor.cpp_builder import BuildOptionsBase, Config, CppOptions


    class Reads(CppOptions):
        def __init__(self):
            super().__init__()
            self._definations.append("-DX")


    class Mid(BuildOptionsBase):
        pass


    class Leaf(Mid):
        def flags(self):
            return self._passthough_args + ["-O2"]


    class SetsItself(BuildOptionsBase):
        def __init__(self):
            super().__init__()
            self._definations = []

        def flags(self):
            return self._definations


    class SetsFirst(BuildOptionsBase):
        def flags(self):
            self._definations = ["-DY"]
            return self._definations


    class Guarded(BuildOptionsBase):
        def flags(self):
            return getattr(self, "_definations", None) or []


    class Conditional(BuildOptionsBase):
        def flags(self, on):
            if on:
                return self._passthough_args
            return []


    class StillSetUpstream(BuildOptionsBase):
        def state(self):
            return self._cache, self._flag, self._kept


    class ClassDefault(BuildOptionsBase):
        _definations = ()

        def flags(self):
            return self._definations


    class SetElsewhere(BuildOptionsBase):
        def prepare(self):
            self._passthough_args = []

        def flags(self):
            return self._passthough_args


    class Resolved(Config):
        def value(self):
            return self._resolved
    """
)


@pytest.fixture(scope="module")
def reads(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("dropped"),
        {"torch/_inductor/cpp_builder.py": BUILDER_OLD},
        {"torch/_inductor/cpp_builder.py": BUILDER_NEW},
        "cpp_builder: fix the spelling of definitions",
        {"torch_npu/_inductor/cpp_builder.py": DOWN},
    )
    out = {}
    for u in doc["units"]:
        for c in u["couplings"]:
            if c["kind"] == "inherited_attribute":
                out[(c["owner"], c["detail"].split("`")[1])] = c
    return out


def test_a_renamed_attribute_read_by_a_subclass_is_shim_with_the_old_and_new_place(reads):
    c = reads[("Reads.__init__", "self._definations")]
    assert (c["action"], c["rule"]) == ("Shim", "inherited_attribute.read_breaks")
    assert c["downstream"] == "torch_npu/_inductor/cpp_builder.py:8"
    assert "(now `_definitions`)" in c["detail"]
    ev = c["evidence"]
    assert "reads `self._definations` (torch_npu/_inductor/cpp_builder.py:8)" in ev
    assert "the old `BuildOptionsBase.__init__` set it (torch/_inductor/cpp_builder.py:4)" in ev
    assert "sets `self._definitions` there instead" in ev and "AttributeError" in ev
    assert "`CppOptions`, `BuildOptionsBase`" in ev


def test_a_read_through_a_downstream_intermediate_class_is_shim(reads):
    c = reads[("Leaf.flags", "self._passthough_args")]
    assert c["action"] == "Shim" and "(now `_passthrough_args`)" in c["detail"]


def test_a_getattr_with_a_default_or_a_conditional_read_is_test(reads):
    for key in (
        ("Guarded.flags", "self._definations"),
        ("Conditional.flags", "self._passthough_args"),
    ):
        c = reads[key]
        assert (c["action"], c["rule"]) == ("Test", "inherited_attribute.read_guarded")
    assert (
        "through `getattr`/`hasattr`" in reads[("Guarded.flags", "self._definations")]["evidence"]
    )
    assert (
        "only on a conditional path"
        in reads[("Conditional.flags", "self._passthough_args")]["evidence"]
    )


def test_downstream_setters_and_upstream_setters_elsewhere_give_nothing(reads):
    owners = {owner.split(".")[0] for owner, _ in reads}
    # the downstream __init__ or the reading method sets it; another upstream method or a
    # class attribute gives it; an attribute the new __init__ still sets
    assert not owners & {"SetsItself", "SetsFirst", "StillSetUpstream", "ClassDefault"}
    assert owners == {"Reads", "Leaf", "Guarded", "Conditional", "SetElsewhere", "Resolved"}


def test_another_downstream_method_that_may_set_it_first_makes_it_test(reads):
    c = reads[("SetElsewhere.flags", "self._passthough_args")]
    assert (c["action"], c["rule"]) == ("Test", "inherited_attribute.read_guarded")
    assert "`SetElsewhere.prepare` (torch_npu/_inductor/cpp_builder.py:" in c["evidence"]


def test_an_attribute_post_init_stops_setting_is_coupled_too(reads):
    c = reads[("Resolved.value", "self._resolved")]
    assert c["action"] == "Shim" and "(now `resolved`)" in c["detail"]
    assert "the old `Config.__post_init__` set it" in c["evidence"]


def _def(src: str) -> ast.AST:
    return ast.parse(textwrap.dedent(src)).body[0]


def test_renames_are_paired_by_place_and_a_plain_drop_names_no_successor():
    old = _def(
        """
        def __init__(self):
            self.a = 1
            self._definations = []
            self._cache = None
            self._flags = 0
            self.d = 4
        """
    )
    new = _def(
        """
        def __init__(self):
            self.a = 1
            self._definitions = []
            self._options = 0
            self.d = 4
            self.e = 5
        """
    )
    # in one block: the name spelled alike succeeds, the others are plain drops
    assert dropped_attributes(old, new) == {
        "_definations": (4, "_definitions"),
        "_cache": (5, None),
        "_flags": (6, None),
    }
    one_for_one = _def(
        """
        def __init__(self):
            self.a = 1
            self._definations = []
            self._cache = None
            self._options = 0
            self.d = 4
        """
    )
    # one assignment in place of one: a rename whatever the spelling
    assert dropped_attributes(old, one_for_one) == {"_flags": (6, "_options")}
    assert dropped_attributes(old, old) == {}
