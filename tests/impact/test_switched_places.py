"""A would-be Shim at a place that runs only when a switch off by default is on is Test
(``switch.off_by_default``): real git repositories, the shape of torch 2.8.0 -> 2.9.0 on
torch-npu 2.8.0, whose ``_inductor/__init__.py`` imports ``lowering_fx`` only
``if npu_config.dump_fx_graph:`` (a debug switch read from the environment, default off)
and the same name from ``lowering`` otherwise; ``SizeVarAllocator.evaluate_static_shape``,
which ``lowering_fx`` calls, is gone in torch 2.9.0."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit

SIZEVARS_OLD = textwrap.dedent(
    """
    class SizeVarAllocator:
        def size_hint(self, expr):
            return expr

        def evaluate_static_shape(self, expr):
            return int(expr)
    """
)
SIZEVARS_NEW = textwrap.dedent(
    """
    class SizeVarAllocator:
        def size_hint(self, expr):
            return expr
    """
)

CONFIG = textwrap.dedent(
    """
    import os


    class aot_inductor:  # a class as a namespace of settings, as torch-npu 2.8.0's
        debug_kernel = os.environ.get("AOTI_ASCEND_DEBUG_KERNEL", False)


    dump_fx_graph = (
        os.environ.get("INDUCTOR_ASCEND_DUMP_FX_GRAPH", "0") == "1" or aot_inductor.debug_kernel
    )
    """
)
INIT = textwrap.dedent(
    """
    from . import config as npu_config
    from . import debug

    if npu_config.dump_fx_graph:
        from . import lowering_dyn
        from .lowering_fx import register
    else:
        from .lowering import register

    register()

    if npu_config.dump_fx_graph:
        debug.dump_shapes()
    debug.check_shapes()
    """
)
USES = textwrap.dedent(
    """
    from torch._inductor.virtualized import V


    def register():
        return squeeze(3)


    def squeeze(dim):
        return V.graph.sizevars.evaluate_static_shape(dim)


    STATIC = V.graph.sizevars.evaluate_static_shape
    """
)
DEBUG = textwrap.dedent(
    """
    from torch._inductor.virtualized import V


    def dump_shapes():
        return V.graph.sizevars.evaluate_static_shape(2)


    def check_shapes():
        return V.graph.sizevars.evaluate_static_shape(1)
    """
)
PLUGINS = textwrap.dedent(
    """
    import importlib

    DYN = importlib.import_module("torch_npu._inductor.lowering_dyn")
    """
)
VIRTUALIZED = textwrap.dedent(
    """
    class _V:
        graph = None


    V = _V()
    """
)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, tuple[str, str]]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("switched"),
        {
            "torch/_inductor/sizevars.py": SIZEVARS_OLD,
            "torch/_inductor/virtualized.py": VIRTUALIZED,
        },
        {"torch/_inductor/sizevars.py": SIZEVARS_NEW},
        "[inductor] drop SizeVarAllocator.evaluate_static_shape (#12)",
        {
            "torch_npu/_inductor/__init__.py": INIT,
            "torch_npu/_inductor/config.py": CONFIG,
            "torch_npu/_inductor/lowering_fx.py": USES,
            "torch_npu/_inductor/lowering.py": USES,
            "torch_npu/_inductor/debug.py": DEBUG,
            # imported under the switch, and by a string where nothing guards it
            "torch_npu/_inductor/lowering_dyn.py": USES,
            "torch_npu/_inductor/plugins.py": PLUGINS,
        },
    )
    unit = next(u for u in doc["units"] if u["pr"] == 12)
    out = {}
    for c in unit["couplings"]:
        if c["upstream"].endswith("evaluate_static_shape"):
            path = c["downstream"].split(":")[0].rsplit("/", 1)[-1]
            out[f"{path}::{c['owner'] or '<module>'}"] = (c["action"], c["rule"], c["evidence"])
    return out


def test_a_module_imported_only_under_a_switch_off_by_default_is_no_shim(verdicts):
    action, rule, evidence = verdicts["lowering_fx.py::<module>"]
    assert (action, rule) == ("Test", "switch.off_by_default")
    assert "`torch_npu._inductor.lowering_fx` is imported only under `if " in evidence
    assert "npu_config.dump_fx_graph" in evidence
    # the module the else branch imports runs by default: still a Shim
    assert verdicts["lowering.py::<module>"][:2] == ("Shim", "removed.breaks")


def test_a_module_also_loaded_by_a_string_is_not_decided(verdicts):
    # importlib names it outside any import statement: another way in may hide there
    assert verdicts["lowering_dyn.py::<module>"][:2] == ("Shim", "removed.breaks")


def test_a_function_bound_only_through_an_import_under_the_switch_is_no_shim(verdicts):
    # `register()` is called unconditionally, but the name is lowering_fx's only when
    # the switch is on: the else branch binds lowering's
    action, rule, evidence = verdicts["lowering_fx.py::squeeze"]
    assert (action, rule) == ("Test", "switch.off_by_default")
    assert "imported under `if npu_config.dump_fx_graph:`" in evidence
    assert verdicts["lowering.py::squeeze"][:2] == ("Shim", "removed.breaks")


def test_a_function_called_only_under_the_switch_is_no_shim(verdicts):
    assert verdicts["debug.py::dump_shapes"][:2] == ("Test", "switch.off_by_default")
    assert verdicts["debug.py::check_shapes"][:2] == ("Shim", "removed.breaks")
