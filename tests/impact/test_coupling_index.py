"""Coupling index on a small synthetic downstream tree written in torch_npu's style."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest

from instep.impact.downstream.coupling_index import index_downstream, index_downstream_file
from instep.impact.model import CouplingKind
from instep.pyindex.cache import ContentCache

K = CouplingKind

FILES = {
    "npu_ext/__init__.py": "",
    "npu_ext/_inductor/__init__.py": """
        from torch._inductor import lowering
        from torch._inductor.scheduler import Scheduler
        from .lowering import npu_make_fallback
        from .scheduler import npu_compute_ancestors
        from .utils import patch_fn

        lowering.make_fallback = npu_make_fallback
        Scheduler.compute_ancestors = npu_compute_ancestors


        @patch_fn(Scheduler, "can_fuse_vertical")
        def npu_can_fuse_vertical(self, node1, node2, orig_fn=None):
            return orig_fn(self, node1, node2)
        """,
    "npu_ext/_inductor/lowering.py": """
        import torch._inductor.ir as ir
        from torch._inductor.lowering import register_lowering as rl, make_fallback
        from torch._inductor.virtualized import V
        from torch._inductor import config

        aten = torch.ops.aten
        _orig_make_fallback = make_fallback

        FALLBACK_LIST = [aten.gather, aten.scatter.value]


        def npu_make_fallback(op, layout_constraint=None, warn=True):
            return _orig_make_fallback(op, layout_constraint, warn)


        def register_all():
            @rl(aten.expand, type_promotion_kind=None)
            def expand(x, sizes):
                n = V.graph.sizevars.lookup_precomputed_size(sizes[0])
                return ir.ExpandView.create(x, tuple(sizes))

            make_fallback(aten.sort)
            if config.fallback_random:
                config.triton.unique_kernel_names = True
            with config.patch({"triton.cudagraphs": False}, max_autotune=True):
                pass


        def _patch_sliceview_create(cls, x, dim, start, end, step=1, clamp=True):
            return x


        ir.SliceView.create = _patch_sliceview_create
        setattr(ir.FallbackKernel, "create", _patch_sliceview_create)
        """,
    "npu_ext/_inductor/scheduler.py": """
        from torch._inductor.scheduler import Scheduler

        _src = Scheduler.compute_ancestors


        def npu_compute_ancestors(self):
            _src(self)
            return None
        """,
    "npu_ext/_inductor/utils.py": """
        import functools


        def patch_fn(model, fn):
            orig_fn = getattr(model, fn)

            def decorator(f):
                @functools.wraps(orig_fn)
                def inner(*args, **kwargs):
                    return f(*args, **kwargs, orig_fn=orig_fn)

                setattr(model, fn, inner)
                return inner

            return decorator


        def _assign_attr(target_root, target_path, value):
            parts = target_path.split(".")
            owner = target_root
            for p in parts[:-1]:
                owner = getattr(owner, p)
            setattr(owner, parts[-1], value)
        """,
    "npu_ext/_inductor/codegen/triton.py": """
        from torch._inductor.codegen.triton import TritonKernel, TritonScheduling
        from torch._inductor.codegen.common import DeviceOpOverrides, register_device_op_overrides
        from torch._inductor import config as inductor_config
        import torch


        class NPUTritonKernel(TritonKernel):
            def load(self, name, index):
                return super().load(name, index)

            def store(self, name, index, value, mode=None):
                return None

            def npu_only(self):
                return inductor_config.triton.persistent_reductions


        class NPUDeviceOpOverrides(DeviceOpOverrides):
            def kernel_driver(self):
                return "aoti_torch_npu_get_current_stream"


        register_device_op_overrides("npu", NPUDeviceOpOverrides())
        torch._dynamo.config.suppress_errors = True
        """,
    "npu_ext/_inductor/codegen/triton_ext.py": """
        from .triton import NPUTritonKernel
        from ..utils import _assign_attr
        import torch


        class NPUTritonKernelV2(NPUTritonKernel):
            def load(self, name, index):
                return NPUTritonKernel.load(self, name, index)

            def indexing(self, index):
                return index


        def install():
            _assign_attr(torch, "_inductor.codegen.triton.TritonKernel", NPUTritonKernelV2)
        """,
}


def _write(root: Path) -> list[tuple[str, bytes]]:
    items = []
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        data = textwrap.dedent(text).lstrip("\n").encode()
        p.write_bytes(data)
        items.append((rel, data))
    return items


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("down")
    items = [(rel, (root / rel).read_bytes()) for rel, _ in _write(root)]
    return root, items


@pytest.fixture(scope="module")
def index(tree):
    _, items = tree
    return index_downstream(items, jobs=1)


def _refs(index, kind, target=None, path=None):
    return [
        r
        for r in index.references()
        if r.kind is kind
        and (target is None or r.target == target)
        and (path is None or r.path.endswith(path))
    ]


def test_imports_keep_every_line_and_alias(index):
    imp = _refs(index, K.IMPORT_USE, "torch._inductor.lowering.register_lowering")
    assert [(r.path, r.line) for r in imp if r.detail.startswith("from")] == [
        ("npu_ext/_inductor/lowering.py", 2)
    ]
    assert "as rl" in imp[0].detail
    mods = _refs(index, K.IMPORT_USE, "torch._inductor.ir", "lowering.py")
    assert mods and mods[0].detail == "import torch._inductor.ir as ir"


def test_attribute_chains_through_aliases_and_handles(index):
    uses = _refs(index, K.IMPORT_USE, path="lowering.py")
    targets = {r.target for r in uses}
    assert "torch._inductor.ir.ExpandView.create" in targets
    assert "torch._inductor.sizevars.SizeVarAllocator.lookup_precomputed_size" in targets
    sv = next(r for r in uses if r.target.endswith("SizeVarAllocator.lookup_precomputed_size"))
    assert sv.owner == "register_all.expand" and sv.line == 19
    assert "V.graph.sizevars" in sv.snippet
    # one use per (target, owner): ir.ExpandView.create appears once
    assert len([r for r in uses if r.target == "torch._inductor.ir.ExpandView.create"]) == 1
    assert not any(t.startswith("torch.ops.") for t in targets)


def test_monkeypatch_forms(index):
    sv = _refs(index, K.MONKEYPATCH, "torch._inductor.ir.SliceView.create")[0]
    assert sv.signature == "cls, x, dim, start, end, step=1, clamp=True"
    assert sv.body_hash and "replaced by" in sv.detail
    sa = _refs(index, K.MONKEYPATCH, "torch._inductor.ir.FallbackKernel.create")[0]
    assert sa.detail.startswith("setattr")
    assert sa.signature == sv.signature


def test_writes_through_handles_and_root_named_parameters():
    src = (
        b"from torch._inductor.virtualized import V\n"
        b"def f(torch, x):\n"
        b"    V.graph.removed_buffers = set()\n"
        b"    V.kernel.range_tree_nodes[x] = 1\n"
        b"    torch.distributed.distributed_c10d.rendezvous = x\n"
    )
    fi = index_downstream_file("npu_ext/h.py", src)
    mp = {r.target: r.detail for r in fi.references if r.kind is K.MONKEYPATCH}
    assert mp["torch._inductor.graph.GraphLowering.removed_buffers"].startswith(
        "instance attribute write"
    )
    assert "via a handle" in mp["torch._inductor.codegen.simd.SIMDKernel.range_tree_nodes"]
    assert mp["torch.distributed.distributed_c10d.rendezvous"].startswith("assign")


def test_monkeypatch_installed_from_another_file(index):
    mf = _refs(index, K.MONKEYPATCH, "torch._inductor.lowering.make_fallback")[0]
    assert mf.path == "npu_ext/_inductor/__init__.py"
    assert mf.signature == "op, layout_constraint=None, warn=True"
    assert mf.calls_original  # calls the saved original _orig_make_fallback
    assert "npu_ext/_inductor/lowering.py::npu_make_fallback" in mf.detail
    ca = _refs(index, K.MONKEYPATCH, "torch._inductor.scheduler.Scheduler.compute_ancestors")[0]
    assert ca.signature == "self" and ca.calls_original


def test_patch_helpers(index):
    dec = _refs(index, K.MONKEYPATCH, "torch._inductor.scheduler.Scheduler.can_fuse_vertical")
    assert len(dec) == 1
    assert dec[0].signature == "self, node1, node2, orig_fn=None"
    assert "patch helper" in dec[0].detail
    dotted = _refs(index, K.MONKEYPATCH, "torch._inductor.codegen.triton.TritonKernel")
    assert [r.path for r in dotted] == ["npu_ext/_inductor/codegen/triton_ext.py"]


def test_subclass_overrides_and_downstream_chain(index):
    cls = _refs(index, K.SUBCLASS_OVERRIDE, "torch._inductor.codegen.triton.TritonKernel")
    assert {r.owner for r in cls} == {"NPUTritonKernel", "NPUTritonKernelV2"}
    load = _refs(index, K.SUBCLASS_OVERRIDE, "torch._inductor.codegen.triton.TritonKernel.load")
    by_owner = {r.owner: r for r in load}
    assert by_owner["NPUTritonKernel.load"].calls_original  # super().load
    assert by_owner["NPUTritonKernel.load"].signature == "self, name, index"
    assert "NPUTritonKernelV2.load" in by_owner  # resolved across files
    store = _refs(index, K.SUBCLASS_OVERRIDE, "torch._inductor.codegen.triton.TritonKernel.store")
    assert not store[0].calls_original
    assert index.classes()["npu_ext._inductor.codegen.triton_ext.NPUTritonKernelV2"] == [
        "torch._inductor.codegen.triton.TritonKernel"
    ]


def test_registrations(index):
    regs = _refs(index, K.REGISTRATION)
    got = {(r.target, r.detail.split(" ")[0]) for r in regs}
    assert ("op:aten.expand", "register_lowering") in got  # imported as rl
    assert ("op:aten.sort", "make_fallback") in got
    assert ("op:aten.gather", "table:FALLBACK_LIST") in got
    assert ("device_op_overrides:npu", "register_device_op_overrides") in got
    sort = next(r for r in regs if r.target == "op:aten.sort")
    assert sort.owner == "register_all"


def test_config_reads_writes_and_patch(index):
    cfg = {(r.target, r.detail) for r in _refs(index, K.CONFIG)}
    assert ("torch._inductor.config.fallback_random", "read") in cfg
    assert ("torch._inductor.config.triton.unique_kernel_names", "write") in cfg
    assert ("torch._inductor.config.triton.cudagraphs", "patch") in cfg
    assert ("torch._inductor.config.max_autotune", "patch") in cfg
    assert ("torch._inductor.config.triton.persistent_reductions", "read") in cfg
    assert ("torch._dynamo.config.suppress_errors", "write") in cfg
    assert not any(t.endswith(".patch") for t, _ in cfg)


def test_c_shim_best_effort(index):
    shims = _refs(index, K.C_SHIM)
    assert [(r.target, r.best_effort) for r in shims] == [("c_shim:get_current_stream", True)]
    fi = index_downstream_file(
        "npu_ext/w.py",
        b'def f(t, s, d):\n    return f"CHECK(aoti_torch_item_{d}({t}, &{s}));'
        b' aoti_torch_get_dim(x)"\n',
    )
    assert sorted(r.target for r in fi.references if r.kind is K.C_SHIM) == [
        "c_shim:get_dim",
        "c_shim:item_*",
    ]


def test_functions_nested_and_fingerprinted(index):
    fns = {f.qualname: f for f in index.files["npu_ext/_inductor/lowering.py"].functions}
    exp = fns["register_all.expand"]
    assert exp.signature == "x, sizes" and exp.line == 18
    assert [r.key for r in exp.registrations] == ["aten.expand"]  # via the alias rl
    assert len(exp.fingerprint) >= 2 and exp.body_hash


def test_bad_files_are_skipped_with_a_message(caplog):
    items = [
        ("pkg/ok.py", b"import torch._inductor.ir as ir\nir.X.create = 1\n"),
        ("pkg/py2.py", b"print 'hello'\n"),
        ("pkg/latin.py", "x = 'caf\xe9'\n".encode("latin-1")),
        ("pkg/bin.py", b"\x00\x01\x02"),
        ("pkg/bom.py", b"\xef\xbb\xbfimport torch._inductor.ir as ir\n"),
    ]
    with caplog.at_level(logging.WARNING):
        idx = index_downstream(items, jobs=1)
    errs = sorted(idx.errors)
    assert len(errs) == 3
    assert any("pkg/py2.py:1: skipped, not valid Python 3" in e for e in errs)
    assert any("pkg/latin.py: skipped, not UTF-8" in e for e in errs)
    assert any("pkg/bin.py: skipped, binary" in e for e in errs)
    assert "pkg/py2.py" in caplog.text
    assert _refs(idx, K.MONKEYPATCH, "torch._inductor.ir.X.create")  # partial results flow
    assert idx.files["pkg/bom.py"].error is None


def test_gate_attached_to_reference():
    src = textwrap.dedent(
        """
        from torch._inductor import ir
        from npu_ext._compat.version import CURRENT_VERSION

        if CURRENT_VERSION >= (2, 14):
            ir.SliceView.create = None
        else:
            ir.SliceView.old = None
        """
    ).encode()
    fi = index_downstream_file("npu_ext/x.py", src)
    mp = {r.target: r for r in fi.references if r.kind is K.MONKEYPATCH}
    assert mp["torch._inductor.ir.SliceView.create"].gate.min_version == (2, 14)
    assert mp["torch._inductor.ir.SliceView.old"].gate.max_version == (2, 14)


def test_parallel_and_cache_agree(tree, tmp_path):
    _, items = tree
    cache = ContentCache(tmp_path / "c", "down")
    cold = index_downstream(items, cache=cache, jobs=2)
    assert cache.misses == len(items) and cache.hits == 0
    warm = index_downstream(items, cache=cache, jobs=2)
    assert cache.hits == len(items)
    key = lambda refs: sorted((r.kind, r.target, r.path, r.line, r.owner) for r in refs)  # noqa: E731
    assert key(cold.references()) == key(warm.references())
    assert key(cold.references()) == key(index_downstream(items, jobs=1).references())


def test_cached_indexes_of_other_analysis_code_are_not_reused(tree, tmp_path, monkeypatch):
    import instep.pyindex.cache as cache_module

    _, items = tree
    index_downstream(items, cache=ContentCache(tmp_path / "c", "down"), jobs=1)
    monkeypatch.setattr(cache_module, "analysis_code_digest", lambda: "e" * 40)
    cache = ContentCache(tmp_path / "c", "down")
    index_downstream(items, cache=cache, jobs=1)
    assert cache.misses == len(items) and cache.hits == 0


def test_registration_carries_the_registered_function(index):
    reg = next(r for r in _refs(index, K.REGISTRATION, "op:aten.expand"))
    assert reg.owner == "register_all.expand"
    assert reg.signature == "x, sizes" and reg.body_hash
    curried = index_downstream_file(
        "npu_ext/c.py",
        b"from torch._inductor.lowering import register_lowering\n"
        b"def npu_cat(inputs, dim=0):\n    return inputs\n"
        b"register_lowering(torch.ops.aten.cat)(npu_cat)\n",
    )
    (r,) = [r for r in curried.references if r.kind is K.REGISTRATION]
    assert (r.target, r.signature) == ("op:aten.cat", "inputs, dim=0")


def test_cross_file_subclass_carries_its_gate():
    items = [
        ("npu_ext/__init__.py", b""),
        (
            "npu_ext/base.py",
            b"from torch._inductor.scheduler import Scheduler\n"
            b"class NPUScheduler(Scheduler):\n    pass\n",
        ),
        (
            "npu_ext/gated.py",
            b"from npu_ext.base import NPUScheduler\n"
            b"from npu_ext.version import CURRENT_VERSION\n"
            b"if CURRENT_VERSION >= (2, 14):\n"
            b"    class NewScheduler(NPUScheduler):\n"
            b"        def fuse_nodes(self, nodes):\n"
            b"            return super().fuse_nodes(nodes)\n",
        ),
    ]
    idx = index_downstream(items, jobs=1)
    (m,) = _refs(idx, K.SUBCLASS_OVERRIDE, "torch._inductor.scheduler.Scheduler.fuse_nodes")
    assert (m.path, m.owner, m.calls_original) == (
        "npu_ext/gated.py",
        "NewScheduler.fuse_nodes",
        True,
    )
    assert m.gate is not None and m.gate.min_version == (2, 14)


def test_prefix_factored_name_scan_matches_the_plain_alternation():
    import random
    import re

    from instep.impact.downstream.pruning import trie_pattern

    rng = random.Random(7)
    words = ["torch", "to", "torch_npu", "aten", "V", "V.graph", "register", "register_x", "op"]
    noise = ["foo", "torchx", "_torch", "V.g", "regist", "ops", "xop"]
    text = " ".join(rng.choice(words + noise) for _ in range(5000))
    trie = re.compile(r"\b" + trie_pattern(words) + r"\b")
    plain = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b")
    assert [m.start() for m in trie.finditer(text)] == [m.start() for m in plain.finditer(text)]
    assert not trie.search("torchx _torch regist")


def test_names_pattern_matches_where_the_bounded_alternation_does():
    """The literal-first scan pattern starts a match exactly where ``\\b(?:...)\\b`` (and
    the bare prefix ``aoti_torch_``) would: names starting with a non-word character
    (``*`` of a star import) included."""
    import random
    import re

    from instep.impact.downstream.pruning import names_pattern

    rng = random.Random(11)
    words = ["torch", "to", "torch_npu", "aten", "V", "V.graph", "*", "op", "aoti_torch_"]
    noise = ["foo", "torchx", "_torch", "V.g", "2**63", "a*b", "xop", "aoti_torch_x", "\n"]
    text = " ".join(rng.choice(words + noise) for _ in range(5000)).replace(" \n ", "\n")
    others = [w for w in words if w != "aoti_torch_"]
    plain = re.compile(r"\b(?:" + "|".join(map(re.escape, others)) + r")\b|aoti_torch_")
    fast = names_pattern(tuple(sorted(words)))
    starts = {i for i in range(len(text) + 1) if plain.match(text, i)}
    assert {i for i in range(len(text) + 1) if fast.match(text, i)} == starts
    assert starts


WALK_ORDER_SOURCE = """
import a as x
def f():
    import b as x
    try:
        import c
    except ImportError:
        import d as c
    else:
        pass
    finally:
        from e import g
class K:
    if t:
        import h as x
match v:
    case 1:
        import i
    case _:
        import j as i
for y in z:
    import k as y
else:
    import m
import n as c
"""


def test_statements_come_in_ast_walks_order_without_visiting_expressions():
    import ast

    from instep.impact.downstream.pruning import statements_in_walk_order

    tree = ast.parse(WALK_ORDER_SOURCE)
    walked = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.stmt))]
    got = list(statements_in_walk_order(tree))
    assert [type(n).__name__ for n in got] == [type(n).__name__ for n in walked]
    assert got == walked  # the same nodes: breadth first, handlers and cases a level deeper


def test_module_aliases_keep_the_last_import_of_a_name_in_walk_order():
    import ast

    from instep.impact.downstream.source_probes import module_aliases

    aliases = module_aliases(ast.parse(WALK_ORDER_SOURCE))
    # depth decides, then position: `import n as c` (module level) comes before the
    # handler's `import d as c` (def -> try -> handler), which wins
    assert aliases["c"] == "d"
    assert aliases["x"] == "h"  # class -> if is deeper than def's `import b as x`
    assert aliases["i"] == "j"
    assert aliases["g"] == "e.g"
    assert aliases["y"] == "k"


def test_hot_lines_are_each_line_naming_a_word_once_within_the_range():
    import re

    from instep.impact.downstream.pruning import HotLines

    source = "torch.a(torch.b)\nx = 1\naten.x; torch.y\ntorchx\n\nsetattr(a, b)\naten"
    hot = HotLines()
    hot.source, hot._offsets = source, None
    names = {"torch", "aten", "setattr"}
    plain = re.compile(r"\b(?:torch|aten|setattr)\b")
    every = sorted({source.count("\n", 0, m.start()) + 1 for m in plain.finditer(source)})
    assert every == [1, 3, 6, 7]
    assert hot._lines_of(names) == every
    assert hot._lines_of(names, 2, 6) == [3, 6]
    assert hot._lines_of(names, 7) == [7]  # the last line, no newline after it
    assert hot._lines_of({"torch"}, 1, 1) == [1]


def test_reference_copy_with_one_field_is_what_replace_builds():
    """``coupling_index._with`` stands for ``dataclasses.replace`` on references: it holds
    while ``Reference`` has no ``__post_init__`` and no slots (the pickled index too)."""
    import dataclasses
    import pickle

    from instep.impact.downstream.coupling_index import _with
    from instep.impact.model import CouplingKind, Reference

    assert not hasattr(Reference, "__post_init__") and not hasattr(Reference, "__slots__")
    r = Reference(CouplingKind.IMPORT_USE, "torch.x", "a.py", 3, "x()", detail="use")
    for name, value in (("call_shapes", ("()",)), ("gate", None), ("line", 4)):
        want = dataclasses.replace(r, **{name: value})
        got = _with(r, name, value)
        assert got == want and pickle.dumps(got) == pickle.dumps(want)
