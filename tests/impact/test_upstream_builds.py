"""Two upstreams of different builds (a CPU wheel against a CUDA one) differ in
``torch.version.cuda`` for that reason alone: the report warns and says what to give
instead. torchao 0.18.0 on this machine's README pair (``torch==2.13.0`` from the local
CPU wheels, ``torch==2.14.1`` a CUDA 13.0 wheel) had six Test couplings on
``torch.version.cuda`` from it. Two upstreams of the same build give no warning.
"""

from __future__ import annotations

from .gitrepo import impact_of_commit

CPU = "from typing import Optional\n\n__version__ = '{v}+cpu'\ncuda: Optional[str] = None\n"
CUDA = "from typing import Optional\n\n__version__ = '{v}'\ncuda: Optional[str] = '13.0'\n"
DOWN = {"torch_npu/cuda_check.py": "import torch\n\nHAS_CUDA = torch.version.cuda is not None\n"}


def _warnings(tmp_path, old: str, new: str) -> list[str]:
    doc = impact_of_commit(
        tmp_path,
        {"torch/version.py": old.format(v="2.13.0")},
        {"torch/version.py": new.format(v="2.14.1")},
        "release",
        DOWN,
    )
    return [w for w in doc["warnings"] if "different builds" in w]


def test_a_cpu_and_a_cuda_upstream_are_named_as_different_builds(tmp_path):
    (warning,) = _warnings(tmp_path, CPU, CUDA)
    assert "(CPU, then CUDA 13.0)" in warning
    assert "torch.version.cuda" in warning


def test_two_upstreams_of_one_build_give_no_warning(tmp_path):
    assert _warnings(tmp_path, CUDA, CUDA) == []
