"""Does a downstream replacement still accept what upstream callers now pass?"""

from __future__ import annotations

from instep.pyindex.signatures import incompatibilities, same_parameters


def test_new_keyword_only_parameter_breaks_old_fork():
    # the expand lowering gained `implicit` (seed 001's Shim row)
    assert incompatibilities("x, sizes", "x, sizes, *, implicit=False") == [
        "does not accept keyword 'implicit'"
    ]


def test_replacement_that_already_takes_the_parameter_fits():
    assert incompatibilities("x, sizes, implicit=False", "x, sizes, *, implicit=False") == []
    assert incompatibilities("*args, **kwargs", "x, sizes, *, implicit=False") == []
    assert incompatibilities("x, sizes, **kw", "x, sizes, *, implicit=False") == []


def test_replacement_requiring_a_parameter_upstream_dropped():
    assert incompatibilities("self, a, b", "self, a", method=True) == [
        "requires 'b', which upstream callers no longer pass"
    ]
    assert incompatibilities("self, a, b=1", "self, a", method=True) == []


def test_new_positional_parameter():
    assert incompatibilities("a", "a, b") == ["does not accept 'b'"]
    assert incompatibilities("a, *rest", "a, b") == []


def test_unparseable_signature_is_not_a_finding():
    assert incompatibilities("a b c", "a") == []


def test_same_parameters():
    assert same_parameters("x, sizes, *, implicit=False", "x, sizes, *, implicit=False")
    assert not same_parameters("x, sizes", "x, sizes, *, implicit=False")
