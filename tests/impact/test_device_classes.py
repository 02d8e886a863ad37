"""A breaking call in a method of an upstream device class reaches the backend only when a
class the backend registers for that role (``register_backend_for_device``) inherits it.

One real upstream git commit adds ``workspace`` to ``DeviceOpOverrides.cpp_global_scratch``
and passes it from ``CppWrapperGpu.generate_args_decl`` (upstream registers
``CppWrapperGpu`` as the cpp wrapper for ``cuda``). The downstream overrides
``cpp_global_scratch`` without ``workspace`` and registers its own wrappers, or none.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit


def _common(new: bool) -> str:
    params = "idx, workspace" if new else "idx"
    return f"""\
device_codegens = {{}}


class DeviceOpOverrides:
    def cpp_global_scratch(self, {params}):
        return None


def register_backend_for_device(
    device, device_scheduling, device_wrapper_codegen, device_cpp_wrapper_codegen=None
):
    device_codegens[device] = (device_scheduling, device_wrapper_codegen)


def init_backend_registration():
    from .cpp_wrapper_cpu import CppWrapperCpu
    from .cpp_wrapper_gpu import CppWrapperGpu
    from .wrapper import PythonWrapperCodegen

    register_backend_for_device("cpu", None, PythonWrapperCodegen, CppWrapperCpu)
    register_backend_for_device("cuda", None, PythonWrapperCodegen, CppWrapperGpu)
"""


def _gpu(new: bool) -> str:
    args = "idx, self.workspace" if new else "idx"
    return f"""\
from .cpp_wrapper_cpu import CppWrapperCpu


class CppWrapperGpu(CppWrapperCpu):
    def generate_args_decl(self, idx):
        return self.device_codegen.cpp_global_scratch({args})
"""


UP = {
    "torch/_inductor/codegen/__init__.py": "",
    "torch/_inductor/codegen/wrapper.py": (
        "class PythonWrapperCodegen:\n    def generate(self):\n        return None\n"
    ),
    "torch/_inductor/codegen/cpp_wrapper_cpu.py": (
        "from .wrapper import PythonWrapperCodegen\n\n\n"
        "class CppWrapperCpu(PythonWrapperCodegen):\n    pass\n"
    ),
}

DOWN = """\
from torch._inductor.codegen.common import DeviceOpOverrides, register_backend_for_device
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu
from torch._inductor.codegen.wrapper import PythonWrapperCodegen


class NPUDeviceOpOverrides(DeviceOpOverrides):
    def cpp_global_scratch(self, idx):
        return None


class NPUWrapper(PythonWrapperCodegen):
    pass


class NPUCppWrapper({base}):
{body}
"""

REGISTER = '\n\nregister_backend_for_device("npu", None, NPUWrapper, NPUCppWrapper)\n'
OVERRIDE = "    def generate_args_decl(self, idx):\n        return idx\n"

CASES = {
    # the registered cpp wrapper derives from CppWrapperCpu: CppWrapperGpu never runs
    "unused": ("CppWrapperCpu", "    pass\n", True),
    "derives": ("CppWrapperGpu", "    pass\n", True),
    "overrides_caller": ("CppWrapperGpu", OVERRIDE, True),
    "unregistered": ("CppWrapperCpu", "    pass\n", False),
}


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for case, (base, body, register) in CASES.items():
        down = DOWN.format(base=base, body=body) + (REGISTER if register else "")
        doc = impact_of_commit(
            tmp_path_factory.mktemp(case),
            {
                **UP,
                "torch/_inductor/codegen/common.py": _common(False),
                "torch/_inductor/codegen/cpp_wrapper_gpu.py": _gpu(False),
            },
            {
                "torch/_inductor/codegen/common.py": _common(True),
                "torch/_inductor/codegen/cpp_wrapper_gpu.py": _gpu(True),
            },
            "cpp_global_scratch takes workspace",
            {"torch_npu/_inductor/codegen.py": down},
        )
        for unit in doc["units"]:
            for c in unit["couplings"]:
                if c["kind"] == "subclass_override" and c["upstream"].endswith(
                    "DeviceOpOverrides.cpp_global_scratch"
                ):
                    out[case] = c
    return out


@pytest.mark.parametrize("case", ["unused", "overrides_caller"])
def test_a_device_class_the_backend_never_registers_is_no_breaking_path(couplings, case):
    c = couplings[case]
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call")
    assert (
        "`CppWrapperGpu.generate_args_decl` runs only for a device that registers"
        in (c["evidence"])
    )
    assert "`NPUCppWrapper`, `NPUWrapper`" in c["evidence"]
    assert "torch/_inductor/codegen/cpp_wrapper_gpu.py:6" in c["evidence"]


@pytest.mark.parametrize("case", ["derives", "unregistered"])
def test_a_registered_class_inheriting_the_caller_or_no_registration_stays_shim(couplings, case):
    c = couplings[case]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "generate_args_decl" in c["evidence"]
