"""A module-level def that runs only where a version gate lets it: the gate of its uses.

A downstream often writes a patch as a plain def and installs it elsewhere in the module,
under a version gate: vllm 0.34.0's ``env_override.py`` defines
``should_partition_patched`` (:421) and ``_update_scheduler_patched`` (:503, which
installs the first), and installs the second only under ``if is_torch_equal("2.9.0"):``
(:545-557). The def's body is not inside the gate, so its couplings (``ir.Conditional``,
removed in torch 2.14, at :488) read as live code; yet the body runs only when the gate
holds, and on torch 2.13 and 2.14 it never does.

Two steps, as for imported flags, so that a file's cached index depends on that file
alone. Indexing a file (:func:`def_mentions`, :func:`name_hashes`) records, for each
undecorated module-level def of a file with gates, the lines outside the def that name
it (a word match on the text: a comment, a string or ``__all__`` counts too, which only
keeps the def live), and the hashes of every identifier the file's text holds. The
tree index (:func:`inherit_install_gates`) gives a def's body the gate of its uses when
every line naming it sits under one version gate (``version_compare`` or
``version_flag``; directly, or inside another def already given that gate), no other
downstream module imports it by name, and no other file's text names it (a ``mod.f`` or
``getattr(mod, "f")`` elsewhere, or a chance match of the hashes, keeps it live). A def
named nowhere else is left alone: it may be an entry point. The gate kept is the one its
uses sit under, its condition saying which def runs only there; the place's own
innermost gate still wins. Nothing here decides a gate against a version.
"""

from __future__ import annotations

import ast
import bisect
import re
import zlib
from array import array
from dataclasses import replace

from instep.impact.downstream.imported_flags import add_gate_spans
from instep.impact.downstream.records import DownstreamFileIndex, GateSpan
from instep.impact.downstream.version_gates import GateLookup
from instep.impact.model import VersionGate

GATE_KINDS = frozenset({"version_compare", "version_flag"})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def name_hashes(source: str) -> array:
    """The CRC-32s of every identifier-like word of ``source``, sorted and unique: 4 bytes
    a word, and a name the file lacks matches by chance with odds of about words / 2**32
    (a Bloom filter small enough to keep per file errs far more often over a tree of
    thousands of files)."""
    return array("I", sorted({zlib.crc32(w.encode()) for w in set(_WORD.findall(source))}))


def may_name(hashes: array, name: str) -> bool:
    """Whether the file whose :func:`name_hashes` are ``hashes`` may hold ``name`` (no
    false negatives)."""
    h = zlib.crc32(name.encode())
    i = bisect.bisect_left(hashes, h)
    return i < len(hashes) and hashes[i] == h


def def_mentions(tree: ast.Module, source: str) -> dict[str, tuple[int, int, tuple[int, ...]]]:
    """Undecorated module-level defs: name -> (first line, last line, the lines outside
    the def whose text names it), for defs named at least once outside themselves."""
    defs = {
        s.name: (s.lineno, s.end_lineno or s.lineno)
        for s in tree.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and not s.decorator_list
    }
    if not defs:
        return {}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, defs)) + r")\b")
    lines: dict[str, list[int]] = {}
    for number, text in enumerate(source.splitlines(), 1):
        for name in set(pattern.findall(text)):
            start, end = defs[name]
            if not start <= number <= end:
                lines.setdefault(name, []).append(number)
    return {n: (*defs[n], tuple(ls)) for n, ls in lines.items()}


def inherit_install_gates(files: dict[str, DownstreamFileIndex]) -> dict[str, DownstreamFileIndex]:
    """``files`` with each def that runs only under one version gate given that gate over
    its lines (``gate_spans``, and its references and pending uses where that gate is now
    their innermost). Files are copied, never changed."""
    candidates = {p: f for p, f in files.items() if f.def_mentions and f.gate_spans}
    if not candidates:
        return files
    imported = {dn for f in files.values() for dn, _, _ in f.dn_imports}
    out = dict(files)
    for path, f in candidates.items():
        made = _derive(f, imported, [(p, o.name_hashes) for p, o in files.items() if p != path])
        if not made:
            continue
        # not in ``gates``: the gate is listed once, where it is written (compat debt)
        out[path] = add_gate_spans(f, made, listed=False)
    return out


def _derive(
    f: DownstreamFileIndex, imported: set[str], others: list[tuple[str, array]]
) -> list[GateSpan]:
    """The spans of ``f``'s defs that run only under one version gate (to a fixpoint: a
    def named only inside such a def runs only under that gate too)."""
    spans = list(f.gate_spans)
    roots: dict[int, VersionGate] = {}  # id of a made gate -> the gate its uses sit under
    made: list[GateSpan] = []
    done: set[str] = set()
    changed = True
    while changed:
        changed = False
        at = GateLookup(sorted(spans, key=lambda s: (s.start, -s.end))).at
        for name, (start, end, lines) in f.def_mentions.items():
            if name in done:
                continue
            under = {id(g): g for g in (at(line) for line in lines) if g is not None}
            found = {id(roots.get(i, g)): roots.get(i, g) for i, g in under.items()}
            if len(found) != 1 or len(under) == 0 or any(at(line) is None for line in lines):
                continue
            root = next(iter(found.values()))
            if root.kind not in GATE_KINDS or f"{f.module}.{name}" in imported:
                continue
            if any(may_name(hashes, name) for _, hashes in others):
                continue
            why = f"{root.condition}; `{name}` runs only from code under it"
            gate = replace(root, condition=why)
            roots[id(gate)] = root
            span = GateSpan(gate, start, end)
            spans.append(span)
            made.append(span)
            done.add(name)
            changed = True
    return made
