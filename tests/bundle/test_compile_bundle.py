"""A bundle of a real torch.compile failure: one tiny Inductor (CPU, C++) compile whose
custom lowering of ``aten.sin`` computes ``cos``, so compiled differs from eager.

The run shares a session-wide cache (instep's ``cache_dir``); the case disables the FX
graph cache itself (a wrong lowering must neither hit nor write it). The debug re-run
compiles again in its own fresh cache: that is what puts the FX graph, the IR, the
output code and the kernel source in the bundle.
"""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
from tests.bundle.conftest import Project, bundle_files, paths_of, tar_files

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]

WRONG_LOWERING = """
import torch
from torch._inductor import lowering
from torch._inductor.lowering import register_lowering

from instep.suites.triad import check_triad

aten = torch.ops.aten


def f(x):
    return (x.sin() + 1).relu()


def test_wrong_sin_lowering():
    original = lowering.lowerings[aten.sin.default]
    register_lowering(aten.sin.default)(lambda x: lowering.lowerings[aten.cos.default](x))
    try:
        with torch._inductor.config.patch(force_disable_caches=True):
            check_triad(f, [torch.randn(8, generator=torch.Generator().manual_seed(0))], "cpu")
    finally:
        lowering.lowerings[aten.sin.default] = original
"""
CASE = "test_wrong_lowering.py::test_wrong_sin_lowering"


@pytest.fixture(scope="session")
def inductor_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("bundle-instep-cache")


def test_compile_failure_bundle_has_the_compiler_artifacts(tmp_path, inductor_cache):
    (tmp_path / "test_wrong_lowering.py").write_text(WRONG_LOWERING)
    (tmp_path / "instep.toml").write_text(f'cache_dir = "{inductor_cache}"\n')
    project = Project(tmp_path, tmp_path / "instep.db")
    run = project.instep("run", CASE, "--run", "compile", "--db", str(project.db))
    assert run.code == 1, run.err

    result = project.bundle(CASE, "--out", str(tmp_path / "out"), run="compile")
    assert result.code == 0, result.err
    directory, archive = paths_of(result)
    files = bundle_files(directory)
    names = [n.rsplit("/", 1)[-1] for n in files]
    for artifact in (
        "fx_graph_readable.py",
        "fx_graph_runnable.py",
        "ir_pre_fusion.txt",
        "ir_post_fusion.txt",
        "output_code.py",
    ):
        assert artifact in names, artifact
    kernels = [n for n in files if n.startswith("rerun/inductor_cache/") and n.endswith(".cpp")]
    assert kernels, "no kernel source from the fresh inductor cache"
    # the evidence shows the bug: the generated kernel computes cos where eager has sin
    assert any(b"cos" in files[k] for k in kernels)
    assert any(n.startswith("rerun/torch_trace/") for n in files)
    assert tar_files(archive) == files

    data = json.loads(files["bundle.json"])
    assert data["rerun"]["status"] == "failed"
    assert data["rerun_same_signature"] is True
    assert set(data["artifacts"]) >= {"fx_graph", "inductor_ir", "output_code", "kernel_source"}
    issue = files["ISSUE.md"].decode()
    assert issue.startswith(
        "# [Numerics][wrong_sin_lowering] CompiledMismatch: compiled (inductor) on cpu differs"
    )
    assert "- CPU compiled (inductor): stored: mismatch, debug re-run: mismatch" in issue
    assert "- CPU eager (reference): stored: ok, debug re-run: ok" in issue
    assert "reproduced: same signature as the stored failure" in issue
    if shutil.which("tlparse"):
        assert "rerun/tlparse/index.html" in files
    else:
        assert "tlparse is not on PATH" in issue
