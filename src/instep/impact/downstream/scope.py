"""Scopes and names of the downstream file being indexed, with typed references.

A name is bound to an absolute dotted name (``str``), to a def or class of the same file
(:class:`Local`), or to nothing known (``None``); :meth:`Scope.resolve` turns a
Name/Attribute chain into one of them. A call argument that the patch-helper analysis
reads is an :class:`Arg` (these types are records': ``downstream/records.py``).
:class:`Scope` also emits references (``ref``, ``use``, ``pending_use``) and tracks how
upstream callables are called. The recognisers of each
coupling kind build on it (``imports``, ``definitions``, ``monkeypatches``,
``registration_sites``, ``patch_helpers``, ``c_shim_names``); walking the tree is
``coupling_index``'s. Nothing here visits nodes by itself.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from instep.impact.downstream.ast_children import children
from instep.impact.downstream.handles import apply_handles, config_key
from instep.impact.downstream.pruning import HotLines
from instep.impact.downstream.records import (
    Binding,
    CallSite,
    DownstreamClass,
    DownstreamFunction,
    HelperSpec,
    Local,
    LocalKind,
)
from instep.impact.model import CouplingKind, Reference
from instep.impact.upstream.c_shims import shim_name_pattern
from instep.pyindex.model import module_of
from instep.pyindex.registrations import dotted_name
from instep.pyindex.signatures import call_shape

MAX_CALL_SHAPES = 16  # distinct ways of calling one upstream callable judged per place
SNIPPET_CHARS = 160


# a name after a dot, or a quoted identifier (getattr(obj, "name")): how a file (or a def)
# can name a member of an upstream class it uses
ATTRIBUTE_NAMES = re.compile(r"(?<=[.\"'])\s*([A-Za-z_]\w*)")


def code_member_names(text: str) -> frozenset[str]:
    """The member names a piece of code names, as ``ATTRIBUTE_NAMES`` but read from its
    tokens: a name after a dot, a string that is one identifier (``getattr(obj,
    "name")``), and what an f-string names; a comment or any other string (a docstring,
    a message, code kept in a string) names nothing. Text that does not tokenize is read
    with the pattern."""
    out: set[str] = set()
    after_dot = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and after_dot:
                out.add(tok.string)
            elif tok.type == tokenize.STRING:
                body = tok.string.lstrip("rbuRBU")
                if body[:1] in "fF":
                    out.update(ATTRIBUTE_NAMES.findall(body))
                else:
                    inner = body.strip("\"'")
                    if inner.isidentifier():
                        out.add(inner)
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                after_dot = tok.type == tokenize.OP and tok.string == "."
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return frozenset(ATTRIBUTE_NAMES.findall(text))
    return frozenset(out)


def code_member_receivers(text: str) -> dict[str, frozenset[str]]:
    """:func:`code_member_names` with, for each name, the dotted names written before its
    dot (``ir.Pointwise`` for ``ir.Pointwise.create``); ``""`` where there is none to
    read (a call's result, a subscript, a string naming it)."""
    out: dict[str, set[str]] = {}
    after_dot = False
    chain: list[str] = []  # the dotted name read so far (``ir``, ``Pointwise``)
    dotted = False  # the chain ends with a dot
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                continue
            if tok.type == tokenize.NAME and after_dot:
                out.setdefault(tok.string, set()).add(".".join(chain) if dotted else "")
            elif tok.type == tokenize.STRING:
                body = tok.string.lstrip("rbuRBU")
                names = (
                    ATTRIBUTE_NAMES.findall(body)
                    if body[:1] in "fF"
                    else [inner]
                    if (inner := body.strip("\"'")).isidentifier()
                    else []
                )
                for name in names:
                    out.setdefault(name, set()).add("")
            if tok.type == tokenize.NAME:  # a dotted name goes on, any other name starts one
                chain, dotted = [*chain, tok.string] if dotted else [tok.string], False
            elif tok.type == tokenize.OP and tok.string == "." and chain and not dotted:
                dotted = True
            else:
                chain, dotted = [], False
            after_dot = tok.type == tokenize.OP and tok.string == "."
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return {n: frozenset({""}) for n in ATTRIBUTE_NAMES.findall(text)}
    return {n: frozenset(r) for n, r in out.items()}


class MemberNames:
    """``name in names``: what :func:`code_member_names` gives for a text, answered
    lazily. The pattern's names (``ATTRIBUTE_NAMES``, which holds every name the tokens
    give) are found at once; a name the pattern does not find is named nowhere, and only
    a name it finds is looked up in the tokens, read (``load``) and tokenized on the first
    such question. Tokenizing every file of torch-npu 2.13.0 costs 6.1 CPU s, the pattern
    0.2 s, and most files are never asked about a name they hold (issue #32)."""

    __slots__ = ("_code", "_load", "_seen")

    def __init__(self, text: str, load: Callable[[], str] | None = None) -> None:
        self._seen = frozenset(ATTRIBUTE_NAMES.findall(text))
        # the text again when the tokens are wanted (kept only when there is no loader)
        self._load: Callable[[], str] = load if load is not None else (lambda: text)
        self._code: frozenset[str] | None = None

    def __contains__(self, name: object) -> bool:
        if name not in self._seen:
            return False
        if self._code is None:
            self._code = code_member_names(self._load())
        return name in self._code


def line_snippet(lines: list[str], line: int) -> str:
    if 0 < line <= len(lines):
        s = lines[line - 1].strip()
        return s if len(s) <= SNIPPET_CHARS else s[: SNIPPET_CHARS - 3] + "..."
    return ""


@dataclass
class Frame:
    """A function being visited: its bindings and what it does."""

    qualname: str
    params: tuple[str, ...]
    derived: dict[str, set[str]] = field(default_factory=dict)  # local -> params it uses
    upstream_calls: set[str] = field(default_factory=set)
    super_calls: set[str] = field(default_factory=set)
    super_call_shapes: set[tuple[str, str]] = field(default_factory=set)  # (name, shape)
    helper: HelperSpec | None = None
    returns: str | None = None  # upstream dotted it returns (`return inductor_lowering`)


class Scope(HotLines):
    """The state of one file's visit: scopes, frames, emitted references."""

    def __init__(self, path: str, source: str, roots: tuple[str, ...]) -> None:
        self.path = path
        self.module = module_of(path)
        self.package = self.module.split(".", 1)[0]
        self.dn_imports: list[tuple[str, int, str | None]] = []  # downstream names imported
        self.is_package = path.endswith("__init__.py")
        self.lines = source.splitlines()
        self.roots = frozenset(roots)
        self.scopes: list[tuple[dict[str, Binding], bool]] = [({}, False)]
        self.frames: list[Frame] = []
        self.owner_stack: list[str] = []
        self.refs: list[Reference] = []
        self.pending: list[Reference] = []
        # (target, owner, kind) of each place's use reference -> the line it stands at
        self.seen_uses: dict[tuple[str, str | None, CouplingKind], int] = {}
        self.seen_pending: set[tuple[str, str | None]] = set()
        self.functions: list[DownstreamFunction] = []
        self.classes: list[DownstreamClass] = []
        self.helpers: dict[str, HelperSpec] = {}
        self.returns: dict[str, str] = {}  # local def -> upstream module/object it returns
        self.calls: list[CallSite] = []
        self.local_patches: list[tuple[int, Local]] = []  # ref idx -> its local replacement
        # ``U.__bases__ = (Mixin, ...)``: (upstream class, local class put first, line, owner)
        self.base_mixins: list[tuple[str, str, int, str | None]] = []
        # (local name, upstream binding) -> first line of the ``try`` body that binds it
        # when an ``except ImportError`` handler binds the same name too
        self.import_fallbacks: dict[tuple[str, str], int] = {}
        # (target, line) of a use through such a name -> that ``try`` body's line
        self.uses_behind_fallback: dict[tuple[str, int], int] = {}
        self.patch_values: list[tuple[int, str]] = []
        self.skip_calls: set[int] = set()
        self.decorator_calls: set[int] = set()
        self.shim = shim_name_pattern()
        self.spans: list[tuple[int, int]] = []  # line spans of the enclosing defs
        self.full = 0  # > 0 inside a function that may be a patch helper: visit everything
        self.names: set[str] = set()
        self.hot: list[int] = []
        self._offsets: list[int] | None = None
        self.setattr_lines: list[int] = []
        # how upstream callables are called: target -> place (def or class qualname; None:
        # the module level) -> distinct call shapes, or None once a non-call use was seen
        self.call_uses: dict[str, dict[str | None, set[str] | None]] = {}
        self.called: set[int] = set()  # ids of the func nodes of calls
        # type positions (annotations, except clauses, isinstance's class argument) name a
        # class without calling or passing it on: not a use for the call check
        self.in_type = 0
        self.type_nodes: set[int] = set()
        # (target, place) named in a type position / otherwise (called, read, passed on)
        self.typed_uses: set[tuple[str, str | None]] = set()
        self.runtime_uses: set[tuple[str, str | None]] = set()
        # module-level defs and classes of the file, by name: a def's body may name one
        # defined further down (Python looks the name up when the def runs)
        self.module_defs: dict[str, Local] = {}

    def is_up(self, dotted: str | Local | None) -> bool:
        return type(dotted) is str and dotted.split(".", 1)[0] in self.roots

    def is_own(self, dotted: str) -> bool:
        return dotted.split(".", 1)[0] == self.package

    def bind(self, name: str, value: Binding) -> None:
        self.scopes[-1][0][name] = value

    def lookup(self, name: str) -> Binding:
        top = len(self.scopes) - 1
        for i in range(top, -1, -1):
            scope, is_class = self.scopes[i]
            if is_class and i != top:
                continue
            if name in scope:
                return scope[name]
        return None

    def resolve(self, node: ast.AST) -> tuple[str | Local | None, bool]:
        """Absolute dotted name of a Name/Attribute chain, or the local def/class it goes
        through (None: unknown); and whether a handle was applied."""
        # dotted_name's chain, its head looked up before the rest is joined (most heads
        # are bound to nothing: no string is built for them)
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None, False
        b = self.lookup(node.id)
        if b is None:
            return None, False
        rest = ".".join(reversed(attrs))
        if type(b) is Local:
            return (Local(b.kind, f"{b.qualname}.{rest}") if rest else b), False
        full = b + "." + rest if rest else b
        if self.is_up(full):
            return apply_handles(full)
        return full, False

    def prepare(self, tree: ast.Module, source: str) -> None:
        super().prepare(tree, source)
        self.module_defs = {
            n.name: Local(LocalKind.CLASS if isinstance(n, ast.ClassDef) else LocalKind.DEF, n.name)
            for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }

    def late_binding(self, node: ast.AST) -> Local | None:
        """Inside a def, a Name/Attribute chain whose head no scope binds yet but a
        module-level def or class further down the file does: bound when the def runs."""
        chain = dotted_name(node) if self.frames else None
        if chain is None:
            return None
        head, _, rest = chain.partition(".")
        b = self.module_defs.get(head)
        if b is None or self.lookup(head) is not None:
            return None
        return Local(b.kind, f"{b.qualname}.{rest}") if rest else b

    def owner(self) -> str | None:
        return ".".join(self.owner_stack) if self.owner_stack else None

    def abs_module(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.module.split(".")
        if not self.is_package:
            base = base[:-1]
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, node.module] if node.module else base)

    def ref(self, kind: CouplingKind, target: str, line: int, **kw) -> int:
        self.refs.append(
            Reference(
                kind,
                target,
                self.path,
                line,
                line_snippet(self.lines, line),
                owner=self.owner(),
                **kw,
            )
        )
        return len(self.refs) - 1

    def use(self, target: str, line: int, *, write: bool = False) -> None:
        if target.startswith("torch.ops."):
            return
        ck = config_key(target)
        if ck is not None:
            kind, tgt = CouplingKind.CONFIG, target
            detail = "write" if write else "read"
        else:
            kind, tgt, detail = CouplingKind.IMPORT_USE, target, "use"
        key = (tgt, self.owner(), kind)
        if key in self.seen_uses and not write:
            return
        self.seen_uses.setdefault(key, line)
        self.ref(kind, tgt, line, detail=detail)

    def pending_use(self, target: str, line: int) -> None:
        key = (target, self.owner())
        if key in self.seen_pending:
            return
        self.seen_pending.add(key)
        self.pending.append(
            Reference(
                CouplingKind.IMPORT_USE,
                target,
                self.path,
                line,
                line_snippet(self.lines, line),
                detail="use",
                owner=self.owner(),
            )
        )

    def note_use(
        self, target: str, node: ast.AST, call: ast.Call | None = None, *, instance: bool = False
    ) -> None:
        """Record how ``node`` uses ``target`` in the current place (def, class body or the
        module level): called (with ``call``'s shape), named in a type position (no effect
        on calls), or otherwise (passed on: callers unknown). An ``instance`` of the class
        ``target`` (a handle: ``V.graph``) is used at run time but never calls the class:
        passing it on or calling it constructs nothing."""
        if call is None and id(node) in self.called:
            return  # its call recorded the shape
        typed = call is None and (self.in_type > 0 or id(node) in self.type_nodes)
        places, owner = self.call_uses.setdefault(target, {}), self.owner()
        (self.typed_uses if typed else self.runtime_uses).add((target, owner))
        shapes = places.setdefault(owner, set())
        if shapes is None or typed or instance:
            return
        if call is not None:
            shapes.add(call_shape(call))
        if call is None or len(shapes) > MAX_CALL_SHAPES:
            places[owner] = None  # passed on, or too many ways to judge

    def call_shapes_of(self, ref: Reference) -> tuple[str, ...] | None:
        """The calls a reference answers for. A use answers for the calls of its place.
        An import line answers for the calls of its file that no use reference of their
        own place judges: a place whose use of the name is no ``IMPORT_USE`` reference (a
        config key, ``torch.ops``), or whose use stands on the import line itself (one
        coupling per line: the import line's)."""
        if ref.detail == "use":
            shapes = self.call_uses.get(ref.target, {}).get(ref.owner, set())
            return None if shapes is None else tuple(sorted(shapes))
        out: set[str] = set()
        for owner, shapes in self.call_uses.get(ref.target, {}).items():
            own = self.seen_uses.get((ref.target, owner, CouplingKind.IMPORT_USE))
            if own is not None and own != ref.line:
                continue  # judged at its own place
            if shapes is None:
                return None
            out |= shapes
        return None if len(out) > MAX_CALL_SHAPES else tuple(sorted(out))

    def type_only(self, ref: Reference) -> bool:
        """Does the place name ``ref.target`` only in type positions (annotations,
        ``isinstance``/``issubclass`` class arguments, ``except`` clauses)? For an import
        line: every place of the file that names it, at least one."""
        if ref.detail == "use":
            key = (ref.target, ref.owner)
            return key in self.typed_uses and key not in self.runtime_uses
        owners = self.call_uses.get(ref.target, {})
        return bool(owners) and all(
            (ref.target, owner) not in self.runtime_uses for owner in owners
        )

    def note_call(self, dotted: str) -> None:
        if self.frames and self.is_up(dotted):
            self.frames[-1].upstream_calls.add(dotted)

    def deps(self, node: ast.AST) -> set[str]:
        """Parameters (of the enclosing functions) an expression is computed from."""
        out: set[str] = set()
        todo = [node]  # every node, in any order (a set comes out): not ast.walk's queue
        while todo:
            n = todo.pop()
            if type(n) is not ast.Name:
                todo.extend(children(n))
            else:
                for frame in reversed(self.frames):
                    if n.id in frame.params:
                        out.add(n.id)
                        break
                    if n.id in frame.derived:
                        out |= frame.derived[n.id]
                        break
        return out

    # walking the tree is the composed visitor's (coupling_index._Visitor)
    def visit(self, node: ast.AST) -> None:
        raise NotImplementedError

    def visit_list(self, nodes: Iterable[ast.AST]) -> None:
        raise NotImplementedError

    def generic(self, node: ast.AST) -> None:
        raise NotImplementedError

    def type_position(self, node: ast.AST) -> None:
        raise NotImplementedError
