"""``instep run`` / ``show`` / ``runs`` as a user calls them: options, exit codes, output."""

from __future__ import annotations

import json

from tests.run.cases import FLAKY, SLOW_CASES, by_case, show, write

NO_TORCH = ("--preimport", "none")


def test_reruns_keep_every_attempt_and_mark_flaky(instep, tmp_path):
    write(tmp_path, "test_flaky.py", FLAKY)
    result = instep("run", "test_flaky.py", *NO_TORCH, "--reruns", "2", "--run", "r")
    assert result.code == 1  # test_always_fails stays failed
    final = by_case(show(instep, "r"))
    assert final["test_flaky"]["status"] == "passed"
    assert final["test_flaky"]["flaky"] is True
    assert final["test_flaky"]["attempt"] == 2
    assert final["test_always_fails"]["status"] == "failed"
    assert final["test_always_fails"]["attempt"] == 3
    assert final["test_always_fails"]["flaky"] is False
    every = show(instep, "r", "--all-attempts")["outcomes"]
    attempts = sorted((o["case"].split("::")[1], o["attempt"], o["final"]) for o in every)
    assert attempts == [
        ("test_always_fails", 1, False),
        ("test_always_fails", 2, False),
        ("test_always_fails", 3, True),
        ("test_flaky", 1, False),
        ("test_flaky", 2, True),
    ]


def test_all_passing_run_exits_0_and_show_lists_the_outcome_fields(instep, tmp_path):
    write(tmp_path, "test_ok.py", "def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    result = instep("run", "test_ok.py", *NO_TORCH, "-k", "one", "--run", "ok")
    assert result.code == 0, result.err
    assert "instep: run ok" in result.err
    data = show(instep, "ok")
    assert [o["case"] for o in data["outcomes"]] == ["test_ok.py::test_one"]
    out = data["outcomes"][0]
    for key in ("case", "status", "duration", "layer", "category", "signature", "stage"):
        assert key in out
    assert data["run"]["status"] == "finished"
    assert data["run"]["version_matrix"]["python"]
    assert data["run"]["settings"]["k"] == "one"
    table = instep("show", "ok")
    assert table.code == 0 and "test_ok.py::test_one" in table.out


def test_generated_run_name_is_printed_and_listed_by_runs(instep, tmp_path):
    write(tmp_path, "test_ok.py", "def test_one():\n    pass\n")
    result = instep("run", "test_ok.py", *NO_TORCH)
    assert result.code == 0
    runs = json.loads(instep("runs", "--format", "json").out)
    [run] = runs
    assert f"instep: run {run['name']}" in result.err
    assert run["counts"] == {"passed": 1}
    assert run["planned"] == 1
    assert run["name"] in instep("runs").out


def test_no_tests_collected_exits_5(instep, tmp_path):
    write(tmp_path, "test_empty.py", "x = 1\n")
    assert instep("run", "test_empty.py", *NO_TORCH).code == 5


def test_collect_only_lists_node_ids(instep, tmp_path):
    write(tmp_path, "test_two.py", SLOW_CASES.format(n=3, sleep=0))
    result = instep("run", "test_two.py", *NO_TORCH, "--collect-only")
    assert result.code == 0
    assert result.out.split() == [f"test_two.py::test_slow[{i}]" for i in range(3)]
    assert not (tmp_path / ".instep").exists()  # collecting stores nothing


def test_missing_torch_or_backend_is_one_line_exit_2(instep, tmp_path):
    write(tmp_path, "test_ok.py", "def test_one():\n    pass\n")
    result = instep("run", "test_ok.py", "--preimport", "no_such_backend_pkg")
    assert result.code == 2
    assert result.err.strip().count("\n") == 0
    assert "no_such_backend_pkg" in result.err and "not installed" in result.err


def test_profile_backend_package_is_required(instep, tmp_path):
    write(tmp_path, "test_ok.py", "def test_one():\n    pass\n")
    result = instep("run", "test_ok.py", "--profile", "npu")
    assert result.code == 2
    assert "torch_npu" in result.err


def test_shards_partition_the_cases(instep, tmp_path):
    write(tmp_path, "test_many.py", SLOW_CASES.format(n=7, sleep=0))
    assert instep("run", "test_many.py", *NO_TORCH, "--run", "baseline").code == 0  # durations
    seen = []
    for k in (1, 2, 3):
        assert (
            instep("run", "test_many.py", *NO_TORCH, "--shard", f"{k}/3", "--run", f"s{k}").code
            == 0
        )
        data = show(instep, f"s{k}")
        assert data["run"]["shard"] == f"{k}/3"
        seen += [o["case"] for o in data["outcomes"]]
    assert sorted(seen) == sorted(f"test_many.py::test_slow[{i}]" for i in range(7))


def test_bad_options_are_one_line_errors(instep, tmp_path):
    missing = instep("show", "nope")
    assert missing.code == 2 and "does not exist" in missing.err
    assert instep("run", "x.py", *NO_TORCH, "--shard", "4/3").code == 2
    assert instep("run", *NO_TORCH).code == 2
    write(tmp_path, "test_ok.py", "def test_one():\n    pass\n")
    assert instep("run", "test_ok.py", *NO_TORCH, "--run", "dup").code == 0
    again = instep("run", "test_ok.py", *NO_TORCH, "--run", "dup")
    assert again.code == 2 and "exists" in again.err
    unknown = instep("show", "nope")
    assert unknown.code == 2 and "run 'nope' not found" in unknown.err


def test_a_path_that_does_not_exist_is_one_line_and_makes_no_store(instep, tmp_path):
    write(tmp_path, "test_ok.py", "def test_one():\n    pass\n")
    for args in (("no_such_dir",), ("test_ok.py", "gone/test_x.py::test_y")):
        result = instep("run", *args, *NO_TORCH)
        assert result.code == 2
        missing = args[-1]
        assert result.err.strip() == (
            f"instep: error: instep run: {missing}: no such file or directory (expected a test"
            " file, a directory or a node id such as tests/test_x.py::TestX::test_y)"
        )
        assert not (tmp_path / ".instep").exists()  # no store, no "finished" run in it
    # a node id whose file exists is no missing path
    assert instep("run", "test_ok.py::test_one", *NO_TORCH).code == 0


def test_tier_from_config_gives_paths_and_k(instep, tmp_path):
    write(tmp_path, "suite/test_t.py", "def test_keep():\n    pass\n\ndef test_drop():\n    pass\n")
    write(
        tmp_path,
        "instep.toml",
        '[tiers.smoke]\npaths = ["suite"]\nk = "keep"\ntimeout = 30\n',
    )
    result = instep("run", "--tier", "smoke", *NO_TORCH, "--run", "t")
    assert result.code == 0, result.err
    data = show(instep, "t")
    assert [o["case"].split("::")[1] for o in data["outcomes"]] == ["test_keep"]
    assert data["run"]["tier"] == "smoke"
    assert data["run"]["settings"]["timeout"] == 30


def test_devices_pin_one_device_per_worker(instep, tmp_path):
    test = (
        "import os, pytest\n"
        "@pytest.mark.parametrize('i', range(4))\n"
        "def test_dev(i):\n"
        "    print('DEV=' + os.environ['CUDA_VISIBLE_DEVICES'])\n"
        "    # fork-safe CUDA probing in the fork server (torch.cuda.is_available via NVML)\n"
        "    assert os.environ['PYTORCH_NVML_BASED_CUDA_CHECK'] == '1'\n"
    )
    write(tmp_path, "test_dev.py", test)
    result = instep(
        "run", "test_dev.py", "--profile", "cuda", *NO_TORCH, "--devices", "3,5", "--run", "d"
    )
    assert result.code == 0, result.err
    outcomes = show(instep, "d")["outcomes"]
    for out in outcomes:
        assert out["stdout_tail"].strip() == f"DEV={out['device']}"
    assert {o["device"] for o in outcomes} <= {"3", "5"}
    assert {o["worker"] for o in outcomes} <= {0, 1}


def test_projects_addopts_with_terminal_options_still_run(instep, tmp_path):
    write(tmp_path, "pytest.ini", "[pytest]\naddopts = -ra -q --strict-markers\n")
    write(tmp_path, "test_ok.py", "def test_one():\n    print('only this')\n")
    result = instep("run", "test_ok.py", *NO_TORCH, "--run", "ini")
    assert result.code == 0, result.err
    [out] = show(instep, "ini")["outcomes"]
    assert out["stdout_tail"] == "only this\n"  # no pytest progress in the case's output


def test_the_callers_inductor_cache_is_honoured_and_recorded(instep, tmp_path, monkeypatch):
    mine = tmp_path / "my-ci-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(mine))
    write(
        tmp_path,
        "test_cache.py",
        "import os\n\ndef test_sees_the_cache():\n"
        f"    assert os.environ['TORCHINDUCTOR_CACHE_DIR'] == {str(mine)!r}\n",
    )
    result = instep("run", "test_cache.py", "--preimport", "none", "--run", "c")
    assert result.code == 0, result.err
    matrix = show(instep, "c")["run"]["version_matrix"]
    assert matrix["inductor_cache_dir"] == str(mine)
    assert matrix["inductor_cache_empty_at_start"] is True
    mine.mkdir()
    (mine / "fxgraph").mkdir()
    assert instep("run", "test_cache.py", "--preimport", "none", "--run", "c2").code == 0
    assert show(instep, "c2")["run"]["version_matrix"]["inductor_cache_empty_at_start"] is False


def test_a_shipped_case_runs_by_its_instep_path(instep, tmp_path):
    """PATHS starting with instep: name instep's own suites (what an impact report's Test
    rows give); the run passes them the profile's device, as a tier does."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed")
    node = "instep:smoke/test_l1_smoke.py::test_smoke[pointwise]"
    listed = instep("run", node, "--profile", "cpu", "--collect-only")
    assert listed.code == 0, listed.err
    (case,) = listed.out.split()
    assert case.endswith("src/instep/suites/smoke/test_l1_smoke.py::test_smoke[pointwise]")
