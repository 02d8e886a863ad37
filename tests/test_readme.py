"""The README's two first commands stay true: CI runs the test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command_verbatim():
    blocks = _bash_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    test_command = blocks[1].strip()
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()


def test_readme_first_command_installs_and_runs_the_main_job():
    first = _bash_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[0].strip()
    assert first.startswith("pip install -e . && instep ")


def test_every_registered_command_is_in_the_readme():
    from instep.cli import cli

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in cli.commands:
        assert f"`instep {name}`" in readme, name
