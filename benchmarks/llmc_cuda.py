#!/usr/bin/env python3
"""llm.c's dev/cuda/*.cu on the CPU, each kernel version checked by the
file's own CPU reference code.

    python benchmarks/llmc_cuda.py --llmc DIR [--only layernorm_forward.cu ...] [--timeout 300]
    python benchmarks/llmc_cuda.py --llmc DIR --nvcc     # the same runs on an NVIDIA GPU (baseline)

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
runs every kernel as written; only the timing loop is skipped). --nvcc
builds the same edited files with llm.c's own nvcc flags and runs them on
the GPU, to tell this runtime's failures from the files' own.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZES = {"B": 1, "T": 128}


def scaled_copy(dev: Path, dst: Path, overrides: dict[str, dict[str, int]] | None = None):
    """dev copied to dst with main's sizes scaled to SIZES (per file, `overrides`
    replaces some of them) and common.h's benchmark loops at zero repeats."""
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
        for name, value in {**SIZES, **(overrides or {}).get(f.name, {})}.items():
            body = re.sub(rf"(\b(?:const\s+)?(?:int|int64_t|long|size_t)\s+{name}\s*=\s*)\d+\s*;",
                          rf"\g<1>{value};", body, count=1)
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


class BuildError(Exception):
    pass


def build(path: Path, text: str, nvcc: bool) -> Path:
    if nvcc:  # llm.c's dev/cuda/Makefile flags, for the GPU at hand
        exe = path.with_suffix("")
        proc = subprocess.run(["nvcc", "-O3", "--use_fast_math", "-arch=native", "-std=c++17", str(path),
                               "-lcublas", "-lcublasLt", "-o", str(exe)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(([ln for ln in proc.stderr.splitlines() if "error" in ln] or ["nvcc failed"])[0])
        return exe
    from metal_kernel.port import CudaCompileError
    from metal_kernel.port.program import build_program

    try:
        return build_program(text, filename=str(path))
    except (CudaCompileError, OSError) as e:
        raise BuildError(str(e).splitlines()[0]) from None


def run(exe: Path, args, timeout: float, cwd: str):
    try:
        proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd)
        return proc.returncode, proc.stdout, proc.stderr, False
    except subprocess.TimeoutExpired:
        return -1, "", "", True


def why(returncode: int, stdout: str, stderr: str, timed_out: bool) -> str:
    text = stdout + stderr
    if timed_out:
        return "timed out"
    for pattern in (r"\[metal-kernel\][^\n]*", r"Mismatch[^\n]*", r"\[cuBLAS ERROR\][^\n]*", r"\[CUDA ERROR\][^\n]*",
                    r"Assertion[^\n]*", r"Invalid kernel number[^\n]*"):
        m = re.search(pattern, text)
        if m:
            return m.group(0)[:160]
    tail = [ln for ln in text.splitlines() if ln.strip()][-1:] or [f"exit code {returncode}"]
    return f"exit code {returncode}: {tail[0][:120]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmc", required=True, help="a checkout of llm.c")
    ap.add_argument("--only", nargs="*", help="file names in dev/cuda")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per kernel version")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--nvcc", action="store_true", help="build with nvcc and run on the GPU instead")
    ap.add_argument("--baseline", help="a --json of a --nvcc run: the table shows both")
    ap.add_argument("--table", help="only print the table for this --json of an earlier run (with --baseline)")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text()),
                    json.loads(Path(args.baseline).read_text()) if args.baseline else []))
        return
    dev = Path(args.llmc) / "dev" / "cuda"
    if not (dev / "common.h").exists():
        sys.exit(f"{dev} is not llm.c's dev/cuda")
    files = sorted(p.name for p in dev.glob("*.cu") if not args.only or p.name in args.only)
    results = []
    with tempfile.TemporaryDirectory(prefix="llmc-") as tmp:
        work = Path(tmp) / "cuda"
        scaled_copy(dev, work)
        prebuilt = {}
        if args.nvcc:  # nvcc is slow: build every file at once
            from concurrent.futures import ThreadPoolExecutor

            def try_build(name):
                try:
                    return build(work / name, "", True)
                except BuildError as e:
                    return e

            with ThreadPoolExecutor(8) as pool:
                prebuilt = dict(zip(files, pool.map(try_build, files)))
        for name in files:
            path = work / name
            text = path.read_text()
            versions = kernel_versions(text)
            entry = {"file": name, "versions": versions, "passed": [], "failed": {}, "build": None,
                     "not_built": []}
            t0 = time.time()
            try:
                exe = prebuilt.get(name) or build(path, text, args.nvcc)
                if isinstance(exe, BuildError):
                    raise exe
            except BuildError as e:
                entry["build"] = str(e)[:200]
                results.append(entry)
                print(f"{name}: does not build: {entry['build']}", flush=True)
                continue
            for v in versions or [None]:
                rc, out, err, timed_out = run(exe, [] if v is None else [v], args.timeout, str(work))
                ok = rc == 0 and "All results match" in out
                if "Invalid kernel number" in out + err:
                    entry["not_built"].append(v)  # behind an #if the file's main is not built with (cuDNN)
                    continue
                if ok:
                    entry["passed"].append(v)
                else:
                    entry["failed"][str(v)] = why(rc, out, err, timed_out)
            entry["seconds"] = round(time.time() - t0, 1)
            entry["versions"] = [v for v in versions if v not in entry["not_built"]]
            results.append(entry)
            print(f"{name}: {len(entry['passed'])}/{len(entry['versions']) or 1} versions pass"
                  + "".join(f"\n    {k}: {r}" for k, r in entry["failed"].items()), flush=True)
    total = sum(len(r["versions"]) or 1 for r in results)
    for r in results:
        if r["not_built"]:
            print(f"{r['file']}: versions {r['not_built']} are not built without cuDNN (not counted)")
    passed = sum(len(r["passed"]) for r in results)
    files_ok = sum(1 for r in results if r["build"] is None and not r["failed"])
    print(f"\n{passed}/{total} kernel versions match their file's CPU reference; "
          f"{files_ok}/{len(results)} files pass completely")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if args.baseline:
        print()
        print(table(results, json.loads(Path(args.baseline).read_text())))


def table(cpu: list, gpu: list) -> str:
    """Markdown: per file, the versions that pass here and on the GPU, and why the others fail."""
    by_gpu = {r["file"]: r for r in gpu}
    lines = ["| file | versions | pass on the CPU | pass on the GPU | failing here, and why |", "|---|---|---|---|---|"]
    for r in cpu:
        g = by_gpu.get(r["file"], {})
        n = len(r["versions"]) or 1
        if r["build"]:
            lines.append(f"| {r['file']} | {n} | does not build | {len(g.get('passed', []))} | {r['build'][:90]} |")
            continue
        why = "; ".join(f"{k}: {v[:70]}" + (" (also on the GPU)" if k in g.get("failed", {}) else "")
                        for k, v in r["failed"].items())
        lines.append(f"| {r['file']} | {n} | {len(r['passed'])} | {len(g.get('passed', [])) if g else '?'} | "
                     f"{why.replace('|', '/')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
