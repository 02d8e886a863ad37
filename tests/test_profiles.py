"""Built-in profiles load, and every rule matches the real messages it was written for."""

from __future__ import annotations

import re

import pytest

from instep.errors import BadInput, MissingInput
from instep.layers import Layer
from instep.profiles import builtin_profile_names, load_profile


@pytest.mark.parametrize("name", ["cpu", "cuda", "npu"])
def test_builtin_profiles_load(name):
    prof = load_profile(name)
    assert prof.name == name
    assert prof.device_type == name
    assert prof.rules and prof.version_probes and prof.layer_map


def test_builtin_names():
    assert {"cpu", "cuda", "npu"} <= set(builtin_profile_names())


@pytest.mark.parametrize("name", ["cpu", "cuda", "npu"])
def test_every_rule_matches_its_examples(name):
    prof = load_profile(name)
    for rule in prof.rules:
        assert rule.examples, f"{name}:{rule.category} has no example message"
        for example in rule.examples:
            assert re.search(rule.pattern, example), (rule.category, example)


def test_npu_profile_covers_seed_000_signatures():
    cats = {r.category for r in load_profile("npu").rules}
    for needed in [
        "registration.device_op_overrides_cpu",  # KeyError 'cpu'
        "lowering.missing_operator",
        "decomposition.not_selected",
        "lowering.assert_scalar_cast",
        "codegen.zero_dim_slice",
        "runtime.acl_param_dtype",  # AclNN_Parameter_Error / EZ1001
        "codegen.grid_launch",  # coreDim == 0
        "kernel_compile.ub_overflow",
        "runtime.device_exception_507035",
        "runtime.segfault_wrapper_call",
        "codegen.structural_assert",
        "timeout.case",
    ]:
        assert needed in cats


def test_layer_map_longest_prefix_and_paths():
    prof = load_profile("npu")
    assert prof.layer_for(module="torch._inductor.lowering") is Layer.LOWERING
    assert prof.layer_for(module="torch._inductor.codegen.triton") is Layer.CODEGEN
    assert (
        prof.layer_for(module="torch._inductor.runtime.triton_heuristics") is Layer.KERNEL_COMPILE
    )
    assert prof.layer_for(module="torch._inductor.runtime.hints") is Layer.RUNTIME
    assert prof.layer_for(module="torch._inductor.loweringx") is None  # component boundary
    assert prof.layer_for(module="torch_npu._inductor.lowering_fx") is Layer.LOWERING
    assert prof.layer_for(module="torch_npu._inductor.init") is Layer.REGISTRATION
    assert prof.layer_for(path="/tmp/u/inductor_cache/ab/cabc.py") is Layer.RUNTIME
    assert prof.layer_for(module="json") is None


def test_extends_cycle_is_reported():
    with pytest.raises(BadInput, match="cycle"):
        load_profile("a", {"a": {"extends": "b", "device_type": "x"}, "b": {"extends": "a"}})


def test_unknown_parent_is_reported():
    with pytest.raises(MissingInput, match="profile 'ghost' not found"):
        load_profile("a", {"a": {"extends": "ghost", "device_type": "x"}})


def test_invalid_rule_regex_names_the_rule():
    bad = {"extends": "cpu", "rules": [{"category": "x.y", "pattern": "(unclosed"}]}
    with pytest.raises(BadInput, match=r"profile 'mine': rules\.0\.pattern: .*not a valid regular"):
        load_profile("mine", {"mine": bad})


def test_probe_needs_exactly_one_source():
    bad = {"extends": "cpu", "version_probes": [{"name": "x", "module": "a", "env": "B"}]}
    with pytest.raises(BadInput, match="exactly one of"):
        load_profile("mine", {"mine": bad})


def test_unknown_layer_is_rejected():
    bad = {"extends": "cpu", "layer_map": {"foo": "lowerin"}}
    with pytest.raises(BadInput, match=r"layer_map\.foo"):
        load_profile("mine", {"mine": bad})


def test_layer_order_is_pipeline_order():
    assert Layer.ENV.depth < Layer.DYNAMO.depth < Layer.LOWERING.depth < Layer.NUMERICS.depth
