"""What ``instep impact`` is asked: :class:`ImpactRequest`, with the check that its
upstream options go together (:meth:`ImpactRequest.mode`). Data only; the analysis is
``impact/analysis.py``'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from instep.errors import BadInput


@dataclass
class ImpactRequest:
    downstream: str
    upstream_old: str | None = None
    upstream_new: str | None = None
    upstream_git: str | None = None
    rev_range: str | None = None
    patches: str | None = None
    cache_dir: Path | None = None
    use_cache: bool = True
    jobs: int | None = None
    lang: str = "en"
    stage_map: dict[str, str] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    min_supported: tuple[int, ...] | None = None
    large_file_changes: int = 40  # release units split per class above this many changes
    first_parent: bool = False  # git: one unit per merge of the first-parent line
    upstream_packages: tuple[str, ...] = ()  # top-level upstream packages (default: detected)

    def mode(self) -> str:
        """``release``, ``patches`` or ``git``; a one-line error for options that do not
        go together."""
        if self.upstream_git or self.rev_range:
            if not (self.upstream_git and self.rev_range):
                raise BadInput(
                    "--upstream-git and --range go together (e.g. --range v2.13.0..v2.14.0)"
                )
            if self.upstream_old or self.upstream_new or self.patches:
                raise BadInput(
                    "--upstream-git/--range cannot be combined with "
                    "--upstream-old/--upstream-new/--patches"
                )
            return "git"
        if self.patches:
            if not self.upstream_old or self.upstream_new:
                raise BadInput(
                    "--patches needs --upstream-old (the tree the patches apply to) "
                    "and no --upstream-new"
                )
            return "patches"
        if self.first_parent:
            raise BadInput("--first-parent goes with --upstream-git and --range (commit mode)")
        if self.upstream_old and self.upstream_new:
            return "release"
        raise BadInput(
            "no upstream given: use --upstream-old X --upstream-new Y, "
            "--upstream-git PATH --range A..B, or --upstream-old X --patches DIR"
        )
