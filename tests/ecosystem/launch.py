"""Runs an ecosystem script as a user does, `python script.py ...` or `torchrun --nproc-per-node
2 script.py ...`, and returns the JSON objects it printed (one per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from torchtpu.testing.torchrun import completed

HERE = os.path.dirname(__file__)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"]


def _objects(out: str) -> list[dict]:
    # The ranks share one stdout: a line of one may run into the other's.
    decoder, found, at = json.JSONDecoder(), [], out.find('{"')
    while at != -1:
        value, end = decoder.raw_decode(out, at)
        found.append(value)
        at = out.find('{"', end)
    return found


def run(script: str, *args: str, nproc: int = 0, timeout: int = 300) -> list[dict]:
    head = [*TORCHRUN, str(nproc)] if nproc else [sys.executable]
    done = subprocess.run(
        [*head, os.path.join(HERE, script), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # a crash prints every thread's stack
    )
    found = _objects(done.stdout)
    every_rank_done = len(found) == max(nproc, 1)
    ok = done.returncode == 0 or (
        nproc and completed(done.returncode, done.stderr, every_rank_done)
    )
    assert ok, done.stdout[-1000:] + done.stderr[-6000:]
    assert every_rank_done, done.stdout[-3000:]
    return found
