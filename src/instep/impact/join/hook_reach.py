"""Does a read of a member in the new upstream reach a downstream class?

:class:`HookReach` (a part of the hook-name pass) collects the calls ``x.name(…)`` of the
members sought, one visit per file that can hold one (:meth:`HookReach._member_reads`),
and decides for each read whether it reaches a downstream class: ``self`` inside an
upstream class of the class's MRO whose calling method the class does not override (or
calls ``super()`` of), one level up through the callers of that method, or a handle of
``data/backend_hooks.toml`` that hands out the class (only the classes the downstream
passes to the handle's registrar, when it has one). It also lifts a read's condition one
level up (:meth:`HookReach._called_under`). Nothing here decides a verdict.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Container

from instep.impact.downstream.tree_index import DownstreamIndex
from instep.impact.join.backend_handles import load_registrars, registered_names
from instep.impact.join.hook_reads import (
    ATTRIBUTE,
    MAX_SITES,
    SELF_RECEIVERS,
    Read,
    reads_in_tree,
    receiver_key,
    shortest,
)
from instep.impact.join.skipped_init import SkippedInit
from instep.impact.join.upstream_calls import UpstreamCalls
from instep.pyindex.model import module_of

UpClass = tuple[str, str]  # (module, class qualname) in the new upstream


class HookReach:
    """The hook-name pass's reach (a mixin of :class:`~instep.impact.join.hook_names.
    HookNames`, whose ``__init__`` sets these)."""

    down: DownstreamIndex
    calls: UpstreamCalls
    skipped: SkippedInit
    handles: dict[str, UpClass]
    names_in: Callable[[str], Container[str]]
    read_down: Callable[[str], bytes | None] | None
    _reads_of: dict[str, list[Read]]
    _handed: dict[UpClass, frozenset[str]] | None
    _callers: dict[str, list[Read] | None]
    _attributes: dict[str, frozenset[bytes]]
    _supers: dict[tuple[str, str], set[str]] | None
    _down_name: dict[tuple[str, str], str]

    def _handed_to(self, up: UpClass, info) -> bool:
        """Can a handle of ``up`` hand out the downstream class ``info``? Where the handle
        has a registrar (``registered_by`` in ``backend_hooks.toml``), only the classes the
        downstream passes to it (by last name); else, or when one of the names passed is no
        downstream class (a variable), any subclass."""
        if self._handed is None:
            regs = load_registrars()
            self._handed = {}
            for dotted, reg in regs.items():
                up_ = tuple(dotted.rsplit(".", 1))
                raw = reg.function.encode()
                names: set[str] = set()
                for path in getattr(self.down, "files", {}):
                    data = self.read_down(path) if self.read_down is not None else None
                    tree = self._down_tree(path) if data and raw in data else None
                    if tree is not None:
                        names |= registered_names(tree, reg)
                known = {n.rsplit(".", 1)[-1] for n in self.skipped.down_classes}
                if names <= known:  # a name that is no downstream class: not followed
                    self._handed[up_] = frozenset(names)  # type: ignore[index]
        names = self._handed.get(up)
        return names is None or info.qualname.rsplit(".", 1)[-1] in names

    def _may_lack(self, receiver: str, name: str, enclosing: list[UpClass], subs) -> bool:
        """Can a textual read of ``name`` from ``receiver`` find a downstream class that
        lacks it? ``self`` inside an upstream class the downstream subclasses (one of
        ``enclosing``), or a handle of such a class, and a downstream class that neither
        defines nor inherits ``name`` from upstream nor names it in its file."""
        if receiver in SELF_RECEIVERS:
            ups = [up for up in enclosing if up in subs]
        else:
            handed = self.handles.get(receiver_key(receiver))
            ups = [handed] if handed in subs else []
        return any(
            (receiver in SELF_RECEIVERS or self._handed_to(up, info))
            and name not in defined
            and name not in self.names_in(info.path)
            and self._provider(mro, name) is None
            for up in ups
            for info, defined, mro in subs[up]
        )

    def _receiver_class(self, read: Read, path: str) -> UpClass | None:
        if read.receiver in SELF_RECEIVERS and read.cls:
            return module_of(path), read.cls
        dotted = self.handles.get(receiver_key(read.receiver))
        return (dotted[0], dotted[1]) if dotted else None

    # -- matching ----------------------------------------------------------------------

    def _member_reads(self, where: dict[str, set[str]]) -> None:
        """Calls ``x.name(…)`` of each name of ``where`` that can reach a downstream
        object, with their conditions: only in files of the modules ``where`` gives for it
        (its holders' upstream MRO: ``self.name()``) or files that name a handle
        (``V.graph.device_ops``), only in the defs whose text names it; each file parsed
        once."""
        assert self.calls is not None
        handles = shortest({h.split("(", 1)[0].encode() for h in self.handles})
        raws = [(n, n.encode()) for n in where]
        by_module: dict[str, list[tuple[str, bytes]]] = defaultdict(list)
        for n, raw in raws:
            for mod in where[n]:
                by_module[mod].append((n, raw))
        plain = [(n, raw) for n, raw in raws if n.isascii() and n.isidentifier()]
        other = [(n, raw) for n, raw in raws if not (n.isascii() and n.isidentifier())]
        for path, text in self.calls.texts().items():
            if any(h in text for h in handles):
                # every name: a set lookup among the file's attribute names each (what
                # _called_in keeps of them, and a name read as an attribute is in the
                # text) rather than a search of the text each
                read = self._attribute_names(path, text)
                here = frozenset(
                    [n for n, raw in plain if raw in read] + [n for n, raw in other if raw in text]
                )
            else:
                named = by_module.get(module_of(path), ())
                here = self._called_in(path, text, frozenset(n for n, raw in named if raw in text))
            # trees not parsed yet are not kept: this pass visits many files once each
            tree = self.calls.tree(path, keep=False) if here else None
            if tree is None:
                continue
            lines = self.calls.lines(path, keep=False)
            reads = reads_in_tree(path, tree, here, lines, True, text)
            if any(r.caller and "." in r.caller for _, r in reads):
                self.calls.keep(path, tree, lines)  # _callers_of reads it for the method's callers
            for name, r in reads:
                if r.how == "call" and name in here:
                    text_ = f"{r.receiver}.{name}(…)"
                    self._reads_of[name].append(
                        Read(r.at, text_, r.receiver, "call", r.condition, r.caller, r.cls)
                    )

    def _called_in(self, path: str, text: bytes, names: frozenset[str]) -> frozenset[str]:
        """The names of ``names`` that ``text`` (the file at ``path``) reads as attributes
        (a call ``x.name(…)`` is such a read): the others have no call to find there, and
        a file left with none is not parsed. A name that is no ASCII identifier is kept."""
        if not names:
            return names
        read = self._attribute_names(path, text)
        return frozenset(
            n for n in names if n.encode() in read or not (n.isascii() and n.isidentifier())
        )

    def _attribute_names(self, path: str, text: bytes) -> frozenset[bytes]:
        """The names ``text`` (the file at ``path``) reads as attributes (memoised)."""
        if path not in self._attributes:
            self._attributes[path] = frozenset(ATTRIBUTE.findall(text))
        return self._attributes[path]

    def _reaches(self, r: Read, info, mro: list[UpClass], defined: frozenset[str]) -> bool:
        path = r.at.rsplit(":", 1)[0]
        up = self._receiver_class(r, path)
        if up is None or up not in mro:
            return False
        if r.receiver not in SELF_RECEIVERS:
            return self._handed_to(up, info)
        if not r.caller or "." not in r.caller:
            return True
        # a caller the downstream class overrides does not run on it, unless the class (or
        # a downstream base) calls ``super().caller()``: then its callers decide, as below
        caller = r.caller.rsplit(".", 1)[-1]
        if caller in defined and caller not in self._super_called(info):
            return False
        # nor does one whose only callers (``self.caller()`` in its MRO) it overrides without
        # ``super().caller()``, unless downstream code of the class names it itself
        if self._down_names(info, caller):
            return True
        callers = self._callers_of(caller)
        if not callers:
            return True  # none found, or a use that is not such a call: assume it runs
        return any(
            c.receiver not in SELF_RECEIVERS
            or c.caller is None
            or (
                (module_of(c.at.rsplit(":", 1)[0]), c.cls or "") in mro
                and (
                    c.caller.rsplit(".", 1)[-1] not in defined
                    or c.caller.rsplit(".", 1)[-1] in self._super_called(info)
                )
            )
            for c in callers
        )

    def _called_under(self, r: Read, info) -> Read:
        """``r`` with the condition its enclosing method ``m`` is called under, one level
        up, when ``r`` itself is unconditional: every call ``x.m(…)`` of the new upstream
        sits under an ``if`` (calls inside a def named ``m``, a delegation such as
        ``return self._triton_scheduling.m()``, run only when another ``m`` is called),
        no file of the class names ``m``; the first such condition is quoted."""
        if r.condition is not None or not r.caller or "." not in r.caller:
            return r
        name = r.caller.rsplit(".", 1)[-1]
        if self._down_names(info, name):
            return r
        callers = [
            c
            for c in self._callers_of(name) or ()
            if not (c.caller and c.caller.rsplit(".", 1)[-1] == name)
        ]
        if not callers or any(c.condition is None for c in callers):
            return r
        first = callers[0]
        cond = f"{first.condition} (`{name}` is called only so, e.g. {first.at})"
        return Read(r.at, r.text, r.receiver, r.how, cond, r.caller, r.cls)

    def _chain_of(self, info) -> list:
        name = self._down_name.get((info.path, info.qualname))
        return [i for _, i in self.skipped._down_chain(name)] if name else [info]

    def _down_names(self, info, member: str) -> bool:
        """Does a file of the class or of a downstream base name ``member``?"""
        return any(member in self.names_in(i.path) for i in self._chain_of(info))

    def _super_called(self, info) -> frozenset[str]:
        """Method names the class and its downstream bases call as ``super().name``."""
        if self._supers is None:
            self._supers = defaultdict(set)
            for f in self.down.functions():
                owner = f.qualname.rsplit(".", 1)[0] if "." in f.qualname else ""
                self._supers[(f.path, owner)].update(f.super_calls)
        out: set[str] = set()
        for i in self._chain_of(info):
            out |= self._supers.get((i.path, i.qualname), set())
        return frozenset(out)

    def _callers_of(self, name: str) -> list[Read] | None:
        """Every call ``x.name(…)`` in the new upstream; None when ``name`` is also used
        otherwise (passed as a value, read by string) or no calls were read."""
        if name in self._callers:
            return self._callers[name]
        out: list[Read] | None = []
        raw = name.encode()
        word = re.compile(rf"\b{re.escape(name)}\b".encode())
        for path, text in self.calls.texts().items() if self.calls is not None else ():
            if raw not in text:
                continue
            uses = len(word.findall(text)) - len(re.findall(rb"def\s+" + raw + rb"\b", text))
            if uses and not self._called_in(path, text, frozenset({name})):
                out = None  # used, and no call of it here (as if parsed and none found)
                break
            tree = self.calls.tree(path) if self.calls is not None else None
            if tree is None:
                out = None
                break
            # calls only: the getattr reads are dropped below anyway, and a def whose text
            # lacks the name holds none of its calls (so it is skipped)
            found = [
                r
                for n, r in reads_in_tree(
                    path, tree, frozenset({name}), self.calls.lines(path), True, text
                )
                if n == name and r.how == "call"
            ]
            if uses != len(found):
                out = None
                break
            out.extend(found)
            if len(out) > MAX_SITES:
                out = None
                break
        self._callers[name] = out
        return out
