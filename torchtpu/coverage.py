"""python -m torchtpu.coverage [--json] [--markdown PATH] [--expected PATH]
python -m torchtpu.coverage --error-inputs PATH
python -m torchtpu.coverage --modules PATH [--markdown PATH]
python -m torchtpu.coverage --crashes PATH [--max-samples N] [--markdown PATH]

Runs the OpInfo harness over PyTorch's op_db (float32) and reports how many ops match CPU.
With --error-inputs it runs every op's `error_inputs` instead and writes, per op, how many tpu
rejects as CPU does (the test suite's floor), with the totals and the failures. With --modules
it runs PyTorch's module_db (testing/modules.py) and writes the passing ModuleInfos, the totals
and the failures; --markdown then replaces the module section of that file. With --crashes it
runs the crash finder (testing/crashes.py: every op, sample, dtype and error input, each in a
child process) and writes crashes, hangs and failures by cause; --markdown then replaces the
crash section.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections import defaultdict

import torch

import torchtpu  # noqa: F401 (registers the device)
from torchtpu.testing import opinfo


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--markdown", help="write a report of passing ops and failures by reason")
    p.add_argument("--expected", help="write the passing op names (the test suite's list)")
    p.add_argument("--ops", help="comma-separated op names to run (default: all)")
    p.add_argument("--error-inputs", help="run error_inputs and write their results here")
    p.add_argument("--modules", help="run module_db and write its results here")
    p.add_argument("--crashes", help="run the crash finder and write its results here")
    p.add_argument("--max-samples", type=int, default=0, help="--crashes: samples per dtype")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    wanted = set(args.ops.split(",")) if args.ops else None
    if args.crashes:
        _crashes(args.crashes, args.markdown, wanted, args.max_samples)
        sys.stdout.flush()
        os._exit(0)
    if args.modules:
        _modules(args.modules, args.markdown, wanted)
        sys.stdout.flush()
        os._exit(0)
    if args.error_inputs:
        _error_inputs(args.error_inputs, wanted)
        sys.stdout.flush()
        os._exit(0)
    db = opinfo.op_database()
    results = opinfo.run_all(lambda op: wanted is None or op.name in wanted)
    fwd = sorted(k for k, r in results.items() if r["forward"].ok)
    grad = sorted(k for k, r in results.items() if "grad" in r and r["grad"].ok)
    summary = {
        "forward_passed": len(fwd),
        "grad_passed": len(grad),
        "attempted": len(results),
        "op_db_total": len(db),
    }
    expected = {"forward": fwd, "grad": grad}
    for name in opinfo.EXTRA_DTYPES:
        k = f"forward_{name}"
        expected[k] = sorted(op for op, r in results.items() if k in r and r[k].ok)
        summary[f"forward_passed_{name}"] = len(expected[k])
        summary[f"attempted_{name}"] = sum(k in r for r in results.values())
    if args.expected:
        with open(args.expected, "w") as f:
            json.dump(expected, f, indent=1)
            f.write("\n")
    if args.markdown:
        _write_markdown(args.markdown, results, summary)
    if args.json:
        print(json.dumps(summary))
    else:
        for k, r in sorted(results.items()):
            cols = " ".join(f"{kind}={'ok' if res.ok else res.reason}" for kind, res in r.items())
            print(f"{k:45s} {cols}")
        print(json.dumps(summary))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown of the PJRT client


def _error_inputs(path: str, wanted: set[str] | None) -> None:
    matched: dict[str, int] = {}
    failures: dict[str, list[str]] = {}
    total = {"expected": 0, "matched": 0}
    for op in opinfo.op_database():
        if wanted is not None and op.name not in wanted:
            continue
        key = op.name if not op.variant_test_name else f"{op.name}.{op.variant_test_name}"
        r = opinfo.run_error_inputs(op)
        if r.expected == 0:
            continue
        total["expected"] += r.expected
        total["matched"] += r.matched
        matched[key] = r.matched
        if r.failures:
            failures[key] = r.failures
    with open(path, "w") as f:
        json.dump({"total": total, "matched": matched, "failures": failures}, f, indent=1)
        f.write("\n")
    print(json.dumps(total))


MODULES_BEGIN, MODULES_END = "<!-- module_db begin -->", "<!-- module_db end -->"
CRASHES_BEGIN, CRASHES_END = "<!-- crashes begin -->", "<!-- crashes end -->"


def _crashes(path: str, markdown: str | None, wanted: set[str] | None, max_samples: int) -> None:
    from torchtpu.testing import crashes

    result = crashes.sweep(max_samples=max_samples, ops=wanted, progress=path + ".progress")
    summary = result.summary()
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    if markdown:
        samples = f"up to {max_samples} samples" if max_samples else "every sample input"
        lines = [
            CRASHES_BEGIN,
            (
                "## Crash sweep (generated by `python -m torchtpu.coverage --crashes PATH "
                "--markdown PATH`)"
            ),
            "",
            (
                f"torch {torch.__version__}: {summary['cases']} cases ({summary['ops']} ops of "
                f"op_db, {samples} in each dtype CPU supports, and every error input), each run "
                f"on tpu in a child process: **{len(summary['crashes'])} crashes, "
                f"{len(summary['hangs'])} hangs**, {summary['failed']} failures (tpu raised where "
                "CPU did not, or another exception type; or ran where CPU raises)."
            ),
            "",
            *[f"- crash: {c}" for c in summary["crashes"]],
            *[f"- hang: {h}" for h in summary["hangs"]],
            "",
            "Failures by cause (the 25 most frequent; an example case each):",
            "",
            *[
                f"- {n} × `{cause}` (e.g. {summary['examples'][cause]})"
                for cause, n in list(summary["failures_by_cause"].items())[:25]
            ],
            CRASHES_END,
        ]
        _replace_section(markdown, CRASHES_BEGIN, CRASHES_END, lines)
    print(json.dumps({k: v for k, v in summary.items() if k != "examples"}))


def _replace_section(path: str, begin: str, end: str, lines: list[str]) -> None:
    text = _read(path)
    if begin in text:
        head, rest = text.split(begin, 1)
        text = head + "\n".join(lines) + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)


def _modules(path: str, markdown: str | None, wanted: set[str] | None) -> None:
    from torchtpu.testing import modules

    results = modules.run_all(lambda info: wanted is None or info.name in wanted)
    attempted = [k for k, r in results.items() if r]
    passed = sorted(k for k in attempted if modules.passes(results[k]))
    failures = {
        k: {c: r.reason for c, r in checks.items() if not r.ok}
        for k, checks in results.items()
        if k in attempted and k not in passed
    }
    summary = {"passed": len(passed), "attempted": len(attempted), "total": len(results)}
    with open(path, "w") as f:
        json.dump({"total": summary, "passed": passed, "failures": failures}, f, indent=1)
        f.write("\n")
    if markdown:
        _write_module_section(markdown, summary, passed, failures)
    print(json.dumps(summary))


def _write_module_section(path: str, summary: dict, passed: list, failures: dict) -> None:
    by_reason: dict[str, list[str]] = defaultdict(list)
    for name, checks in failures.items():
        reason = next(iter(checks.values()))
        by_reason[reason.split(":")[0] + ": " + reason.split(":", 1)[-1][:90]].append(name)
    lines = [
        MODULES_BEGIN,
        "## module_db (generated by `python -m torchtpu.coverage --modules PATH --markdown PATH`)",
        "",
        (
            f"{summary['passed']} ModuleInfos pass of {summary['attempted']} attempted "
            f"({summary['total']} in module_db; modules random in every mode are not attempted): "
            "forward, buffers and gradients in float32, forward in bfloat16 where CPU has it, "
            "training and eval modes."
        ),
        "",
        "Failing, grouped by the first reason:",
        "",
    ]
    for reason, names in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- **{reason}** ({len(names)}): " + ", ".join(f"`{n}`" for n in names))
    lines.append(MODULES_END)
    _replace_section(path, MODULES_BEGIN, MODULES_END, lines)


def _read(path: str) -> str:
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


def _write_markdown(path: str, results: dict, summary: dict) -> None:
    by_reason: dict[str, list[str]] = defaultdict(list)
    for k, r in sorted(results.items()):
        if not r["forward"].ok:
            by_reason[
                r["forward"].reason.split(":")[0]
                + ": "
                + r["forward"].reason.split(":", 1)[-1][:90]
            ].append(k)
    lines = [
        "# OpInfo coverage (float32, generated by `python -m torchtpu.coverage --markdown`)",
        "",
        (
            f"torch {torch.__version__}: {summary['forward_passed']} ops match CPU forward and "
            f"{summary['grad_passed']} in gradients, of {summary['attempted']} attempted "
            f"({summary['op_db_total']} entries in op_db)."
        ),
        "",
        "## Passing forward",
        "",
        ", ".join(f"`{k}`" for k, r in sorted(results.items()) if r["forward"].ok),
        "",
        "## Failing forward, grouped by reason",
        "",
    ]
    for reason, ops in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- **{reason}** ({len(ops)}): " + ", ".join(f"`{o}`" for o in ops))
    lines += ["", "## Forward in other dtypes", ""]
    for name in opinfo.EXTRA_DTYPES:
        lines.append(f"- {name}: {summary[f'forward_passed_{name}']} of "
                     f"{summary[f'attempted_{name}']} attempted")
    key = "forward_complex64"
    failing = [(k, r[key].reason) for k, r in sorted(results.items()) if key in r and not r[key].ok]
    lines += ["", "## Failing forward in complex64", ""]
    lines += [f"- `{k}`: {reason[:120]}" for k, reason in failing]
    old = _read(path)
    for begin, end in ((MODULES_BEGIN, MODULES_END), (CRASHES_BEGIN, CRASHES_END)):
        if begin in old:  # sections written by --modules and --crashes: keep them
            lines += ["", begin + old.split(begin, 1)[1].split(end, 1)[0] + end]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
