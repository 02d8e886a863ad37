"""Real-world acceptance of the native half: torch-npu's shared objects against two torch
releases (issue #30), read from the wheels a user gets (tests/impact/conftest.py:
INSTEP_REALWORLD=1 downloads them with pip, or INSTEP_WHEELS names a folder holding them).

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

import os
from pathlib import Path

import pytest

from instep.impact.join.verdicts import judge_unit
from instep.impact.model import Action, NativeCheck
from instep.impact.native_coupling import analyse_native
from instep.impact.upstream.sources import open_snapshot

pytestmark = [pytest.mark.slow, pytest.mark.realworld]
NPU = "torch_npu/lib/libtorch_npu.so"


def _native(old: Path, new: Path, down: Path, cache: Path):
    snaps = [open_snapshot(str(p), cache) for p in (old, new, down)]
    d = snaps[2]
    return analyse_native(
        mode="release",
        old=snaps[0],
        new=snaps[1],
        down=d,
        python_paths=[p for p in d.paths() if p.endswith(".py")],
        read_python=d.read,
        cache_root=cache,
        labels={"old": "old", "new": "new"},
    )


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return Path(os.environ.get("INSTEP_CACHE_DIR") or tmp_path_factory.mktemp("instep-cache"))


def test_torch_2_13_to_2_14_1_checks_libtorch_npu_s_symbols_none_missing(real_wheels, cache):
    result = _native(real_wheels["old"], real_wheels["new"], real_wheels["down"], cache)
    s = result.scope
    assert s.native is NativeCheck.CHECKED and s.unreadable == ()
    assert result.by_object[NPU] == [1585, 0]
    assert s.missing_symbols == 0 and not result.units
    assert s.shared_objects == 9
    assert "torch/lib/libtorch_cuda.so" not in s.upstream_libraries
    assert set(s.upstream_libraries) == {
        "torch/lib/libc10.so",
        "torch/lib/libtorch.so",
        "torch/lib/libtorch_cpu.so",
        "torch/lib/libtorch_python.so",
    }


@pytest.fixture(scope="module")
def wheels_2_12(cache) -> dict[str, Path]:
    """torch 2.12.0 and torch-npu 2.12.0, found or downloaded as the other wheels are."""
    where = os.environ.get("INSTEP_WHEELS")
    found = {}
    if where and Path(where).is_dir():
        for key, prefix in (("torch", "torch-2.12.0"), ("npu", "torch_npu-2.12.0")):
            hits = sorted(Path(where).glob(f"{prefix}*.whl"))
            if hits:
                found[key] = hits[0]
    if len(found) == 2:
        return found
    if os.environ.get("INSTEP_REALWORLD") != "1":
        pytest.skip("torch 2.12.0 wheels not available (set INSTEP_REALWORLD=1 or INSTEP_WHEELS)")
    from instep.impact.upstream.sources.pip_spec import download_wheel

    return {
        "torch": download_wheel("torch==2.12.0", cache),
        "npu": download_wheel("torch-npu==2.12.0", cache),
    }


def test_torch_2_12_to_2_13_one_shim_unit_for_libtorch_npu(wheels_2_12, real_wheels, cache):
    result = _native(wheels_2_12["torch"], real_wheels["old"], wheels_2_12["npu"], cache)
    assert result.by_object[NPU] == [1522, 39]  # nm -D: 1,528, 6 of them libtensorpipe's
    units = {u.id: (u, cs) for u, cs in result.units}
    unit, couplings = units[f"{NPU} (linked symbols)"]
    impact = judge_unit(unit, couplings)
    assert impact.action is Action.SHIM and len(couplings) == 39
    assert {c.rule for c in couplings} == {"linked_symbol.fails_at_import"}
    names = [c.upstream.split("::", 1)[1] for c in couplings]
    assert sum(n.startswith("at::namedinference::") for n in names) == 15
    assert "at::namedinference::propagate_names(at::Tensor const&, at::Tensor const&)" in names
    assert all(c.evidence.startswith(f"{NPU}: undefined symbol: _Z") for c in couplings)
    assert "ATen/NamedTensorUtils.h" in unit.title
    # loaded at import: the extension module torch_npu._C needs it
    assert all(c.downstream.endswith(".py:" + c.downstream.rsplit(":", 1)[1]) for c in couplings)
    assert "through DT_NEEDED torch_npu/_C" in couplings[0].detail
    # the ATB plugin loses one symbol too, but its load is guarded
    _, atb = units["torch_npu/lib/libop_plugin_atb.so (linked symbols)"]
    assert [c.rule for c in atb] == ["linked_symbol.load_guarded"]
    assert atb[0].downstream.startswith("torch_npu/op_plugin/atb/_atb_ops.py:")
