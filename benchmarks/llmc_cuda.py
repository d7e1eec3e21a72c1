#!/usr/bin/env python3
"""llm.c's dev/cuda/*.cu on the CPU, each kernel version checked by the
file's own CPU reference code.

    python benchmarks/llmc_cuda.py --llmc DIR [--only layernorm_forward.cu ...] [--timeout 300]
    python benchmarks/llmc_cuda.py --llmc DIR --nvcc     # the same runs on an NVIDIA GPU (baseline)
    python benchmarks/llmc_cuda.py --llmc DIR --nvcc --sanitizer racecheck   # under compute-sanitizer

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
the GPU, to tell this runtime's failures from the files' own. --sanitizer TOOL
runs each GPU version under NVIDIA's compute-sanitizer with that tool
(racecheck, memcheck, synccheck, initcheck) and records, per version, what
it reports and in which kernels: the ground truth for this project's own
checker on the same files (benchmarks/llmc_port.py compares the two).
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
from concurrent.futures import ThreadPoolExecutor
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
        if "int main(" in src:
            f.write_text(scale_main(src, {**SIZES, **(overrides or {}).get(f.name, {})}))


def scale_main(src: str, sizes: dict[str, int]) -> str:
    """`src` with main's `int NAME = N;` sizes set to `sizes`."""
    main = src.find("int main(")
    head, body = src[:main], src[main:]
    for name, value in sizes.items():
        body = re.sub(rf"(\b(?:const\s+)?(?:int|int64_t|long|size_t)\s+{name}\s*=\s*)\d+\s*;",
                      rf"\g<1>{value};", body, count=1)
    return head + body


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
    if nvcc:  # llm.c's dev/cuda/Makefile flags, for the GPU at hand (+ line info for the sanitizer's reports)
        exe = path.with_suffix("")
        proc = subprocess.run(["nvcc", "-O3", "--use_fast_math", "-arch=native", "-std=c++17", "-lineinfo", str(path),
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


def run(exe: Path, args, timeout: float, cwd: str, prefix=()):
    try:
        proc = subprocess.run([*prefix, str(exe), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd)
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


# compute-sanitizer's report lines, e.g. "========= Error: Race reported between Write access at
# kernel4(float *, int)+0x90 in softmax_forward.cu:123" / "=========     and Read access at ..." and,
# for memcheck, "========= Invalid __global__ read of size 4 bytes" / "=========     at kernel(...)+0x1a0
# in a.cu:12".
_SAN_LINE = re.compile(r"^========= (?:(Error|Warning): )?(.*)$")
_SAN_AT = re.compile(r"\bat (?:.*?\s)?(\w+)(?:<.*?>)?\((?:.*?\)\+0x[0-9a-f]+(?: in (?:.*/)?([\w.]+):(\d+))?|[^)]*$)")
_SAN_SUMMARY = re.compile(r"(?:ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, "
                          r"(\d+) warnings?\))")
_SAN_HEAD = ("Invalid", "Race", "Barrier", "Uninitialized", "Misaligned", "Potential")


def sanitizer_findings(text: str) -> dict:
    """What compute-sanitizer said about one run: {"errors", "warnings",
    "kernels": {kernel: [reports, each with the first access's file:line]},
    "report": its first report lines}."""
    out = {"errors": 0, "warnings": 0, "kernels": {}, "report": []}
    current = None
    for line in text.splitlines():
        m = _SAN_SUMMARY.search(line)
        if m:
            if m.group(1) is not None:
                out["errors"] = max(out["errors"], int(m.group(1)))
            else:
                out["errors"], out["warnings"] = max(out["errors"], int(m.group(3))), int(m.group(4))
            continue
        m = _SAN_LINE.match(line)
        if not m:
            continue
        body = m.group(2).strip()
        if body and "Host Frame" not in body and len(out["report"]) < 40:
            out["report"].append(line[:400])
        if m.group(1) or body.startswith(_SAN_HEAD):
            current = (m.group(1) or "Error") + ": " + body.split(" at ")[0]
        at = _SAN_AT.search(body)
        if at and current:
            msg = current + (f" ({at.group(2)}:{at.group(3)})" if at.group(2) else "")
            msgs = out["kernels"].setdefault(at.group(1), [])
            if len(msgs) < 8 and msg not in msgs:
                msgs.append(msg[:200])
            current = None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmc", required=True, help="a checkout of llm.c")
    ap.add_argument("--only", nargs="*", help="file names in dev/cuda")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per kernel version")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--nvcc", action="store_true", help="build with nvcc and run on the GPU instead")
    ap.add_argument("--sanitizer", choices=("racecheck", "memcheck", "synccheck", "initcheck"),
                    help="with --nvcc: run every version under compute-sanitizer --tool TOOL and record its reports")
    ap.add_argument("--jobs", type=int, default=1, help="versions run at once (GPU runs)")
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
            prefix = (["compute-sanitizer", "--tool", args.sanitizer, "--print-limit", "50"]
                      if args.sanitizer else [])
            with ThreadPoolExecutor(max(1, args.jobs)) as pool:
                runs = list(pool.map(lambda v: run(exe, [] if v is None else [v], args.timeout, str(work), prefix),
                                     versions or [None]))
            for v, (rc, out, err, timed_out) in zip(versions or [None], runs):
                if args.sanitizer:
                    entry.setdefault("sanitizer", {})[str(v)] = {**sanitizer_findings(out + err),
                                                                 "timed_out": timed_out}
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
