"""Upstream and downstream sources: versions of Python trees and the change units between.

A :class:`Snapshot` is one version (a directory, a wheel, a git revision, a base plus
patches); :func:`open_snapshot` turns a command-line word into one. Change units come
from a git range (:func:`iter_commits`, one :class:`CommitUnit` per commit), a patch
directory (:func:`iter_patch_units`) or two snapshots (:func:`diff_snapshots`). Nothing
here parses Python or imports analysed code.
"""

from instep.impact.upstream.sources.commit_message import MessageFacts, read_message
from instep.impact.upstream.sources.git_repo import (
    CommitUnit,
    GitRepo,
    GitSnapshot,
    is_test_path,
    iter_commits,
    mark_reverts,
    parse_range,
)
from instep.impact.upstream.sources.patches import PatchedSnapshot, PatchUnit, iter_patch_units
from instep.impact.upstream.sources.pip_spec import download_wheel, is_pip_requirement
from instep.impact.upstream.sources.resolve import open_snapshot
from instep.impact.upstream.sources.snapshot import (
    DEFAULT_MAX_BYTES,
    FileChange,
    Snapshot,
    TreeSnapshot,
    diff_snapshots,
    is_binary,
    sha256_digest,
)
from instep.impact.upstream.sources.wheel import WheelSnapshot

__all__ = [
    "DEFAULT_MAX_BYTES",
    "CommitUnit",
    "FileChange",
    "GitRepo",
    "GitSnapshot",
    "MessageFacts",
    "PatchUnit",
    "PatchedSnapshot",
    "Snapshot",
    "TreeSnapshot",
    "WheelSnapshot",
    "diff_snapshots",
    "download_wheel",
    "is_binary",
    "is_pip_requirement",
    "is_test_path",
    "iter_commits",
    "iter_patch_units",
    "mark_reverts",
    "open_snapshot",
    "parse_range",
    "read_message",
    "sha256_digest",
]
