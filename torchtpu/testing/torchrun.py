"""Reading a torchrun job's outcome in tests."""

from __future__ import annotations

# PyTorch's own Gloo teardown: a worker thread still joinable when the process exits aborts it
# with this, after the script has finished (the finalization race of pytorch/pytorch#179291).
# Seen here in about one run in ten on a loaded 2-core machine, with torchtpu's autoload off as
# well as on: a CPU-only DDP script under plain PyTorch 2.11 does it too.
GLOO_TEARDOWN_ABORT = "terminate called without an active exception"


def completed(returncode: int, output: str, every_rank_done: bool) -> bool:
    """Exit status 0, or that abort at exit once every rank has printed its results (which the
    caller still checks): any other failure, or an abort before the results, is a failure."""
    return returncode == 0 or (every_rank_done and GLOO_TEARDOWN_ABORT in output)
