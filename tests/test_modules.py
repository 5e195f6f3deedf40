"""PyTorch's module suite (common_modules.module_db) on tpu against CPU: every ModuleInfo that
module_expected.json lists passes all its checks (forward, buffers and gradients in float32,
forward in bfloat16 where CPU has it, training and eval modes), and they are at least 90% of
those attempted. `python -m torchtpu.coverage --modules tests/module_expected.json` writes the
list; its "failures" say what does not pass yet."""

import json
import os

import pytest

from torchtpu.testing import modules

with open(os.path.join(os.path.dirname(__file__), "module_expected.json")) as _f:
    EXPECTED = json.load(_f)

INFOS = {info.name: info for info in modules.module_database()}


@pytest.mark.parametrize("name", EXPECTED["passed"])
def test_module_matches_cpu(name):
    results = modules.run_checks(INFOS[name])
    assert modules.passes(results), {c: r.reason for c, r in results.items() if not r.ok}


def test_module_floor():
    total = EXPECTED["total"]
    assert total["passed"] >= 0.9 * total["attempted"]
