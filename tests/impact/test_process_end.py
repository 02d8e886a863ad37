"""``instep impact`` run as its own process leaves what the analysis made to the process's
end (frozen: the collector never walks it again while the report is written); run from a
test through ``instep.cli.run``, in a process that goes on, it freezes nothing."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap

from .gitrepo import RepoBuilder, impact_of_commit

UP_OLD = "def expand(x, sizes):\n    return x\n"
UP_NEW = "def expand(x, sizes, *, implicit=False):\n    return x\n"
DOWN = (
    "from torch._inductor.lowering import expand\n\n\n"
    "def npu_expand(x):\n    return expand(x, [1])\n"
)

PROBE = textwrap.dedent(
    """
    import atexit, gc, sys
    atexit.register(lambda: print("frozen", gc.get_freeze_count(), file=sys.stderr))
    from instep.cli import main
    main(sys.argv[1:])
    """
)


def test_the_console_entry_freezes_what_the_analysis_left(tmp_path):
    up = RepoBuilder(tmp_path / "pytorch")
    for package in ("torch/__init__.py", "torch/_inductor/__init__.py"):
        up.write(package, "")
    up.write("torch/_inductor/lowering.py", UP_OLD)
    up.commit("base")
    up.tag("v1")
    up.write("torch/_inductor/lowering.py", UP_NEW)
    up.commit("expand: implicit (#1)")
    up.tag("v2")
    down = tmp_path / "torch_npu"
    (down / "torch_npu").mkdir(parents=True)
    (down / "torch_npu/__init__.py").write_text("")
    (down / "torch_npu/lowering.py").write_text(DOWN)
    out = tmp_path / "r.json"
    args = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2"]
    args += ["--downstream", str(down), "--format", "json", "--out", str(out), "--no-cache"]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    frozen = [line for line in proc.stderr.splitlines() if line.startswith("frozen ")]
    assert frozen and int(frozen[-1].split()[1]) > 0
    # the report was written whole all the same
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["summary"]["couplings"] >= 1


def test_a_command_run_in_a_process_that_goes_on_freezes_nothing(tmp_path):
    before = gc.get_freeze_count()
    doc = impact_of_commit(
        tmp_path,
        {"torch/_inductor/lowering.py": UP_OLD},
        {"torch/_inductor/lowering.py": UP_NEW},
        "expand: implicit (#1)",
        {"torch_npu/lowering.py": DOWN},
    )
    assert doc["summary"]["couplings"] >= 1
    assert gc.get_freeze_count() == before
