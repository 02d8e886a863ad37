"""HOOK_NAME: a member that the new upstream reads from an object the backend provides,
and that the backend's class does not define.

Two shapes of the same coupling:

- upstream *adds* a method ``m`` to a class ``C`` (``DeviceInterface``,
  ``DeviceOpOverrides``, any upstream class a downstream class subclasses, through
  downstream bases too) and the downstream subclass ``D`` defines no ``m``: ``D`` gets
  whatever its upstream ancestors give, the new default of ``C`` (or an upstream subclass
  in between, such as a CUDA one);
- a changed upstream function *newly* reads a name by string from such an object:
  ``getattr(obj, "_name")``, ``getattr(obj, "_name", None)``, ``hasattr(obj, "_name")``,
  where ``obj`` is ``self``/``cls``/``type(self)`` of an upstream class, or a handle that
  hands out the backend's object (``V.graph.device_ops``, ``get_interface_for_device(…)``:
  ``data/backend_hooks.toml``), and neither ``D`` nor an upstream ancestor defines it;
- a changed upstream method that ``D`` inherits (and does not override) *newly* reads
  ``self.<attr>`` on its normal path, set only by an upstream ``__init__`` that ``D``'s
  ``__init__`` skips (``join/skipped_init.py``): ``D`` lacks ``<attr>``.

Facts for the rules (``hook.*`` in ``verdict_rules.toml``): ``hook_default_fails`` (the
inherited default raises unconditionally or is CUDA-specific, or ``getattr`` has no
default), ``hook_call_reaches`` (a new-upstream call or read reaches ``D`` outside any
``if``), ``hook_call_conditional`` (every reaching call sits under an ``if``: the
condition is quoted). The evidence names the read with ``file:line``, the downstream class
with ``file:line`` and the default's behaviour. Nothing here picks a verdict.

The pass is :class:`HookNamePass` (in a forked child); :class:`HookNames` finds the
couplings, with its reading of the upstream defaults (``join/hook_defaults.py``) and of
whether a read reaches a class (``join/hook_reach.py``); the reads themselves are
``join/hook_reads.py``'s.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections import OrderedDict, defaultdict
from collections.abc import Mapping

from instep.impact.downstream.subclasses import members_defined
from instep.impact.join.backend_handles import load_handles
from instep.impact.join.fact_names import Fact
from instep.impact.join.hook_defaults import UpstreamDefaults
from instep.impact.join.hook_reach import HookReach
from instep.impact.join.hook_reads import (
    MAX_SITES,
    SELF_RECEIVERS,
    TEXT_READ,
    Read,
    reads_in,
)
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.join.skipped_init import SkippedInit, downstream_mros
from instep.impact.model import ChangeKind, CouplingKind, Reference, SymbolChange, UpstreamChange
from instep.pyindex.model import SymbolKind, module_of

UpClass = tuple[str, str]  # (module, class qualname) in the new upstream
# how a string read of a missing name behaves: (it fails, what it does)
_MISSING = {
    "getattr": (True, "no default: AttributeError when it is missing"),
    "getattr_default": (False, "read with a default when it is missing"),
    "hasattr": (False, "`hasattr` is False when it is missing"),
}


class HookNames(HookReach, UpstreamDefaults):
    """Match new upstream hooks to the downstream classes that lack them."""

    def __init__(self, inputs: JoinInputs) -> None:
        self.resolver = inputs.resolver
        self.units = inputs.units
        self.lines_of = inputs.lines_of
        self.down = inputs.down
        self.calls = inputs.calls
        self.names_in = inputs.names_in  # attribute names and quoted identifiers of a file
        self.handles = {k: tuple(v.rsplit(".", 1)) for k, v in load_handles().items()}
        self._texts: dict[str, ast.Module | None] = {}
        self._reads_of: dict[str, list[Read]] = defaultdict(list)  # member -> calls of it
        self._defs: OrderedDict[str, dict[str, list]] = OrderedDict()  # the latest files'
        self._fns: dict[tuple[str, str], ast.FunctionDef | ast.AsyncFunctionDef | None] = {}
        self._defaults: dict[tuple[str, str, str], tuple[bool, str]] = {}
        self._normal: dict[tuple[str, str], list[tuple[str, int]] | None] = {}
        self._file_reads: dict[tuple[str, str], tuple[str, list, list]] = {}
        self._sub_modules: frozenset[str] = frozenset()
        self.read_down = inputs.read_down  # __init__ bodies, registrations
        self.down_trees = inputs.down_trees
        self._down_name: dict[tuple[str, str], str] = {}  # (path, qualname) -> module.qualname
        self._handed: dict[UpClass, frozenset[str]] | None = None
        self._callers: dict[str, list[Read] | None] = {}
        self._attributes: dict[str, frozenset[bytes]] = {}  # path -> names read as attributes
        self._supers: dict[tuple[str, str], set[str]] | None = None
        self.skipped = SkippedInit(self.resolver, self._tree, self._down_tree, {})

    # -- the downstream side ---------------------------------------------------------

    def _subclassers(self) -> dict[UpClass, list[tuple[object, frozenset[str], list[UpClass]]]]:
        """Upstream class -> the downstream classes with it in their upstream MRO, each
        with the member names it (or a downstream base) defines and that MRO."""
        cmap = self.down._class_map()
        self.skipped.down_classes = cmap
        out: dict[UpClass, list] = defaultdict(list)
        for name, info, mro in downstream_mros(self.down, self.resolver, cmap):
            defined = members_defined(name, cmap)
            self._down_name[(info.path, info.qualname)] = name
            for up in mro:
                out[up].append((info, defined, mro))
        return out

    # -- the upstream side -------------------------------------------------------------

    def _down_tree(self, path: str) -> ast.Module | None:
        return self.down_trees.tree_of_bytes(path) if self.read_down is not None else None

    def find(self) -> list[Found]:
        """The HOOK_NAME couplings, in the order they are to be added. It reads the
        resolver, ``names_in`` and the indexes, never a late service of the inputs, so it
        runs in a child forked before the references are matched."""
        self._found: list[Found] = []
        subs = self._subclassers()
        if not subs:
            return self._found
        self._sub_modules = frozenset(mod for mod, _ in subs)
        changed = [
            (i, c, found)
            for i, u in enumerate(self.units)
            for c in u.changes
            if (found := self._changed_member(u, c, subs))
        ]
        if self.calls is not None:  # the calls of every added member a holder lacks: one pass
            where: dict[str, set[str]] = defaultdict(set)  # member -> modules of its MROs
            for u in self.units:
                for c in u.changes:
                    if c.kind is ChangeKind.ADDED and c.symbol_kind is SymbolKind.METHOD:
                        cls_q, member = c.qualname.rsplit(".", 1)
                        for _, defined, mro in subs.get((c.module, cls_q), ()):
                            if member not in defined:
                                where[member].update(mod for mod, _ in mro)
            for _, c, found in changed:  # and of every changed one that newly fails
                for _, _, mro, *_ in found:
                    where[c.qualname.rsplit(".", 1)[1]].update(mod for mod, _ in mro)
            self._member_reads(where)
        for i, u in enumerate(self.units):
            for c in u.changes:
                if c.kind is ChangeKind.ADDED and c.symbol_kind is SymbolKind.METHOD:
                    self._added_member(i, c, subs)
                if c.aspects & {ChangeKind.BODY, ChangeKind.ADDED} and c.symbol_kind in (
                    SymbolKind.FUNCTION,
                    SymbolKind.METHOD,
                ):
                    self._new_reads(i, u, c, subs)
        for i, c, found in changed:
            member = c.qualname.rsplit(".", 1)[1]
            reads = self._reads_of.get(member, [])
            for info, defined, mro, where, pqual, attr, why in found:
                reaching = [
                    self._called_under(r, info)
                    for r in reads[:MAX_SITES]
                    if self._reaches(r, info, mro, defined)
                ]
                default = f"the changed `{pqual}.{member}` ({where}) fails on it: {why}"
                capped = len(reads) > MAX_SITES
                self._emit(i, c, info, attr, True, default, reaching, capped, via=member)
        return self._found

    def _changed_member(self, u: UpstreamChange, c: SymbolChange, subs) -> list[tuple]:
        """The downstream classes on which a body change of an upstream method they inherit
        (and do not override) newly reads, on its normal path, an attribute that only an
        upstream ``__init__`` they skip sets: (info, defined, mro, where, provider
        qualname, attribute, evidence) each. The read is new when the old body read no
        ``self.<attribute>`` anywhere."""
        if (
            ChangeKind.BODY not in c.aspects
            or c.kind is ChangeKind.ADDED
            or c.symbol_kind is not SymbolKind.METHOD
            or c.old is None
            or c.new is None
        ):
            return []
        cls_q, member = c.qualname.rsplit(".", 1)
        holders = subs.get((c.module, cls_q))
        if not holders or (member.startswith("__") and member.endswith("__")):
            return []
        out: list[tuple] = []
        old_reads: frozenset[str] | None = None
        for info, defined, mro in holders:
            if member in defined:
                continue  # the downstream class overrides it: the change does not run there
            prov = self._provider(mro, member)
            if prov is None or prov[0] != (c.module, cls_q):
                continue  # it inherits another definition
            if self._skipped_init(info, mro, prov[1], member) is None:
                continue
            if old_reads is None:
                old_reads = self._old_self_reads(u, c)
                if old_reads is None:
                    return out  # the old body was not read: nothing proven new
            found = self._skipped_init(info, mro, prov[1], member, old_reads)
            if found is not None:
                out.append((info, defined, mro, prov[1], cls_q, *found))
        return out

    def _old_self_reads(self, u: UpstreamChange, c: SymbolChange) -> frozenset[str] | None:
        """Every ``self.<attr>`` the old body of ``c`` loads (any path); None if not read."""
        old_lines, _ = self.lines_of(u, c)
        if old_lines is None or c.old is None:
            return None
        text = textwrap.dedent("\n".join(old_lines[c.old.line - 1 : c.old.end_line]))
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
        return frozenset(
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        )

    def _added_member(self, i: int, c: SymbolChange, subs) -> None:
        cls_q, member = c.qualname.rsplit(".", 1)
        if member.startswith("__") and member.endswith("__"):
            return
        holders = subs.get((c.module, cls_q))
        if not holders:
            return
        for info, defined, mro in holders:
            if member in defined:
                continue  # added.collides decides that one
            prov = self._provider(mro, member)
            if prov is None:
                continue
            (_, pqual), where = prov
            fails, default = self._default(where, pqual, member)
            skipped = self._skipped_init(info, mro, where, member)
            if skipped is not None:
                fails = True
                default = f"the default `{pqual}.{member}` ({where}) fails: {skipped[1]}"
            elif fails and default.endswith("is CUDA-specific"):
                own = self._own_delegate(info, where, member)
                if own is not None:
                    fails, default = (
                        False,
                        (
                            f"the default `{pqual}.{member}` ({where}), in a CUDA file, only "
                            f"delegates to `self.{own}`, which `{info.qualname}` sets itself"
                        ),
                    )
            reads = self._reads_of.get(member, [])
            reaching = [
                self._called_under(r, info)
                for r in reads[:MAX_SITES]
                if self._reaches(r, info, mro, defined)
            ]
            if not fails and not reaching:
                continue  # a usable default nothing reaches: nothing to test
            self._emit(i, c, info, member, fails, default, reaching, len(reads) > MAX_SITES)

    def _new_reads(self, i: int, u: UpstreamChange, c: SymbolChange, subs) -> None:
        """Couple the string reads (``getattr(obj, "_x")``…) the changed def ``c`` newly
        makes of a name a downstream class behind that receiver lacks."""
        found = self._fresh_reads(u, c, subs)
        if found is None:
            return
        new_src, new, old_keys = found
        span = (c.new.line, c.new.end_line)  # type: ignore[union-attr]
        for name, r in new:
            line = int(r.at.rsplit(":", 1)[1])
            if not (span[0] <= line <= span[1]) or (name, r.receiver) in old_keys:
                continue
            up = self._receiver_class(r, c.path)
            holders = subs.get(up) if up is not None else None
            if not holders or re.search(rf"\bself\.{re.escape(name)}\s*[:=]", new_src):
                continue  # not a backend object, or an instance attribute upstream sets
            for info, defined, mro in holders:
                if name in defined or name in self.names_in(info.path):
                    continue
                handle = r.receiver not in SELF_RECEIVERS and up is not None
                if handle and not self._handed_to(up, info):
                    continue  # the handle never hands this class out
                if self._provider(mro, name) is not None:
                    continue  # an upstream ancestor defines it: the read finds that
                fails, default = _MISSING.get(r.how, _MISSING["hasattr"])
                self._emit(i, c, info, name, fails, default, [r], False)

    def _fresh_reads(self, u: UpstreamChange, c: SymbolChange, subs):
        """(the new file's text, its string reads worst first, the (name, receiver) pairs
        the old def read) when the changed def reads by string a name it did not read
        before that some downstream class behind the receiver may lack; else None."""
        if c.new is None:
            return None
        old_lines, new_lines = self.lines_of(u, c)
        if new_lines is None:
            return None
        # a textual pre-filter on the changed def alone: a string read it did not have,
        # of a name some downstream class behind that receiver lacks
        new_def = "\n".join(new_lines[c.new.line - 1 : c.new.end_line])
        if "attr(" not in new_def:
            return None
        old_def = ""
        if c.old is not None and old_lines is not None:
            old_def = "\n".join(old_lines[c.old.line - 1 : c.old.end_line])
        fresh = set(TEXT_READ.findall(new_def)) - set(TEXT_READ.findall(old_def))
        module, parts = module_of(c.path), c.qualname.split(".")
        enclosing = [(module, ".".join(parts[:k])) for k in range(1, len(parts))]
        if not any(self._may_lack(recv, name, enclosing, subs) for recv, name in fresh):
            return None
        memo_key = (u.id, c.path)
        if memo_key not in self._file_reads:
            new_src = "\n".join(new_lines)
            old_src = "\n".join(old_lines) if old_lines is not None else ""
            self._file_reads[memo_key] = (
                new_src,
                reads_in(c.path, new_src),
                reads_in(c.path, old_src) if "attr(" in old_src else [],
            )
        new_src, new_all, old_all = self._file_reads[memo_key]
        new = list(new_all)
        if not new:
            return None
        new.sort(key=lambda nr: nr[1].how != "getattr")  # one coupling per place: worst first
        old_keys: set[tuple[str, str]] = set()
        if c.old is not None:
            for name, r in old_all:
                line = int(r.at.rsplit(":", 1)[1])
                if c.old.line <= line <= c.old.end_line:
                    old_keys.add((name, r.receiver))
        return new_src, new, old_keys

    def _emit(self, i, c, info, member, fails, default, reaching, capped, via=None) -> None:
        """One coupling: ``info`` lacks ``member`` (with ``via``: an attribute the changed
        member ``via`` reads, ``reaching`` being the calls of ``via``)."""
        facts = set()
        if fails:
            facts.add(Fact.HOOK_DEFAULT_FAILS)
        verb = f"calls the changed `{via}`" if via else "reads it"
        unconditional = [r for r in reaching if r.condition is None]
        if unconditional:
            facts.add(Fact.HOOK_CALL_REACHES)
            first = unconditional[0]
            how = f"{verb} at {first.at} (`{first.text}`"
            how += f", in `{first.caller}`)" if first.caller else ")"
        elif reaching:
            facts.add(Fact.HOOK_CALL_CONDITIONAL)
            first = reaching[0]
            how = f"{verb} only under `{first.condition}`: {first.at} (`{first.text}`" + (
                f", in `{first.caller}`)" if first.caller else ")"
            )
        else:
            how = "no new-upstream call reaching it was found" + (
                f" (more than {MAX_SITES} calls of the name: not followed)" if capped else ""
            )
        if len(reaching) > 1:
            how += f" and at {len(reaching) - 1} more place(s)"
        evidence = (
            f"upstream {how}; `{info.qualname}` ({info.path}:{info.line}) does not "
            f"{'set' if via else 'define'} `{member}`; {default}"
        )
        ref = Reference(
            CouplingKind.HOOK_NAME,
            f"{c.module}.{c.qualname}",
            info.path,
            info.line,
            info.snippet,
            detail=f"lacks `{member}`",
            owner=info.qualname,
        )
        self._found.append(
            Found(
                i,
                c,
                ref,
                CouplingKind.HOOK_NAME,
                detail=f"lacks `{member}`",
                extra=frozenset(facts),
                evidence=evidence,
            )
        )


class HookNamePass(JoinPass):
    """hook_name couplings (see the module's docstring); in a forked child."""

    name = "hook names"
    kinds = frozenset({CouplingKind.HOOK_NAME})
    forked = True
    counted_as = "hook_name_couplings"

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        return Findings(HookNames(inputs).find())
