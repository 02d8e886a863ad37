"""The backend's C++ half as written: torchgen backend yamls, C++ registrations, autocast
lists, boxed fallbacks, op lists and C shim headers (small real texts in the shapes
torch-npu, torch_musa and torch-xpu-ops write them)."""

from __future__ import annotations

import logging
from pathlib import Path

from instep.impact.downstream.backend_yaml import may_be_backend_yaml, read_backend_yaml
from instep.impact.downstream.cpp_registrations import mask, scan_cpp
from instep.impact.downstream.registered_kernels import is_native_source, read_registered_kernels
from instep.impact.model import CouplingKind, KernelRole
from instep.impact.upstream.sources import open_snapshot

NPU_YAML = """\
backend: NPU
cpp_namespace: at_npu::native
supported:
  - abs
  - abs.out
  - func: clone
    op_api: True
  - device_check: NoCheck
    func: _copy_from_and_resize
  - func: "sum.dim_DimnameList(Tensor self, str[1] dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"
    impl_ns: acl_op
  - {func: 'mean.names_dim', op_api: true}
symint:
  - abs.out
  - func: embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor
autograd:
  - func: _thnn_fused_gru_cell(Tensor input_gates, Tensor hidden_gates, Tensor hx, Tensor? input_bias=None, Tensor? hidden_bias=None) -> (Tensor, Tensor)
custom:
  - func: npu_format_cast(Tensor self, int acl_format) -> Tensor
    exposed: True
  - func: "${placeholder}"
tocpu:
  - nonzero
"""  # noqa: E501

MUSA_YAML = """\
# torch_musa codegen functions
- func: bitwise_not
- func: bitwise_not.out
  dispatch:
    PrivateUse1: BitwiseNotOut

- func: amax.out
  dispatch:
    PrivateUse1: AMaxOut
"""


def _rows(kernels):
    return [(k.line, k.where, k.name, str(k.role)) for k in kernels]


def test_a_backend_yaml_every_section_at_its_line():
    kernels = read_backend_yaml("torch_npu/csrc/aten/npu_native_functions.yaml", NPU_YAML)
    assert kernels is not None
    assert _rows(kernels) == [
        (4, "supported", "abs", "kernel"),
        (5, "supported", "abs.out", "kernel"),
        (6, "supported", "clone", "kernel"),
        (9, "supported", "_copy_from_and_resize", "kernel"),  # func: after another key
        (10, "supported", "sum.dim_DimnameList", "kernel"),
        (12, "supported", "mean.names_dim", "kernel"),  # a flow mapping
        (14, "symint", "abs.out", "kernel"),
        (15, "symint", "embedding", "kernel"),
        (17, "autograd", "_thnn_fused_gru_cell", "kernel"),
        (19, "custom", "npu_format_cast", "custom"),
        (23, "tocpu", "nonzero", "kernel"),
    ]
    by_line = {k.line: k for k in kernels}
    # a bare name is the default overload, not the packet
    assert (by_line[4].op, by_line[4].overload) == ("abs", "")
    assert (by_line[5].op, by_line[5].overload) == ("abs", "out")
    # the func: copy of a schema is kept, a bare name has none
    assert by_line[15].schema.startswith("embedding(Tensor weight")
    assert by_line[4].schema is None
    # the backend's own ops are in no upstream namespace
    assert by_line[19].namespace == "" and by_line[4].namespace == "aten"
    assert by_line[10].snippet.startswith('- func: "sum.dim_DimnameList(')


def test_a_list_of_func_entries_is_a_backend_yaml_outside_upstreams_path():
    kernels = read_backend_yaml("torch_musa/csrc/aten/ops/musa_functions.yaml", MUSA_YAML)
    assert _rows(kernels) == [
        (2, "functions", "bitwise_not", "kernel"),
        (3, "functions", "bitwise_not.out", "kernel"),
        (7, "functions", "amax.out", "kernel"),
    ]
    # a vendored upstream schema file is upstream's, not the backend's
    vendored = "third_party/pytorch/aten/src/ATen/native/native_functions.yaml"
    assert read_backend_yaml(vendored, MUSA_YAML) is None
    assert not may_be_backend_yaml(vendored, MUSA_YAML.encode())
    assert may_be_backend_yaml("x/musa_functions.yaml", MUSA_YAML.encode())


def test_other_yaml_files_are_no_backend_yaml(caplog):
    # a mapping with backend: but no cpp_namespace:, a CI workflow, a list of something else
    assert read_backend_yaml("a.yaml", "backend: NPU\nsupported:\n  - abs\n") is None
    assert not may_be_backend_yaml("a.yaml", b"backend: NPU\nsupported:\n  - abs\n")
    assert read_backend_yaml("ci.yml", "jobs:\n  build:\n    runs-on: x\n") is None
    assert read_backend_yaml("l.yaml", "- name: a\n- name: b\n") is None
    assert not may_be_backend_yaml("npu.json", NPU_YAML.encode())
    # a yaml that looks like one but does not parse: a warning naming it, nothing read
    with caplog.at_level(logging.WARNING):
        assert (
            read_backend_yaml("bad.yaml", "backend: NPU\ncpp_namespace: x\nsupported: [a\n") is None
        )
    assert "bad.yaml:4: not valid YAML" in caplog.text


KERNELS_CPP = r"""
#include <torch/library.h>
// TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("commented_out", f); }
/* m.impl("in_a_block_comment", f); */
namespace at_npu {
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("true_divide.Tensor", TORCH_FN(true_divide_Tensor));
  m.impl(TORCH_SELECTIVE_NAME("aten::is_pinned"), TORCH_FN(is_pinned));
  m.impl("_copy_from",
         torch::CppFunction::makeFallthrough());
  m.impl("add.out", c10::DispatchKey::CPU, TORCH_FN(add_out));
  m.impl("${name}", TORCH_FN(templated));  // a codegen template's placeholder
  const char* note = "a brace { and a paren ( in a string";
  m.impl("empty_strided", TORCH_FN(empty_strided));
}
TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) {
  m.impl("npu_format_cast", TORCH_FN(npu_format_cast));
}
TORCH_LIBRARY_FRAGMENT(aten, m) {
  m.def("npu_only_op(Tensor self) -> Tensor");
}
#define REGISTER_CPU_EMPTY                                  \
  TORCH_LIBRARY_IMPL(aten, CPU, m) {                        \
    m.impl("empty.memory_format", TORCH_FN(empty_memory_format)); \
  }
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npu_cpu_fallback>());
}
static const char* kFallbackOps[] = {"aten::nonzero", "aten::_unique2.default"};
auto message = "support operator 'aten::_sparse_csr_sum.dim_dtype' is missing";
auto raw = R"doc(m.impl("in_a_raw_string", f))doc";
constexpr int64_t big = 1'000'000;
}  // namespace at_npu
"""


def test_cpp_registrations_as_written():
    scan = scan_cpp("torch_npu/csrc/aten/Kernels.cpp", KERNELS_CPP)
    rows = [(k.line, str(k.role), k.namespace, k.name, k.where, k.boxed) for k in scan.kernels]
    assert rows == [
        (7, "kernel", "aten", "true_divide.Tensor", "PrivateUse1", False),
        (8, "kernel", "aten", "is_pinned", "PrivateUse1", False),
        (9, "kernel", "aten", "_copy_from", "PrivateUse1", True),  # a fallthrough
        (11, "kernel", "aten", "add.out", "CPU", False),  # the key written in the call
        (14, "kernel", "aten", "empty_strided", "PrivateUse1", False),
        (17, "kernel", "npu", "npu_format_cast", "PrivateUse1", False),
        (20, "custom", "aten", "npu_only_op", "def", False),
        (24, "kernel", "aten", "empty.memory_format", "CPU", False),  # in a macro's body
        (29, "op_list", "aten", "nonzero", "string", False),
        (29, "op_list", "aten", "_unique2.default", "string", False),
    ]
    assert [(f.line, f.key) for f in scan.fallbacks] == [(27, "PrivateUse1")]
    assert "npu_cpu_fallback" in scan.fallbacks[0].kernel


AUTOCAST_CPP = r"""
#include <ATen/autocast_mode.h>
#define KERNEL_PRIVATEUSEONE(OP, POLICY) KERNEL(c10::DeviceType::PrivateUse1, OP, POLICY)
#define _KERNEL_NPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // lower_precision_fp
  KERNEL_PRIVATEUSEONE(_convolution, deprecated, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv1d, lower_precision_fp)
  KERNEL(c10::DeviceType::PrivateUse1, pow, Tensor_Scalar, fp32)
  KERNEL_PRIVATEUSEONE(ADD_NS(matmul), lower_precision_fp)
  // KERNEL_PRIVATEUSEONE(commented_out, fp32)
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(
      ADD_NS(norm),
      "norm.Scalar",
      at::Tensor(const at::Tensor&, const c10::Scalar&),
      at::Tensor(const at::Tensor&, const c10::optional<c10::Scalar>&, at::ScalarType),
      fp32_append_dtype)
  AT_FORALL_FP32(_KERNEL_NPU_FP32)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&bce_banned)));
}
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  KERNEL_PRIVATEUSEONE(not_an_autocast_block, fp32)
}
"""


def test_autocast_lists_as_written():
    scan = scan_cpp("torch_npu/csrc/aten/AutoCastOps.cpp", AUTOCAST_CPP)
    rows = [(k.line, str(k.role), k.name, k.where, k.explicit_signature) for k in scan.kernels]
    assert rows == [
        (10, "autocast", "_convolution.deprecated", "lower_precision_fp", False),
        (11, "autocast", "conv1d", "lower_precision_fp", False),
        (12, "autocast", "pow.Tensor_Scalar", "fp32", False),  # upstream's KERNEL(DeviceType, ...)
        (13, "autocast", "matmul", "lower_precision_fp", False),
        (15, "autocast", "norm.Scalar", "fp32_append_dtype", True),
        (22, "kernel", "binary_cross_entropy", "AutocastPrivateUse1", False),
    ]
    explicit = scan.kernels[4]
    assert explicit.schema == "at::Tensor(const at::Tensor&, const c10::Scalar&)"
    assert [(f.line, f.key) for f in scan.fallbacks] == [(6, "AutocastPrivateUse1")]


def test_masking_keeps_lines_and_offsets():
    text = 'a("x{y", /* c\n */ \'"\', R"(z")") // tail\nb'
    m = mask(text)
    assert len(m.code) == len(text) and m.code.count("\n") == text.count("\n")
    assert "{" not in m.code and "tail" not in m.code and m.code.endswith("\nb")
    assert sorted(m.strings.values()) == ["x{y", 'z"']


SHIM_H = """\
// WARNING: THIS FILE IS AUTOGENERATED BY torchnpugen. DO NOT MODIFY BY HAND.
#pragma once
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_npu__cdist_backward(AtenTensorHandle grad, AtenTensorHandle x1, AtenTensorHandle x2, double p, AtenTensorHandle cdist, AtenTensorHandle* ret0);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_npu_add_Tensor(AtenTensorHandle self, AtenTensorHandle other, double alpha, AtenTensorHandle* ret0);
"""  # noqa: E501


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_a_tree_read_once_with_counts(tmp_path):
    root = _tree(
        tmp_path / "torch_npu_src",
        {
            "torch_npu/__init__.py": "",
            "torch_npu/csrc/aten/npu_native_functions.yaml": NPU_YAML,
            # the same overloads again in a second yaml: counted once
            "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml": NPU_YAML,
            "torch_npu/csrc/aten/Kernels.cpp": KERNELS_CPP,
            "torch_npu/csrc/aten/AutoCastOps.cpp": AUTOCAST_CPP,
            "torch_npu/csrc/aten/Plain.cpp": "int f() { return 1; }\n",
            "torch_musa/generated/c_shim_musa.h": SHIM_H.replace(
                "aoti_torch_npu_", "aoti_torch_musa_"
            ),
            "torch_npu/include/generated/c_shim_npu.h": SHIM_H,
            ".github/workflows/ci.yml": "jobs: {}\n",
        },
    )
    snap = open_snapshot(str(root), tmp_path / "cache", also=is_native_source)
    assert "torch_npu/csrc/aten/Kernels.cpp" in snap.paths()
    index = read_registered_kernels(snap.paths(), snap.read)
    assert index.backend_yamls == [
        "torch_npu/csrc/aten/npu_native_functions.yaml",
        "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml",
    ]
    stats = index.stats()
    by_source = stats["registered_kernels_by_source"]
    # yaml: 10 distinct overloads of every section (abs.out in supported and symint, and
    # the second file, count once), custom's npu_format_cast among them
    assert by_source["backend_yaml"] == 10 and by_source["backend_yaml_custom"] == 1
    # m.impl: Kernels.cpp's 7 (npu::npu_format_cast too) and AutoCastOps.cpp's one
    assert by_source["cpp_impl"] == 8 and by_source["autocast"] == 5
    assert by_source["c_shim"] == 2 and by_source["op_list"] == 2 and by_source["fallback"] == 2
    # the union by name: the yaml's 10, the C++ kernels, the def and autocast's 5, none
    # named twice (npu::npu_format_cast keeps its namespace: not the yaml's custom op)
    assert stats["registered_kernels"] == 10 + 8 + 1 + 5
    assert stats["registered_kernel_files"]["cpp_read"] == 5
    assert stats["registered_kernel_files"]["cpp_registering"] == 4
    # shims: the device comes off the name by the header's own device (musa is no device
    # of the handles table); a C_SHIM reference and a C_SHIM-role record each
    shims = sorted((r.path.split("/")[0], r.target) for r in index.shim_references)
    assert shims == [
        ("torch_musa", "c_shim:_cdist_backward"),
        ("torch_musa", "c_shim:add_Tensor"),
        ("torch_npu", "c_shim:_cdist_backward"),
        ("torch_npu", "c_shim:add_Tensor"),
    ]
    assert all(r.kind is CouplingKind.C_SHIM for r in index.shim_references)
    records = [k for k in index.kernels if k.role is KernelRole.C_SHIM]
    assert {(k.name, k.line) for k in records} == {("_cdist_backward", 3), ("add_Tensor", 4)}


def test_excluded_paths_are_not_read(tmp_path):
    root = _tree(
        tmp_path / "t", {"a/npu_native_functions.yaml": NPU_YAML, "test/t.cpp": KERNELS_CPP}
    )
    snap = open_snapshot(str(root), tmp_path / "cache", also=is_native_source)
    index = read_registered_kernels(snap.paths(), snap.read, skip=lambda p: p.startswith("test/"))
    assert index.cpp_files_read == 0 and index.backend_yamls == ["a/npu_native_functions.yaml"]
