"""The coupling index of a whole downstream tree, with cross-file resolution: names
re-exported by another downstream module, replacements installed from another file,
patch helpers defined elsewhere, subclass chains through downstream classes.
Indexing the files is ``coupling_index``'s; this only joins their records.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from instep.impact.downstream.handles import apply_handles, config_key
from instep.impact.downstream.imported_flags import resolve_imported_flags
from instep.impact.downstream.install_gates import inherit_install_gates
from instep.impact.downstream.patch_helpers import apply_function, helper_patch
from instep.impact.downstream.records import (
    ArgKind,
    DownstreamClass,
    DownstreamFileIndex,
    DownstreamFunction,
    HelperSpec,
    Local,
)
from instep.impact.downstream.scope import line_snippet
from instep.impact.downstream.subclasses import ancestors, subclass_refs
from instep.impact.downstream.version_gates import GateLookup
from instep.impact.model import CouplingKind, Reference


class DownstreamIndex:
    """The coupling index of a whole downstream tree, with cross-file resolution."""

    def __init__(
        self, files: dict[str, DownstreamFileIndex], upstream_roots: tuple[str, ...] = ("torch",)
    ) -> None:
        self.files = files
        self.roots = frozenset(upstream_roots)
        self.by_module = {f.module: f for f in files.values()}
        if any(f.flag_uses for f in files.values()):  # flags set in another module
            self.files = resolve_imported_flags(files, self.resolve)
            self.by_module = {f.module: f for f in self.files.values()}
        if any(f.def_mentions for f in self.files.values()):  # defs used only under a gate
            self.files = inherit_install_gates(self.files)
            self.by_module = {f.module: f for f in self.files.values()}
        self._refs: list[Reference] | None = None
        self.sources: dict[str, str] = {}  # optional: path -> text, for snippets
        self._functions: dict[tuple[str, str], DownstreamFunction] | None = None

    @property
    def errors(self) -> list[str]:
        return [f.error for f in self.files.values() if f.error]

    def functions(self) -> list[DownstreamFunction]:
        return [fn for f in self.files.values() for fn in f.functions]

    def _fn_map(self) -> dict[tuple[str, str], DownstreamFunction]:
        if self._functions is None:
            self._functions = {
                (f.module, fn.qualname): fn for f in self.files.values() for fn in f.functions
            }
        return self._functions

    def resolve(self, dotted: str) -> str:
        """Follow downstream re-exports until an upstream or a downstream-defined name."""
        for _ in range(12):
            if dotted.split(".", 1)[0] in self.roots:
                return apply_handles(dotted)[0]
            parts = dotted.split(".")
            for i in range(len(parts) - 1, 0, -1):
                f = self.by_module.get(".".join(parts[:i]))
                if f is None:
                    continue
                b = f.exports.get(parts[i])
                if b is None:
                    return dotted
                if type(b) is Local:
                    return ".".join([f.module, b.qualname, *parts[i + 1 :]])
                dotted = ".".join([b, *parts[i + 1 :]])
                break
            else:
                return dotted
        return dotted

    def export_gate(self, dotted: str):
        """The version gate, try/except or probe around the import by which a downstream
        module re-exports ``dotted``'s upstream name (the first one along the chain), so
        that a use through the re-export carries it: ``if CURRENT_VERSION >= (2, 14):
        def f(): ...  else: from torch... import f``."""
        for _ in range(12):
            if dotted.split(".", 1)[0] in self.roots:
                return None
            parts = dotted.split(".")
            for i in range(len(parts) - 1, 0, -1):
                f = self.by_module.get(".".join(parts[:i]))
                if f is None:
                    continue
                b = f.exports.get(parts[i])
                if b is None or type(b) is Local:
                    return None
                target = self.resolve(b)
                for r in f.references:
                    if r.gate is not None and r.target in (b, target):
                        return r.gate
                dotted = ".".join([b, *parts[i + 1 :]])
                break
            else:
                return None
        return None

    def _defined(self, dotted: str) -> DownstreamFunction | None:
        """The downstream def a resolved dotted name denotes (module.qualname)."""
        parts = dotted.split(".")
        fmap = self._fn_map()
        for i in range(len(parts) - 1, 0, -1):
            mod = ".".join(parts[:i])
            if mod in self.by_module:
                return fmap.get((mod, ".".join(parts[i:])))
        return None

    def _helper(self, dotted: str) -> tuple[HelperSpec, str] | None:
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            f = self.by_module.get(".".join(parts[:i]))
            if f is not None:
                q = ".".join(parts[i:])
                spec = f.helpers.get(q)
                return (spec, f"{f.path}::{q}") if spec else None
        return None

    def references(self) -> list[Reference]:
        if self._refs is not None:
            return self._refs
        out: list[Reference] = []
        for f in self.files.values():
            refs = list(f.references)
            for idx, dn in f.patch_values:  # replacement defined in another file
                fn = self._defined(self.resolve(dn))
                if fn is not None:
                    refs[idx] = apply_function(refs[idx], fn, f"{fn.path}::{fn.qualname}")
            out.extend(refs)
            out.extend(self._pending_uses(f))
            out.extend(self._reexport_imports(f))
            out.extend(self._helper_calls(f))
        out.extend(self._subclass_chains())
        self._refs = out
        return out

    def _pending_uses(self, f: DownstreamFileIndex) -> list[Reference]:
        """Uses through downstream re-exports of upstream names."""
        out: list[Reference] = []
        seen: set[tuple[str, str | None]] = set()
        for r in f.pending:
            target = self.resolve(r.target)
            if target.split(".", 1)[0] in self.roots and (target, r.owner) not in seen:
                seen.add((target, r.owner))
                ck = config_key(target)
                kind = CouplingKind.CONFIG if ck else CouplingKind.IMPORT_USE
                detail = f"{'read' if ck else 'use'} via {r.target}"
                gate = r.gate or self.export_gate(r.target)
                out.append(replace(r, kind=kind, target=target, detail=detail, gate=gate))
        return out

    def _reexport_imports(self, f: DownstreamFileIndex) -> list[Reference]:
        """``from .x import V`` where ``x`` re-exports an upstream name."""
        out: list[Reference] = []
        lines = None
        for dn, line, owner in f.dn_imports:
            target = self.resolve(dn)
            if target.split(".", 1)[0] in self.roots:
                snippet = next((r.snippet for r in f.pending if r.line == line), "")
                if not snippet:
                    lines = lines if lines is not None else self._lines(f.path)
                    snippet = line_snippet(lines, line)
                out.append(
                    Reference(
                        CouplingKind.IMPORT_USE,
                        target,
                        f.path,
                        line,
                        snippet,
                        detail=f"import of {dn} (re-export)",
                        owner=owner,
                        gate=self.export_gate(dn),
                    )
                )
        return out

    def _helper_calls(self, f: DownstreamFileIndex) -> list[Reference]:
        """Calls of patch helpers defined in another file."""
        out: list[Reference] = []
        for site in f.calls:
            callee = self.resolve(site.callee)  # type: ignore[arg-type]
            got_spec = self._helper(callee)
            if got_spec is None:
                continue
            spec, where = got_spec
            got = helper_patch(site, spec, where, f.path)
            if got is None:
                continue
            target, value = got
            ref = Reference(
                CouplingKind.MONKEYPATCH,
                target,
                f.path,
                site.line,
                site.snippet,
                detail=f"patch helper {where}: value",
                owner=site.owner,
            )
            fn = None
            if value and value.kind is ArgKind.LOCAL:
                fn = self._fn_map().get((f.module, value.value.qualname))  # type: ignore[union-attr]
            elif value and value.kind is ArgKind.DOWNSTREAM:
                fn = self._defined(self.resolve(value.value))  # type: ignore[arg-type]
            if fn is not None:
                ref = replace(ref, detail=f"patch helper {where}: replaced by")
                ref = apply_function(ref, fn, f"{fn.path}::{fn.qualname}")
            out.append(ref)
        return out

    def _subclass_chains(self) -> list[Reference]:
        """Subclass chains through classes of other files."""
        out: list[Reference] = []
        classes = self._class_map()
        by_module: dict[str, dict[str, DownstreamFunction]] = {}
        for (m, q), fn in self._fn_map().items():
            by_module.setdefault(m, {})[q] = fn
        for f in self.files.values():
            funcs = by_module.get(f.module, {}) if f.classes else {}
            for c in f.classes:
                if c.upstream_direct:
                    continue
                anc = ancestors(f"{f.module}.{c.qualname}", classes, self.roots)
                if anc:
                    gate_at = GateLookup(f.gate_spans).at
                    out.extend(subclass_refs(c, anc, funcs, c.snippet, gate_at, "downstream base"))
        return out

    def _lines(self, path: str) -> list[str]:
        return self.sources.get(path, "").splitlines() if self.sources else []

    def _class_map(self) -> dict[str, DownstreamClass]:
        out: dict[str, DownstreamClass] = {}
        for f in self.files.values():
            for c in f.classes:
                c2 = replace(c, bases=tuple(self.resolve(b) for b in c.bases))
                out[f"{f.module}.{c.qualname}"] = c2
        return out

    def classes(self) -> dict[str, list[str]]:
        """Downstream class (module.qualname) -> its upstream ancestors, nearest first."""
        cmap = self._class_map()
        out = {}
        for name in cmap:
            anc = ancestors(name, cmap, self.roots)
            if anc:
                out[name] = anc
        return out

    def counts(self) -> dict[str, int]:
        """Figures for reports: references per kind and a few derived counts."""
        refs = self.references()
        c: dict[str, int] = defaultdict(int)
        for r in refs:
            c[str(r.kind)] += 1
        c["monkeypatch_replacing"] = sum(
            1 for r in refs if r.kind is CouplingKind.MONKEYPATCH and "replaced by" in r.detail
        )
        c["import_lines"] = sum(
            1
            for r in refs
            if r.kind is CouplingKind.IMPORT_USE
            and r.detail != "use"
            and not r.detail.startswith("use via")
        )
        c["files"] = len(self.files)
        c["errors"] = len(self.errors)
        return dict(c)
