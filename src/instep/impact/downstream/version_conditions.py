"""Version conditions: a test expression about the torch version read as a version range.

``CURRENT_VERSION >= (2, 14)``, ``torch.__version__ >= "2.14"``, ``Version(torch.
__version__) >= Version("2.14")``, ``is_torch_version_ge("2.14")`` and module constants
holding such comparisons are a :data:`Range` ``(min inclusive, max exclusive)``
(:class:`Conditions`, which knows the module's version constants); ``and`` intersects,
``not`` negates. Shared by the version gates (``version_gates.py``) and the version
refusals (``version_refusals.py``). Static only: nothing is evaluated; a test not
recognisably about the version has no range.
"""

from __future__ import annotations

import ast
import re

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


def is_current_version(node: ast.AST) -> bool:
    """torch.__version__, CURRENT_VERSION, TORCH_VERSION, Version(torch.__version__)..."""
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
        return isinstance(node, ast.Attribute) and _dotted(node.value).split(".")[0] == "torch"
    return _TORCH_VERSION.search(low) is not None or _CONSTANT_VERSION.match(name) is not None


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


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


class Conditions:
    """Evaluates a test expression to a version range, knowing module-level constants."""

    def __init__(self) -> None:
        self.constants: dict[str, Range] = {}
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
            inner = self.range_of(test.operand)
            return negate(inner) if inner else None
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            ranges = [self.range_of(v) for v in test.values]
            known = [r for r in ranges if r is not None]
            if not known:
                return None
            out: Range = (None, None)
            for r in known:
                out = intersect(out, r)
            return out
        if isinstance(test, ast.Name):
            return self.constants.get(test.id)
        if isinstance(test, ast.Call):
            return self._helper_call(test)
        return None

    def _helper_call(self, call: ast.Call) -> Range | None:
        name = callee(call)
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
