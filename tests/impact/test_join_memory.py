"""The join's memory bounds (issue #32): the new upstream's trees kept within a budget of
source bytes and parsed again when wanted (the same call sites either way), the patch-install
search reading the join's one store of downstream trees instead of a copy of its own."""

from __future__ import annotations

from instep.impact.join.patch_installs import PatchInstalls
from instep.impact.join.upstream_calls import UpstreamCalls
from instep.pyindex.parsed_files import ParsedFiles


def _module(k: int) -> bytes:
    """A module whose defs call ``run`` (with and without ``out=``) and ``step``."""
    body = [f"import torch\n\n\nclass K{k}:\n"]
    for j in range(40):
        body.append(
            f"    def m{j}(self, x):\n"
            f"        if x.is_cuda:\n"
            f"            self.run(x, out=x)\n"
            f"        return self.step(x) + run(x)\n\n"
        )
    return "".join(body).encode()


UPSTREAM = {f"torch/_inductor/m{k}.py": _module(k) for k in range(4)}
UPSTREAM["torch/other.py"] = b"def g():\n    return 1\n"


def _calls(budget: int) -> UpstreamCalls:
    return UpstreamCalls(sorted(UPSTREAM), UPSTREAM.get, budget=budget)


def _asked(calls: UpstreamCalls) -> list:
    return [
        calls.sites("run"),
        calls.sites("run", keywords=("out",)),
        calls.sites("step"),
        calls.sites("<self>", only_in="torch/_inductor/m2.py"),
        calls.sites("run"),  # memoised
    ]


def test_a_tree_budget_drops_old_trees_and_finds_the_same_call_sites() -> None:
    one_file = len(UPSTREAM["torch/_inductor/m0.py"])
    unbounded, bounded = _calls(10**9), _calls(one_file)
    expected = _asked(unbounded)
    assert len(expected[0]) == 4 * 80
    passing_out = [s for s in expected[1] if s.keywords == ("out",)]
    assert len(passing_out) == 4 * 40 and all(
        s.guard and s.guard.startswith("`x.is_cuda`") for s in passing_out
    )
    assert _asked(bounded) == expected
    # unbounded: the four modules that name a callee are parsed once each; bounded: one
    # tree is kept at a time, so every new name parses its files again
    assert unbounded.parses == 4
    assert bounded.parses > 4
    assert len(bounded._trees) == 1 and bounded._kept <= one_file


def test_the_newest_tree_is_kept_whatever_its_size() -> None:
    calls = _calls(0)
    tree = calls.tree("torch/_inductor/m1.py")
    assert tree is not None and calls.tree("torch/_inductor/m1.py") is tree
    assert calls.parses == 1
    calls.tree("torch/_inductor/m3.py")
    assert list(calls._trees) == ["torch/_inductor/m3.py"]


DOWNSTREAM = {
    "pkg/config.py": b"import os\ndump = os.environ.get('DUMP', False)\n",
    "pkg/patch.py": (
        b"from pkg import config\nimport torch._inductor.ir as ir\n\n"
        b"def f(*a):\n    pass\n\ndef _patch():\n    ir.Reduction.create = f\n\n"
        b"if config.dump:\n    _patch()\n"
    ),
    "pkg/broken.py": b"def (:\n",
}


def test_patch_installs_read_the_shared_downstream_trees_and_answer_the_same() -> None:
    shared = ParsedFiles(DOWNSTREAM.__getitem__)
    own = PatchInstalls(DOWNSTREAM, DOWNSTREAM.__getitem__, lambda m: None)
    joined = PatchInstalls(DOWNSTREAM, DOWNSTREAM.__getitem__, lambda m: None, shared)
    why = "under `if config.dump:` at pkg/patch.py:10, off by default (no environment variable set)"
    for installs in (own, joined):
        assert installs.off_by_default("pkg/patch.py", 8, "_patch") == why
        assert installs.tree("pkg/broken.py") is None
        assert installs.tree("pkg/absent.py") is None
    assert joined.tree("pkg/patch.py") is shared.tree("pkg/patch.py")
    assert own.tree("pkg/patch.py") is not shared.tree("pkg/patch.py")
    assert shared.parsed == 3  # patch.py, config.py (the switch's module), broken.py
