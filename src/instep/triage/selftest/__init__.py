"""``instep selftest``: inject a fault at each compile layer and check where it is filed.

:func:`run_selftest` copies ``fault_suite.py`` (real CPU compiles, faults injected with
real torch extension points) into a fresh directory, runs it with ``instep run``'s
runner (isolated cases, the classifier applied as outcomes arrive) and compares each
case's stored layer with :data:`matrix.EXPECTED`. The result says which cases landed
where; accuracy 1.0 is required. Nothing here classifies: the runner's classifier does.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from instep.profiles import Profile
from instep.run.runner import RunOptions, execute_run
from instep.store import Store
from instep.triage.classifier import Classifier
from instep.triage.selftest.matrix import EXPECTED

SUITE_FILE = "test_instep_faults.py"


@dataclass
class SelftestRow:
    case: str
    fault: str
    expected: str
    layer: str | None
    category: str | None
    status: str | None

    @property
    def ok(self) -> bool:
        return self.layer == self.expected

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "ok": self.ok}


@dataclass
class SelftestResult:
    rows: list[SelftestRow] = field(default_factory=list)
    wall_s: float = 0.0
    run_name: str = ""

    @property
    def accuracy(self) -> float:
        return sum(r.ok for r in self.rows) / len(self.rows) if self.rows else 0.0


def suite_source() -> str:
    return (resources.files("instep.triage.selftest") / "fault_suite.py").read_text("utf-8")


def run_selftest(
    profile: Profile,
    store: Any = None,
    workers: int = 2,
    inductor_cache_dir: Path | None = None,
    only: list[str] | None = None,
    timeout: float = 300.0,
) -> SelftestResult:
    """Run the fault suite and compare each case's layer with the expected one."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="instep-selftest-") as tmp:
        root = Path(tmp)
        (root / SUITE_FILE).write_text(suite_source(), encoding="utf-8")
        names = [n for n in EXPECTED if not only or n in only]
        paths = [f"{SUITE_FILE}::{n}" for n in names]
        opts = RunOptions(
            paths=paths,
            workers=workers,
            isolate="case",
            timeout=timeout,
            inductor_cache_dir=inductor_cache_dir,
            cwd=root,
            name=f"selftest-{time.strftime('%Y%m%d-%H%M%S')}-{root.name[-6:]}",
            argv=["instep", "selftest"],
        )
        target = store if store is not None else str(root / "selftest.db")
        result = execute_run(target, profile, opts, classifier=Classifier)
        opened = Store(target) if not isinstance(target, Store) else target
        try:
            rows = {r["case"].rsplit("::", 1)[-1]: r for r in opened.outcome_rows(result.run.id)}
        finally:
            if opened is not target:
                opened.close()
    out = SelftestResult(wall_s=time.monotonic() - began, run_name=result.run.name)
    for name in names:
        layer, fault = EXPECTED[name]
        row = rows.get(name, {})
        out.rows.append(
            SelftestRow(
                name, fault, str(layer), row.get("layer"), row.get("category"), row.get("status")
            )
        )
    return out
