"""A downstream def installed as a method of an upstream class reads ``self.<attr>`` that
the class's new ``__init__`` no longer sets (real git repositories; the shape of torch
2.7.1 -> 2.8.0 ``FSDPParamGroup.reduce_scatter_reduce_op``, read by torch_musa's
``post_backward_non_overlap`` installed as ``FSDPParamGroup.post_backward``: Test there
only through the def's other couplings, never at the read)."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit

GROUP_OLD = textwrap.dedent(
    """
    class ParamGroup:
        def __init__(self, op):
            self.reduce_op = op
            self.device = "cpu"

        def post_backward(self):
            return self.reduce_op


    class SubGroup(ParamGroup):
        pass


    class KeptGroup:
        def __init__(self, op):
            self.reduce_op = op

        def post_backward(self):
            return self.reduce_op
    """
)
GROUP_NEW = GROUP_OLD.replace("self.reduce_op = op", "self.gradient_divide_factor = op").replace(
    "return self.reduce_op", "return self.gradient_divide_factor"
)

DOWN = textwrap.dedent(
    """
    import os

    from torch._inductor.group import KeptGroup, ParamGroup, SubGroup

    DEBUG = os.environ.get("NPU_GROUP_DEBUG", "0") == "1"


    def post_backward_plain(self):
        return reduce(self.reduce_op, self.device)


    def post_backward_guarded(self):
        if self.device == "npu":
            return self.reduce_op
        return None


    def sub_hook(self):
        return self.reduce_op


    def not_a_method(group):
        return group.reduce_op


    def kept_init(self, op):
        self.reduce_op = op


    def kept_post_backward(self):
        return self.reduce_op


    def debug_hook(self):
        return self.reduce_op


    def debug_install():
        ParamGroup.debug_hook = debug_hook


    def reduce(*args):
        return args


    def install():
        ParamGroup.post_backward = post_backward_plain


    ParamGroup.guarded = post_backward_guarded
    SubGroup.hook = sub_hook
    ParamGroup.helper = not_a_method
    KeptGroup.__init__ = kept_init
    KeptGroup.post_backward = kept_post_backward
    if DEBUG:
        debug_install()
    """
)


@pytest.fixture(scope="module")
def reads(tmp_path_factory) -> dict[str, dict]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("patched"),
        {"torch/_inductor/group.py": GROUP_OLD},
        {"torch/_inductor/group.py": GROUP_NEW},
        "[fsdp] ParamGroup keeps a gradient_divide_factor, not a reduce_op (#11)",
        {"torch_npu/_inductor/patch.py": DOWN},
    )
    unit = next(u for u in doc["units"] if u["pr"] == 11)
    return {c["owner"]: c for c in unit["couplings"] if c["kind"] == "inherited_attribute"}


def test_a_patch_that_reads_the_dropped_attribute_on_every_run_is_a_shim(reads):
    plain = reads["post_backward_plain"]
    assert (plain["action"], plain["rule"]) == ("Shim", "inherited_attribute.patch_read_breaks")
    assert plain["downstream"] == "torch_npu/_inductor/patch.py:10"
    assert "reads `self.reduce_op` (now `gradient_divide_factor`)" in plain["detail"]
    assert (
        "installed as `post_backward` of `ParamGroup` at torch_npu/_inductor/patch.py:48"
        in (plain["evidence"])
    )
    # a patch of a class deriving from the changed one runs on its instances too
    assert reads["sub_hook"]["rule"] == "inherited_attribute.patch_read_breaks"


def test_a_conditional_read_is_a_test(reads):
    guarded = reads["post_backward_guarded"]
    assert (guarded["action"], guarded["rule"]) == (
        "Test",
        "inherited_attribute.patch_read_guarded",
    )


def test_a_plain_read_by_a_patch_installed_only_under_a_switch_off_by_default_is_a_test(reads):
    # the would-be Shim goes to the switch rule, as any Shim only a switch reaches
    debug = reads["debug_hook"]
    assert (debug["action"], debug["rule"]) == ("Test", "switch.off_by_default")
    assert "installed as `debug_hook` of `ParamGroup`" in debug["evidence"]
    assert "under `if DEBUG:`" in debug["evidence"]


def test_no_finding_without_self_or_when_a_patched_init_sets_it(reads):
    assert "not_a_method" not in reads  # its first parameter is no self: not a method body
    assert "kept_post_backward" not in reads  # KeptGroup.__init__ is the downstream's own
    assert set(reads) == {"post_backward_plain", "post_backward_guarded", "sub_hook", "debug_hook"}
