"""FORK gaps: a downstream class or file that forks an upstream one lacks a method or
function that upstream *added* in the range.

The forks themselves come from fork detection (``join/fork_search.py``: downstream
functions that are near-copies of changed upstream functions). From them:

- a downstream class ``D`` forks the upstream class ``C`` when two or more of its methods
  are forks of methods of ``C`` (or one is and ``D``'s name ends with ``C``'s), and ``C``
  is not an upstream ancestor of ``D`` (a subclass inherits what upstream adds);
- a downstream file forks the upstream module ``M`` when two or more of its module-level
  functions are forks of module-level functions of ``M``.

A method added to ``C`` (dunders apart) that ``D`` and its downstream bases do not
define, or a function added to ``M`` that the file does not define, is a FORK coupling
(fact ``fork_lacks_added``) only where the fork runs without it:

- the new upstream calls it from a member the fork has its own copy of (``self.m()`` in
  ``C.f``, and ``D`` defines ``f``; ``m()`` in ``M.f``, and the file defines ``f``): the
  copy keeps the old body, which does not. The coupling sits at the copy's line, so a
  version gate around the copy applies (a copy kept for older torch only is the old
  branch);
- or the new upstream calls it on an object outside ``C`` (``x.m(...)``) *and* the
  downstream puts ``D`` in ``C``'s place (a monkey-patch of ``C`` in a file that names
  ``D``): ``added_called_on_fork``.

Anything else the fork lacks is only called by upstream code the fork does not copy (it
runs upstream's, which has it), or by nobody: judged noise on torch-npu 2.13.0
(docs/validation/impact-new-kinds.md), no coupling.

Two things look like forks and are not (judged on torch-npu, same doc):

- a downstream method whose body is one delegation to a base (``return super().m(...)``,
  ``Base.m(self, ...)``: torch_npu's ``NPUGraph.capture_end`` over its C++ graph) copies
  nothing: it neither makes its class a fork nor stands as the copy of a caller;
- a class with ``C`` anywhere in its upstream MRO, through an upstream intermediate class
  (``NPUTritonScheduling(TritonScheduling)``, ``TritonScheduling(SIMDScheduling)``),
  inherits what upstream adds to ``C``; an override of ``C``'s member that lacks the new
  call is ``fork.stale``'s business, not a gap. The evidence names the member, its
upstream ``file:line`` and the call. Nothing here detects forks or picks a verdict.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Mapping

from instep.impact.downstream.subclasses import members_defined
from instep.impact.downstream.version_gates import GateLookup
from instep.impact.join.fact_names import Fact
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.model import ChangeKind, CouplingKind, Reference
from instep.pyindex.model import SymbolKind

_ASSIGNED = re.compile(r"=\s*([A-Za-z_]\w*)\s*$")
_SELF = frozenset({"self", "cls", "type(self)", "self.__class__"})


class ForkGaps:
    """Match members upstream added to forked classes and modules."""

    def __init__(self, inputs: JoinInputs) -> None:
        self.inputs = inputs
        self.units = inputs.units
        self.down = inputs.down
        self.calls = inputs.calls
        # fork (downstream class or file) -> upstream member name -> the fork's copy of it
        self._copies: dict[str, dict[str, str]] = defaultdict(dict)
        self.read_down = inputs.read_down  # downstream path -> bytes: a delegation or a copy?
        self._delegations: dict[str, frozenset[str]] = {}  # path -> qualnames of delegations
        self._cmap: dict | None = None  # the downstream class map, made once (_class_map)
        self.found: list[Found] = []

    def find(self, fork_refs: list[Reference], all_refs: list[Reference]) -> list[Found]:
        """The FORK couplings of the members forks lack, in the order they are to be added."""
        added_methods, added_functions = self._added()
        if not added_methods and not added_functions:
            return self.found
        classes, files = self._forked(fork_refs)
        if self.calls is not None:  # the calls of every member a fork may lack: one pass
            self.calls.prefetch(
                c.qualname.split(".")[1] for _, up in classes for _, c in added_methods.get(up, ())
            )
        self._class_gaps(classes, added_methods, self._swaps(all_refs))
        self._file_gaps(files, added_functions)
        return self.found

    def _added(self) -> tuple[dict[tuple[str, str], list], dict[str, list]]:
        """The methods upstream added, by (module, class), dunders apart, and the module
        functions it added, by module: (unit index, change) each."""
        added_methods: dict[tuple[str, str], list] = defaultdict(list)  # (module, C) -> hits
        added_functions: dict[str, list] = defaultdict(list)  # module -> hits
        for i, u in enumerate(self.units):
            for c in u.changes:
                if c.kind is not ChangeKind.ADDED:
                    continue
                if c.symbol_kind is SymbolKind.METHOD and c.qualname.count(".") == 1:
                    cls, member = c.qualname.split(".")
                    if not (member.startswith("__") and member.endswith("__")):
                        added_methods[(c.module, cls)].append((i, c))
                elif c.symbol_kind is SymbolKind.FUNCTION and "." not in c.qualname:
                    added_functions[c.module].append((i, c))
        return added_methods, added_functions

    def _class_gaps(self, classes, added_methods, swaps) -> None:
        """Couple the methods upstream added to a forked class that the fork lacks."""
        cmap = self._class_map()
        for (dcls, up), evidence in classes.items():
            hits = added_methods.get(up)
            info = cmap.get(dcls)
            if not hits or info is None:
                continue
            defined = members_defined(dcls, cmap)
            swapped = [p for p, value in swaps.get(f"{up[0]}.{up[1]}", ()) if value == dcls]
            for i, c in hits:
                member = c.qualname.split(".")[1]
                if member in defined:
                    continue
                facts = {Fact.FORK_LACKS_ADDED}
                text = (
                    f"`{info.qualname}` ({info.path}:{info.line}) forks `{up[1]}` ({evidence}) "
                    f"and lacks `{member}`, which upstream added at {_line(c)}"
                )
                call = self._outside_call(member, up[1]) if swapped else None
                copy = self._copied_caller(member, c.path, up[1], self._copy_names(dcls, defined))
                where = None
                if call is not None:
                    facts.add(Fact.ADDED_CALLED_ON_FORK)
                    text += (
                        f"; upstream calls it at {call} and {swapped[0]} puts "
                        f"`{info.qualname}` in `{up[1]}`'s place"
                    )
                elif copy is not None:
                    site, name = copy
                    where = self._function(info.path, f"{info.qualname}.{name}")
                    at = f"{where.path}:{where.line}" if where is not None else info.path
                    text += (
                        f"; upstream's `{site.caller}` now calls it ({site.at}), and "
                        f"`{info.qualname}.{name}` ({at}) is the fork's copy of it"
                    )
                elif self.calls is not None:
                    continue  # only upstream code the fork does not copy calls it, or none
                ref = self._ref(c, info.path, info.line, info.snippet, info.qualname, where)
                self._add(i, c, ref, member, facts, text)

    def _file_gaps(self, files, added_functions) -> None:
        """Couple the functions upstream added to a forked module that the file lacks."""
        for (path, module), evidence in files.items():
            fi = self.down.files.get(path)
            if fi is None:
                continue
            defined = {f.qualname for f in fi.functions if "." not in f.qualname}
            for i, c in added_functions.get(module, ()):
                if c.qualname in defined:
                    continue
                text = (
                    f"{path} forks {c.path} ({evidence}) and lacks `{c.qualname}`, which "
                    f"upstream added at {_line(c)}"
                )
                copy = self._copied_caller(
                    c.qualname, c.path, None, self._copy_names(path, defined)
                )
                where = None
                if copy is not None:
                    site, name = copy
                    where = self._function(path, name)
                    at = f"{path}:{where.line}" if where is not None else path
                    text += (
                        f"; upstream's `{site.caller}` now calls it ({site.at}), and "
                        f"`{name}` ({at}) is the fork's copy of it"
                    )
                elif self.calls is not None:
                    continue  # only upstream code the file does not copy calls it, or none
                ref = self._ref(c, path, 1, f"{path} ({evidence})", None, where)
                self._add(i, c, ref, c.qualname, {Fact.FORK_LACKS_ADDED}, text)

    def _swaps(self, all_refs: list[Reference]) -> dict[str, list[tuple[str, str]]]:
        """Upstream dotted name -> (downstream file, downstream dotted value) of each
        monkey-patch that assigns a downstream object to it (``sched.Scheduler = NPUSched``)."""
        out: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for fi in self.down.files.values():
            for idx, dn in fi.patch_values:  # the value is defined in another file
                r = fi.references[idx]
                if r.kind is CouplingKind.MONKEYPATCH:
                    out[r.target].append((fi.path, self.down.resolve(dn)))
        for r in all_refs:  # the value is a class of the patching file itself
            m = _ASSIGNED.search(r.snippet) if r.kind is CouplingKind.MONKEYPATCH else None
            fi = self.down.files.get(r.path)
            if m and fi is not None:
                out[r.target].append((r.path, f"{fi.module}.{m.group(1)}"))
        return out

    def _copied_caller(self, member: str, path: str, cls: str | None, copies):
        """(call site, name of the fork's copy) of a new-upstream call of ``member`` in its
        own file, made by a member of ``cls`` through ``self`` (``cls`` None: by a
        module-level function, as a bare name) of which the fork has a copy (``copies``:
        upstream name -> the fork's); None if none."""
        if self.calls is None:
            return None
        for s in self.calls.sites(member, only_in=path):
            if s.caller is None or s.cls != cls:
                continue
            own = s.receiver in _SELF if cls is not None else s.receiver is None
            name = s.caller if cls is None else s.caller.removeprefix(f"{cls}.")
            if own and "." not in name and name in copies and name != member:
                return s, copies[name]
        return None

    def _copy_names(self, fork: str, defined) -> dict[str, str]:
        """Upstream member name -> the fork's copy: the same name, else a fork of it under
        another name (``npu_make_e`` for ``make_e``; never a sibling that also looks like it)."""
        copies = self._copies.get(fork, {}) | {n: n for n in defined}
        path, prefix = self._where(fork)
        gone = self._delegating(path)
        return {k: v for k, v in copies.items() if f"{prefix}{v}" not in gone}

    def _where(self, fork: str) -> tuple[str, str]:
        """(path, qualname prefix of its members) of a fork: a downstream class or file."""
        info = self._class_map().get(fork)
        return (info.path, f"{info.qualname}.") if info is not None else (fork, "")

    def _class_map(self) -> dict:
        """The downstream index's class map (module.qualname -> class, bases resolved),
        made once: the index does not change during the join."""
        if self._cmap is None:
            self._cmap = self.down._class_map()
        return self._cmap

    def _delegating(self, path: str) -> frozenset[str]:
        """Qualnames of the defs in the downstream file ``path`` whose body (past a
        docstring) is one call of the same-named member of a base: ``super().m(...)``,
        ``super(D, self).m(...)`` or ``Base.m(self, ...)``, returned or not."""
        if path not in self._delegations:
            shared = self.inputs.down_trees
            tree = shared.tree_of_bytes(path) if self.read_down is not None else None
            found: set[str] = set()
            for node in tree.body if tree is not None else ():
                if isinstance(node, ast.ClassDef):
                    bases = {ast.unparse(b) for b in node.bases}
                    for f in node.body:
                        fn = isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                        if fn and _delegates(f, bases):
                            found.add(f"{node.name}.{f.name}")
            self._delegations[path] = frozenset(found)
        return self._delegations[path]

    def _function(self, path: str, qualname: str):
        fi = self.down.files.get(path)
        return self.down._fn_map().get((fi.module, qualname)) if fi is not None else None

    def _ref(self, c, path, line, snippet, owner, where) -> Reference:
        """At the fork's copy of the caller (with the gate around it), else at the fork."""
        gate = None
        if where is not None:
            path, line, snippet = where.path, where.line, where.snippet or snippet
            owner = where.qualname
            fi = self.down.files.get(path)
            gate = GateLookup(fi.gate_spans).at(line) if fi is not None else None
        return Reference(CouplingKind.FORK, c.dotted, path, line, snippet, owner=owner, gate=gate)

    def _add(self, i, c, ref, member, facts, text) -> None:
        self.found.append(
            Found(
                i,
                c,
                ref,
                CouplingKind.FORK,
                detail=f"fork lacks `{member}`",
                extra=frozenset(facts),
                evidence=text,
            )
        )

    def _forked(self, fork_refs: list[Reference]):
        """(downstream class, upstream class) and (downstream file, upstream module) pairs
        that fork each other, with a short note of the evidence."""
        by_class: dict[tuple[str, tuple[str, str]], set[str]] = defaultdict(set)
        by_file: dict[tuple[str, str], set[str]] = defaultdict(set)
        cmap = self._class_map()
        anc = self.down.classes()
        for r in fork_refs:
            fi = self.down.files.get(r.path)
            if fi is None or not r.owner:
                continue
            for _, c in self.inputs.changes.by_dotted.get(r.target, ()):
                up_parts = c.qualname.split(".")
                down_parts = r.owner.split(".")
                if len(up_parts) == 2 and len(down_parts) == 2:
                    dcls = f"{fi.module}.{down_parts[0]}"
                    if dcls in cmap and r.owner not in self._delegating(r.path):
                        by_class[(dcls, (c.module, up_parts[0]))].add(down_parts[1])
                        self._copies[dcls][up_parts[1]] = down_parts[1]
                elif len(up_parts) == 1 and len(down_parts) == 1:
                    by_file[(r.path, c.module)].add(r.owner)
                    self._copies[r.path][up_parts[0]] = r.owner
                break
        classes = {}
        for (dcls, up), methods in by_class.items():
            if up in self._upstream_mro(anc.get(dcls, ())):
                continue  # a subclass, not a fork: it inherits what upstream adds
            short = dcls.rsplit(".", 1)[-1]
            if len(methods) >= 2 or short.endswith(up[1]):
                classes[(dcls, up)] = f"forked methods: {', '.join(sorted(methods)[:4])}"
        files = {
            key: f"forked functions: {', '.join(sorted(fns)[:4])}"
            for key, fns in by_file.items()
            if len(fns) >= 2
        }
        return classes, files

    def _upstream_mro(self, bases) -> set[tuple[str, str]]:
        """Every upstream (module, class) a downstream class inherits from: its upstream
        ancestors (dotted) and theirs in the new upstream."""
        resolver = self.inputs.resolver
        out: set[tuple[str, str]] = set()
        for a in bases:
            out.add(tuple(a.rsplit(".", 1)) if "." in a else (a, ""))  # type: ignore[arg-type]
            found = resolver.class_of(resolver.resolve(a)) if resolver is not None else None
            if found is not None:
                out.update(resolver.ancestors(*found))
        return out

    def _outside_call(self, member: str, cls: str) -> str | None:
        """A new-upstream call ``x.member(...)`` that is not ``self.member`` inside ``cls``."""
        if self.calls is None:
            return None
        for s in self.calls.sites(member):
            if s.receiver is None or (s.receiver in _SELF and s.cls == cls):
                continue
            caller = f" (in `{s.caller}`)" if s.caller else ""
            return f"{s.at} (`{s.receiver}.{member}(…)`{caller})"
        return None


class ForkGapPass(JoinPass):
    """fork couplings of the members a fork lacks; reads the fork detection's forks."""

    name = "fork gaps"
    kinds = frozenset({CouplingKind.FORK})
    needs = ("fork detection",)
    counted_as = "fork_gap_couplings"

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        forks = earlier["fork detection"].references
        return Findings(ForkGaps(inputs).find(forks, inputs.references))


def _line(c) -> str:
    return f"{c.path}:{c.new.line if c.new is not None else '?'}"


def _delegates(fn: ast.FunctionDef | ast.AsyncFunctionDef, bases: set[str]) -> bool:
    """``fn``'s body is one call of its own name on a base: ``super().m(...)`` or
    ``Base.m(self, ...)`` with ``Base`` among ``bases`` (returned or not)."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], (ast.Return, ast.Expr)):
        return False
    call = body[0].value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr != fn.name:
        return False
    obj = call.func.value
    if isinstance(obj, ast.Call) and isinstance(obj.func, ast.Name) and obj.func.id == "super":
        return True
    return ast.unparse(obj) in bases
