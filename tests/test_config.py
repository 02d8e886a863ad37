"""Configuration lookup and validation, through the real CLI and the library."""

from __future__ import annotations

from pathlib import Path

import pytest

from instep.config import load_config
from instep.errors import BadInput, MissingInput


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_any_file(tmp_path):
    cfg = load_config(cwd=tmp_path)
    assert cfg.profile == "cpu"
    assert cfg.source is None
    assert cfg.resolve(cfg.db) == Path.cwd() / ".instep/instep.db"


def test_instep_toml_in_working_directory(tmp_path):
    write(tmp_path / "instep.toml", 'profile = "npu"\ndb = "store/x.db"\n')
    cfg = load_config(cwd=tmp_path)
    assert cfg.profile == "npu"
    assert cfg.resolve(cfg.db) == tmp_path / "store/x.db"


def test_pyproject_tool_table(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname="x"\n[tool.instep]\nlang = "zh"\n')
    cfg = load_config(cwd=tmp_path)
    assert cfg.lang == "zh"
    assert cfg.source == tmp_path / "pyproject.toml"


def test_instep_toml_wins_over_pyproject(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.instep]\nprofile = "cuda"\n')
    write(tmp_path / "instep.toml", 'profile = "npu"\n')
    assert load_config(cwd=tmp_path).profile == "npu"


def test_explicit_config_path(tmp_path):
    other = write(tmp_path / "elsewhere.toml", 'profile = "cuda"\n')
    assert load_config(other, cwd=tmp_path).profile == "cuda"
    with pytest.raises(MissingInput, match=r"nope\.toml: no such file"):
        load_config(tmp_path / "nope.toml", cwd=tmp_path)


def test_unknown_key_is_named(tmp_path):
    write(tmp_path / "instep.toml", 'profil = "npu"\n')
    with pytest.raises(BadInput) as err:
        load_config(cwd=tmp_path)
    assert "instep.toml: profil: Extra inputs are not permitted" in str(err.value)


def test_wrong_type_in_nested_table_is_named(tmp_path):
    write(tmp_path / "instep.toml", '[tiers.L1]\ntimeout = "soon"\n')
    with pytest.raises(BadInput, match=r"tiers\.L1\.timeout"):
        load_config(cwd=tmp_path)


def test_invalid_toml_is_one_line_through_cli(tmp_path, instep_proc):
    write(tmp_path / "instep.toml", "profile = \n")
    res = instep_proc("profile", "list", cwd=tmp_path)
    assert res.code == 2
    assert len(res.err.strip().splitlines()) == 1
    assert "instep.toml: not valid TOML" in res.err


def test_pyproject_without_table_given_explicitly(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    with pytest.raises(BadInput, match=r"has no \[tool.instep\] table"):
        load_config(tmp_path / "pyproject.toml", cwd=tmp_path)


def test_user_profile_inline_and_file(tmp_path, instep):
    write(
        tmp_path / "mlu.toml",
        'name = "mlu"\nextends = "base"\ndevice_type = "mlu"\n'
        'visible_devices_env = "MLU_VISIBLE_DEVICES"\n',
    )
    write(
        tmp_path / "instep.toml",
        'profile_files = ["mlu.toml"]\n'
        '[profiles.npu]\nextends = "npu"\ndescription = "our NPU"\n'
        '[[profiles.npu.rules]]\ncategory = "runtime.our_code"\nlayer = "runtime"\n'
        'pattern = "E99999"\n',
    )
    res = instep("--config", str(tmp_path / "instep.toml"), "profile", "list")
    assert res.code == 0, res.err
    assert "mlu" in res.out and "config" in res.out
    cfg = load_config(tmp_path / "instep.toml")
    from instep.profiles import load_profile

    npu = load_profile("npu", cfg.user_profiles())
    assert npu.description == "our NPU"
    assert npu.rules[0].category == "runtime.our_code"  # user rules come first
    assert any(r.category == "runtime.device_exception_507035" for r in npu.rules)
    mlu = load_profile("mlu", cfg.user_profiles())
    assert mlu.visible_devices_env == "MLU_VISIBLE_DEVICES"
