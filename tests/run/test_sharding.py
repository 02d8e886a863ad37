"""--shard K/N: deterministic, complete, disjoint, balanced by stored durations."""

from __future__ import annotations

import pytest

from instep.errors import BadInput
from instep.run.sharding import assign_shards, parse_shard, select_shard

CASES = [f"t.py::test_{i}" for i in range(10)]


def test_shards_are_a_partition_and_deterministic():
    shards = [select_shard(CASES, (k, 3)) for k in (1, 2, 3)]
    assert sorted(c for shard in shards for c in shard) == sorted(CASES)
    assert [len(s) for s in shards] == [4, 3, 3]
    # the same sets whatever order the cases were collected in
    assert [set(select_shard(CASES[::-1], (k, 3))) for k in (1, 2, 3)] == [set(s) for s in shards]


def test_durations_balance_the_load():
    durations = {CASES[0]: 100.0, **{c: 1.0 for c in CASES[1:]}}
    owner = assign_shards(CASES, 2, durations)
    heavy = owner[CASES[0]]
    assert [c for c in CASES if owner[c] == heavy] == [CASES[0]]  # the slow one runs alone


def test_unknown_durations_take_the_median():
    durations = {CASES[0]: 5.0, CASES[1]: 5.0}
    owner = assign_shards(CASES, 2, durations)
    assert sorted(list(owner.values()).count(k) for k in (1, 2)) == [5, 5]


@pytest.mark.parametrize("text", ["0/2", "3/2", "a/b", "1", "1/0"])
def test_bad_shard_specs(text):
    with pytest.raises(BadInput):
        parse_shard(text)


def test_shard_spec_parses():
    assert parse_shard(" 2/4 ") == (2, 4)
