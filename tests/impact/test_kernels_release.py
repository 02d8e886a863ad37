"""Real-world acceptance of the registered-kernel pass (issue #30): torch-npu's codegen yaml
against the torch releases it meets, from the real wheels.

Runs only when the wheels can be had, found the way a user finds them: ``INSTEP_WHEELS``
(a folder holding them) or ``INSTEP_REALWORLD=1`` (``pip download --no-deps`` into
instep's wheel cache, as ``instep impact --upstream-old torch==2.12.0`` does). The pass
runs as ``instep impact`` runs it, on what it reads: the release diff of the two wheels'
``native_functions.yaml`` (``release_diff.diff_versions``), the downstream wheel's yaml and
C++ (``read_registered_kernels``), the join (``Join`` + ``KernelCouplings``), the unit
verdict and the Act-now section. Not the whole cold analysis: that costs about 70 CPU-s a
pair (its Python diff and dataclass pass), nothing of which this pass reads; the whole
pipeline is tested end to end on real git repositories (test_kernel_couplings.py).
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.realworld]

SPECS = {
    "torch-2.12.0": "torch==2.12.0",
    "torch-2.13.0": "torch==2.13.0",
    "torch-2.14.1": "torch==2.14.1",
    "torch_npu-2.12.0": "torch-npu==2.12.0",
    "torch_npu-2.13.0": "torch-npu==2.13.0",
}
CODEGEN_YAML = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    where = os.environ.get("INSTEP_WHEELS")
    if where and Path(where).is_dir():
        found = {k: sorted(Path(where).glob(f"{k}[+-]*.whl")) for k in SPECS}
        if all(found.values()):
            return {k: v[0] for k, v in found.items()}
    if os.environ.get("INSTEP_REALWORLD") != "1":
        pytest.skip("real wheels not available (set INSTEP_REALWORLD=1 or INSTEP_WHEELS)")
    from instep.impact.upstream.sources.pip_spec import download_wheel

    cache = Path(os.environ.get("INSTEP_CACHE_DIR") or tmp_path_factory.mktemp("instep-cache"))
    return {k: download_wheel(spec, cache) for k, spec in SPECS.items()}


def _report(wheels: dict[str, Path], old: str, new: str, down: str) -> dict:
    """The registered-kernel couplings of one pair, as the report's JSON has them."""
    from instep.impact.downstream.registered_kernels import (
        is_native_source,
        read_registered_kernels,
    )
    from instep.impact.export.json_doc import as_document
    from instep.impact.export.sections import act_now
    from instep.impact.join.kernel_couplings import KernelCouplings
    from instep.impact.join.matchers import Join
    from instep.impact.join.verdicts import judge_unit
    from instep.impact.model import ImpactReport, UpstreamChange
    from instep.impact.upstream.op_schemas import SCHEMA_FILES
    from instep.impact.upstream.release_diff import diff_versions
    from instep.impact.upstream.resolver import UpstreamResolver
    from instep.impact.upstream.sources import is_test_path, open_snapshot

    cache = wheels[old].parent  # unused: every side is a wheel file, nothing is downloaded
    path = SCHEMA_FILES[1]  # a wheel's torchgen/packaged/... copy
    sides = [open_snapshot(str(wheels[k]), cache) for k in (old, new)]
    changes = diff_versions([(path, *(s.read(path) for s in sides))], jobs=1).changes
    units = [UpstreamChange(path, path, "file", [path], changes)]
    snap = open_snapshot(str(wheels[down]), cache, also=is_native_source)
    kernels = read_registered_kernels(snap.paths(), snap.read, skip=is_test_path)
    version = tuple(int(x) for x in new.split("-")[1].split("."))
    join = Join(units, UpstreamResolver([], lambda p: None), frozenset({"torch"}), version, str)
    KernelCouplings(join, units).match(kernels.kernels)
    found = join.couplings().get(0, [])
    report = ImpactReport({"mode": "release"}, {}, [judge_unit(units[0], found)])
    report.stats = kernels.stats()
    return {**as_document(report), "act_now": act_now(report)}


def _kernel_couplings(doc: dict) -> list[dict]:
    return [c for u in doc["units"] for c in u["couplings"] if c["kind"] == "registered_kernel"]


def test_torch_npu_2_12_on_torch_2_13_the_removed_overloads(wheels):
    doc = _report(wheels, "torch-2.12.0", "torch-2.13.0", "torch_npu-2.12.0")
    assert doc["stats"]["registered_kernels"] == 1506
    couplings = _kernel_couplings(doc)
    assert {(c["action"], c["rule"]) for c in couplings} == {("Shim", "kernel.removed_codegen")}
    overloads = {c["upstream"].rsplit("::", 1)[1] for c in couplings}
    assert len(overloads) == 28
    assert {"sum.dim_DimnameList", "mean.names_dim", "zeros.names"} <= overloads
    # full.names is in both yamls: 29 places for 28 overloads
    assert len(couplings) == 29
    assert doc["units"][0]["action"] == "Shim"
    # Act now: the yaml line, and the line of the old native_functions.yaml
    line = next(x for x in doc["act_now"] if x.upstream.endswith("::aten::sum.dim_DimnameList"))
    assert line.downstream.startswith(f"{CODEGEN_YAML}:")
    assert re.fullmatch(
        r"torchgen/packaged/ATen/native/native_functions\.yaml:\d+", line.upstream_at
    )
    assert line.kind == "registered_kernel, kernel" and line.change == "removed"
    # each at the yaml line that names it, with the old schema file's line
    members = zipfile.ZipFile(wheels["torch_npu-2.12.0"])
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


def test_torch_npu_2_13_on_torch_2_14_cdist_backward(wheels):
    doc = _report(wheels, "torch-2.13.0", "torch-2.14.1", "torch_npu-2.13.0")
    assert doc["stats"]["registered_kernels"] == 1500
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
    assert not doc["act_now"]
