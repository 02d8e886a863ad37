"""Real-world acceptance of the linked-symbol pass: torch-npu's shared objects against two
torch releases (issue #30), in the whole report ``instep impact`` makes from the real
wheels (tests/impact/conftest.py: ``release_doc``, shared with the golden rows, and
``release_doc_2_12``, which runs only when its wheels are at hand or asked for).

The 2.12.0 -> 2.13.0 tests run only with ``INSTEP_REALWORLD_2_12=1`` (then torch 2.12.0,
532 MB, and torch-npu 2.12.0, 40 MB, are downloaded) or an ``INSTEP_WHEELS`` folder holding
those two wheels: CI sets neither. They cost one more cold analysis, about 78 CPU-s (the
2.13.0 -> 2.14.1 tests share the golden test's analysis and add only their assertions), for
rows the tests on ELF files and git repositories the tests build cover too
(docs/validation/impact-native.md, "On the merged code").

- torch 2.13.0 -> 2.14.1 on torch-npu 2.13.0: ``libtorch_npu.so`` takes 1,585 symbols
  from torch, none missing: the scope says so. ``nm -D`` counts 1,591 undefined symbols
  that torch's libraries define: 6 of them are libstdc++ names (``std::ios_base_library_
  init()``, ``exception_ptr::_M_addref()``...) that ``libtensorpipe.so``, ahead of torch's
  libraries in ``libtorch_npu.so``'s ``DT_NEEDED``, exports too: the linker binds those
  to it (docs/validation/impact-native.md);
- torch 2.12.0 -> 2.13.0 on torch-npu 2.12.0: one Shim unit for ``libtorch_npu.so`` with
  the 39 symbols torch 2.13.0 no longer exports (named-tensor inference and its kin).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.realworld]
NPU = "torch_npu/lib/libtorch_npu.so"


def test_torch_2_13_to_2_14_1_checks_libtorch_npu_s_symbols_none_missing(release_doc):
    s = release_doc["scope"]
    assert s["native"] == "checked" and s["unreadable"] == [] and s["detail"] == ""
    assert release_doc["stats"]["linked_symbols_by_object"][NPU] == [1585, 0]
    assert s["missing_symbols"] == 0 and s["moved_symbols"] == 0
    assert s["shared_objects"] == 9 and s["linked_symbols"] == 1689
    assert s["registered_kernels"] == 1500 and s["python_files"] > 1000
    assert set(s["upstream_libraries"]) == {
        "torch/lib/libc10.so",
        "torch/lib/libtorch.so",
        "torch/lib/libtorch_cpu.so",
        "torch/lib/libtorch_python.so",
    }
    assert not [u for u in release_doc["units"] if u["unit_kind"] == "library"]
    assert "linked_symbol" not in release_doc["summary"]["by_coupling_kind"]


def test_torch_2_12_to_2_13_one_shim_unit_for_libtorch_npu(release_doc_2_12):
    doc = release_doc_2_12
    assert doc["stats"]["linked_symbols_by_object"][NPU] == [1522, 39]  # nm -D: 1,528
    assert doc["scope"]["native"] == "checked" and doc["scope"]["missing_symbols"] == 40
    units = {u["id"]: u for u in doc["units"] if u["unit_kind"] == "library"}
    atb_id = "torch_npu/lib/libop_plugin_atb.so (linked symbols)"
    assert set(units) == {f"{NPU} (linked symbols)", atb_id}
    unit = units[f"{NPU} (linked symbols)"]
    couplings = unit["couplings"]
    assert unit["action"] == "Shim" and unit["stage"] == "Runtime" and len(couplings) == 39
    assert {c["rule"] for c in couplings} == {"linked_symbol.fails_at_import"}
    names = [c["upstream"].split("::", 1)[1] for c in couplings]
    assert sum(n.startswith("at::namedinference::") for n in names) == 15
    assert "at::namedinference::propagate_names(at::Tensor const&, at::Tensor const&)" in names
    assert all(c["evidence"].startswith(f"{NPU}: undefined symbol: _Z") for c in couplings)
    assert "ATen/NamedTensorUtils.h" in unit["title"]
    # loaded at import: the extension module torch_npu._C needs it
    assert all(".py:" in c["downstream"] for c in couplings)
    assert "through DT_NEEDED torch_npu/_C" in couplings[0]["detail"]
    # the ATB plugin loses one symbol too, but its load is guarded
    atb = units[atb_id]["couplings"]
    assert [c["rule"] for c in atb] == ["linked_symbol.load_guarded"]
    assert atb[0]["downstream"].startswith("torch_npu/op_plugin/atb/_atb_ops.py:")
    # the native units follow the diff's, each titled by itself
    ids = [u["id"] for u in doc["units"]]
    assert ids[-2:] == sorted(units)
