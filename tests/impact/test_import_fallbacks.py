"""``try: import new / except ImportError: import old`` — the adaptation torch_npu writes
when an upstream name is renamed. The fallback is dead code on a torch that has the new
name (compat debt, not a break); on one that has neither it always runs, so a removed
name imported in it breaks the module.
Found by validation/impact_adaptations.py on torch_npu 2.13.0's ``_npu_attention.py``."""

from __future__ import annotations

from pathlib import Path

from instep.impact.analysis import ImpactRequest, analyse

RULES_OLD = "def old_ctx(op):\n    return op\n\n\ndef keep(op):\n    return op\n"
RULES_NEW = "def new_ctx(op):\n    return op\n\n\ndef keep(op):\n    return op\n"

DOWNSTREAM = """\
def get_ctx():
    try:
        from torch.distributed.rules import new_ctx as _ctx
    except ImportError:
        from torch.distributed.rules import old_ctx as _ctx
    return _ctx


def register():
    ctx = get_ctx()
    return ctx(1)


try:
    from torch.distributed.rules import future_ctx as _later
except ImportError:
    from torch.distributed.rules import old_ctx as _later


def plain():
    from torch.distributed.rules import old_ctx

    return old_ctx(2)
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_fallback_import_is_compat_debt_when_the_new_name_exists(tmp_path):
    up = {"torch/__init__.py": "", "torch/distributed/__init__.py": ""}
    old = _tree(tmp_path / "old", {**up, "torch/distributed/rules.py": RULES_OLD})
    new = _tree(tmp_path / "new", {**up, "torch/distributed/rules.py": RULES_NEW})
    down = _tree(
        tmp_path / "down",
        {"torch_npu/__init__.py": "", "torch_npu/attention.py": DOWNSTREAM},
    )
    report = analyse(
        ImpactRequest(
            downstream=str(down), upstream_old=str(old), upstream_new=str(new), use_cache=False
        )
    )
    couplings = {
        (c.downstream, c.upstream.split("::")[1]): c for u in report.units for c in u.couplings
    }
    at = {
        int(where.rsplit(":", 1)[1]): c
        for (where, name), c in couplings.items()
        if name == "old_ctx"
    }

    # the fallback inside get_ctx: dead on the new torch, which has new_ctx
    assert str(at[5].action) == "Check" and at[5].rule == "adapted.old_branch"
    # a fallback whose try-name the new torch lacks too: it always runs now, and its own
    # import fails, so nothing catches the ImportError and the module stops loading
    assert str(at[17].action) == "Shim" and at[17].rule == "removed.breaks"
    # an unguarded import of the removed name breaks
    assert str(at[21].action) == "Shim" and at[21].rule == "removed.breaks"
    # the use through get_ctx()'s return value follows the try branch, not the fallback
    used = {name for (where, name) in couplings if where.endswith(":11")}
    assert used == {"new_ctx"}
