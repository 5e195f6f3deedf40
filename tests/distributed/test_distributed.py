"""torch.distributed on tpu: threaded ranks over one client's devices (StableHLO collectives),
and torchrun processes (Gloo on host copies). Each scenario runs in a subprocess: the threaded
ones need TORCHTPU_CPU_DEVICES set before torchtpu starts, and torchrun starts its own ranks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from torchtpu.testing.torchrun import completed

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "examples")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]


def run(cmd: list[str], timeout: float = 300, cwd: str = HERE, done: str | None = None,
        **env: str) -> str:
    """`done`: a regex every rank prints once it has finished; with it, PyTorch's Gloo
    teardown abort after that counts as finished (torchtpu/testing/torchrun.py)."""
    e = {k: v for k, v in os.environ.items() if k != "TORCHTPU_CPU_DEVICES"}
    e.update(env)
    p = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout,
                       check=False)
    out = p.stdout + p.stderr
    ranks_done = done is not None and len(re.findall(done, p.stdout)) == 2
    ok = p.returncode == 0 or (done is not None and completed(p.returncode, out, ranks_done))
    assert ok, f"{' '.join(cmd)} exited {p.returncode}:\n{out[-6000:]}"
    return out


def test_every_collective_on_threaded_ranks_matches_gloo():
    out = run([sys.executable, "threaded_collectives.py"], TORCHTPU_CPU_DEVICES="4")
    assert "threaded collectives: ['ok', 'ok', 'ok', 'ok']" in out


@pytest.mark.parametrize("scenario", ["threaded_mismatch", "threaded_dead_rank", "bad_input"])
def test_faults_on_threaded_ranks(scenario):
    assert f"PASS {scenario}" in run([sys.executable, "faults.py", scenario],
                                     TORCHTPU_CPU_DEVICES="2")


def test_dead_process_raises_on_the_survivor():
    out = run(TORCHRUN + ["--nproc-per-node", "2", "faults.py", "torchrun_dead_rank"])
    assert "PASS torchrun_dead_rank" in out


def test_mismatched_collectives_across_processes_are_named():
    out = run(TORCHRUN + ["--nproc-per-node", "2", "faults.py", "torchrun_mismatch"],
              TORCH_DISTRIBUTED_DEBUG="DETAIL")
    assert "PASS torchrun_mismatch rank 0" in out and "PASS torchrun_mismatch rank 1" in out


def test_backend_names_under_torchrun():
    out = run(TORCHRUN + ["--nproc-per-node", "2", "faults.py", "torchrun_backend_strings"])
    assert "PASS torchrun_backend_strings rank 0" in out
    assert "PASS torchrun_backend_strings rank 1" in out


def test_ddp_with_find_unused_parameters():
    out = run(TORCHRUN + ["--nproc-per-node", "2", "ddp_unused.py"])
    assert "PASS ddp_unused rank 0" in out and "PASS ddp_unused rank 1" in out


def test_a_cpu_only_ddp_script_runs_as_without_torchtpu():
    cmd = TORCHRUN + ["--nproc-per-node", "2", "cpu_ddp.py"]
    results = []
    for autoload in ("1", "0"):
        out = run(cmd, done=r"RESULT rank \d+ ", TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)
        # The ranks share one stdout: a line of one may run into the other's.
        results.append(sorted(re.findall(r"RESULT rank \d+ \S+? \d+\.\d+", out)))
    assert len(results[0]) == 2 and results[0] == results[1], results


def test_groups_destroyed_right_after_their_collectives():
    # A hang here is a collective's completion dropping the caller's tensors on a Gloo thread
    # (it waits for the GIL) while the destroying caller, holding the GIL, joins that thread.
    out = run(TORCHRUN + ["--nproc-per-node", "2", "faults.py", "torchrun_destroy_after_collectives"],
              timeout=120)
    assert "PASS torchrun_destroy_after_collectives rank 0" in out
    assert "PASS torchrun_destroy_after_collectives rank 1" in out


def losses(tmp_path, args: list[str], nproc: int = 0) -> list[float]:
    path = str(tmp_path / f"losses_{nproc}_{'_'.join(args)}.json")
    cmd = ["distributed_finetune.py", "--tiny", "--steps", "4", "--losses", path, "--plot", "",
           *args]
    if nproc:
        run(TORCHRUN + ["--nproc-per-node", str(nproc), *cmd], cwd=EXAMPLES)
    else:
        run([sys.executable, *cmd], cwd=EXAMPLES)
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same shards trained in one process without torch.distributed."""
    tmp = tmp_path_factory.mktemp("ref")
    return {n: losses(tmp, ["--emulate", str(n)]) for n in (1, 2, 4)}


@pytest.mark.parametrize("parallel,nproc,tol", [
    ("ddp", 2, 1e-5),
    ("ddp-ids", 2, 1e-5),
    ("ddp", 4, 1e-5),
    ("fsdp", 2, 1e-5),
    ("fsdp-bf16", 2, 3e-2),
    ("tp", 2, 1e-4),
])
def test_torchrun_training_matches_one_process(tmp_path, reference, parallel, nproc, tol):
    got = losses(tmp_path, ["--parallel", parallel], nproc)
    ref = reference[1 if parallel == "tp" else nproc]  # TP: every rank sees the whole batch
    assert len(got) == len(ref) == 4
    for a, b in zip(got, ref):
        assert abs(a - b) <= tol * abs(b), (parallel, got, ref)


def test_tensor_parallel_generate_matches_one_device():
    out = run([sys.executable, "tp_generate.py", "--new-tokens", "6"], cwd=EXAMPLES)
    assert "tensor-parallel over 4 devices" in out and "identical" in out, out[-2000:]
    assert "transport xla" in out


def test_ddp_all_reduce_runs_inside_the_backward_program():
    # Fused mode: every step's gradient all-reduce is in a program with the backward's ops.
    out = run([sys.executable, "ddp_threaded.py"], TORCHTPU_CPU_DEVICES="2")
    assert "PASS ddp_threaded" in out and "PASS uneven_reads" in out


def test_only_gloos_teardown_abort_after_the_results_counts_as_done():
    from torchtpu.testing.torchrun import GLOO_TEARDOWN_ABORT

    assert completed(0, "", False)
    assert completed(1, "RESULT\n" + GLOO_TEARDOWN_ABORT, True)
    assert not completed(1, GLOO_TEARDOWN_ABORT, False)  # before every rank finished
    assert not completed(1, "Segmentation fault", True)  # any other failure
