"""Code both sides vendor from a third party is no fork of the upstream (issue #31).

torch vendors ``packaging`` and QuACK under ``torch/_vendor/``; a downstream that vendors
the same library (a serving engine's copy of flash-attention's kernels and helpers)
matched it as a stale copy of torch. An upstream function under a vendored directory
(``fork_search.VENDORED_DIRS``: ``_vendor``, ``vendored_templates``, ``third_party``, ...)
is no fork candidate; the same copy of a function of torch itself stays a fork.
"""

from __future__ import annotations

import pytest

from instep.impact.join.fork_search import vendored

from .gitrepo import impact_of_commit

PARSE_V1 = """\
def parse_version(text):
    parts = text.split(".")
    numbers = [int(p) for p in parts if p.isdigit()]
    while numbers and numbers[-1] == 0:
        numbers.pop()
    release = tuple(numbers)
    return release, text.endswith("+local")
"""
PARSE_V2 = PARSE_V1.replace('text.endswith("+local")', '"+" in text')
SIZE_V1 = """\
def parse_size(text):
    value, unit = text[:-2], text[-2:]
    scale = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[unit.upper()]
    number = float(value.strip())
    if number < 0:
        raise ValueError(text)
    return int(number * scale)
"""
SIZE_V2 = SIZE_V1.replace("raise ValueError(text)", "raise ValueError(f'negative: {text}')")


@pytest.fixture(scope="module")
def forked(tmp_path_factory) -> dict[str, str]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("vendored"),
        {
            "torch/_vendor/__init__.py": "",
            "torch/_vendor/packaging/__init__.py": "",
            "torch/_vendor/packaging/version.py": PARSE_V1,
            "torch/_inductor/sizes.py": SIZE_V1,
        },
        {"torch/_vendor/packaging/version.py": PARSE_V2, "torch/_inductor/sizes.py": SIZE_V2},
        "bump vendored packaging; local versions (#3)",
        {"torch_npu/third/version.py": PARSE_V1, "torch_npu/sizes.py": SIZE_V1},
    )
    return {
        c["upstream"]: c["rule"]
        for unit in doc["units"]
        for c in unit["couplings"]
        if c["kind"] == "fork"
    }


def test_a_copy_of_vendored_code_is_no_fork(forked):
    assert "torch/_vendor/packaging/version.py::parse_version" not in forked


def test_the_same_copy_of_torch_code_is_a_fork(forked):
    assert forked["torch/_inductor/sizes.py::parse_size"] == "fork.stale"


@pytest.mark.parametrize(
    ("path", "is_vendored"),
    [
        ("torch/_vendor/packaging/version.py", True),
        ("torch/_inductor/kernel/vendored_templates/cutedsl/gemm.py", True),
        ("torch/third_party/x.py", True),
        ("torch/_inductor/vendor.py", False),  # a module named so is torch's own
        ("torch/_inductor/lowering.py", False),
    ],
)
def test_what_is_vendored(path, is_vendored):
    assert vendored(path) is is_vendored
