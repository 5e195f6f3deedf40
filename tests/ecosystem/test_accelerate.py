"""A custom accelerate.Accelerator loop, unmodified, on tpu and on CPU: one process and under
torchrun (prepare, backward, gather, save_state / load_state)."""

from __future__ import annotations

import pytest

from .launch import run

pytest.importorskip("accelerate")


@pytest.mark.parametrize("nproc", [0, 2])
def test_an_accelerate_loop_matches_cpu(tmp_path, nproc):
    tpu = run("accelerate_script.py", "tpu", str(tmp_path / "tpu"), nproc=nproc)
    cpu = run("accelerate_script.py", "cpu", str(tmp_path / "cpu"), nproc=nproc)
    assert all(r["processes"] == max(nproc, 1) and r["restored"] for r in tpu + cpu)
    if nproc:
        assert sorted(r["device"] for r in tpu) == ["tpu:0", "tpu:1"]
    else:
        assert tpu[0]["device"] in ("tpu", "tpu:0") and cpu[0]["device"] == "cpu"
    for r in tpu:  # gather: every rank saw the same mean loss; DDP: the same weights
        assert r["losses"] == pytest.approx(cpu[0]["losses"], rel=1e-5)
        assert r["sum"] == pytest.approx(cpu[0]["sum"], rel=1e-5)
