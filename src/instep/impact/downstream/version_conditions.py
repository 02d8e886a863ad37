"""Version conditions: a test expression about the torch version read as a version range.

``CURRENT_VERSION >= (2, 14)``, ``torch.__version__ >= "2.14"``, ``Version(torch.
__version__) >= Version("2.14")``, a call of a helper the module defines over the torch
version (``def newer(v): return Version(torch.__version__) >= Version(v)``, read from its
body by :func:`version_helpers`, whatever its name), a call of a helper named like one
(``is_torch_version_ge("2.14")``) whose definition is not in the module, and module
constants holding such comparisons are a :data:`Range` ``(min inclusive, max exclusive)``
(:class:`Conditions`, which knows the module's version constants and helpers); ``and``
intersects, ``not`` negates. A helper the module defines whose body never reads the
torch version (it compares a CANN or driver version) is no gate, whatever its name.
Helpers defined in another downstream module are read from their body by the tree index
(``imported_flags.resolve_imported_flags``); here, without the definition, only the name
reading applies. Shared by the version gates (``version_gates.py``) and the version
refusals (``version_refusals.py``). Static only: nothing is evaluated; a test not
recognisably about the version has no range.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection
from dataclasses import dataclass

from instep.pyindex.registrations import dotted_name

Version = tuple[int, ...]
Range = tuple["Version | None", "Version | None"]  # (min inclusive, max exclusive)

_VERSION_STR = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")
_MIN_SUPPORTED = re.compile(r"^MIN_SUPPORTED\w*$")  # a bound the downstream names, not current
_HELPER = re.compile(
    r"version.*_(ge|gte|gt|lt|le|lte|at_least|atleast|less_than|older_than|newer_than|before"
    r"|after|since|below)$|^(is_)?torch_(ge|gt|lt|le)_?\d*$|^(is_)?torch_version_(ge|gt|lt|le)"
    r"|^_?(is_)?torch_(?:version_)?(equal_or_newer|equal_or_older|newer_than|older_than|equal)$",
    re.IGNORECASE,
)
# A version that is another package's, not the upstream's: a helper or a name that says so
# (``_is_gte_cann_version``, ``soc_version``, ``cuda_version_ge``) is no torch gate.
_OTHER_PACKAGE = re.compile(
    r"cann|cuda|hip|rocm|triton|python|numpy|transformers|driver|soc|cudnn|nccl|hccl|model",
    re.IGNORECASE,
)
# current-version names: torch's own (``torch.__version__``, ``TORCH_VERSION``,
# ``torch_version``) or an upper-case module constant ``CURRENT_VERSION`` / ``PT_VERSION``
# (torch_npu's ``_compat/version.py``); a bare ``version``, ``config.version`` or
# ``current_version`` may be any package's, a model's or the downstream's own.
_CONSTANT_VERSION = re.compile(r"^_?(CURRENT|PT|PYTORCH|TORCH)_VERSION\w*$")
_TORCH_VERSION = re.compile(r"torch_?version|version_?torch")  # not torch_npu's own


def parse_version(value: object) -> Version | None:
    """'2.14.1+cpu' / (2, 14) / '2.14' -> (2, 14, 1) / (2, 14) / (2, 14); None otherwise."""
    if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
        return tuple(value)
    if isinstance(value, str):
        m = _VERSION_STR.match(value)
        if m:
            return tuple(int(p) for p in m.group(1).split("."))
    return None


def fmt_version(v: Version | None) -> str:
    return ".".join(map(str, v)) if v else "?"


def bump(v: Version) -> Version:
    return (*v[:-1], v[-1] + 1)


def literal_version(node: ast.AST) -> Version | None:
    if isinstance(node, ast.Constant):
        return parse_version(node.value)
    if isinstance(node, ast.Tuple):
        vals = []
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, int)):
                return None
            vals.append(elt.value)
        return tuple(vals) if vals else None
    if isinstance(node, ast.Call) and len(node.args) == 1 and callee(node) in PARSERS:
        return literal_version(node.args[0])
    return None


PARSERS = {"Version", "parse", "parse_version", "LooseVersion", "StrictVersion", "_parse"}


def callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def installed_torch_version(node: ast.AST) -> bool:
    """The installed torch's version read from its package metadata:
    ``importlib.metadata.version("torch")`` (or ``metadata.version`` / ``version``
    imported from it) and ``pkg_resources.get_distribution("torch").version`` (vllm 0.34.0's
    ``is_torch_equal`` falls back to the first)."""
    if isinstance(node, ast.Attribute) and node.attr == "version":
        inner = node.value
        return (
            isinstance(inner, ast.Call)
            and callee(inner) == "get_distribution"
            and _names_torch(inner)
        )
    return isinstance(node, ast.Call) and callee(node) == "version" and _names_torch(node)


def _names_torch(call: ast.Call) -> bool:
    first = call.args[0] if call.args else None
    return isinstance(first, ast.Constant) and first.value == "torch"


def is_current_version(node: ast.AST) -> bool:
    """torch.__version__, CURRENT_VERSION, TORCH_VERSION, Version(torch.__version__),
    importlib.metadata.version("torch")..."""
    if installed_torch_version(node):
        return True
    if isinstance(node, ast.Call):
        if callee(node) in PARSERS and node.args:
            return is_current_version(node.args[0])
        return False
    if isinstance(node, ast.Subscript):  # torch.__version__[:3], CURRENT_VERSION[:2]
        return is_current_version(node.value)
    name = (
        node.attr
        if isinstance(node, ast.Attribute)
        else node.id
        if isinstance(node, ast.Name)
        else ""
    )
    low = name.lower()
    if "version" not in low or "info" in low or "min_supported" in low:
        return False  # sys.version_info is Python's; MIN_SUPPORTED is a bound, not current
    if _MIN_SUPPORTED.match(name) or _OTHER_PACKAGE.search(name):
        return False
    if name == "__version__":  # torch.__version__, torch.version.__version__; not a module's own
        return (
            isinstance(node, ast.Attribute)
            and (dotted_name(node.value) or "").split(".")[0] == "torch"
        )
    return _TORCH_VERSION.search(low) is not None or _CONSTANT_VERSION.match(name) is not None


def flip(op: ast.cmpop) -> ast.cmpop:
    return {ast.Gt: ast.Lt(), ast.Lt: ast.Gt(), ast.GtE: ast.LtE(), ast.LtE: ast.GtE()}.get(
        type(op), op
    )


def range_of_compare(op: ast.cmpop, v: Version) -> Range | None:
    if isinstance(op, ast.GtE):
        return (v, None)
    if isinstance(op, ast.Gt):
        return (bump(v), None)
    if isinstance(op, ast.Lt):
        return (None, v)
    if isinstance(op, ast.LtE):
        return (None, bump(v))
    if isinstance(op, ast.Eq):
        return (v, bump(v))
    return None


def negate(r: Range) -> Range | None:
    lo, hi = r
    if lo is not None and hi is None:
        return (None, lo)
    if hi is not None and lo is None:
        return (hi, None)
    return None


def intersect(a: Range, b: Range) -> Range:
    lo = max((v for v in (a[0], b[0]) if v is not None), default=None)
    hi = min((v for v in (a[1], b[1]) if v is not None), default=None)
    return (lo, hi)


def union(ranges: list[Range]) -> Range | None:
    """The one range the ranges cover together (``is_torch_equal("2.9.0") or
    is_torch_equal("2.9.1")``: 2.9.0 up to 2.9.2), or None when they leave a gap (a gate
    is one range: ``< 2.5 or >= 2.14`` is no gate)."""
    if not ranges:
        return None
    low = [r for r in ranges if r[0] is None]
    rest = sorted((r for r in ranges if r[0] is not None), key=lambda r: r[0])  # type: ignore[arg-type, return-value]
    lo, hi = (None, low[0][1]) if low else rest.pop(0)
    for r in low[1:]:
        hi = None if hi is None or r[1] is None else max(hi, r[1])
    for r_lo, r_hi in rest:
        if hi is not None and r_lo > hi:  # type: ignore[operator]
            return None  # a gap
        hi = None if hi is None or r_hi is None else max(hi, r_hi)
    return (lo, hi)


@dataclass(frozen=True)
class HelperSpec:
    """A function whose result is ``current torch version <op> its parameter``: which
    parameter (position and name), the operator with the current version on its left,
    and whether the result is negated."""

    index: int
    param: str
    op: type[ast.cmpop]
    negated: bool = False

    def range_of(self, call: ast.Call) -> Range | None:
        args, kwargs = call_versions(call)
        return self.range_for(args, kwargs)

    def range_for(
        self, args: tuple[Version | None, ...], kwargs: tuple[tuple[str, Version | None], ...]
    ) -> Range | None:
        """The range of a call passing these literal versions (None: not a literal)."""
        v = args[self.index] if len(args) > self.index else dict(kwargs).get(self.param)
        rng = range_of_compare(self.op(), v) if v is not None else None
        return negate(rng) if rng is not None and self.negated else rng


def call_versions(
    call: ast.Call,
) -> tuple[tuple[Version | None, ...], tuple[tuple[str, Version | None], ...]]:
    """The literal versions a call passes, by position and by keyword (None: not one)."""
    args = tuple(literal_version(a) for a in call.args)
    kwargs = tuple((k.arg, literal_version(k.value)) for k in call.keywords if k.arg)
    return args, kwargs


_WRAPPERS = PARSERS | {"str"}


def _unwrap(node: ast.AST, local: dict[str, ast.AST]) -> ast.AST:
    """``Version(str(x))`` -> ``x``, a local variable -> what it was assigned."""
    for _ in range(8):
        if isinstance(node, ast.Name) and node.id in local:
            node = local[node.id]
        elif isinstance(node, ast.Call) and len(node.args) == 1 and callee(node) in _WRAPPERS:
            node = node.args[0]
        else:
            return node
    return node


def _spec_of(fn: ast.FunctionDef | ast.AsyncFunctionDef, known: dict[str, HelperSpec]):
    """``fn``'s :class:`HelperSpec` when its body is assignments then ``return`` of one
    comparison of the current torch version with a parameter (through ``Version()`` /
    ``parse()`` / ``str()`` and local variables), its negation, or a call of a helper in
    ``known`` passing the parameter on (one level); else None."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    local: dict[str, ast.AST] = {}
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    for stmt in body[:-1]:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            return None
        local[stmt.targets[0].id] = stmt.value
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    return _spec_of_expr(body[-1].value, params, local, known)


def _spec_of_expr(e: ast.AST, params: list[str], local, known) -> HelperSpec | None:
    e = _unwrap(e, local)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        inner = _spec_of_expr(e.operand, params, local, known)
        return HelperSpec(inner.index, inner.param, inner.op, not inner.negated) if inner else None
    if isinstance(e, ast.Call) and callee(e) in known:
        other = known[callee(e)]
        arg = e.args[other.index] if len(e.args) > other.index else None
        arg = _unwrap(arg, local) if arg is not None else None
        if isinstance(arg, ast.Name) and arg.id in params:
            return HelperSpec(params.index(arg.id), arg.id, other.op, other.negated)
        return None
    if not (isinstance(e, ast.Compare) and len(e.ops) == 1):
        return None
    left, right = _unwrap(e.left, local), _unwrap(e.comparators[0], local)
    op = e.ops[0]
    if isinstance(right, ast.Name) and right.id in params and is_current_version(left):
        return HelperSpec(params.index(right.id), right.id, type(op))
    if isinstance(left, ast.Name) and left.id in params and is_current_version(right):
        return HelperSpec(params.index(left.id), left.id, type(flip(op)))
    return None


def version_helpers(
    tree: ast.Module, source: str | None = None
) -> tuple[dict[str, HelperSpec], set[str]]:
    """The module-level functions of ``tree`` read as torch version helpers (name ->
    spec), and those that never read the torch version (a CANN or driver version helper,
    whatever its name: no gate). A function in neither reads the torch version in a shape
    not recognised here: its calls fall back to the name reading. With the module's
    ``source``, a def whose ASCII text never says "version" is not walked: every name
    :func:`is_current_version` accepts says it."""
    defs = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    specs: dict[str, HelperSpec] = {}
    for _ in range(2):  # a helper over another one defined after it
        for fn in defs:
            if fn.name not in specs and (spec := _spec_of(fn, specs)) is not None:
                specs[fn.name] = spec
    # lines as the parser counts them (str.splitlines also breaks at \f, \v, \x1c...)
    lines = (
        source.replace("\r\n", "\n").replace("\r", "\n").split("\n") if source is not None else None
    )
    # a def that calls one of the module's readers reads the version too (vllm 0.34.0's
    # is_torch_equal: try: return _is_torch_equal(t), which reads torch.__version__)
    readers = set(specs)
    grew = True
    while grew:
        grew = False
        for fn in defs:
            if fn.name not in readers and _reads_current_version(fn, lines, readers):
                readers.add(fn.name)
                grew = True
    return specs, {fn.name for fn in defs if fn.name not in readers}


def _reads_current_version(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
    lines: list[str] | None,
    readers: Collection[str] = (),
) -> bool:
    """Does a name or attribute of ``fn`` (decorators included) read the torch version,
    or does it call one of the module's ``readers``?"""
    if lines is not None:
        start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
        text = "\n".join(lines[start - 1 : fn.end_lineno])
        if text.isascii() and "version" not in text.lower() and not any(r in text for r in readers):
            return False  # an identifier is written as it is named (ASCII: no NFKC folding)
    for n in ast.walk(fn):
        if isinstance(n, (ast.Name, ast.Attribute)) and is_current_version(n):
            return True
        if isinstance(n, ast.Call) and (
            installed_torch_version(n) or (isinstance(n.func, ast.Name) and n.func.id in readers)
        ):
            return True
    return False


class Conditions:
    """Evaluates a test expression to a version range, knowing module-level constants and
    the module's own version helpers (:func:`version_helpers`)."""

    def __init__(self) -> None:
        self.constants: dict[str, Range] = {}
        self.helpers: dict[str, HelperSpec] = {}
        self.not_helpers: set[str] = set()
        self.helper_calls: dict[int, tuple[object, object]] = {}  # version_gates' placeholders
        self.flags: dict[str, tuple[object, object]] = {}  # flag -> (when true, when false)
        self.probes = None  # source_probes.ProbeReader, for modules that may probe upstream

    def range_of(self, test: ast.AST) -> Range | None:
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if is_current_version(left) and (v := literal_version(right)) is not None:
                return range_of_compare(op, v)
            if is_current_version(right) and (v := literal_version(left)) is not None:
                return range_of_compare(flip(op), v)
            return None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            if isinstance(test.operand, ast.BoolOp):  # De Morgan: each part negated
                parts = [self.range_of(v) for v in test.operand.values]
                negs = [negate(r) if r is not None else None for r in parts]
                if any(r is None for r in negs):
                    return None
                if isinstance(test.operand.op, ast.And):
                    return union(negs)  # type: ignore[arg-type]
                out: Range = (None, None)
                for r in negs:
                    out = intersect(out, r)  # type: ignore[arg-type]
                return out
            inner = self.range_of(test.operand)
            return negate(inner) if inner else None
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            ranges = [self.range_of(v) for v in test.values]
            known = [r for r in ranges if r is not None]
            if not known:
                return None
            both: Range = (None, None)
            for r in known:
                both = intersect(both, r)
            return both
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            ranges = [self.range_of(v) for v in test.values]
            if any(r is None for r in ranges):
                return None  # a part not about the version: it may hold on any torch
            return union(ranges)  # type: ignore[arg-type]
        if isinstance(test, ast.Name):
            return self.constants.get(test.id)
        if isinstance(test, ast.Call):
            return self._helper_call(test)
        return None

    def _helper_call(self, call: ast.Call) -> Range | None:
        name = callee(call)
        if isinstance(call.func, ast.Name):  # the module's own definition decides
            spec = self.helpers.get(name)
            if spec is not None:
                return spec.range_of(call)
            if name in self.not_helpers:
                return None
        m = _HELPER.search(name)
        if not m or not call.args or _OTHER_PACKAGE.search(name):
            return None
        v = literal_version(call.args[-1])
        if v is None:
            return None
        word = next(g for g in m.groups() if g and not g.startswith("is")).lower()
        if word == "equal":  # is_torch_equal("2.9.0"): 2.9.0 and its local builds
            return (v, bump(v))
        if word in {"equal_or_newer"}:
            return (v, None)
        if word in {"equal_or_older"}:
            return (None, bump(v))
        if word in {"ge", "gte", "at_least", "atleast", "since"}:
            return (v, None)
        if word in {"gt", "newer_than", "after"}:
            return (bump(v), None)
        if word in {"lt", "less_than", "older_than", "before", "below"}:
            return (None, v)
        if word in {"le", "lte"}:
            return (None, bump(v))
        return None
