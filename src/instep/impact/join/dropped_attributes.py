"""INHERITED_ATTRIBUTE: a downstream subclass reads ``self.<attr>`` that an upstream base's
``__init__`` (or ``__post_init__``) set and the new one no longer sets.

The shape (torch 2.5.0 -> 2.7.1, torch_musa at ``14ed48b^``): ``BuildOptionsBase.__init__``
set ``self._definations`` and ``self._passthough_args``; the new one sets
``self._definitions`` and ``self._passthrough_args`` instead, and
``CppTorchMusaOptions(CppTorchOptions).__init__`` still reads ``self._definations``:
AttributeError at every construction.

A coupling is claimed only when every step is read from the code: the old ``__init__``
assigns ``self.<attr>`` and the new one does not; no class of the downstream class's new
upstream MRO gives ``<attr>`` anywhere else (another method, a class attribute, a property,
a class-level annotation such as a dataclass field) or has ``__getattr__``; no downstream
class of the chain (the class and its downstream bases) gives it at class level, sets it in
an ``__init__`` or has ``__getattr__``; the reading method does not set it before the read.
The read is *plain* when it runs whenever its method runs (outside any ``if``, ``try``,
short-circuit or nested def: ``skipped_init.unconditional_self_reads``) and no other
downstream method sets it; anything else (a conditional read, ``getattr(self, "_x", d)``,
``hasattr(self, "_x")``, a setter in another downstream method) is *guarded*. When one
assignment replaced the dropped one at the same place (the sequences of ``self.<name>``
assignments of both bodies aligned), the evidence names the new name.

Nothing here picks a verdict: the fact ``attribute_read_plain`` goes to the rules
``inherited_attribute.*`` in ``verdict_rules.toml``. Reads through another name
(``obj._x`` on an instance) are not followed.
"""

from __future__ import annotations

import ast
import difflib
import textwrap
from collections.abc import Mapping, Sequence

from instep.impact.join.fact_names import Fact
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.join.patched_methods import PatchedMethod, patched_methods
from instep.impact.join.skipped_init import (
    SkippedInit,
    _class_level,
    _methods,
    _stores,
    downstream_mros,
    find_class,
    unconditional_self_reads,
)
from instep.impact.model import ChangeKind, CouplingKind, Reference, SymbolChange, UpstreamChange
from instep.pyindex.model import SymbolKind

UpClass = tuple[str, str]
_SETTERS = ("__init__", "__post_init__")
_DYNAMIC = frozenset({"__getattr__", "__getattribute__"})
# a dropped name and a new one in the same block of assignments: the new one replaces it
# when spelled this alike (difflib ratio; `_definations`/`_definitions` 0.92,
# `_cache`/`_definitions` 0.24). Tuning rows: torch_musa `_definations`, `_passthough_args`
_ALIKE = 0.6


def _store_sequence(fn: ast.AST) -> list[tuple[str, int]]:
    """``self.<name>`` assignments of a def in source order: (name, line)."""
    out = [
        (n.attr, n.lineno, n.col_offset)
        for n in ast.walk(fn)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    ]
    return [(name, line) for name, line, _ in sorted(out, key=lambda t: (t[1], t[2]))]


def _parse_def(lines: list[str] | None, line: int, end: int) -> ast.AST | None:
    if lines is None:
        return None
    try:
        tree = ast.parse(textwrap.dedent("\n".join(lines[line - 1 : end])))
    except (SyntaxError, ValueError):
        return None
    return tree.body[0] if tree.body else None


def dropped_attributes(old_fn: ast.AST, new_fn: ast.AST) -> dict[str, tuple[int, str | None]]:
    """Names the old def assigns on ``self`` and the new one does not: name -> (line of the
    first old assignment in the def's text, the name that replaced it at the same place or
    None). The two sequences of assignments are aligned; in a block that differs, one
    assignment in place of one is a rename, and among several a dropped name is renamed to
    the new name spelled most alike (``_ALIKE``)."""
    old, new = _store_sequence(old_fn), _store_sequence(new_fn)
    old_names, new_names = {n for n, _ in old}, {n for n, _ in new}
    gone = old_names - new_names
    out: dict[str, tuple[int, str | None]] = {}
    for name, line in old:
        if name in gone and name not in out:
            out[name] = (line, None)
    matcher = difflib.SequenceMatcher(a=[n for n, _ in old], b=[n for n, _ in new], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "replace":
            continue
        was = [n for n, _ in old[i1:i2] if n in gone and out[n][1] is None]
        now = [n for n, _ in new[j1:j2] if n not in old_names]
        if i2 - i1 == 1 and j2 - j1 == 1 and was and now:
            out[was[0]] = (out[was[0]][0], now[0])  # one assignment in place of one
            continue
        for name in was:  # several: only a name spelled alike succeeds
            best = max(now, key=lambda n: _alike(name, n), default=None)
            if best is not None and _alike(name, best) >= _ALIKE:
                out[name] = (out[name][0], best)
                now.remove(best)
    return out


def _alike(a: str, b: str) -> float:
    return difflib.SequenceMatcher(a=a, b=b, autojunk=False).ratio()


def _guarded_reads(fn: ast.AST, attr: str) -> list[int]:
    """Lines of ``getattr(self, "attr", …)`` and ``hasattr(self, "attr")`` in a def."""
    return [
        n.lineno
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id in ("getattr", "hasattr")
        and len(n.args) >= 2
        and isinstance(n.args[0], ast.Name)
        and n.args[0].id == "self"
        and isinstance(n.args[1], ast.Constant)
        and n.args[1].value == attr
    ]


def _plain_loads(fn: ast.AST, attr: str) -> list[int]:
    return sorted(
        n.lineno
        for n in ast.walk(fn)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and n.attr == attr
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    )


class DroppedAttributes:
    """Match ``self.<attr>`` assignments an upstream ``__init__`` drops to the downstream
    subclass methods that read ``<attr>``."""

    def __init__(self, inputs: JoinInputs) -> None:
        self.resolver = inputs.resolver
        self.units = inputs.units
        self.lines_of = inputs.lines_of
        self.down = inputs.down
        self.down_trees = inputs.down_trees
        self.inputs = inputs
        self.skipped = SkippedInit(self.resolver, inputs.calls.tree, self._down_tree, {})
        self.found: list[Found] = []

    def _down_file(self, path: str) -> tuple[ast.Module | None, Sequence[str]]:
        try:
            return self.down_trees.tree(path), self.down_trees.lines(path)
        except (OSError, KeyError):
            return None, []

    def _down_tree(self, path: str) -> ast.Module | None:
        return self._down_file(path)[0]

    def _holders(self) -> dict[UpClass, list[tuple[str, object, list[UpClass]]]]:
        """Upstream class -> the downstream classes with it in their upstream MRO:
        (module.qualname, the class record, that MRO)."""
        cmap = self.down._class_map()
        self.skipped.down_classes = cmap
        out: dict[UpClass, list] = {}
        for name, info, mro in downstream_mros(self.down, self.resolver, cmap):
            for up in mro:
                out.setdefault(up, []).append((name, info, mro))
        return out

    def _upstream_gives(self, mro: list[UpClass], attr: str) -> bool | None:
        """Does a class of the new ``mro`` still give ``attr`` (any method, class level,
        an annotation, ``__getattr__``)? None when a class of it is not read."""
        for up in mro:
            # the class and what its methods store, read once per class (every holder of
            # every dropped attribute asks again)
            node, _, class_level, methods = self.skipped.up_stores(up)
            if node is None:
                return None
            level = class_level | {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
            if attr in level or level & _DYNAMIC:
                return True
            if any(attr in stores for _, stores in methods):
                return True
        return False

    def _dropped(self, u: UpstreamChange, c: SymbolChange) -> dict[str, tuple[int, str | None]]:
        """The attributes a body change of an ``__init__`` stops setting, lines absolute."""
        if (
            c.symbol_kind is not SymbolKind.METHOD
            or ChangeKind.BODY not in c.aspects
            or c.old is None
            or c.new is None
            or c.qualname.rsplit(".", 1)[-1] not in _SETTERS
        ):
            return {}
        old_lines, new_lines = self.lines_of(u, c)
        old_fn = _parse_def(old_lines, c.old.line, c.old.end_line)
        new_fn = _parse_def(new_lines, c.new.line, c.new.end_line)
        if old_fn is None or new_fn is None:
            return {}
        return {
            name: (c.old.line + line - 1, now)
            for name, (line, now) in dropped_attributes(old_fn, new_fn).items()
        }

    def find(self) -> list[Found]:
        """The INHERITED_ATTRIBUTE couplings, in the order they are to be added."""
        found = [
            (i, u, c, d)
            for i, u in enumerate(self.units)
            for c in u.changes
            if (d := self._dropped(u, c))
        ]
        if not found:
            return self.found
        holders = self._holders()
        patched = patched_methods(
            self.inputs.references,
            lambda dotted: self.resolver.class_of(self.resolver.resolve(dotted)),
            self._down_tree,
        )
        for i, u, c, dropped in found:
            cls_q = c.qualname.rsplit(".", 1)[0]
            for name, info, mro in holders.get((c.module, cls_q), ()):
                for attr, (old_line, now) in dropped.items():
                    self._reads(i, u, c, name, info, mro, attr, old_line, now)
            for cls, methods in patched.items():
                mro = self.resolver.ancestors(*cls)
                if (c.module, cls_q) not in mro:
                    continue
                for attr, (old_line, now) in dropped.items():
                    self._patch_reads(i, c, mro, methods, attr, old_line, now)
        return self.found

    def _patch_reads(self, i, c, mro, methods: list[PatchedMethod], attr, old_line, now) -> None:
        """The couplings of the downstream defs installed on one upstream class (``mro``:
        its new upstream MRO) and one dropped attribute: as :meth:`_reads`, the patches
        standing for the class's methods; a patched ``__init__`` that sets it ends it."""
        if self._upstream_gives(mro, attr) is not False:
            return
        stores = [m for m in methods if attr in _stores(m.node)]
        if any(m.member in _SETTERS for m in stores):
            return  # the downstream's own __init__ of the class sets it
        upstream = self._upstream_text(c, mro, old_line, now)
        for m in methods:
            setters = [f"`{o.qualname}` ({o.path}:{o.node.lineno})" for o in stores if o is not m]
            read = _read_of(m.node, attr, setters)
            if read is None:
                continue
            # a read only a switch off by default reaches is the coupling book's to judge
            # (switch.off_by_default), as for any Shim
            line, how, facts = read
            how += f"; installed as `{m.member}` of `{mro[0][1]}` at {m.ref.at}"
            read = (line, how, facts | {Fact.PATCHED_METHOD})
            found = self._found(i, c, m.path, m.qualname, attr, now, read, upstream, m.ref.gate)
            self.found.append(found)

    def _reads(self, i, u, c, name, info, mro, attr, old_line, now) -> None:
        """The couplings of one downstream class and one dropped attribute."""
        if self._upstream_gives(mro, attr) is not False:
            return
        found = self._chain(name, attr)
        if found is None:
            return
        chain, setters = found
        upstream = self._upstream_text(c, mro, old_line, now)
        for cinfo, node in chain:
            for fn in _methods(node):
                read = _read_of(fn, attr, setters)
                if read is not None:
                    owner = f"{cinfo.qualname}.{fn.name}"
                    self.found.append(
                        self._found(i, c, cinfo.path, owner, attr, now, read, upstream)
                    )

    @staticmethod
    def _upstream_text(c: SymbolChange, mro: list[UpClass], old_line: int, now) -> str:
        """What upstream dropped, for the evidence."""
        cls_q, member = c.qualname.rsplit(".", 1)
        old_path = c.old.path if c.old is not None else c.path
        new_at = f"{c.new.path}:{c.new.line}" if c.new is not None else c.path
        gone = f"the new one ({new_at}) " + (
            f"sets `self.{now}` there instead" if now else "no longer sets it"
        )
        return (
            f"the old `{cls_q}.{member}` set it ({old_path}:{old_line}), {gone}, and no class "
            f"of the new upstream MRO ({', '.join(f'`{q}`' for _, q in mro)}) sets it "
            "elsewhere"
        )

    def _chain(self, name: str, attr: str) -> tuple[list, list[str]] | None:
        """The downstream class ``name`` and its downstream bases, each with its tree, and
        the methods of theirs other than an ``__init__`` that set ``attr``; None when a
        class of the chain is not read, gives ``attr`` at class level (or has
        ``__getattr__``), or sets it in an ``__init__``."""
        chain = []
        for _, cinfo in self.skipped._down_chain(name):
            node = find_class(self._down_tree(cinfo.path), cinfo.qualname)
            if node is None:
                return None  # a downstream class not read: nothing proven
            chain.append((cinfo, node))
        setters: list[str] = []
        for cinfo, node in chain:
            if attr in _class_level(node) or _class_level(node) & _DYNAMIC:
                return None
            for fn in _methods(node):
                if attr in _stores(fn):
                    if fn.name in _SETTERS:
                        return None  # the downstream sets it itself
                    setters.append(f"`{cinfo.qualname}.{fn.name}` ({cinfo.path}:{fn.lineno})")
        return chain, setters

    def _found(self, i, c, path, owner, attr, now, read, upstream: str, gate=None) -> Found:
        """The coupling of the downstream def ``owner`` of ``path`` reading ``attr``
        (``read``: :func:`_read_of`); ``upstream`` says what upstream dropped; ``gate``:
        the version gate of a patch's installation."""
        line, how, facts = read
        _, lines = self._down_file(path)
        snippet = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        detail = f"reads `self.{attr}`" + (f" (now `{now}`)" if now else "")
        evidence = f"`{owner}` reads `self.{attr}` ({path}:{line}) {how}; {upstream}" + (
            ": AttributeError" if Fact.ATTRIBUTE_READ_PLAIN in facts else ""
        )
        ref = Reference(
            CouplingKind.INHERITED_ATTRIBUTE,
            f"{c.module}.{c.qualname}",
            path,
            line,
            snippet,
            detail=detail,
            owner=owner,
            gate=gate,
        )
        return Found(
            i,
            c,
            ref,
            CouplingKind.INHERITED_ATTRIBUTE,
            detail=detail,
            extra=frozenset(facts),
            evidence=evidence,
        )


def _read_of(fn: ast.AST, attr: str, setters: list[str]) -> tuple[int, str, set[Fact]] | None:
    """How the method ``fn`` reads ``self.<attr>``: (line, how, facts); None when it does
    not, or sets it before it reads it. ``setters``: other downstream methods that set it."""
    loads = _plain_loads(fn, attr)
    guards = _guarded_reads(fn, attr)
    if not loads and not guards:
        return None
    stored = [n.lineno for n in ast.walk(fn) if _is_store(n, attr)]
    first = min(loads + guards)
    if stored and min(stored) < first:
        return None  # the method sets it before reading it
    plain = [ln for a, ln in unconditional_self_reads(fn.body) if a == attr]  # type: ignore[attr-defined]
    if plain and not setters:
        return plain[0], "outside any `if` or `try`", {Fact.ATTRIBUTE_READ_PLAIN}
    if loads:
        how = (
            "only on a conditional path"
            if not plain
            else "while " + ", ".join(setters) + " may set it first"
        )
        return loads[0], how, set()
    return guards[0], "through `getattr`/`hasattr`, so it takes the fallback", set()


def _is_store(n: ast.AST, attr: str) -> bool:
    return (
        isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and n.attr == attr
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    )


class InheritedAttributePass(JoinPass):
    """inherited_attribute couplings (see the module's docstring)."""

    name = "dropped attributes"
    kinds = frozenset({CouplingKind.INHERITED_ATTRIBUTE})
    counted_as = "inherited_attribute_couplings"

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        return Findings(DroppedAttributes(inputs).find())
