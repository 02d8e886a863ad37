"""A signature change reads as what changed (pyindex/signature_delta.py)."""

from __future__ import annotations

import pytest

from instep.pyindex.signature_delta import delta_text, parse, signature_delta

REDUCTION_OLD = (
    "cls, device: torch.device, dst_dtype: torch.dtype, src_dtype: torch.dtype, "
    "inner_fn: Callable[..., Any], ranges: Sequence[_IntLike], reduction_ranges: "
    "Sequence[_IntLike], reduction_type: ReductionType, reduction_hint: ReductionHint="
    "ReductionHint.DEFAULT, input_node: IRNode | None=None"
)


@pytest.mark.parametrize(
    ("old", "new", "delta"),
    [
        # torch 2.14.1's Reduction.create: a keyword-only part opens with the new parameter
        (
            REDUCTION_OLD,
            REDUCTION_OLD + ", *, strict_sum: bool=False",
            ["+ *, strict_sum: bool = False"],
        ),
        # expand gains implicit (seed 001 row 16)
        ("x, sizes", "x, sizes, *, implicit=False", ["+ *, implicit=False"]),
        # a keyword-only part that was there already: the kind is said instead
        (
            "self, *, kernel_idx: int, grid: Any",
            "self, *, kernel_idx: int, grid: Any, launch_kwargs: tuple[str, ...]",
            ["+ launch_kwargs: tuple[str, ...] (keyword-only)"],
        ),
        ("x", "x, y", ["+ y"]),
        ("x, y=1", "x", ["- y=1"]),
        # renamed in place: _cdist_backward's grad -> grad_output
        ("grad, x1, x2, p, cdist", "grad_output, x1, x2, p, cdist", ["- grad", "+ grad_output"]),
        # reordered positional parameters bind positional calls differently
        ("a, b, c", "b, a, c", ["order (a, b, c) -> (b, a, c)"]),
        # positional -> keyword-only, and -> positional-only
        ("x, y=1", "x, *, y=1", ["y: positional -> keyword-only"]),
        ("x, y", "x, /, y", ["x: positional -> positional-only"]),
        ("x, /, y", "x, y, /, z", ["+ z", "y: positional -> positional-only"]),
        # defaults: changed, added, removed
        ("x=1", "x=2", ["x=1 -> x=2"]),
        ("x", "x=2", ["x (no default) -> x=2"]),
        ("x: int=1", "x: int", ["x=1 -> x (no default)"]),
        # annotations: changed, added
        ("x: int", "x: float", ["x: int -> float"]),
        ("x", "x: float", ["x: (none) -> float"]),
        # variadics
        ("x", "x, *args, **kwargs", ["+ *args", "+ **kwargs"]),
        ("x, **kw: Any", "x", ["- **kw: Any"]),
        # a positional-only parameter added is said as such
        ("x, /", "x, y, /", ["+ y (positional-only)"]),
        # nothing changed
        ("x, *, y=1", "x, *, y=1", []),
    ],
)
def test_delta(old, new, delta):
    assert signature_delta(old, new) == delta


def test_return_annotation():
    assert signature_delta("x", "x", "int", "str") == ["returns int -> str"]
    assert signature_delta("x", "x", None, "Tensor") == ["returns (none) -> Tensor"]
    assert signature_delta("x", "x, y", "int", "int") == ["+ y"]


def test_several_changes_read_on_one_line():
    assert delta_text("grad, x, p=2.0", "grad_output, x, p=1.0, *, strict: bool=False") == (
        "- grad; + grad_output; + *, strict: bool = False; p=2.0 -> p=1.0"
    )


def test_what_does_not_parse_is_shown_whole():
    # a C shim declaration's parameter list is no Python
    old, new = "AtenTensorHandle grad, double p", "AtenTensorHandle grad_output, double p"
    assert parse(old) is None
    assert signature_delta(old, new) == [f"({old}) -> ({new})"]
    assert signature_delta(old, old) == []
