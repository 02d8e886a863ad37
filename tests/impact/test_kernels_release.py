"""Real-world acceptance of the registered-kernel pass (issue #30): torch-npu's codegen yaml
against the torch releases it meets, in the whole report ``instep impact`` makes from the
real wheels (tests/impact/conftest.py: ``release_doc``, shared with the golden rows, and
``release_doc_2_12``, which runs only when its wheels are at hand or asked for).

The 2.12.0 -> 2.13.0 tests run only with ``INSTEP_REALWORLD_2_12=1`` (then torch 2.12.0,
532 MB, and torch-npu 2.12.0, 40 MB, are downloaded) or an ``INSTEP_WHEELS`` folder holding
those two wheels: CI sets neither. They cost one more cold analysis, about 78 CPU-s (the
2.13.0 -> 2.14.1 tests share the golden test's analysis and add only their assertions), for
rows the tests on ELF files and git repositories the tests build cover too
(docs/validation/impact-native.md, "On the merged code").
"""

from __future__ import annotations

import re
import zipfile

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.realworld]

CODEGEN_YAML = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
SCHEMA_FILE = "torchgen/packaged/ATen/native/native_functions.yaml"


def _kernel_couplings(doc: dict) -> list[dict]:
    return [c for u in doc["units"] for c in u["couplings"] if c["kind"] == "registered_kernel"]


def test_torch_npu_2_12_on_torch_2_13_the_removed_overloads(release_doc_2_12, wheels_2_12):
    doc = release_doc_2_12
    assert doc["stats"]["registered_kernels"] == 1506
    assert doc["scope"]["registered_kernels"] == 1506
    couplings = _kernel_couplings(doc)
    assert {(c["action"], c["rule"]) for c in couplings} == {("Shim", "kernel.removed_codegen")}
    overloads = {c["upstream"].rsplit("::", 1)[1] for c in couplings}
    assert len(overloads) == 28
    assert {"sum.dim_DimnameList", "mean.names_dim", "zeros.names"} <= overloads
    # full.names is in both yamls: 29 places for 28 overloads
    assert len(couplings) == 29
    (unit,) = [u for u in doc["units"] if u["id"] == SCHEMA_FILE]
    assert unit["action"] == "Shim"
    # each at the yaml line that names it, with the old schema file's line
    members = zipfile.ZipFile(wheels_2_12["down"])
    texts = {}
    for c in couplings:
        path, line = c["downstream"].rsplit(":", 1)
        if path not in texts:
            texts[path] = members.read(path).decode().splitlines()
        name = c["upstream"].rsplit("::", 1)[1]
        assert re.search(rf"\b{re.escape(name)}\b", texts[path][int(line) - 1]), c["downstream"]
        assert re.search(
            rf"aten::{re.escape(name)} at native_functions.yaml:\d+ \(old\)", c["detail"]
        )
        assert c["role"] == "kernel"


def test_torch_npu_2_13_on_torch_2_14_cdist_backward(release_doc):
    doc = release_doc
    assert doc["stats"]["registered_kernels"] == 1500
    assert doc["scope"]["registered_kernels"] == 1500
    kernel = {
        (c["downstream"], c["upstream"].rsplit("::", 1)[1]): (c["action"], c["rule"])
        for c in _kernel_couplings(doc)
        if c["downstream"].startswith(CODEGEN_YAML)
    }
    assert kernel == {
        (f"{CODEGEN_YAML}:1170", "_cdist_backward"): ("Test", "kernel.argument_renamed")
    }
    # the shim headers' declarations of it: Check (C calls are positional); no Shim
    shims = {
        (c["downstream"].rsplit("/", 2)[-2], c["rule"])
        for c in _kernel_couplings(doc)
        if not c["downstream"].startswith(CODEGEN_YAML)
    }
    assert shims == {("generated", "kernel.c_shim_renamed"), ("v2r13", "kernel.c_shim_renamed")}
    assert not any(c["action"] == "Shim" for c in _kernel_couplings(doc)), (
        "no registered kernel of torch-npu 2.13.0 breaks on torch 2.14.1"
    )
