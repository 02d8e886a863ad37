"""Source probes and extension probes as gates, decided against a real upstream commit:
``"x" in inspect.getsource(f)``, ``"x" in inspect.signature(f).parameters`` and
``hasattr(torch._C, "_x")``."""

from __future__ import annotations

import textwrap

import pytest

from .gitrepo import impact_of_commit

C10D_OLD = textwrap.dedent(
    """
    def add_timeout(pg, timeout):
        return None


    def new_group(backend):
        # stable marker
        return backend
    """
)
C10D_NEW = textwrap.dedent(
    """
    def add_timeout(pg, timeout):
        return pg._add_ephemeral_timeout(timeout)


    def new_group(backend):
        # stable marker
        return backend or "gloo"
    """
)
LOWERING_OLD = "def expand(x, sizes):\n    return x\n\n\ndef clone(x):\n    return x\n"
LOWERING_NEW = (
    "def expand(x, sizes):\n    return x if sizes else None\n\n\n"
    "def clone(x):\n    return x or None\n"
)
STUB_OLD = "def _old_thing() -> None: ...\n"
STUB_NEW = "def _old_thing() -> None: ...\ndef _new_thing() -> None: ...\n"

DOWN = textwrap.dedent(
    """
    import inspect
    import textwrap

    import torch
    from torch.distributed import c10d as cd
    from torch._inductor import lowering

    if torch.__version__ >= "2.1":
        GENERIC = "pg._add_ephemeral_timeout" in textwrap.dedent(inspect.getsource(cd.add_timeout))

    if GENERIC:
        from torch.distributed.c10d import add_timeout
    else:
        def add_timeout(pg, timeout):
            return cd.add_timeout(pg, timeout)


    def _stable_probe():
        src = inspect.getsource(cd.new_group)
        return "stable marker" in src


    if not _stable_probe():
        def patched_group(backend):
            return cd.new_group(backend)


    def npu_expand(x, sizes):
        if hasattr(torch._C, "_new_thing"):
            return lowering.expand(x, sizes)
        return x


    def npu_clone(x):
        if hasattr(torch._C, "_never_stubbed"):
            return lowering.clone(x)
        return x
    """
)

CONFIG_OLD = textwrap.dedent(
    """
    class _ConfigEntry:
        def __init__(self, config):
            self.config = config
    """
)
CONFIG_NEW = textwrap.dedent(
    """
    class _ConfigEntry:
        def __init__(self, config, name):
            self.config = config
            self.name = name
    """
)
# torch-npu 2.11.0's torch_npu/utils/_dynamo.py:218-221, against torch 2.12's new `name`
DOWN_SIG = textwrap.dedent(
    """
    import inspect
    from inspect import signature

    from torch.distributed import c10d


    def npu_entry(cfg):
        from torch.utils._config_module import _ConfigEntry

        if "name" in inspect.signature(_ConfigEntry.__init__).parameters:
            entry = _ConfigEntry(cfg, "npu_backend")
        else:
            entry = _ConfigEntry(cfg)
        return entry


    def npu_group(backend):
        if "timeout" not in signature(c10d.new_group).parameters:
            return c10d.new_group(backend)
        return None
    """
)


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    return impact_of_commit(
        tmp_path_factory.mktemp("probes"),
        {
            "torch/version.py": "__version__ = '2.13.0'\n",
            "torch/distributed/__init__.py": "",
            "torch/distributed/c10d.py": C10D_OLD,
            "torch/_inductor/lowering.py": LOWERING_OLD,
            "torch/_C/__init__.pyi": STUB_OLD,
            "torch/utils/__init__.py": "",
            "torch/utils/_config_module.py": CONFIG_OLD,
        },
        {
            "torch/version.py": "__version__ = '2.14.0'\n",
            "torch/distributed/c10d.py": C10D_NEW,
            "torch/_inductor/lowering.py": LOWERING_NEW,
            "torch/_C/__init__.pyi": STUB_NEW,
            "torch/utils/_config_module.py": CONFIG_NEW,
        },
        "c10d: backend-generic ephemeral timeout (#9)",
        {"torch_npu/_compat/probes.py": DOWN, "torch_npu/_compat/signatures.py": DOWN_SIG},
    )


def _couplings(doc):
    return [c for u in doc["units"] for c in u["couplings"]]


def _at(doc, line: int, upstream_end: str):
    return next(
        c
        for c in _couplings(doc)
        if c["downstream"] == f"torch_npu/_compat/probes.py:{line}"
        and c["upstream"].endswith(upstream_end)
    )


def test_a_source_probe_that_holds_on_the_new_upstream_marks_its_code_adapted(doc):
    c = _at(doc, 13, "::add_timeout")  # the import under `if GENERIC:`
    assert c["gate"]["kind"] == "source_probe" and c["gate"]["at"].endswith(":12")
    assert (c["action"], c["rule"], c["already_adapted"]) == ("Check", "adapted.version_gate", True)


def test_the_else_branch_of_a_holding_probe_is_the_old_branch(doc):
    c = _at(doc, 16, "::add_timeout")  # the fallback's call of the upstream function
    assert c["gate"]["kind"] == "source_probe" and c["gate"]["condition"] == "not (GENERIC)"
    assert (c["action"], c["rule"]) == ("Check", "adapted.old_branch")


def test_a_probe_that_decides_the_same_on_old_and_new_is_compat_debt(doc):
    debt = {d["at"]: d for d in doc["compat_debt"]}
    d = debt["torch_npu/_compat/probes.py:24"]
    assert d["kind"] == "source_probe"
    assert "decides the same on torch 2.13.0 and 2.14.0" in d["reason"]
    assert "torch.distributed.c10d.new_group" in d["reason"]
    # the probe that changed its answer between the versions is not debt
    assert "torch_npu/_compat/probes.py:12" not in debt


def test_a_torch_C_name_the_new_stubs_declare_marks_its_code_adapted(doc):
    c = _at(doc, 31, "::expand")
    assert c["gate"]["kind"] == "c_probe"
    assert (c["action"], c["rule"]) == ("Check", "adapted.version_gate")


def test_a_torch_C_name_no_stub_declares_is_only_a_guard(doc):
    c = _at(doc, 37, "::clone")
    assert c["gate"]["kind"] == "c_probe"
    assert c["action"] == "Test" and not c["already_adapted"]


def _sig_line(snippet: str) -> int:
    return next(i for i, t in enumerate(DOWN_SIG.splitlines(), 1) if snippet in t)


def test_a_signature_probe_that_holds_on_the_new_upstream_marks_its_branch_adapted(doc):
    at = {
        c["downstream"]: c
        for c in _couplings(doc)
        if c["upstream"].endswith("_ConfigEntry.__init__")
        and c["downstream"].startswith("torch_npu/_compat/signatures.py:")
    }
    probe = _sig_line('if "name" in inspect.signature')
    new = at[f"torch_npu/_compat/signatures.py:{_sig_line('_ConfigEntry(cfg, ')}"]
    assert new["gate"]["kind"] == "source_probe" and new["gate"]["at"].endswith(f":{probe}")
    assert (new["action"], new["rule"], new["already_adapted"]) == (
        "Check",
        "adapted.version_gate",
        True,
    )
    # the call that lacks the new required parameter sits in the old branch: no Shim
    # anywhere (the use answers for the calls of its def, both branches)
    assert at and all(c["action"] != "Shim" for c in at.values())


def test_a_signature_probe_that_decides_the_same_on_both_sides_is_compat_debt(doc):
    debt = {d["at"]: d for d in doc["compat_debt"]}
    d = debt[f"torch_npu/_compat/signatures.py:{_sig_line('not in signature(')}"]
    assert d["kind"] == "source_probe" and "torch.distributed.c10d.new_group" in d["reason"]
    assert "(the gated code runs;" in d["reason"]
    # the `_ConfigEntry` probe changed its answer between the versions: no debt
    probe = _sig_line("inspect.signature(_ConfigEntry")
    assert f"torch_npu/_compat/signatures.py:{probe}" not in debt
