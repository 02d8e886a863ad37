"""The dotted names a test file imports, read with one regex per import line.

Test files are not indexed like code the backend ships (``symbols``): only their imports
matter, to know which tests exercise which modules (impact's suggested tests, ``instep run
--impact``'s upstream test selection). Imports inside functions count; relative imports
and names in a parenthesised list after its first line are not read.
"""

from __future__ import annotations

import re

_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+\(?([^\n#]*)|import[ \t]+([^\n#]+))",
    re.MULTILINE,
)
_NAME = re.compile(r"[A-Za-z_][\w.]*")


def imported_names(source: str) -> set[str]:
    """Dotted names a test file imports: ``from X import a`` gives ``X`` and ``X.a``;
    ``import X.Y as Z`` gives ``X.Y`` (names in a parenthesised list after its first line
    are not read)."""
    names: set[str] = set()
    for m in _IMPORT.finditer(source):
        base, members, plain = m.groups()
        if base is not None:
            if base.startswith("."):
                continue
            names.add(base)
            for part in (members or "").split(","):
                words = part.split()
                if words and _NAME.fullmatch(words[0].rstrip(")")):
                    names.add(f"{base}.{words[0].rstrip(')')}")
        else:
            for part in (plain or "").split(","):
                words = part.split()
                if words and _NAME.fullmatch(words[0]):
                    names.add(words[0])
    return names
