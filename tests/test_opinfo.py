"""OpInfo: every op listed in opinfo_expected.json matches PyTorch CPU (float32), forward and
gradients. The list is written by `make coverage` (python -m torchtpu.coverage --expected);
an op that regresses fails here. docs/COVERAGE.md lists the ops that do not pass yet, by reason."""

import json
import os

import pytest
import torch

from torchtpu.testing import opinfo

with open(os.path.join(os.path.dirname(__file__), "opinfo_expected.json")) as _f:
    EXPECTED = json.load(_f)


def _ops() -> dict[str, object]:
    ops = {}
    for op in opinfo.op_database():
        key = op.name if not op.variant_test_name else f"{op.name}.{op.variant_test_name}"
        ops[key] = op
    return ops


OPS = _ops()


@pytest.mark.parametrize("name", EXPECTED["forward"])
def test_forward_matches_cpu(name):
    result = opinfo.run_op(OPS[name], torch.float32, grad=False)
    assert result.ok, result.reason


@pytest.mark.parametrize("name", EXPECTED["grad"])
def test_grad_matches_cpu(name):
    result = opinfo.run_op(OPS[name], torch.float32, grad=True)
    assert result.ok, result.reason


@pytest.mark.parametrize(
    "name,dtype",
    [(n, d) for d in opinfo.EXTRA_DTYPES for n in EXPECTED.get(f"forward_{d}", [])],
)
def test_forward_other_dtypes_match_cpu(name, dtype):
    result = opinfo.run_op(OPS[name], opinfo.EXTRA_DTYPES[dtype], grad=False)
    assert result.ok, result.reason


def test_coverage_floor():
    assert len(EXPECTED["forward"]) >= 150
