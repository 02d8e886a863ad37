"""Upstream path -> compile stage, from the shipped data table (calibrated on seed 001)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from instep.errors import BadInput
from instep.impact.model import Stage
from instep.impact.upstream.stages import StageMap, calibration_rows, default_table, stage_for

GOLDEN = Path(__file__).resolve().parents[3] / "shared" / "golden" / "seed001_release_diff.jsonl"


@pytest.mark.parametrize(
    ("path", "stage"),
    [
        ("torch/_dynamo/variables/script_object.py", Stage.DYNAMO),
        ("torch/_dynamo/backends/common.py", Stage.AOT),  # longer prefix than torch/_dynamo/
        ("torch/_functorch/_aot_autograd/runtime_wrappers.py", Stage.AOT),
        ("torch/fx/experimental/proxy_tensor.py", Stage.AOT),
        ("torch/fx/experimental/const_fold.py", Stage.FX),
        ("torch/_inductor/lowering.py", Stage.INDUCTOR),
        ("torch/_inductor/decomposition.py", Stage.DECOMPOSITION),
        ("torch/_decomp/decompositions.py", Stage.DECOMPOSITION),
        ("torch/_subclasses/fake_tensor.py", Stage.INDUCTOR),
        ("torch/distributed/distributed_c10d.py", Stage.DISTRIBUTED),
        ("torch/_ops.py", Stage.RUNTIME),
        ("torch/nn/modules/linear.py", Stage.OTHER),
        ("./torch\\_inductor\\ir.py", Stage.INDUCTOR),  # normalised
    ],
)
def test_stage_for(path, stage):
    assert stage_for(path) is stage


def test_every_table_entry_is_a_stage():
    table = default_table()
    assert len(table) > 30 and all(isinstance(v, Stage) for v in table.values())


def test_configuration_adds_and_overrides_prefixes():
    extra = {"torch/nn/": "Runtime", "torch/_inductor/kernel/": "Other"}
    assert stage_for("torch/nn/modules/linear.py", extra) is Stage.RUNTIME
    assert stage_for("torch/_inductor/kernel/mm.py", extra) is Stage.OTHER
    assert stage_for("torch/_inductor/ir.py", extra) is Stage.INDUCTOR
    stage_of = StageMap(extra)
    assert stage_of("torch/nn/functional.py") is Stage.RUNTIME


def test_unknown_stage_in_configuration_is_one_line_bad_input():
    with pytest.raises(BadInput) as err:
        stage_for("torch/x.py", {"torch/": "Codegen"})
    assert "unknown stage 'Codegen'" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.skipif(not GOLDEN.is_file(), reason="../shared/golden is not beside this checkout")
def test_golden_rows_with_a_stage_agree():
    """Only rows the table was not calibrated on (stages.toml's calibration_rows) count."""
    calibrated = calibration_rows()
    checked = set()
    for line in GOLDEN.read_text("utf-8").splitlines():
        row = json.loads(line)
        if not row.get("stage") or row["stage"] == "None" or row["id"] in calibrated:
            continue
        stages = {str(stage_for(p)) for p in row["upstream_paths"]}
        assert row["stage"] in stages, (row["id"], row["upstream_paths"], stages)
        checked.add(row["id"])
    assert checked == {49, 59, 63}  # the held-out rows with a stage, each checked
