"""Fork detection: near-copies of upstream functions and files, any name, any format."""

from __future__ import annotations

import textwrap

from instep.impact.downstream.coupling_index import index_downstream_file
from instep.impact.downstream.forks import (
    find_forked_files,
    find_forked_functions,
    fingerprint,
    lines_fingerprint,
    similarity,
)
from instep.impact.model import CouplingKind
from instep.pyindex.model import Symbol, SymbolKind

UP_OLD = textwrap.dedent(
    '''
    def expand(x, sizes):
        """Expand x to sizes."""
        (x,) = promote_constants([x])
        if isinstance(x, ir.BaseConstant):
            return ExpandView.create(x, tuple(sizes))
        assert isinstance(x, TensorBox)
        assert isinstance(sizes, (list, tuple))
        if tuple(x.get_size()) == tuple(sizes):
            return x
        if not free_unbacked_symbols(x.get_size()):
            x_size_product = V.graph.sizevars.size_hint_or_throw(sympy_product(x.get_size()))
            if x_size_product > 0 and not free_unbacked_symbols(sizes):
                x.mark_reuse(V.graph.sizevars.size_hint_or_throw(sympy_product(sizes)))
        return TensorBox(ExpandView.create(x.data, tuple(sizes)))
    '''
)
UP_NEW = UP_OLD.replace("def expand(x, sizes):", "def expand(x, sizes, implicit=False):").replace(
    "return TensorBox(ExpandView.create(x.data, tuple(sizes)))",
    "if implicit:\n        return x\n    return TensorBox(ExpandView.create(x.data, tuple(sizes)))",
)
OTHER = textwrap.dedent(
    """
    def cat(inputs, dim=0):
        if len(inputs) == 1:
            return clone(inputs[0])
        dim = _validate_dim(inputs[0], dim, 0)
        dtype = get_promoted_dtype(*inputs, type_promotion_kind=PROMOTION_KIND.DEFAULT)
        inputs = [to_dtype(inp, dtype) for inp in inputs]
        return TensorBox(ir.ConcatKernel.create(inputs, dim))
    """
)

# torch_npu style: the copy lives indented inside a registration function, reformatted,
# with comments, under another name, one line changed.
DOWN = textwrap.dedent(
    """
    from torch._inductor.lowering import register_lowering


    def _register_npu_lowerings():
        @register_lowering(aten.expand, type_promotion_kind=None)
        def npu_expand(x, sizes):
            # NPU: same as upstream
            (x,) = promote_constants([x])
            if isinstance(x, ir.BaseConstant):
                return ExpandView.create(x, tuple(sizes))
            assert isinstance(x, TensorBox)
            assert isinstance(sizes, (list, tuple))
            if tuple(x.get_size()) == tuple(sizes):
                return x
            if not free_unbacked_symbols(x.get_size()):
                x_size_product = V.graph.sizevars.size_hint_or_throw(sympy_product(x.get_size()))
                if x_size_product > 0 and not free_unbacked_symbols(sizes):
                    x.mark_reuse(V.graph.sizevars.size_hint_or_throw(sympy_product(sizes)))
            return TensorBox(ExpandView.create(x.data,   tuple(sizes)))  # npu

        def tiny(x):
            return x
    """
)


def _sym(name: str, src: str) -> Symbol:
    return Symbol("torch/_inductor/lowering.py", name, SymbolKind.FUNCTION, 1, 10)


def test_fingerprint_ignores_format_comments_and_the_def_name():
    a = fingerprint(UP_OLD)
    b = fingerprint(UP_OLD.replace("def expand", "def npu_expand").replace("  ", "    "))
    assert similarity(a, b) == 1.0
    assert similarity(a, fingerprint(OTHER)) < 0.2
    assert 0.6 < similarity(a, fingerprint(UP_NEW)) < 1.0


def test_forked_function_found_with_version_and_other_name():
    fi = index_downstream_file("npu_ext/_inductor/lowering.py", DOWN.encode())
    upstream = [
        (_sym("expand", UP_OLD), UP_OLD, UP_NEW),
        (_sym("cat", OTHER), OTHER, OTHER),
    ]
    refs = find_forked_functions(fi.functions, upstream)
    assert len(refs) == 1
    r = refs[0]
    assert r.kind is CouplingKind.FORK
    assert r.target == "torch._inductor.lowering.expand"
    assert r.owner == "_register_npu_lowerings.npu_expand"
    assert r.matched_version == "old" and r.similarity > 0.8
    assert r.signature == "x, sizes" and r.body_hash
    assert r.line == 7 and "def npu_expand" in r.snippet


def test_matching_keeps_no_gram_set_on_the_downstream_functions():
    """The downstream side's sets are built per match, not kept on the records (issue #32:
    kept on vllm's 47,270 functions they held ~190 MiB in the fork-detection child)."""
    fi = index_downstream_file("npu_ext/_inductor/lowering.py", DOWN.encode())
    (r,) = find_forked_functions(fi.functions, [(_sym("expand", UP_OLD), UP_OLD, UP_NEW)])
    assert r.owner == "_register_npu_lowerings.npu_expand"
    assert fi.functions and all("grams" not in vars(f.fingerprint) for f in fi.functions)


def test_copy_of_new_version_matches_new():
    fi = index_downstream_file("d.py", UP_NEW.encode())
    (r,) = find_forked_functions(fi.functions, [(_sym("expand", UP_OLD), UP_OLD, UP_NEW)])
    assert r.matched_version == "new" and r.similarity == 1.0


def test_threshold_excludes_unrelated_and_tiny_functions():
    fi = index_downstream_file("d.py", (OTHER + "\n\ndef f(x):\n    return x\n").encode())
    assert find_forked_functions(fi.functions, [(_sym("expand", UP_OLD), UP_OLD, UP_NEW)]) == []


def test_forked_file():
    body = "\n".join(
        f"def f{i}(x, y):\n    return torch.ops.aten.add(x, y) * {i} + helper_{i}(x)\n"
        for i in range(40)
    )
    old = "import torch\n" + body
    new = old.replace("* 3 +", "* 33 +")
    down = {
        "npu_ext/lowering.py": lines_fingerprint(
            "# copied\n" + body.replace("* 1 +", "* 100 +") + "\ndef npu_only():\n    pass\n"
        ),
        "npu_ext/unrelated.py": lines_fingerprint(
            "\n".join(f"value_{i} = compute_something({i})" for i in range(40))
        ),
    }
    refs = find_forked_files(down, {"torch/_inductor/lowering.py": (old, new)})
    assert len(refs) == 1
    r = refs[0]
    assert (r.path, r.target, r.matched_version) == (
        "npu_ext/lowering.py",
        "torch._inductor.lowering",
        "old",
    )
    assert r.detail.startswith("file: ") and "torch/_inductor/lowering.py (old)" in r.detail
    assert 0.9 < r.similarity < 1.0


def test_matching_over_processes_gives_the_serial_result_in_its_order():
    """Many downstream files: the pool matches contiguous runs of whole files, in forks."""
    from instep.impact.downstream import forks
    from instep.impact.join.fork_search import ForkSearch

    files = []
    for k in range(1200):  # ~2,300 functions: above the pool's 2,000 threshold
        body = DOWN if k % 7 == 0 else OTHER + OTHER.replace("def cat", f"def cat_{k}")
        files.append(index_downstream_file(f"npu/f{k:03}.py", body.encode()))
    functions = [f for fi in files for f in fi.functions]
    assert len(functions) >= 2000
    upstream = [(_sym("expand", UP_OLD), UP_OLD, UP_NEW), (_sym("cat", OTHER), OTHER, OTHER)]
    serial = forks.find_forked_functions(functions, upstream)
    pooled = ForkSearch(jobs=3).forked_functions(functions, upstream, forks)
    assert pooled == serial
    assert {r.target for r in pooled} == {
        "torch._inductor.lowering.expand",
        "torch._inductor.lowering.cat",
    }


def test_normalised_lines_drop_comments_and_blanks_of_any_text():
    """Comments and blanks (space, tab, CR, FF, VT) go, newlines and other characters stay;
    non-ASCII text, a comment of non-ASCII text and a lone surrogate come through."""
    from instep.impact.downstream.forks import normalised_lines

    src = "a = '\udc80'  # é x\n\tdef  f( x ):\r\n  pass\x0b\x0c é\u00a0b\nasync def g(): # c"
    assert normalised_lines(src) == ["a='\udc80'", "defN(x):", "passé\u00a0b", "asyncdefN():"]
