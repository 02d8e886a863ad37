"""Resolving downstream-written names to where upstream defines them; call paths."""

from __future__ import annotations

from instep.impact.upstream.call_paths import reached
from instep.impact.upstream.resolver import UpstreamResolver
from instep.pyindex.symbols import index_source

FILES = {
    "torch/__init__.py": b"",
    "torch/_dynamo/__init__.py": b"from .eval_frame import optimize\nfrom . import config\n",
    "torch/_dynamo/eval_frame.py": b"def optimize(backend):\n    return _wrap(backend)\n\n\n"
    b"def _wrap(b):\n    return _inner(b)\n\n\ndef _inner(b):\n    return b\n",
    "torch/_dynamo/config.py": b"verbose = False\n",
    "torch/_inductor/codegen/simd.py": b"class SIMDKernel:\n    def codegen_body(self):\n"
    b"        return self.indexing(1)\n\n    def indexing(self, i):\n        return i\n",
    "torch/_inductor/codegen/triton.py": b"from torch._inductor.codegen.simd import SIMDKernel\n"
    b"from torch._inductor.codegen import simd\n\n\nclass TritonKernel(SIMDKernel):\n"
    b"    def load(self, name):\n        return name\n\n\n"
    b"class Other(simd.SIMDKernel):\n    pass\n",
}


def _resolver() -> UpstreamResolver:
    return UpstreamResolver(list(FILES), lambda p: index_source(p, FILES[p]))


def test_reexport_is_followed_to_the_definition():
    r = _resolver()
    assert r.resolve("torch._dynamo.optimize") == "torch._dynamo.eval_frame.optimize"
    assert r.resolve("torch._dynamo.config.verbose") == "torch._dynamo.config.verbose"
    assert r.resolve("torch._dynamo.nothing_here") == "torch._dynamo.nothing_here"
    assert r.resolve("numpy.array") == "numpy.array"


def test_inherited_member_resolves_to_the_defining_base():
    r = _resolver()
    assert (
        r.resolve("torch._inductor.codegen.triton.TritonKernel.codegen_body")
        == "torch._inductor.codegen.simd.SIMDKernel.codegen_body"
    )
    assert (
        r.resolve("torch._inductor.codegen.triton.TritonKernel.load")
        == "torch._inductor.codegen.triton.TritonKernel.load"
    )
    assert r.resolve("torch._inductor.codegen.triton.Other.indexing") == (
        "torch._inductor.codegen.simd.SIMDKernel.indexing"
    )
    assert r.ancestors("torch._inductor.codegen.triton", "TritonKernel") == [
        ("torch._inductor.codegen.triton", "TritonKernel"),
        ("torch._inductor.codegen.simd", "SIMDKernel"),
    ]


def test_call_paths_within_a_module():
    idx = index_source("torch/_dynamo/eval_frame.py", FILES["torch/_dynamo/eval_frame.py"])
    assert reached(idx.symbols, "optimize", {"_inner"}) == {
        "_inner": ["optimize", "_wrap", "_inner"]
    }
    assert reached(idx.symbols, "optimize", {"_inner"}, max_depth=1) == {}
    assert reached(idx.symbols, "_inner", {"_inner"}) == {}  # a direct use is not a path
    simd = index_source("torch/_inductor/codegen/simd.py", FILES["torch/_inductor/codegen/simd.py"])
    assert reached(simd.symbols, "SIMDKernel.codegen_body", {"SIMDKernel.indexing"}) == {
        "SIMDKernel.indexing": ["SIMDKernel.codegen_body", "SIMDKernel.indexing"]
    }
