"""C shim headers: upstream declarations of `aoti_torch_*` functions meet the shim names a
downstream's generated wrapper code carries in strings.

Real git repositories: upstream commits a change to its shim headers (one shim gains a
parameter, one goes away, one is added for another device); the downstream's wrapper
codegen names shims in strings. Also the header index itself and which paths are read.
"""

from __future__ import annotations

import pytest

from instep.impact.upstream.c_shims import declarations, is_shim_header, shim_key
from instep.impact.upstream.file_index import index_source
from instep.impact.upstream.sources import open_snapshot

from .gitrepo import impact_of_one_commit

SHIM = "torch/csrc/inductor/aoti_torch/c/shim.h"
GENERATED = "torch/csrc/inductor/aoti_torch/generated/c_shim_cuda.h"

SHIM_V1 = """\
#pragma once
#include <stdint.h>

// Get the number of elements of a tensor
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_get_numel(AtenTensorHandle tensor, int64_t* ret_numel);

/* Deprecated: use aoti_torch_get_numel */
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_get_size_legacy(
    AtenTensorHandle tensor,  // the tensor
    int64_t* ret_size);

AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cuda__cdist_backward(AtenTensorHandle grad, \
AtenTensorHandle x1, double p, AtenTensorHandle* ret0);
"""

SHIM_V2 = (
    SHIM_V1.replace(
        "AtenTensorHandle x1, double p,",
        "AtenTensorHandle x1, AtenTensorHandle x2, double p,",
    ).replace(
        """/* Deprecated: use aoti_torch_get_numel */
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_get_size_legacy(
    AtenTensorHandle tensor,  // the tensor
    int64_t* ret_size);
""",
        "",
    )
    + """
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_xpu_get_numel_async(AtenTensorHandle tensor, int64_t* ret_numel);
"""
)

WRAPPER = """\
def codegen_numel(name):
    return f"AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_numel({name}, &numel));"


def codegen_cdist_backward(args):
    return "aoti_torch_npu__cdist_backward(" + ", ".join(args) + ");"


def codegen_size(name):
    return f"aoti_torch_get_size_legacy({name}, &size);"


def codegen_numel_async(name):
    return f"aoti_torch_npu_get_numel_async({name}, &numel);"
"""


def test_declarations_of_a_header():
    syms = {s.qualname: s for s in declarations(SHIM, SHIM_V1)}
    assert list(syms) == [
        "aoti_torch_get_numel",
        "aoti_torch_get_size_legacy",
        "aoti_torch_cuda__cdist_backward",
    ]
    legacy = syms["aoti_torch_get_size_legacy"]
    # comments dropped, whitespace normalised; the span covers the whole declaration
    assert legacy.signature == "AtenTensorHandle tensor, int64_t* ret_size"
    assert (legacy.line, legacy.end_line) == (9, 11)
    assert syms["aoti_torch_get_numel"].line == 6
    # the device is stripped from the key: the npu shim of the op meets the cuda one
    assert [r.key for r in syms["aoti_torch_cuda__cdist_backward"].registrations] == [
        "c_shim:_cdist_backward"
    ]
    assert shim_key("aoti_torch_npu__cdist_backward") == "_cdist_backward"


def test_only_shim_headers_are_read(tmp_path):
    assert is_shim_header(SHIM) and is_shim_header(GENERATED)
    assert is_shim_header("torch/include/torch/csrc/inductor/aoti_torch/c/shim_cpu.h")
    assert not is_shim_header("torch/csrc/inductor/aoti_torch/utils.h")
    assert not is_shim_header("torch/csrc/inductor/aoti_torch/c/shim.cpp")
    files = {SHIM: SHIM_V1, "torch/csrc/other.h": "int x;", "torch/a.py": "x = 1\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert open_snapshot(str(tmp_path), tmp_path / "cache").paths() == ["torch/a.py", SHIM]


def test_a_header_indexes_by_its_declarations():
    index = index_source(SHIM, SHIM_V1.encode())
    assert index.error is None
    assert sorted(index.symbols) == sorted(
        ["aoti_torch_get_numel", "aoti_torch_get_size_legacy", "aoti_torch_cuda__cdist_backward"]
    )
    assert {r.key for r in index.registrations} == {
        "c_shim:get_numel",
        "c_shim:get_size_legacy",
        "c_shim:_cdist_backward",
    }


@pytest.fixture(scope="module")
def couplings(tmp_path_factory):
    doc = impact_of_one_commit(
        tmp_path_factory.mktemp("shims"),
        SHIM,
        SHIM_V1,
        SHIM_V2,
        "[aoti] _cdist_backward takes x2; drop get_size_legacy; xpu numel_async (#7)",
        {"torch_npu/_inductor/codegen/cpp_wrapper_npu.py": WRAPPER},
    )
    got = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            got[c["upstream"].split("::")[1]] = (c["kind"], c["action"], c["rule"], c["downstream"])
    return got


def test_a_changed_declaration_is_a_shim(couplings):
    kind, action, rule, where = couplings["aoti_torch_cuda__cdist_backward"]
    assert (kind, action, rule) == ("c_shim", "Shim", "c_shim.changed")
    assert where == "torch_npu/_inductor/codegen/cpp_wrapper_npu.py:6"


def test_a_removed_declaration_is_a_shim(couplings):
    assert couplings["aoti_torch_get_size_legacy"][:3] == ("c_shim", "Shim", "c_shim.changed")


def test_a_shim_added_for_another_device_is_checked(couplings):
    assert couplings["aoti_torch_xpu_get_numel_async"][:3] == ("c_shim", "Check", "c_shim.added")


def test_an_unchanged_declaration_does_not_couple(couplings):
    assert "aoti_torch_get_numel" not in couplings
