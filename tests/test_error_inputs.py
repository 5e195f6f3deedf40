"""OpInfo's error_inputs: every op's invalid inputs that CPU rejects as OpInfo expects are rejected
on tpu with the same exception type and a message matching OpInfo's regex, at least as many per
op as error_inputs_expected.json records (`python -m torchtpu.coverage --error-inputs
tests/error_inputs_expected.json` writes it; its "failures" say what does not match yet)."""

import json
import os

import pytest

from torchtpu.testing import opinfo

with open(os.path.join(os.path.dirname(__file__), "error_inputs_expected.json")) as _f:
    EXPECTED = json.load(_f)

OPS = {
    (op.name if not op.variant_test_name else f"{op.name}.{op.variant_test_name}"): op
    for op in opinfo.op_database()
}


@pytest.mark.parametrize("name", sorted(EXPECTED["matched"]))
def test_error_inputs_raise_as_on_cpu(name):
    result = opinfo.run_error_inputs(OPS[name])
    assert result.matched >= EXPECTED["matched"][name], result.failures


def test_error_inputs_floor():
    total = EXPECTED["total"]
    assert total["matched"] >= 0.95 * total["expected"]
