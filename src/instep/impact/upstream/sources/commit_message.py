"""What a commit message says about its pull request and about reverts, PyTorch style.

PyTorch lands a PR as one commit whose body has ``Pull Request resolved:
https://github.com/pytorch/pytorch/pull/N`` (ghstack) or whose subject ends in ``(#N)``;
merge-based histories land it as GitHub's ``Merge pull request #N from ...``.
Its merge bot reverts with the subject ``Revert "<original subject>"`` and a body with
``This reverts commit <sha>.`` and/or ``Reverted https://github.com/pytorch/pytorch/pull/N
on behalf of ...``. This module reads those conventions from text; it runs no git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PR_RESOLVED = re.compile(r"Pull Request resolved:\s*\S*?/pull/(\d+)", re.IGNORECASE)
_PR_SUFFIX = re.compile(r"\(#(\d+)\)\s*$")
_PR_MERGE = re.compile(r"^Merge pull request #(\d+)\b")  # GitHub's merge commit subject
_REVERT_SUBJECT = re.compile(r'^Revert\s+"(?P<original>.*)"\s*(?:\(#(?P<pr>\d+)\))?\s*$')
_REVERTS_COMMIT = re.compile(r"This reverts commit ([0-9a-fA-F]{7,40})\b")
_REVERTED_PR = re.compile(r"Reverted\s+\S*?/pull/(\d+)\s+on behalf of", re.IGNORECASE)


@dataclass(frozen=True)
class MessageFacts:
    pr: int | None  # the PR this commit landed
    reverts_sha: str | None  # the commit it reverts (as written: may be abbreviated)
    reverts_pr: int | None  # the PR it reverts
    reverts_subject: str | None  # the quoted original subject of 'Revert "..."'

    @property
    def is_revert(self) -> bool:
        return bool(self.reverts_sha or self.reverts_pr or self.reverts_subject)


def read_message(subject: str, body: str) -> MessageFacts:
    """PR number and revert references of one commit message."""
    subject = subject.strip()
    revert = _REVERT_SUBJECT.match(subject)
    reverts_subject = revert.group("original") if revert else None
    reverts_sha_m = _REVERTS_COMMIT.search(body)
    reverts_pr_m = _REVERTED_PR.search(body)
    reverts_pr = int(reverts_pr_m.group(1)) if reverts_pr_m else None
    if reverts_pr is None and reverts_subject is not None:
        inner = _PR_SUFFIX.search(reverts_subject)
        reverts_pr = int(inner.group(1)) if inner else None

    pr: int | None = None
    resolved = _PR_RESOLVED.search(body)
    if resolved:
        pr = int(resolved.group(1))
    elif revert is not None:
        # 'Revert "Foo (#123)" (#456)': #123 is the original, #456 the revert's own PR.
        pr = int(revert.group("pr")) if revert.group("pr") else None
    else:
        suffix = _PR_SUFFIX.search(subject) or _PR_MERGE.match(subject)
        pr = int(suffix.group(1)) if suffix else None
    if pr is not None and pr == reverts_pr:
        pr = None  # the bot's revert names the reverted PR, not a PR of its own
    return MessageFacts(
        pr=pr,
        reverts_sha=reverts_sha_m.group(1).lower() if reverts_sha_m else None,
        reverts_pr=reverts_pr,
        reverts_subject=reverts_subject,
    )
