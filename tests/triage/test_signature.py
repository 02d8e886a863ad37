"""Signatures: run-specific details stripped, the cause kept."""

from __future__ import annotations

import pytest

from instep.triage.signature import MAX_SIGNATURE, failure_signature, normalize_message


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (  # kernel suffixes and numbers
            "launch failed for triton_unk_fused_new_ones_0: coreDim == 0",
            "launch failed for triton_unk_fused_new_ones_3: coreDim == 0",
        ),
        (  # addresses
            "tensor at 0x7f3a2b1c00 freed",
            "tensor at 0x55d1e0aa10 freed",
        ),
        (  # cache paths and hashes
            'File "/tmp/torchinductor_root/ab/cabqzz3kq7h2jd7x5rrkdsqs4kxbbj4.py", line 74',
            'File "/tmp/torchinductor_ci/xy/cxy7kq3hh2jd7x5rrkdsqs4kaaaa9k.py", line 80',
        ),
        (  # shapes and symbolic sizes
            "Value: u0 >= 0 for torch.Size([2, 3]) vs [4, 5, 6]",
            "Value: u3 >= 0 for torch.Size([7]) vs [1, 1]",
        ),
    ],
)
def test_same_cause_same_text(a, b):
    assert normalize_message(a) == normalize_message(b)


def test_different_causes_stay_apart():
    one = failure_signature("KeyError", "'cpu'")
    two = failure_signature("IndexError", "list assignment index out of range")
    assert one != two
    assert normalize_message("expected DT_FLOAT but found DT_FLOAT16") != normalize_message(
        "expected DT_FLOAT16 but found DT_FLOAT"
    )


def test_signature_is_type_and_headline():
    sig = failure_signature(
        "torch._inductor.exc.MissingOperatorWithoutDecomp",
        "missing lowering\n  target: npu._npu_dropout.default",
    )
    assert sig == "MissingOperatorWithoutDecomp: missing lowering"
    assert len(failure_signature("E", "x" * 1000)) == MAX_SIGNATURE
    assert failure_signature(None, None) == "<no message>"
