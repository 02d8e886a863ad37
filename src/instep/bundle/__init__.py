"""Evidence bundles: everything the owner of the next layer needs to reproduce one failing
case or batch without the original environment (seed 000, Appendix B).

``select`` reads a case or batch of a run from the store (``selection.py``);
``build_bundle`` writes the bundle (``assembly.py``): the reproducer (``reproducer.py``),
a debug re-run with its compiler artifacts (``debug_rerun.py``), the issue text
(``issue_markdown.py``), all redacted (``redaction.py``) into a directory and a
``.tar.gz`` (``writer.py``).
"""

from __future__ import annotations

from instep.bundle.assembly import BundleResult, build_bundle
from instep.bundle.selection import Selection, select

__all__ = ["BundleResult", "Selection", "build_bundle", "select"]
