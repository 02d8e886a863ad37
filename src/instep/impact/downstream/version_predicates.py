"""Version predicates: the condition of a version check as small frozen data, and whether
it holds on a given upstream version.

``torch.__version__.startswith("2.1")`` is a :class:`Prefix`, ``TORCH_VERSION >= (2, 14)``
an :class:`InRange`, ``not``/``and``/``or`` are :class:`Not`/:class:`All`/:class:`AnyOf`; a
test about something else is :class:`Unknown`. :func:`holds` decides a predicate on a
version (None when an unknown part decides it). Data and its truth only: reading a test
expression into a predicate is :mod:`version_refusals`' (and ``version_gates``').
"""

from __future__ import annotations

from dataclasses import dataclass

Version = tuple[int, ...]


@dataclass(frozen=True)
class InRange:
    """``lo <= version < hi`` (either bound may be None)."""

    lo: Version | None
    hi: Version | None


@dataclass(frozen=True)
class Prefix:
    """``version_string.startswith(prefixes)``, as Python does it ("2.10" starts with "2.1")."""

    prefixes: tuple[str, ...]


@dataclass(frozen=True)
class OneOf:
    """``version in (v1, v2, ...)``, each compared on its own number of components."""

    values: tuple[Version, ...]


@dataclass(frozen=True)
class Contains:
    """``"2.1." in version_string``."""

    needle: str


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class Unknown:
    """A test that is not about the upstream version (an environment flag, a config)."""


@dataclass(frozen=True)
class Not:
    inner: Predicate


@dataclass(frozen=True)
class All:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Predicate, ...]


Predicate = InRange | Prefix | OneOf | Contains | Const | Unknown | Not | All | AnyOf


def holds(p: Predicate, version: Version) -> bool | None:
    """Whether ``p`` is true on ``version``; None when an unknown test decides it."""
    text = ".".join(map(str, version))
    if isinstance(p, InRange):
        return (p.lo is None or version >= p.lo) and (p.hi is None or version < p.hi)
    if isinstance(p, Prefix):
        return text.startswith(p.prefixes)
    if isinstance(p, OneOf):
        return any(version[: len(v)] == v for v in p.values)
    if isinstance(p, Contains):
        return p.needle in text
    if isinstance(p, Const):
        return p.value
    if isinstance(p, Not):
        inner = holds(p.inner, version)
        return None if inner is None else not inner
    if isinstance(p, (All, AnyOf)):
        values = [holds(q, version) for q in p.parts]
        decisive = isinstance(p, AnyOf)  # True decides an or, False an and
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    return None
