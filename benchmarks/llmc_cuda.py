#!/usr/bin/env python3
"""llm.c's dev/cuda/*.cu on the CPU, each kernel version checked by the
file's own CPU reference code.

    python benchmarks/llmc_cuda.py --llmc DIR [--only layernorm_forward.cu ...] [--timeout 300]

DIR is a checkout of github.com/karpathy/llm.c (never copied into this
repository). Each file is built as a whole program for the CPU
(metal_kernel.port.program: host code native, every <<<...>>> launch run by
the runtime with CUDA's semantics) and run once per kernel version its main
accepts (the `case N:` labels of its `switch (kernel_num)`). The file's main
computes the CPU reference, runs the kernel for each block size and compares
with validate_result; a version passes when the program ends with "All
results match".

Two edits, made in a temporary copy, keep it within reach of a CPU: the
problem sizes in main shrink (B -> 1, T -> 128; C, NH, V as written), and
common.h's benchmark_kernel times zero repetitions (the correctness check
runs every kernel as written; only the timing loop is skipped).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metal_kernel.port import CudaCompileError  # noqa: E402
from metal_kernel.port.program import build_program, run_program  # noqa: E402

SIZES = {"B": 1, "T": 128}


def scaled_copy(dev: Path, dst: Path):
    shutil.copytree(dev, dst)
    common = dst / "common.h"
    text = common.read_text()
    text, n = re.subn(r"(float\s+benchmark_kernel\s*\(\s*int\s+repeats\s*,[^)]*\)\s*\{)", r"\1 repeats = 0;", text)
    if n != 1:
        print("warning: benchmark_kernel not found in common.h; timing loops run in full", file=sys.stderr)
    common.write_text(text)
    for f in dst.glob("*.cu"):
        src = f.read_text()
        main = src.find("int main(")
        if main < 0:
            continue
        head, body = src[:main], src[main:]
        for name, value in SIZES.items():
            body = re.sub(rf"(\bint\s+{name}\s*=\s*)\d+\s*;", rf"\g<1>{value};", body, count=1)
        f.write_text(head + body)


def kernel_versions(text: str) -> list[int]:
    """The `case N:` labels of main's `switch (kernel_num)`."""
    out = []
    for m in re.finditer(r"switch\s*\(\s*kernel_num\s*\)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out += [int(x) for x in re.findall(r"\bcase\s+(\d+)\s*:", text[m.end():i])]
    return sorted(set(out))


def why(run) -> str:
    text = run.stdout + run.stderr
    if run.timed_out:
        return "timed out"
    for pattern in (r"\[metal-kernel\][^\n]*", r"Mismatch[^\n]*", r"\[cuBLAS ERROR\][^\n]*", r"\[CUDA ERROR\][^\n]*",
                    r"Assertion[^\n]*", r"Invalid kernel number[^\n]*"):
        m = re.search(pattern, text)
        if m:
            return m.group(0)[:160]
    tail = [ln for ln in text.splitlines() if ln.strip()][-1:] or [f"exit code {run.returncode}"]
    return f"exit code {run.returncode}: {tail[0][:120]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmc", required=True, help="a checkout of llm.c")
    ap.add_argument("--only", nargs="*", help="file names in dev/cuda")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per kernel version")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    dev = Path(args.llmc) / "dev" / "cuda"
    if not (dev / "common.h").exists():
        sys.exit(f"{dev} is not llm.c's dev/cuda")
    files = sorted(p.name for p in dev.glob("*.cu") if not args.only or p.name in args.only)
    results = []
    with tempfile.TemporaryDirectory(prefix="llmc-") as tmp:
        work = Path(tmp) / "cuda"
        scaled_copy(dev, work)
        for name in files:
            path = work / name
            text = path.read_text()
            versions = kernel_versions(text)
            entry = {"file": name, "versions": versions, "passed": [], "failed": {}, "build": None}
            t0 = time.time()
            try:
                exe = build_program(text, filename=str(path))
            except (CudaCompileError, OSError) as e:
                entry["build"] = str(e).splitlines()[0][:200]
                results.append(entry)
                print(f"{name}: does not build: {entry['build']}", flush=True)
                continue
            for v in versions or [None]:
                run = run_program(exe, [] if v is None else [v], timeout=args.timeout, cwd=str(work))
                ok = run.returncode == 0 and "All results match" in run.stdout
                if ok:
                    entry["passed"].append(v)
                else:
                    entry["failed"][str(v)] = why(run)
            entry["seconds"] = round(time.time() - t0, 1)
            results.append(entry)
            print(f"{name}: {len(entry['passed'])}/{len(versions) or 1} versions pass"
                  + "".join(f"\n    {k}: {r}" for k, r in entry["failed"].items()), flush=True)
    total = sum(len(r["versions"]) or 1 for r in results)
    passed = sum(len(r["passed"]) for r in results)
    files_ok = sum(1 for r in results if r["build"] is None and not r["failed"])
    print(f"\n{passed}/{total} kernel versions match their file's CPU reference; "
          f"{files_ok}/{len(results)} files pass completely")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
