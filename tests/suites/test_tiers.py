"""Tiers: built-in L0..L6, config and tier-file precedence, the L2 tier from a stored run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.suites.store_fixture import make_run

from instep.config import load_config
from instep.errors import BadInput
from instep.profiles import load_profile
from instep.suites.tiers import SUITES_DIR, available_tiers, builtin_tiers, resolve_tier


def test_builtin_tiers_cover_l0_to_l6_and_their_files_exist():
    tiers = builtin_tiers()
    assert list(tiers) == [f"L{i}" for i in range(7)]
    for tier in tiers.values():
        assert tier.description
        for path in tier.paths:
            assert Path(path.split("::")[0]).is_file(), path
    assert tiers["L1"].paths == (str(SUITES_DIR / "smoke" / "test_l1_smoke.py"),)
    assert tiers["L4"].k == "dynamic"
    assert tiers["L6"].isolate == "case"


def test_builtin_suites_get_the_profiles_device_and_backend():
    tier = builtin_tiers()["L1"]
    args = tier.pytest_args(load_profile("npu"))
    assert "--instep-device=npu" in args
    assert "--instep-backend-package=torch_npu" in args
    assert "--instep-profile=npu" in args


def test_config_tier_replaces_the_builtin_and_may_name_builtin_suites(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "instep.toml").write_text(
        '[tiers.L1]\npaths = ["tests/test_mine.py", "instep:smoke/test_l1_smoke.py::test_smoke"]\n'
        'timeout = 5\n[tiers.mine]\npaths = ["tests"]\n',
        encoding="utf-8",
    )
    config = load_config(cwd=tmp_path)
    l1 = resolve_tier(config, "L1")
    assert l1.source == "config"
    assert l1.paths[0] == str(tmp_path / "tests" / "test_mine.py")
    assert l1.paths[1] == str(SUITES_DIR / "smoke" / "test_l1_smoke.py") + "::test_smoke"
    assert l1.timeout == 5
    assert l1.pytest_args(load_profile("cpu"))  # it runs a built-in suite
    mine = resolve_tier(config, "mine")
    assert mine.pytest_args(load_profile("cpu")) == []  # plain user tests get no options
    assert set(available_tiers(config)) >= {"L0", "L6", "mine"}


def test_unknown_tier_and_tier_without_paths_are_one_line_errors(tmp_path):
    config = load_config(cwd=tmp_path)
    with pytest.raises(BadInput, match=r"--tier L9: unknown tier \(tiers: L0, L1"):
        resolve_tier(config, "L9")
    with pytest.raises(BadInput, match=r"--tier L3 has no paths yet: upstream test files"):
        resolve_tier(config, "L3")


def test_run_with_a_pathless_tier_fails_cleanly(instep):
    result = instep("run", "--tier", "L3")
    assert result.code == 2
    assert "no paths yet" in result.err and "Traceback" not in result.err


def test_tier_cli_list_and_show(instep):
    listed = instep("tier", "list")
    assert listed.code == 0
    assert "L5" in listed.out and "[tiers.L3]" in listed.out
    shown = instep("tier", "show", "L1", "--profile", "cuda")
    assert shown.code == 0, shown.err
    data = json.loads(shown.out)
    assert "--instep-device=cuda" in data["pytest_args"]
    assert data["paths"][0].endswith("test_l1_smoke.py")


def test_l2_tier_is_written_from_a_runs_batches_and_runs_resolve_it(instep, tmp_path):
    db = tmp_path / "r.db"
    make_run(
        db,
        "base",
        [
            ("t/test_a.py::test_one", {"status": "failed", "signature": "lowering:aten.sort"}),
            ("t/test_a.py::test_two", {"status": "failed", "signature": "lowering:aten.sort"}),
            ("t/test_b.py::test_three", {"status": "crashed", "signature": "runtime:507035"}),
            ("t/test_b.py::test_ok", {"status": "passed"}),
        ],
    )
    result = instep("tier", "L2", "--from-run", "base", "--db", str(db))
    assert result.code == 0, result.err
    assert "2 batches, 3 cases" in result.out
    tier = resolve_tier(load_config(cwd=tmp_path), "L2")
    assert tier.source.endswith("L2.toml")
    assert tier.paths == (
        str(tmp_path / "t/test_a.py") + "::test_one",
        str(tmp_path / "t/test_a.py") + "::test_two",
        str(tmp_path / "t/test_b.py") + "::test_three",
    )
    only = instep("tier", "L2", "--from-run", "base", "--db", str(db), "--batch", "runtime:507035")
    assert "1 batches, 1 cases" in only.out
    none = instep("tier", "L2", "--from-run", "base", "--db", str(db), "--batch", "nope")
    assert none.code == 2 and "no failing cases" in none.err


def test_l2_batches_are_triages_and_batch_takes_their_id(instep, tmp_path):
    from instep.triage.batches import batch_id

    db = tmp_path / "r.db"
    make_run(
        db,
        "base",
        [
            ("t/test_b.py::test_three", {"status": "crashed", "signature": "runtime:507035"}),
            ("t/test_a.py::test_one", {"status": "failed", "signature": "lowering:aten.sort"}),
            ("t/test_a.py::test_two", {"status": "failed", "signature": "lowering:aten.sort"}),
        ],
    )
    crash = batch_id(None, None, "runtime:507035")
    only = instep("tier", "L2", "--from-run", "base", "--db", str(db), "--batch", crash)
    assert only.code == 0, only.err
    assert "1 batches, 1 cases" in only.out
    assert resolve_tier(load_config(cwd=tmp_path), "L2").paths == (
        str(tmp_path / "t/test_b.py") + "::test_three",
    )
    every = instep("tier", "L2", "--from-run", "base", "--db", str(db))
    assert "2 batches, 3 cases" in every.out
    assert resolve_tier(load_config(cwd=tmp_path), "L2").paths[0].endswith("::test_one")


def test_a_runs_expected_lists_are_its_tiers_then_instep_builtin_ones(tmp_path):
    from instep.suites.tiers import expected_lists

    (tmp_path / "instep.toml").write_text(
        '[tiers.L5]\npaths = ["t"]\nexpected_failures = ["mine.toml"]\n', encoding="utf-8"
    )
    config = load_config(cwd=tmp_path)
    assert expected_lists(config, None, "cpu") == []
    lists = expected_lists(config, "L5", "cpu")
    assert lists[0].name == "mine.toml"
    assert lists[-1] == SUITES_DIR / "data" / "expected_failures" / "L5.toml"
