"""A release diff whose inputs did not change is answered from the remembered report;
any change of an input, of the request or of instep's code is a fresh analysis."""

from __future__ import annotations

import shutil

import pytest

import instep.pyindex.cache as cache_module
from instep.impact import report_memo
from instep.impact.analysis import ImpactRequest, analyse

from .e2e_fixture import build_downstream, build_upstream


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("memo")
    up = build_upstream(root / "pytorch")
    return up.path, build_downstream(root / "torch_npu")


def _request(up, down, cache, **kw) -> ImpactRequest:
    return ImpactRequest(
        downstream=str(down),
        upstream_old=f"{up}@v1",
        upstream_new=f"{up}@v2",
        cache_dir=cache,
        jobs=1,
        **kw,
    )


def _rows(report) -> list[tuple]:
    return [
        (u.change.id, str(u.action), sorted(c.downstream for c in u.couplings))
        for u in report.units
    ]


def test_same_inputs_are_remembered_and_an_edit_is_not(pair, tmp_path):
    up, down_src = pair
    down = tmp_path / "torch_npu"
    shutil.copytree(down_src, down)
    cache = tmp_path / "cache"

    first = analyse(_request(up, down, cache))
    assert first.stats.get("report_memo") is None
    again = analyse(_request(up, down, cache))
    assert again.stats["report_memo"] == "hit"
    assert _rows(again) == _rows(first)
    assert "join" not in again.stats["timings_s"]  # nothing was re-joined

    # another language is another report
    zh = analyse(_request(up, down, cache, lang="zh"))
    assert zh.stats.get("report_memo") is None
    assert zh.units[0].rationale != first.units[0].rationale

    # a downstream edit that adds a use of a changed upstream symbol shows up
    new_file = down / "torch_npu" / "late_user.py"
    new_file.write_text("from torch._inductor.lowering import expand\n", encoding="utf-8")
    edited = analyse(_request(up, down, cache))
    assert edited.stats.get("report_memo") is None

    def files(report) -> set[str]:
        return {c.downstream.split(":")[0] for u in report.units for c in u.couplings}

    assert "torch_npu/late_user.py" in files(edited)
    assert "torch_npu/late_user.py" not in files(first)


def test_instep_code_is_part_of_the_key(pair, tmp_path, monkeypatch):
    up, down = pair
    cache = tmp_path / "cache"
    analyse(_request(up, down, cache))
    assert analyse(_request(up, down, cache)).stats["report_memo"] == "hit"
    # another instep's code: its own cache generation, reports included
    monkeypatch.setattr(cache_module, "analysis_code_digest", lambda: "a" * 40)
    assert analyse(_request(up, down, cache)).stats.get("report_memo") is None


def test_no_cache_remembers_nothing(pair, tmp_path):
    up, down = pair
    req = _request(up, down, tmp_path / "cache", use_cache=False)
    analyse(req)
    assert analyse(req).stats.get("report_memo") is None
    assert not (tmp_path / "cache" / report_memo.NAMESPACE).exists()
