"""compare_schemas: two versions of one ATen schema, argument by argument (real schemas of
native_functions.yaml, and the changes torch made between releases)."""

from __future__ import annotations

import pytest

from instep.impact.upstream.op_schemas import parse_schema
from instep.impact.upstream.schema_comparison import SchemaDifferenceKind as K
from instep.impact.upstream.schema_comparison import compare_schemas


def _diff(old: str, new: str) -> list[tuple[str, str]]:
    return [
        (str(d.kind), d.argument) for d in compare_schemas(parse_schema(old), parse_schema(new))
    ]


CDIST_214 = "_cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, Tensor cdist) -> Tensor"


def test_the_torch_214_rename_of_cdist_backward():
    new = CDIST_214.replace("Tensor grad,", "Tensor grad_output,")
    diffs = compare_schemas(parse_schema(CDIST_214), parse_schema(new))
    assert [(d.kind, d.argument, d.new) for d in diffs] == [
        (K.ARGUMENT_RENAMED, "grad", "grad_output")
    ]
    assert diffs[0].text() == "argument 'grad' renamed to 'grad_output'"


def test_same_schema_up_to_spacing_has_no_difference():
    a = (
        "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *,"
        " ScalarType? dtype=None) -> Tensor"
    )
    b = a.replace(", ", " ,  ").replace("-> Tensor", "->  Tensor")
    assert _diff(a, b) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # added without / with a default
        (
            "f(Tensor self) -> Tensor",
            "f(Tensor self, int dim) -> Tensor",
            [("argument_added", "dim")],
        ),
        (
            "f(Tensor self) -> Tensor",
            "f(Tensor self, bool keepdim=False) -> Tensor",
            [("argument_added_with_default", "keepdim")],
        ),
        # removed: nothing of its type arrives in its place
        (
            "f(Tensor self, int dim) -> Tensor",
            "f(Tensor self) -> Tensor",
            [("argument_removed", "dim")],
        ),
        # a removal and an addition of another type are not a rename
        (
            "f(Tensor self, int dim) -> Tensor",
            "f(Tensor self, float scale) -> Tensor",
            [("argument_removed", "dim"), ("argument_added", "scale")],
        ),
        # C++ type changes
        (
            "f(Tensor self, int dim) -> Tensor",
            "f(Tensor self, int? dim) -> Tensor",
            [("type_changed", "dim")],
        ),
        ("f(Tensor self) -> Tensor", "f(Tensor[] self) -> Tensor", [("type_changed", "self")]),
        # annotations the kernel's parameter type does not see, or sees as symbolic
        (
            "f(Tensor self, int[2] s) -> Tensor",
            "f(Tensor self, int[] s) -> Tensor",
            [("type_size", "s")],
        ),
        (
            "f(Tensor self, int[] s) -> Tensor",
            "f(Tensor self, SymInt[] s) -> Tensor",
            [("type_symint", "s")],
        ),
        (
            "f(Tensor self, int[2] s) -> Tensor",
            "f(Tensor self, SymInt[] s) -> Tensor",
            [("type_symint", "s"), ("type_size", "s")],
        ),
        # alias annotations: mutability is part of the C++ type, the alias set is not
        (
            "f(Tensor self) -> Tensor",
            "f(Tensor(a!) self) -> Tensor",
            [("mutability_changed", "self")],
        ),
        ("f(Tensor(a) self) -> Tensor", "f(Tensor(b) self) -> Tensor", [("alias_changed", "self")]),
        # defaults
        (
            "f(Tensor self, int dim) -> Tensor",
            "f(Tensor self, int dim=0) -> Tensor",
            [("default_added", "dim")],
        ),
        (
            "f(Tensor self, int dim=0) -> Tensor",
            "f(Tensor self, int dim) -> Tensor",
            [("default_removed", "dim")],
        ),
        (
            "f(Tensor self, int dim=0) -> Tensor",
            "f(Tensor self, int dim=1) -> Tensor",
            [("default_changed", "dim")],
        ),
        # the keyword-only marker
        (
            "f(Tensor self, bool keepdim=False) -> Tensor",
            "f(Tensor self, *, bool keepdim=False) -> Tensor",
            [("keyword_only_changed", "keepdim")],
        ),
        # order
        (
            "f(Tensor a, int b) -> Tensor",
            "f(int b, Tensor a) -> Tensor",
            [("arguments_reordered", "")],
        ),
        # returns: count and type, alias only, names only
        (
            "f(Tensor self) -> Tensor",
            "f(Tensor self) -> (Tensor, Tensor)",
            [("returns_changed", "")],
        ),
        (
            "f(Tensor(a!) self) -> Tensor(a!)",
            "f(Tensor(a!) self) -> Tensor",
            [("returns_changed", "")],
        ),
        (
            "f(Tensor self) -> Tensor(a)",
            "f(Tensor self) -> Tensor(b)",
            [("return_alias_changed", "")],
        ),
        (
            "f(Tensor self) -> (Tensor values, Tensor indices)",
            "f(Tensor self) -> (Tensor v, Tensor i)",
            [("return_names_changed", "")],
        ),
        ("f(Tensor self) -> ()", "f(Tensor self) -> ()", []),
    ],
)
def test_each_kind_of_difference(old, new, expected):
    assert _diff(old, new) == expected


def test_rename_pairs_by_position_first_then_by_type():
    # two Tensor arguments leave and two arrive: each pairs with the one at its position
    diffs = compare_schemas(
        parse_schema("f(Tensor a, Tensor b, int n) -> Tensor"),
        parse_schema("f(Tensor x, Tensor y, int n) -> Tensor"),
    )
    assert [(d.argument, d.new) for d in diffs] == [("a", "x"), ("b", "y")]
    # a keyword-only argument never pairs with a positional one
    assert _diff("f(Tensor a, *, int k) -> Tensor", "f(Tensor a, int j) -> Tensor") == [
        ("argument_removed", "k"),
        ("argument_added", "j"),
    ]


def test_a_renamed_argument_is_compared_too():
    # renamed and given a default: both are said
    assert _diff("f(Tensor grad, int n) -> Tensor", "f(Tensor grad_output, int n=1) -> Tensor") == [
        ("argument_renamed", "grad"),
        ("default_added", "n"),
    ]


def test_texts_name_old_and_new():
    diffs = compare_schemas(
        parse_schema("f(Tensor self, int dim=0) -> Tensor"),
        parse_schema("f(Tensor self, int dim=1, *, bool flag) -> (Tensor, Tensor)"),
    )
    assert [d.text() for d in diffs] == [
        "argument 'dim' default `0` -> `1`",
        "argument `bool flag` added without a default",
        "returns `Tensor` -> `(Tensor, Tensor)`",
    ]
