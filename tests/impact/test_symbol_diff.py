"""The symbol diff on small upstream file pairs (every change kind) and on real torch files."""

from __future__ import annotations

import pytest

from instep.impact.model import ChangeKind, Stage
from instep.impact.upstream.symbol_diff import diff_files, diff_many, diff_sources
from instep.pyindex.model import SymbolKind
from instep.pyindex.symbols import index_source

OLD = b'''"""Module docstring."""
import torch

aten = torch.ops.aten
unique_kernel_names = False
FALLBACK_LIST = [aten.uniform, aten.randint]


@register_lowering(aten.expand, type_promotion_kind=None)
def expand(x, sizes):
    return ExpandView.create(x, tuple(sizes))


@register_lowering(aten.permute)
def permute(x, dims):
    return PermuteView.create(x, dims)


def pad(x, value=0):
    return Pad(x, value)


def squeeze(x, dim=None):
    """Squeeze."""
    if dim is None:
        return x
    return View.create(x, dim)


def _old_helper(a, b):
    total = a + b
    total = total * 2
    return total


def going_away():
    return 1


def formatted(a, b):
    return call(a,
                b)  # comment


class Kernel(Base):
    def load(self, name, index):
        return self.cse.generate(name, index)

    def store(self, name):
        return None


class Renamed(Base):
    def one(self):
        return 1

    def two(self):
        return 2


make_fallback(aten.cumsum)
'''

NEW = b'''"""Module docstring, reworded."""
import torch

aten = torch.ops.aten
unique_kernel_names = True
FALLBACK_LIST = [aten.uniform, aten.randint, aten.normal]


@register_lowering(aten.expand, type_promotion_kind=None)
def expand(x, sizes, *, implicit=False):
    return ExpandView.create(x, tuple(sizes), implicit)


@register_lowering([aten.permute, aten.permute_copy])
def permute(x, dims):
    return PermuteView.create(x, dims)


def pad(x, value=1):
    return Pad(x, value)


def squeeze(x, dim=None):
    """Squeeze a tensor (docstring only changed)."""
    if dim is None:
        return x
    return View.create(x, dim)


def _new_helper(a, b):
    total = a + b
    total = total * 2
    return total


def formatted(a, b):
    # a new comment
    return call(a, b)


def brand_new():
    return 2


class Kernel(Base, Mixin):
    def load(self, name, index, mode=None):
        return self.cse.generate(name, index, mode)

    def store(self, name):
        return name


class NewName(Base):
    def one(self):
        return 1

    def two(self):
        return 2


make_fallback(aten.cumsum)
'''

PATH = "torch/_inductor/lowering.py"


@pytest.fixture(scope="module")
def changes():
    out = diff_files(PATH, index_source(PATH, OLD), index_source(PATH, NEW), Stage.INDUCTOR)
    return {c.qualname: c for c in out}


def test_signature_change_with_body(changes):
    c = changes["expand"]
    assert c.kind is ChangeKind.SIGNATURE and c.also == (ChangeKind.BODY,)
    assert "(x, sizes) -> (x, sizes, *, implicit=False)" in c.detail
    assert c.stage is Stage.INDUCTOR and c.symbol_kind is SymbolKind.FUNCTION
    assert c.old.line == 10 and c.new.line == 10
    assert c.ref == "torch/_inductor/lowering.py::expand"


def test_default_value_only_is_value(changes):
    c = changes["pad"]
    assert c.kind is ChangeKind.VALUE and c.also == ()
    assert "(x, value=0) -> (x, value=1)" in c.detail


def test_decorator_registration_change(changes):
    c = changes["permute"]
    assert c.kind is ChangeKind.DECORATOR and c.also == ()
    assert "+register_lowering(aten.permute_copy)" in c.detail
    assert c.registration_keys == {"aten.permute", "aten.permute_copy"}


def test_config_value_and_registry_list(changes):
    c = changes["unique_kernel_names"]
    assert c.kind is ChangeKind.VALUE and "False -> True" in c.detail
    reg = changes["FALLBACK_LIST"]
    assert reg.kind is ChangeKind.DECORATOR and reg.also == (ChangeKind.VALUE,)
    assert "+table:FALLBACK_LIST(aten.normal)" in reg.detail


def test_docstring_comment_and_formatting_changes_are_not_changes(changes):
    assert "squeeze" not in changes
    assert "formatted" not in changes
    assert "make_fallback(aten.cumsum)" not in changes
    assert "Renamed.one" not in changes and "NewName.one" in changes


def test_added_removed_renamed(changes):
    assert changes["brand_new"].kind is ChangeKind.ADDED
    assert changes["going_away"].kind is ChangeKind.REMOVED
    gone = changes["going_away"]
    assert gone.new is None
    assert gone.old.line == OLD.decode().splitlines().index("def going_away():") + 1
    r = changes["_new_helper"]
    assert r.kind is ChangeKind.RENAMED and r.renamed_from == "_old_helper"
    assert "_old_helper" not in changes
    cls = changes["NewName"]
    assert cls.kind is ChangeKind.RENAMED and cls.renamed_from == "Renamed"
    assert changes["NewName.two"].renamed_from == "Renamed.two"


def test_class_members_and_bases(changes):
    k = changes["Kernel"]
    assert k.kind is ChangeKind.SIGNATURE and "bases: (Base) -> (Base, Mixin)" in k.detail
    load = changes["Kernel.load"]
    assert load.kind is ChangeKind.SIGNATURE and load.symbol_kind is SymbolKind.METHOD
    assert changes["Kernel.store"].kind is ChangeKind.BODY
    record = load.record()
    assert record.symbol == "torch/_inductor/lowering.py::Kernel.load"
    assert record.change is ChangeKind.SIGNATURE and record.also == (ChangeKind.BODY,)


def test_a_class_does_not_change_for_its_members():
    old = b"class A:\n    def m(self):\n        return 1\n"
    new = b"class A:\n    def m(self):\n        return 2\n"
    out = diff_files("a.py", index_source("a.py", old), index_source("a.py", new), Stage.OTHER)
    assert [(c.qualname, c.kind) for c in out] == [("A.m", ChangeKind.BODY)]


def test_added_and_removed_files():
    idx = index_source("a.py", b"def f():\n    return 1\n")
    assert [c.kind for c in diff_files("a.py", None, idx, Stage.OTHER)] == [ChangeKind.ADDED]
    assert [c.kind for c in diff_files("a.py", idx, None, Stage.OTHER)] == [ChangeKind.REMOVED]


def test_unreadable_side_gives_no_changes():
    good = index_source("a.py", b"def f():\n    return 1\n")
    bad = index_source("a.py", b'print "x"\n')
    assert diff_files("a.py", good, bad, Stage.OTHER) == []
    assert diff_files("a.py", bad, good, Stage.OTHER) == []


def test_moved_across_files_is_renamed():
    body = (
        b"def build(graph, nodes):\n"
        b"    out = []\n"
        b"    for n in nodes:\n"
        b"        out.append(n)\n"
        b"    return out\n"
    )
    a_old = index_source("torch/fx/a.py", body + b"X = 1\n")
    a_new = index_source("torch/fx/a.py", b"from torch.fx.b import build\nX = 1\n")
    b_new = index_source("torch/fx/b.py", body)
    out = diff_many(
        [("torch/fx/a.py", a_old, a_new), ("torch/fx/b.py", None, b_new)],
        lambda p: Stage.FX,
    )
    assert len(out) == 1
    c = out[0]
    assert c.kind is ChangeKind.RENAMED and c.path == "torch/fx/b.py"
    assert c.renamed_from == "torch/fx/a.py::build"
    assert "moved from torch/fx/a.py::build" in c.detail
    assert "still importable from torch.fx.a" in c.detail


def test_trivial_bodies_are_not_matched_as_renames():
    old = index_source("a.py", b"def f():\n    pass\n")
    new = index_source("a.py", b"def g():\n    pass\n")
    kinds = {c.qualname: c.kind for c in diff_files("a.py", old, new, Stage.OTHER)}
    assert kinds == {"f": ChangeKind.REMOVED, "g": ChangeKind.ADDED}


def test_diff_sources_equals_full_diff():
    fast = diff_sources(PATH, OLD, NEW, Stage.INDUCTOR)
    full = diff_files(PATH, index_source(PATH, OLD), index_source(PATH, NEW), Stage.INDUCTOR)
    assert fast.changes == full and fast.old_reused
    assert fast.new.symbols == index_source(PATH, NEW).symbols
    added = diff_sources(PATH, None, NEW, Stage.INDUCTOR)
    assert added.old is None and all(c.kind is ChangeKind.ADDED for c in added.changes)
    broken = diff_sources(PATH, OLD, b"\xff\xfe\x00", Stage.INDUCTOR)
    assert broken.new.error and broken.changes == []


@pytest.mark.realworld
def test_real_lowering_expand_gained_implicit(torch_wheels):
    old_wheel, new_wheel = torch_wheels
    rel = "torch/_inductor/lowering.py"
    old, new = old_wheel.read(rel), new_wheel.read(rel)
    result = diff_sources(rel, old, new, Stage.INDUCTOR)
    by_name = {c.qualname: c for c in result.changes}
    expand = by_name["expand"]
    assert expand.kind is ChangeKind.SIGNATURE and "implicit" in expand.detail
    assert ChangeKind.BODY in expand.also
    assert "aten.expand" in expand.registration_keys
    assert by_name["with_effects"].kind is ChangeKind.BODY  # seed 001 row 71
    full = diff_files(rel, index_source(rel, old), index_source(rel, new), Stage.INDUCTOR)
    assert result.changes == full


@pytest.mark.realworld
def test_real_golden_symbols_are_reported(torch_wheels):
    old_wheel, new_wheel = torch_wheels
    expected = {
        "torch/_subclasses/fake_tensor.py": {"SymNumberMemoDescriptor.__set__": "body"},
        "torch/fx/experimental/proxy_tensor.py": {
            "_sympy_handlers": "body",
            "make_fx": "signature",
        },
        "torch/_dynamo/variables/lists.py": {"BaseListVariable.sq_contains": "removed"},
    }
    for rel, want in expected.items():
        result = diff_sources(rel, old_wheel.read(rel), new_wheel.read(rel), Stage.OTHER)
        got = {c.qualname: c for c in result.changes}
        for qual, kind in want.items():
            assert qual in got, (rel, qual)
            assert kind in {str(k) for k in got[qual].aspects}, (rel, qual, got[qual])
    # seed 001 row 7 also names _build_proxy_for_sym_expr, whose only 2.14 edit is a
    # docstring typo: docstrings are not changes
    rel = "torch/fx/experimental/proxy_tensor.py"
    result = diff_sources(rel, old_wheel.read(rel), new_wheel.read(rel), Stage.OTHER)
    assert "_build_proxy_for_sym_expr" not in {c.qualname for c in result.changes}
    # seed 001 row 23 names IterationRangesEntry.precomputed_args, whose only 2.14 edit is
    # `assert isinstance(...), type(...)` rewritten as `if not ...: raise AssertionError(...)`
    # with the same message: a neutral rewrite (pyindex/neutral.py), no change
    rel = "torch/_inductor/codegen/simd.py"
    result = diff_sources(rel, old_wheel.read(rel), new_wheel.read(rel), Stage.OTHER)
    assert "IterationRangesEntry.precomputed_args" not in {c.qualname for c in result.changes}


def test_annotations_defaults_and_parameters_are_told_apart():
    old = b"".join(b"def %s(x, y=1):\n    return x\n\n\n" % name for name in (b"f", b"g", b"h"))
    new = (
        b"def f(x: int, y: int = 1):\n    return x\n\n\n"  # annotations only
        b"def g(x: int, y=2):\n    return x\n\n\n"  # a default (and an annotation)
        b"def h(x, y=1, z=None):\n    return x\n"  # a parameter
    )
    path = "torch/_inductor/utils.py"
    got = {c.qualname: c for c in diff_sources(path, old, new, Stage.INDUCTOR).changes}
    assert got["f"].kind is ChangeKind.ANNOTATION and got["f"].also == ()
    assert "annotations: (x, y=1) -> (x: int, y: int=1)" in got["f"].detail
    assert got["g"].kind is ChangeKind.VALUE
    assert got["h"].kind is ChangeKind.SIGNATURE


def test_a_return_annotation_is_an_annotation_not_a_body_change():
    old = b"def f(x):\n    return x\n\n\ndef g(x) -> int:\n    return x\n"
    new = b"def f(x) -> Tensor:\n    return x\n\n\ndef g(x) -> int:\n    return x + 1\n"
    path = "torch/_inductor/utils.py"
    got = {c.qualname: c for c in diff_sources(path, old, new, Stage.INDUCTOR).changes}
    assert got["f"].kind is ChangeKind.ANNOTATION and got["f"].also == ()
    assert "returns: - -> Tensor" in got["f"].detail
    assert got["g"].kind is ChangeKind.BODY and got["g"].also == ()


# --- renames that keep the old name; the stage of registered defs --------------------------


def _diff(old: dict[str, str], new: dict[str, str]) -> dict[str, object]:
    from instep.impact.upstream.stages import StageMap

    paths = sorted(set(old) | set(new))
    pairs = [
        (
            p,
            index_source(p, old[p].encode()) if p in old else None,
            index_source(p, new[p].encode()) if p in new else None,
        )
        for p in paths
    ]
    return {c.ref: c for c in diff_many(pairs, StageMap())}


OPAQUE_OLD = {
    "torch/_library/opaque_object.py": '''\
def is_opaque_value_type(cls):
    """Checks if the given type is an opaque value type."""
    if not is_opaque_type(cls):
        return False
    return _info(cls) == "value"


def is_opaque_type(cls):
    return cls in _TYPES


def legacy(cls):
    return cls


def is_custom_class(cls):
    return cls in _TYPES
''',
    "torch/_opaque_base.py": "class OpaqueBase:\n    def __init__(self):\n        self.x = 1\n",
}
OPAQUE_NEW = {
    "torch/_library/opaque_object.py": """\
import logging
import warnings

log = logging.getLogger(__name__)


def is_opaque_constant_type(cls):
    if not is_custom_class(cls):
        return False
    return _info(cls) == "constant"


def is_opaque_value_type(cls):
    log.warning("is_opaque_value_type is deprecated, use is_opaque_constant_type instead")
    return is_opaque_constant_type(cls)


def is_opaque_type(cls):
    warnings.warn(
        f"{cls}: is_opaque_type will be removed in 2.16", FutureWarning, stacklevel=2
    )
    return is_custom_class(cls)


def is_custom_class(cls):
    return cls in _TYPES


def legacy(cls):
    warnings.warn("legacy is deprecated", DeprecationWarning)
    return cls.real
""",
    "torch/_opaque_base.py": (
        "from torch._custom_class_base import CustomClassBase as OpaqueBase  # noqa: F401\n"
    ),
    "torch/_custom_class_base.py": (
        "class CustomClassBase:\n    kind = 'custom'\n\n    def __init__(self):\n"
        "        self.y = 2\n\n\n"
        "OpaqueBase = CustomClassBase\nFreshAlias = CustomClassBase\n"
    ),
}


def test_a_rename_that_keeps_the_old_name_with_a_warning_is_named_so():
    got = _diff(OPAQUE_OLD, OPAQUE_NEW)
    lib = "torch/_library/opaque_object.py"
    new = got[f"{lib}::is_opaque_constant_type"]
    assert new.kind is ChangeKind.RENAMED and new.renamed_from == f"{lib}::is_opaque_value_type"
    assert new.deprecation == (
        f"renamed from `{lib}::is_opaque_value_type`, old name kept with a warning"
    )
    old = got[f"{lib}::is_opaque_value_type"]
    assert old.kind is ChangeKind.BODY
    assert old.deprecation == "renamed to `is_opaque_constant_type`, old name kept with a warning"
    # the warning says until when (a FutureWarning, the message an f-string); the def it
    # calls existed before: a deprecation, not a rename
    kept = got[f"{lib}::is_opaque_type"]
    assert kept.deprecation == (
        "deprecated: use `is_custom_class`, old name kept with a warning (until 2.16)"
    )
    assert f"{lib}::is_custom_class" not in got  # unchanged


def test_a_rename_that_keeps_the_old_name_as_an_alias_is_named_so():
    got = _diff(OPAQUE_OLD, OPAQUE_NEW)
    new = got["torch/_custom_class_base.py::CustomClassBase"]
    assert new.kind is ChangeKind.RENAMED
    assert new.renamed_from == "torch/_opaque_base.py::OpaqueBase"
    kept = "old name kept as an alias (`OpaqueBase = CustomClassBase`)"
    assert new.deprecation == f"renamed from `torch/_opaque_base.py::OpaqueBase`, {kept}"
    assert got["torch/_opaque_base.py::OpaqueBase"].deprecation == (
        f"renamed to `torch/_custom_class_base.py::CustomClassBase`, {kept}"
    )
    assert got["torch/_custom_class_base.py::OpaqueBase"].deprecation == (
        "the old name of `CustomClassBase`, kept as an alias"
    )


def test_what_only_looks_like_a_kept_rename_is_not_one():
    got = _diff(OPAQUE_OLD, OPAQUE_NEW)
    # warns, but does its own work (returns an attribute, calls no other def)
    assert got["torch/_library/opaque_object.py::legacy"].deprecation == ""
    # an alias of a name that never was a def: a new name
    assert got["torch/_custom_class_base.py::FreshAlias"].deprecation == ""
    # a wrapper already deprecated before the change says nothing new
    old = {"a.py": OPAQUE_NEW["torch/_library/opaque_object.py"]}
    new = {"a.py": old["a.py"].replace("instead", "instead (soon)")}
    assert all(c.deprecation == "" for c in _diff(old, new).values())
    # a body that calls another def without announcing a deprecation
    plain_old = {"a.py": "def f(x):\n    return x\n"}
    plain_new = {"a.py": "def g(x):\n    return x + 1\n\n\ndef f(x):\n    return g(x)\n"}
    got = _diff(plain_old, plain_new)
    assert got["a.py::g"].kind is ChangeKind.ADDED and got["a.py::f"].deprecation == ""


def test_a_registered_def_takes_the_stage_of_its_registry():
    """The stage is where the change takes effect on the downstream path: a def's
    registry, whatever its file's directory (data/stages.toml, [roles])."""
    old = {
        "torch/_subclasses/fake_impls.py": (
            "@register_op_impl(aten.nonzero)\ndef nonzero(fake_mode, func, x):\n    return x\n\n\n"
            "def _helper(x):\n    return x\n"
        ),
        "torch/_inductor/lowering.py": (
            "@register_decomposition([aten.addmm])\ndef addmm(a, b, c):\n    return a\n\n\n"
            "@register_lowering(aten.abs)\ndef abs_(x):\n    return x\n"
        ),
    }
    new = {
        p: t.replace("return x\n", "return x + 1\n").replace("return a\n", "return b\n")
        for p, t in old.items()
    }
    # a def added beside a registered one keeps its path's stage (the join makes the
    # added and removed defs again, after the file's other changes)
    old["torch/_inductor/meta_x.py"] = "@register_meta(aten.mm)\ndef mm(a, b):\n    return a\n"
    new["torch/_inductor/meta_x.py"] = (
        "def _added(x):\n    return x\n\n\n@register_meta(aten.mm)\ndef mm(a, b):\n    return b\n"
    )
    got = _diff(old, new)
    assert got["torch/_subclasses/fake_impls.py::nonzero"].stage is Stage.AOT
    assert got["torch/_inductor/meta_x.py::mm"].stage is Stage.AOT
    assert got["torch/_inductor/meta_x.py::_added"].stage is Stage.INDUCTOR
    assert got["torch/_subclasses/fake_impls.py::_helper"].stage is Stage.INDUCTOR  # path
    assert got["torch/_inductor/lowering.py::addmm"].stage is Stage.DECOMPOSITION
    assert got["torch/_inductor/lowering.py::abs_"].stage is Stage.INDUCTOR


@pytest.mark.realworld
def test_real_renames_that_keep_the_old_name(torch_wheels):
    """torch 2.13.0 -> 2.14.1: OpaqueBase became CustomClassBase (kept as an alias),
    is_opaque_value_type became is_opaque_constant_type (kept with a warning)."""
    from instep.impact.upstream.stages import StageMap

    old_wheel, new_wheel = torch_wheels
    paths = [
        "torch/_opaque_base.py",
        "torch/_custom_class_base.py",
        "torch/_library/opaque_object.py",
    ]
    pairs = [
        (
            p,
            index_source(p, old_wheel.read(p)) if p in old_wheel.names else None,
            index_source(p, new_wheel.read(p)) if p in new_wheel.names else None,
        )
        for p in paths
    ]
    got = {c.ref: c for c in diff_many(pairs, StageMap())}
    base = got["torch/_custom_class_base.py::CustomClassBase"]
    assert base.kind is ChangeKind.RENAMED
    assert base.renamed_from == "torch/_opaque_base.py::OpaqueBase"
    assert "old name kept as an alias (`OpaqueBase = CustomClassBase`)" in base.deprecation
    const = got["torch/_library/opaque_object.py::is_opaque_constant_type"]
    assert const.kind is ChangeKind.RENAMED and "kept with a warning" in const.deprecation
