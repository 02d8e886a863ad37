"""C++ names for people: demangling (Itanium C++ ABI) and the parts of a declaration.

:func:`demangle` asks ``cxxfilt``, which calls the toolchain's own
``abi::__cxa_demangle`` in the C++ runtime (``libstdc++``) through ctypes: the text is
exactly what ``c++filt`` prints, and no demangler of our own can disagree with the
compiler's. It is only asked about the symbols a report names (and the few candidates
of a signature change), never a whole library's 75,000; a name it cannot demangle, or a
machine without a C++ runtime, leaves the mangled name.

:func:`split_declaration` cuts a demangled function name into its qualified name and
parameter list (``at::f(int, bool) const`` -> ``at::f``, ``(int, bool)``, ``const``), so
two symbols with the same qualified name and other parameters are one function whose
signature changed. :func:`source_names` lists the identifiers a mangled name spells
(``_ZN2at14namedinference15propagate_names...`` -> ``at``, ``namedinference``,
``propagate_names``): a cheap filter for those candidates.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache

log = logging.getLogger(__name__)

_SOURCE_NAME = re.compile(r"(?<!\d)(\d+)")
_TRAILING_QUALIFIERS = (" const", " volatile", " &&", " &", " noexcept")


@lru_cache(maxsize=1)
def _demangler():
    try:
        # names stay mangled without it or libstdc++: loaded as an optional dependency
        import cxxfilt

        cxxfilt.demangle("_Z1fv")  # a machine without libstdc++ fails here, once
    except Exception as exc:  # the library or the C++ runtime is missing: names stay mangled
        log.warning("C++ names stay mangled: cannot demangle (%s)", exc)
        return None
    return cxxfilt.demangle


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """``name`` demangled, or ``name`` itself when it is no C++ name or cannot be."""
    if not name.startswith("_Z"):
        return name
    demangler = _demangler()
    if demangler is None:
        return name
    try:
        return demangler(name)
    except Exception:  # cxxfilt.InvalidName and kin: not a name the ABI can spell
        return name


@dataclass(frozen=True)
class Declaration:
    """A demangled name in parts; ``parameters`` is None for data (no parameter list)."""

    qualified: str  # 'at::namedinference::propagate_names', 'vtable for at::Tensor'
    parameters: str | None  # '(at::Tensor const&, bool)'
    qualifiers: str = ""  # 'const', '&&' after the parameter list

    @property
    def scope(self) -> str:
        """The namespace or class holding it: 'at::namedinference' ('' at global scope)."""
        return _scope_of(self.qualified)

    @property
    def name(self) -> str:
        """The last part of the qualified name: 'propagate_names'."""
        scope = self.scope
        return self.qualified[len(scope) + 2 :] if scope else self.qualified


def split_declaration(demangled: str) -> Declaration:
    text = demangled.strip()
    qualifiers = []
    changed = True
    while changed:
        changed = False
        for q in _TRAILING_QUALIFIERS:
            if text.endswith(q) and text.endswith(")" + q):
                text = text[: -len(q)]
                qualifiers.insert(0, q.strip())
                changed = True
    if not text.endswith(")") or " for " in text.split("(", 1)[0]:
        return Declaration(text, None)  # data, or 'vtable for X', 'typeinfo for X'
    open_at = _matching_open(text)
    if open_at <= 0:
        return Declaration(text, None)
    head, params = text[:open_at], text[open_at:]
    return Declaration(_strip_return_type(head), params, " ".join(qualifiers))


def _matching_open(text: str) -> int:
    """Index of the '(' matching the final ')'."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _strip_return_type(head: str) -> str:
    """``void at::f<int>`` -> ``at::f<int>`` (a function template's demangled name starts
    with its return type); the name itself may hold spaces inside ``<...>`` and in
    ``operator new``, ``operator<<``."""
    op = head.find("operator")
    cut_at = op if op >= 0 else len(head)
    depth = 0
    last_space = -1
    for i, ch in enumerate(head[:cut_at]):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == " " and depth == 0:
            last_space = i
    return head[last_space + 1 :]


def _scope_of(qualified: str) -> str:
    """'a::b<c::d>::f' -> 'a::b<c::d>'."""
    depth = 0
    last = -1
    i = 0
    op = qualified.find("operator")
    end = op if op >= 0 else len(qualified)
    while i < end:
        ch = qualified[i]
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0 and qualified.startswith("::", i):
            last = i
            i += 1
        i += 1
    return qualified[:last] if last > 0 else ""


def source_names(mangled: str) -> list[str]:
    """The identifiers a mangled name spells as ``<length><identifier>``, in order
    (a filter: a number that is a template argument can give a false one)."""
    out = []
    pos = 0
    while True:
        m = _SOURCE_NAME.search(mangled, pos)
        if m is None:
            return out
        n = int(m.group(1))
        start = m.end()
        word = mangled[start : start + n]
        if n and len(word) == n and (word[0].isalpha() or word[0] == "_") and _ident(word):
            out.append(word)
            pos = start + n
        else:
            pos = m.end()


def _ident(word: str) -> bool:
    return word.replace("_", "a").isalnum() and word.isascii()
