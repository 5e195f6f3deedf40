"""torch.distributed.checkpoint of an FSDP2-sharded model and its optimizer under torchrun on
tpu: the resumed run is the uninterrupted one, bit for bit, and equal to CPU's."""

from __future__ import annotations

from operator import itemgetter

import pytest

from .launch import run


def test_fsdp2_dcp_save_load_resumes_exactly(tmp_path):
    tpu = sorted(
        run("dcp_script.py", "tpu", str(tmp_path / "tpu"), nproc=2), key=itemgetter("rank")
    )
    cpu = sorted(
        run("dcp_script.py", "cpu", str(tmp_path / "cpu"), nproc=2), key=itemgetter("rank")
    )
    assert [r["device"] for r in tpu] == ["tpu:0", "tpu:1"]
    assert (tmp_path / "tpu" / ".metadata").exists()
    for t, c in zip(tpu, cpu, strict=True):
        assert t["resumed"] == t["uninterrupted"]
        assert t["sums"][0] == t["sums"][1]
        assert t["uninterrupted"] == pytest.approx(c["uninterrupted"], rel=1e-5)
        assert t["sums"][0] == pytest.approx(c["sums"][0], rel=1e-6)
