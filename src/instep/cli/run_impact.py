"""The impact report a stored run implies: upstream X against the torch the run used
(``instep triage RUN --upstream-old X``).

Only finding the two sides from what the run recorded and asking the impact engine's
library entry point (``analyse``) for the report; the attribution is triage's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instep.cli.context import AppContext
from instep.errors import BadInput

if TYPE_CHECKING:  # the contract loads when a report is computed (fast CLI start)
    from instep.impact_contract import ImpactDocument


def run_impact_request(app: AppContext, run: Any, upstream_old: str, downstream: str | None):  # type: ignore[no-untyped-def]
    """An ``ImpactRequest`` from ``upstream_old`` to the torch ``run`` used, against the
    downstream it tested: ``downstream``, else ``[impact] downstream`` of the config, else
    the profile's backend package at the version the run recorded."""
    # the impact engine loads only when a report is computed (fast CLI start)
    from instep.impact.analysis import ImpactRequest

    cfg = app.config
    matrix = run.version_matrix or {}
    return ImpactRequest(
        downstream=downstream or cfg.impact.downstream or _backend_of(app, run, matrix),
        upstream_old=upstream_old,
        upstream_new=_torch_of(run, matrix, cfg.cache_path()),
        cache_dir=cfg.cache_path(),
        lang=cfg.lang,
        stage_map=dict(cfg.impact.stage_map),
        exclude=list(cfg.impact.exclude),
    )


def impact_document(request: Any) -> ImpactDocument:
    """The report ``request`` asks for: the records ``instep impact --format json`` writes."""
    # CLI start: the impact engine loads only when a report is computed
    from instep.impact.analysis import analyse
    from instep.impact.export.json_doc import as_document

    return as_document(analyse(request))


def _torch_of(run: Any, matrix: dict[str, Any], cache_dir: Path) -> str:
    """The torch the run used: its package directory when the run recorded one that is
    still there (read as a tree holding ``torch/``), else ``torch==VERSION``."""
    torch_dir = matrix.get("torch_dir")
    if torch_dir and Path(torch_dir, "__init__.py").is_file():
        key = hashlib.blake2b(str(torch_dir).encode(), digest_size=8).hexdigest()
        root = cache_dir / "run-torch" / key  # a tree whose torch/ is the run's package
        link = root / "torch"
        try:
            root.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(Path(torch_dir), target_is_directory=True)
            return str(root)
        except OSError:
            pass  # no symlinks here: the released wheel of that version instead
    version = str(matrix.get("torch") or "").split("+", 1)[0]
    if not version:
        raise BadInput(
            f"--upstream-old: run {run.name} recorded no torch in its version matrix;"
            " use --impact FILE (instep impact ... --format json --out FILE)"
        )
    return f"torch=={version}"


def _backend_of(app: AppContext, run: Any, matrix: dict[str, Any]) -> str:
    package = app.profile(run.profile).backend_package
    version = str(matrix.get(package) or "").split("+", 1)[0] if package else ""
    if not version:
        what = f"no {package} version" if package else "no backend package"
        raise BadInput(
            f"--upstream-old: run {run.name} records {what} (profile {run.profile});"
            " give --downstream X (a source tree, repo@rev, wheel or pip spec)"
        )
    return f"{package.replace('_', '-')}=={version}"  # type: ignore[union-attr]
