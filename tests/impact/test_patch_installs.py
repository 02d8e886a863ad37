"""A patch installed only under a switch that is off by default is not on the normal path.

torch-npu 2.14.0 installs its ``ir_fx`` patches (``ir.Reduction.create``,
``ir.ConcatKernel.create``, ...) in ``_patch_npu_inductor_ir``, which
``_load_triton_backend`` calls only ``if npu_config.dump_fx_graph:``, a config value read
from ``INDUCTOR_ASCEND_DUMP_FX_GRAPH`` (default False) ``or check_accuracy`` (another
variable, default False). So a breaking upstream call reaches such a patch only when a
user sets one of those variables: Test, saying the switch, not Shim. And such a patch of
a *caller* does not keep the callee's other replacement from being reached on the normal
path: the ``ascend_npu_ir`` patch of ``ConcatKernel.realize_into(cls, src, dst)``, made
at module level, is reached by upstream ``ConcatKernel.create`` passing ``allow_alias=``,
which only the debug patch replaces.

"Off by default" is the value with no environment variable set: the downstream's own
config module (its one assignment, followed through names) and the new upstream's config
defaults. A switch on by default, or one the downstream writes somewhere, decides nothing.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

IR_V1 = """\
class Reduction:
    @classmethod
    def create(cls, x):
        return x


class ConcatKernel:
    @classmethod
    def create(cls, inputs):
        return [cls.realize_into(i, None) for i in inputs]

    @classmethod
    def realize_into(cls, src, dst):
        return src
"""

IR_V2 = """\
class Reduction:
    @classmethod
    def create(cls, x, *, strict=False):
        return x


class ConcatKernel:
    @classmethod
    def create(cls, inputs):
        return [cls.realize_into(i, None, allow_alias=False) for i in inputs]

    @classmethod
    def realize_into(cls, src, dst, allow_alias=True):
        return src
"""

LOWERING_V1 = """\
from torch._inductor import ir


def make_reduction(kind):
    def inner(x):
        return ir.Reduction.create(x)
    return inner
"""

LOWERING_V2 = LOWERING_V1.replace("ir.Reduction.create(x)", "ir.Reduction.create(x, strict=True)")

UP_CONFIG = """\
import os


class trace:
    enabled = os.environ.get("TORCH_COMPILE_DEBUG", "0") == "1"
"""

NPU_CONFIG = """\
import os

check_accuracy = os.environ.get("NPU_CHECK_ACCURACY", False)
# Trace the fx graph when lowering, and dump it.
dump_fx_graph = os.environ.get("NPU_DUMP_FX_GRAPH", False) or check_accuracy
fast_path = os.environ.get("NPU_FAST", "1") == "1"
verbose = os.environ.get("NPU_VERBOSE", False)
"""

REPLACEMENTS = """\
from torch._inductor import ir


@classmethod
def _create(cls, x):
    return x


@classmethod
def _concat_create(cls, inputs):
    return list(inputs)


@classmethod
def _realize_into(cls, src, dst):
    return src
"""


_BY = {"Reduction.create": "_create", "ConcatKernel.create": "_concat_create"}


def _patching(name: str, *targets: str) -> str:
    """A module of the replacements whose function ``name`` patches ``targets``."""
    body = "".join(f"    ir.{t} = {_BY.get(t, '_realize_into')}\n" for t in targets)
    return f"{REPLACEMENTS}\n\ndef {name}():\n{body}"


LOAD = """\
from torch._inductor import config as inductor_config


def load():
    from . import config as npu_config

    if npu_config.dump_fx_graph:
        from .ir_fx import patch_debug

        patch_debug()
    if npu_config.fast_path:
        from .ir_on import patch_fast

        patch_fast()
    if inductor_config.trace.enabled:
        from .ir_trace import patch_trace

        patch_trace()
    if npu_config.verbose:
        from .ir_verbose import patch_verbose

        patch_verbose()
"""

DOWNSTREAM = {
    "torch_npu/_inductor/__init__.py": LOAD,
    "torch_npu/_inductor/config.py": NPU_CONFIG,
    # the debug path's patches: Reduction.create, and ConcatKernel's create and realize_into
    "torch_npu/_inductor/ir_fx.py": _patching(
        "patch_debug",
        "Reduction.create",
        "ConcatKernel.create",
        "ConcatKernel.realize_into",
    ),
    # on by default: NPU_FAST defaults to "1"
    "torch_npu/_inductor/ir_on.py": _patching("patch_fast", "Reduction.create"),
    # upstream's own debug switch, off by default in the new upstream's config
    "torch_npu/_inductor/ir_trace.py": _patching("patch_trace", "Reduction.create"),
    # off by default, but the downstream turns it on itself
    "torch_npu/_inductor/ir_verbose.py": _patching(
        "patch_verbose",
        "Reduction.create",
    ),
    "torch_npu/_inductor/tools.py": "from . import config\n\n\ndef chatty():\n"
    "    config.verbose = True\n",
    # another backend's patch, installed at import (module level), with the old arity
    "torch_npu/_inductor/mlir_ir.py": REPLACEMENTS
    + "\n\nir.ConcatKernel.realize_into = _realize_into\n",
}


def _run(root, downstream: dict[str, str]) -> dict[str, dict]:
    doc = impact_of_commit(
        root,
        {
            "torch/_inductor/ir.py": IR_V1,
            "torch/_inductor/lowering.py": LOWERING_V1,
            "torch/_inductor/config.py": UP_CONFIG,
        },
        {"torch/_inductor/ir.py": IR_V2, "torch/_inductor/lowering.py": LOWERING_V2},
        "strict reductions, aliasing concat",
        downstream,
    )
    out: dict[str, dict] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["kind"] == "monkeypatch":
                out[f"{c['upstream'].split('::')[1]}@{c['downstream']}"] = c
    return out


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, dict]:
    return _run(tmp_path_factory.mktemp("installs"), DOWNSTREAM)


def _at(couplings: dict[str, dict], symbol: str, path: str) -> dict:
    (hit,) = [c for k, c in couplings.items() if k.startswith(f"{symbol}@{path}:")]
    return hit


def test_a_patch_installed_only_under_an_env_switch_off_by_default_is_test(couplings):
    c = _at(couplings, "Reduction.create", "torch_npu/_inductor/ir_fx.py")
    assert (c["action"], c["rule"]) == ("Test", "signature.conditional_call")
    assert "torch/_inductor/lowering.py:6" in c["evidence"]
    assert (
        "under `if npu_config.dump_fx_graph:` at torch_npu/_inductor/__init__.py:7"
        in (c["evidence"])
    )
    assert "off by default" in c["evidence"]


def test_a_patch_installed_under_a_switch_on_by_default_stays_shim(couplings):
    c = _at(couplings, "Reduction.create", "torch_npu/_inductor/ir_on.py")
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")


def test_upstream_config_default_off_is_read_from_the_new_upstream(couplings):
    c = _at(couplings, "Reduction.create", "torch_npu/_inductor/ir_trace.py")
    assert (c["action"], c["rule"]) == ("Test", "signature.conditional_call")
    assert "`if inductor_config.trace.enabled:`" in c["evidence"]


def test_a_switch_the_downstream_writes_decides_nothing(couplings):
    c = _at(couplings, "Reduction.create", "torch_npu/_inductor/ir_verbose.py")
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")


def test_a_caller_replaced_only_on_the_debug_path_still_calls_the_old_arity_patch(couplings):
    c = _at(couplings, "ConcatKernel.realize_into", "torch_npu/_inductor/mlir_ir.py")
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "torch/_inductor/ir.py:10 (in `ConcatKernel.create`)" in c["evidence"]
    # the debug path's own realize_into patch breaks only when that path is on
    d = _at(couplings, "ConcatKernel.realize_into", "torch_npu/_inductor/ir_fx.py")
    assert (d["action"], d["rule"]) == ("Test", "signature.conditional_call")


def test_a_caller_replaced_on_the_normal_path_keeps_the_call_away(tmp_path):
    downstream = {
        **DOWNSTREAM,
        "torch_npu/_inductor/concat.py": _patching(
            "patch_concat",
            "ConcatKernel.create",
        ),
        "torch_npu/_inductor/__init__.py": LOAD
        + "    from .concat import patch_concat\n\n    patch_concat()\n",
    }
    c = _at(
        _run(tmp_path, downstream), "ConcatKernel.realize_into", "torch_npu/_inductor/mlir_ir.py"
    )
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call")
    assert "its caller `ConcatKernel.create` is replaced downstream too" in c["evidence"]


POOL_V1 = """\
class Pool:
    @classmethod
    def make(cls, x):
        return cls.layered(x)

    @classmethod
    def layered(cls, x):
        return cls.make_one(x)

    @classmethod
    def make_one(cls, x):
        return x
"""

POOL_V2 = POOL_V1.replace("def make_one(cls, x):", "def make_one(cls, x, *, strict=False):")
POOL_V2 = POOL_V2.replace("return cls.make_one(x)", "return cls.make_one(x, strict=True)")

POOL_PATCH = """\
from torch._inductor import pool


@classmethod
def _make_one(cls, x):
    return x


@classmethod
def _make(cls, x):
    return x


pool.Pool.make_one = _make_one
"""


def _pool(root, downstream: dict[str, str]) -> dict:
    doc = impact_of_commit(
        root,
        {"torch/_inductor/pool.py": POOL_V1},
        {"torch/_inductor/pool.py": POOL_V2},
        "strict pools",
        downstream,
    )
    (hit,) = [
        c
        for u in doc["units"]
        for c in u["couplings"]
        if c["kind"] == "monkeypatch" and c["upstream"].endswith("Pool.make_one")
    ]
    return hit


def test_a_caller_called_only_from_a_replaced_method_does_not_run(tmp_path):
    c = _pool(tmp_path, {"torch_npu/pool_patch.py": POOL_PATCH + "pool.Pool.make = _make\n"})
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call")
    assert "`Pool.layered` is called only from `Pool.make`" in c["evidence"]


def test_a_caller_that_upstream_still_runs_reaches_the_patch(tmp_path):
    c = _pool(tmp_path, {"torch_npu/pool_patch.py": POOL_PATCH})
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")


def test_a_caller_the_downstream_calls_itself_runs(tmp_path):
    c = _pool(
        tmp_path,
        {
            "torch_npu/pool_patch.py": POOL_PATCH + "pool.Pool.make = _make\n",
            "torch_npu/use.py": "from torch._inductor import pool\n\n\n"
            "def build(x):\n    return pool.Pool.layered(x)\n",
        },
    )
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
