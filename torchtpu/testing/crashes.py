"""The crash finder: every op of op_db, with every sample input, in every dtype CPU supports for
it, and its error_inputs, run on tpu in a child process that reports each case before and
after it runs. A child that dies mid-case (a signal, an abort) or goes silent past the timeout
is a crash or a hang of that case; the parent records it and starts a new child at the next
case. Failures (Python exceptions where CPU has none, or of another type) are counted apart,
by cause. `python -m torchtpu.coverage --crashes` runs the whole sweep; tests/test_crashes.py
a slice of it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import select
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

DTYPE_NAMES = [
    "float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8", "uint8",
    "int16", "int32", "int64", "bool", "float8_e4m3fn", "float8_e5m2",
]  # fmt: skip
ERRORS = len(DTYPE_NAMES)  # the dtype slot of an op's error_inputs

# Testing hook: the worker kills itself (SIGSEGV) on this op's first float32 case, so the suite
# can check that a crash is found, named and survived.
CRASH_HOOK = "TORCHTPU_CRASH_FINDER_SELF_TEST"


@dataclass
class Sweep:
    cases: int = 0
    ops: set[str] = field(default_factory=set)
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "ops": len(self.ops),
            "crashes": self.crashes,
            "hangs": self.hangs,
            "failed": sum(self.failures.values()),
            "failures_by_cause": dict(self.failures.most_common()),
            "examples": self.examples,
        }


def _key(op: Any) -> str:
    return op.name if not op.variant_test_name else f"{op.name}.{op.variant_test_name}"


def _cause(e: BaseException) -> str:
    """An exception's type and message, with numbers and names of shapes blurred, to group by."""
    first = (str(e).strip().splitlines() or [""])[0]
    first = re.sub(r"\d+", "#", first)[:90]
    return f"{type(e).__name__}: {first}"


def _samples(op: Any, dtype: Any, max_samples: int) -> list[Any]:
    import torch

    torch.manual_seed(0)
    samples = op.sample_inputs("cpu", dtype) if dtype is not None else op.error_inputs("cpu")
    return list(itertools.islice(samples, max_samples) if max_samples else samples)


def _run_sample(op: Any, sample: Any, pinned: set[int] = frozenset()) -> str:
    """'ok', or the cause of a tpu failure where CPU ran or raised another type. `pinned`: the
    sample's tensors that stay on CPU whatever the device (tensor_split's indices)."""
    import torch
    from torch.utils._pytree import tree_map

    from torchtpu.testing.opinfo import _to_keeping_aliases

    def run(device: str) -> BaseException | None:
        try:
            torch.manual_seed(0)
            args = _to_keeping_aliases((sample.input, sample.args, sample.kwargs), device, pinned)
            out = op(args[0], *args[1], **args[2])
            tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, out)
            if device == "tpu":
                torch.tpu.synchronize()
        except Exception as e:  # noqa: BLE001 (compared below)
            return e
        return None

    want, got = run("cpu"), run("tpu")
    if got is None:
        return "ok" if want is None else f"ran where CPU raises {type(want).__name__}"
    if want is not None and isinstance(got, (NotImplementedError, type(want))):
        return "ok"
    return _cause(got)


def _run_error_input(op: Any, error_input: Any) -> str:
    from torchtpu.testing.opinfo import _raises_as_expected

    if _raises_as_expected(op, error_input, "cpu") is not None:
        return "ok"  # CPU does not raise as OpInfo says either: nothing to hold tpu to
    why = _raises_as_expected(op, error_input, "tpu")
    return "ok" if why is None else f"error_inputs: {why[:90]}"


def worker(
    start: tuple[int, int, int], stop: int, every: int, offset: int, max_samples: int, ops: set[str]
):
    """Prints 'C i d s' before case (op i, dtype slot d, sample s) and 'R cause' after it."""
    import warnings

    import torch

    import torchtpu  # noqa: F401
    from torchtpu.testing.opinfo import _cpu_pinned, op_database

    warnings.filterwarnings("ignore")
    crash_op = os.environ.get(CRASH_HOOK)
    for i, op in enumerate(op_database()):
        if i < start[0] or i >= stop or i % every != offset or (ops and _key(op) not in ops):
            continue
        supported = op.supported_dtypes("cpu")
        for d, name in enumerate([*DTYPE_NAMES, "errors"]):
            if (i, d) < start[:2]:
                continue
            dtype = getattr(torch, name, None) if d < ERRORS else None
            if d < ERRORS and dtype not in supported:
                continue
            if d == ERRORS and op.error_inputs_func is None:
                continue
            try:
                samples = _samples(op, dtype, max_samples if d < ERRORS else 0)
                pinned = _cpu_pinned(op, dtype, False, samples) if d < ERRORS else []
            except Exception:  # noqa: BLE001, S112 (OpInfo's own generator fails: no case)
                continue
            for s, sample in enumerate(samples):
                if (i, d, s) < start:
                    continue
                print(f"C {i} {d} {s}", flush=True)
                if crash_op == _key(op) and (d, s) == (0, 0):
                    os.kill(os.getpid(), 11)
                try:
                    r = (
                        _run_sample(op, sample, pinned[s])
                        if d < ERRORS
                        else _run_error_input(op, sample)
                    )
                except BaseException as e:  # noqa: BLE001 (a harness failure is a failure too)
                    r = _cause(e)
                print("R " + r.replace("\n", " "), flush=True)
    print("END", flush=True)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown of the PJRT client


def _name_of(i: int, d: int, s: int, names: list[str]) -> str:
    slot = DTYPE_NAMES[d] if d < ERRORS else "error_inputs"
    return f"{names[i]} {slot} sample {s}"


def sweep(
    every: int = 1,
    offset: int = 0,
    max_samples: int = 0,
    ops: set[str] | None = None,
    timeout_s: float = 300.0,
    progress: str | None = None,
    ops_range: tuple[int, int] = (0, 1 << 30),
) -> Sweep:
    """Runs the cases in children until every one has run, crashed or hung. `progress`: a path
    the summary so far is written to every 1000 cases, and crashes are printed to stderr.
    `ops_range`: the op_db indices [first, last) to run (to split the sweep over processes)."""
    from torchtpu.testing.opinfo import op_database

    names = [_key(op) for op in op_database()]
    result, start, current = Sweep(), (ops_range[0], 0, 0), None
    while True:
        cmd = [sys.executable, "-m", "torchtpu.testing.crashes", "--worker",
               "--start", ":".join(map(str, start)), "--stop", str(ops_range[1]),
               "--every", str(every),
               "--offset", str(offset), "--max-samples", str(max_samples),
               "--ops", ",".join(sorted(ops or ()))]  # fmt: skip
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
        current, finished, hung = None, False, False
        while True:
            ready, _, _ = select.select([child.stdout], [], [], timeout_s)
            if not ready:
                hung = True
                child.kill()
                break
            line = child.stdout.readline()
            if not line:
                break
            if line.startswith("C "):
                current = tuple(int(x) for x in line.split()[1:])
                result.cases += 1
                result.ops.add(names[current[0]])
                if progress and result.cases % 1000 == 0:
                    with open(progress, "w") as f:
                        json.dump({"at": names[current[0]], **result.summary()}, f, indent=1)
            elif line.startswith("R ") and current is not None:
                cause = line[2:].strip()
                if cause != "ok":
                    result.failures[cause] += 1
                    result.examples.setdefault(cause, _name_of(*current, names))
                current = None
            elif line.strip() == "END":
                finished = True
        code = child.wait()
        if finished and current is None:
            return result
        if current is None:  # died between cases (importing, generating samples)
            raise RuntimeError(f"the crash finder's worker exited with {code} between cases")
        what = _name_of(*current, names)
        (result.hangs if hung else result.crashes).append(f"{what} (exit {code})")
        if progress:
            print(("HANG " if hung else "CRASH ") + what, file=sys.stderr, flush=True)
        start = (current[0], current[1], current[2] + 1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--start", default="0:0:0")
    p.add_argument("--stop", type=int, default=1 << 30)
    p.add_argument("--every", type=int, default=1)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--max-samples", type=int, default=0)
    p.add_argument("--ops", default="")
    p.add_argument("--progress", help="write the summary so far here every 1000 cases")
    a = p.parse_args()
    ops = set(a.ops.split(",")) - {""}
    start = tuple(int(x) for x in a.start.split(":"))
    if a.worker:
        worker(start, a.stop, a.every, a.offset, a.max_samples, ops)  # type: ignore[arg-type]
    first = start[0]
    result = sweep(a.every, a.offset, a.max_samples, ops, progress=a.progress,
                   ops_range=(first, a.stop))  # fmt: skip
    print(json.dumps(result.summary(), indent=1))


if __name__ == "__main__":
    main()
