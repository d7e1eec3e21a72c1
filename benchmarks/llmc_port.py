#!/usr/bin/env python3
"""llm.c's dev/cuda/*.cu ported to Metal, every kernel verified against the
original on the file's own inputs.

    python benchmarks/llmc_port.py --llmc DIR [--only gelu_forward.cu ...] [--json out.json] [--double float]
    python benchmarks/llmc_port.py --table out.json     # the Markdown table of docs/port.md

DIR is a checkout of github.com/karpathy/llm.c (never copied into this
repository). Per file, in a temporary copy scaled as benchmarks/llmc_cuda.py
scales it (B = 1, T = 128, or FILE_SIZES; common.h times zero repetitions):

1. capture: the file is built as a whole program for the CPU with launch
   capture (metal_kernel/port/to_metal/capture.py) and run once per kernel
   version its main accepts; the first launch of each kernel records its
   grid, block, shared memory, scalars and the contents of its buffers;
   launches of template kernels with deduced arguments name their
   instantiation, which is then instantiated explicitly for load_cuda and
   the port; a kernel version whose own host code refuses main's sizes
   (VERSION_SIZES) is captured in a run of a copy at sizes it accepts;
2. port: `port_cuda` on the file; the port is compiled (`load()`);
3. verify: each translated kernel runs through load_cuda (the original) and
   through compile_shader (the port) on copies of its recorded inputs
   (buffers the kernel only writes poisoned), both under
   metal_kernel.check(), every buffer compared.

A run that stops before launching some kernel (llm.c's global_norm.cu
sizes its grid from the SM count and asserts it stays under 1024 blocks,
which fails on a 132-SM GPU) is run again with the device reporting
SMALL_SMS SMs; the launches only that run made say so in their notes.

A kernel the file's main never launches is verified on random inputs sized
from defaults (default_sizes: the file's own B/T/C... constants for the
parameters of those names, the block size the file uses most, a warp per
row), and its row says "sized from defaults".

A kernel counts as verified when its verification passes; every other
kernel is listed with the diagnostic that says why.

`--double` is port_cuda's `double=` option, `float` by default here: the
four llm.c kernels that use double (matmul_backward.cu's
matmul_backward_bias_kernel_naive/_faster, softmax_forward.cu's
softmax_forward_kernel1/softmax_forward_online_kernel1) use it only as a
local accumulator (`double sum = 0.0; sum += x[i]; ... (float)sum`), which
the port computes in float. It is never silent: each such kernel's row has
`demoted` and the MK1038 warning, the table names them, and verify compares
them with the original accumulating in double. `--double reject` gives the
default of port_cuda (MK1001, not translated). The setting is recorded in
each file's entry of the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from llmc_cuda import kernel_versions, scale_main, scaled_copy  # noqa: E402

SMALL_SMS = 16  # the SM count of the second capture run (see the docstring)
# Files whose kernels need more than the scaled sizes: attention_backward.cu's
# softmax_autoregressive_backward_kernel6<256> stages 256 columns of a row
# per step and reads past a row of fewer than 256 (T >= BlockSize).
FILE_SIZES = {"attention_backward.cu": {"T": 256}}
# Kernel versions whose own host code refuses main's sizes, captured in a run
# of a copy at sizes it accepts: layernorm_backward.cu tests every version at
# C = 1600 ("the problematic size"), and version 9's host code asserts (its
# kernel traps) unless C is a multiple of 32 * x128::size (256 in bf16), so
# its main never launches kernel 9; 1536 is the largest such C below 1600.
VERSION_SIZES = {"layernorm_backward.cu": {9: {"C": 1536}}}


def port_file(path: Path, work: Path, timeout: float, check: bool, double: str = "float") -> dict:
    from metal_kernel.port.to_metal.capture import capture_launches, explicit_instantiations
    from metal_kernel.port.to_metal.porting import port_cuda

    text = path.read_text()
    entry = {"file": path.name, "double": double, "kernels": [], "capture_problems": [], "seconds": 0.0}
    t0 = time.time()
    versions = kernel_versions(text)
    runs = [[str(v)] for v in versions] or [[]]
    captures, problems = capture_launches(text, str(path), runs=runs, timeout=timeout, cwd=str(work))
    p = port_cuda(text, filename=str(path), double=double)
    if any(" exited with " in x for x in problems) and any(k.spelling not in captures for k in p.kernels):
        more, again = capture_launches(text, str(path), runs=runs, timeout=timeout, cwd=str(work),
                                       env={"MK_CUDA_SM_COUNT": str(SMALL_SMS)})
        problems += [f"with {SMALL_SMS} SMs: {x}" for x in again]
        for spelling, cap in more.items():
            if spelling not in captures:
                cap["where"] += f", in a run with the device reporting {SMALL_SMS} SMs (with 132 it stopped first)"
                captures[spelling] = cap
    resized = {}  # spelling -> the sizes of the run its capture comes from (VERSION_SIZES)
    for version, sizes in VERSION_SIZES.get(path.name, {}).items():
        alt = path.with_name(f"{path.stem}_v{version}{path.suffix}")
        alt.write_text(scale_main(text, sizes))
        more, again = capture_launches(alt.read_text(), str(alt), runs=[[str(version)]], timeout=timeout,
                                       cwd=str(work))
        at = ", ".join(f"{k} = {v}" for k, v in sizes.items())
        problems += [f"version {version} at {at}: {x}" for x in again]
        for spelling, cap in more.items():
            if spelling not in captures:
                cap["where"] += f", in a run of version {version} at {at} (its host code refuses main's sizes)"
                captures[spelling] = cap
                resized[spelling] = at
    entry["capture_problems"] = problems
    extra = explicit_instantiations(p, list(captures))
    if extra:
        text += "\n// instantiations the program's launches deduced (llmc_port.py)" + extra
        path.write_text(text)
        p = p.port_again(text)
    p.load()
    if not p.kernels:
        entry["error"] = "; ".join(str(d) for d in p.diagnostics[:1]) or "no kernels"
    for k in p.kernels:
        row = {"kernel": k.spelling, "translated": k.translated, "verified": False, "why": "", "codes": [],
               "demoted": k.demoted, "warnings": sorted({d.code for d in p.diagnostics if d.severity == "warning" and
                                                         d.function in (k.spelling, k.spelling.split("<")[0])}
                                                        | ({"MK1038"} if k.demoted else set()))}
        if not k.translated:
            row["codes"] = sorted({d.code for d in k.diagnostics})
            row["why"] = "; ".join(f"{d.code} {d.message}" for d in k.diagnostics[:2])
        else:
            cap = captures.get(k.spelling)
            if cap is None:
                row["sized_from"] = "defaults"
            elif k.spelling in resized:
                row["sized_from"] = resized[k.spelling]
            res = _verify_one(p, k, cap, check, timeout, default_sizes(k, text, captures))
            row["verified"] = res.ok
            row["original_findings"] = sorted({f.kind for f in res.original_findings})
            row["port_findings"] = sorted({f.kind for f in res.port_findings})
            # The original is itself at fault and the port does exactly what
            # it does: same outputs, the same kinds of finding on both sides.
            row["faithful"] = bool(not res.ok and res.ran and res.buffers and all(b.match for b in res.buffers)
                                   and row["original_findings"] and row["original_findings"] == row["port_findings"])
            if not res.ok:
                row["why"] = res.summary()[:300]
                if cap is None:
                    row["why"] = "the file's main never launches it; on inputs sized from defaults: " + row["why"]
                row["codes"] = sorted({d.code for d in p.diagnostics if d.function in (k.spelling, k.spelling.split(
                    "<")[0]) and d.severity != "note"}) or ["MK1027"]
                if cap is None:
                    row["codes"] = sorted({"MK1036", *row["codes"]})
            row["launch"] = res.launch
        entry["kernels"].append(row)
    entry["diagnostics"] = [d.to_json() for d in p.diagnostics]
    entry["stats"] = p.stats
    entry["seconds"] = round(time.time() - t0, 1)
    return entry


def default_sizes(k, text: str, captures: dict) -> dict:
    """verify_all's `sizes` for a kernel main never launches: its integer
    parameters named like main's own constants (B, T, C, NH ...; products of
    literals such as `int OC = 768 * 4;` too) take their values, every buffer holds their product (at least 1024 elements, so a
    buffer indexed by any of them or their products is large enough), the
    block is the one the file's launches use most, and the grid gives a
    warp of threads to each row (B * T rows where the kernel has both): a
    thread-per-row kernel and a warp-per-row kernel both cover their rows,
    the extra threads return at their bounds checks."""
    main = text[text.find("int main("):]
    consts = {m.group(1): math.prod(int(x) for x in m.group(2).split("*")) for m in re.finditer(
        r"\b(?:const\s+)?(?:int|size_t|long|int64_t)\s+(\w+)\s*=\s*(\d+(?:\s*\*\s*\d+)*)\s*;", main)}
    named = {p.name: consts[p.name] for p in k.params if p.kind == "scalar" and p.name in consts}
    n = min(max(1024, math.prod(named.values()) if named else 0), 1 << 22)
    blocks = Counter(c["block"][0] for c in captures.values() if c["block"][1:] in ([1, 1], (1, 1)))
    block = min(blocks.most_common(1)[0][0] if blocks else 128, k.max_threads)
    rows = named["B"] * named["T"] if {"B", "T"} <= set(named) else n
    return {"n": n, "block": block, "grid": -(-rows * 32 // block), **named}


def _verify_one(p, k, capture, check, timeout, sizes):
    """Verifies on the recorded launch's inputs (buffers it only writes
    poisoned), or without one on random inputs from `sizes`."""
    from metal_kernel.port.to_metal.inputs import from_capture, make_launch
    from metal_kernel.port.to_metal.verify import VerifyResult

    try:
        if capture is None:
            args, launch, notes = make_launch(k, sizes, None)
            notes = [f"the file's main never launches it: random inputs sized from defaults {sizes}"] + notes
        else:
            args, launch, notes = from_capture(k, capture)
    except ValueError as e:
        return VerifyResult(k.spelling, False, False, error=str(e))
    res = p.verify(k.spelling, *args, check=check, timeout=timeout, **launch)
    res.notes = notes + res.notes
    return res


def gpu_verdicts(sanitizer: dict) -> dict[str, list[str]]:
    """kernel name -> what compute-sanitizer reported for it in llm.c's own
    runs on a GPU (benchmarks/llmc_cuda.py --sanitizer, collected in
    benchmarks/results/sanitizer_h200.json)."""
    out: dict[str, list[str]] = {}
    for tool in ("racecheck", "memcheck"):
        for f in sanitizer.get("llmc", {}).get(tool, []):
            for v in f.get("versions", {}).values():
                for kernel, msgs in v.get("kernels", {}).items():
                    seen = out.setdefault(kernel, [])
                    seen += [f"{tool}: {m}" for m in msgs if f"{tool}: {m}" not in seen]
    return out


def annotate(results: list[dict], sanitizer: dict):
    """Each kernel whose original has findings of its own gets `gpu`: what
    compute-sanitizer said about the same kernel on a real GPU."""
    verdicts = gpu_verdicts(sanitizer)
    for r in results:
        for k in r["kernels"]:
            if k.get("original_findings"):
                k["gpu"] = verdicts.get(k["kernel"].split("<")[0], [])


def table(results: list[dict]) -> str:
    lines = ["| file | kernels | translated | verified | not verified, and why |", "|---|---|---|---|---|"]
    for r in results:
        ks = r["kernels"]
        if r.get("error") and not ks:
            lines.append(f"| {r['file']} | 0 | | | {r['error'].split(': ', 1)[-1][:120].replace('|', '/')} |")
            continue
        why = "; ".join(f"`{k['kernel']}`: {', '.join(k['codes'])} {_why(k)}" for k in ks if not k["verified"])
        resized = sorted({k["sized_from"] for k in ks if k.get("sized_from", "defaults") != "defaults"})
        groups = [("verified on inputs sized from defaults (main never launches them)",
                   [k["kernel"] for k in ks if k["verified"] and k.get("sized_from") == "defaults"]),
                  ("verified with double computed in float (MK1038)",
                   [k["kernel"] for k in ks if k["verified"] and k.get("demoted")]),
                  ("verified with `__trap()` ending the thread (MK1039)",
                   [k["kernel"] for k in ks if k["verified"] and "MK1039" in k.get("warnings", [])])]
        groups += [(f"launched in a run at {at} (its version's host code refuses main's sizes)",
                    [k["kernel"] for k in ks if k.get("sized_from") == at]) for at in resized]
        for what, names in groups:
            if names:
                why += ("; " if why else "") + what + ": " + ", ".join(f"`{k}`" for k in names)
        lines.append(f"| {r['file']} | {len(ks)} | {sum(k['translated'] for k in ks)} | "
                     f"{sum(k['verified'] for k in ks)} | {why.replace('|', '/')} |")
    found = sum(len(r["kernels"]) for r in results)
    verified = sum(k["verified"] for r in results for k in r["kernels"])
    translated = sum(k["translated"] for r in results for k in r["kernels"])
    faithful = sum(bool(k.get("faithful")) for r in results for k in r["kernels"])
    lines.append(f"| **total** | **{found}** | **{translated}** | **{verified}** "
                 f"({100.0 * verified / max(found, 1):.1f}%) | {faithful} more ported faithfully: the original is "
                 f"itself at fault (same outputs, the same kinds of finding on both sides) |")
    return "\n".join(lines)


# Why compute-sanitizer can stay silent on a finding of each kind (checked
# by hand on the H200 for each kernel of docs/port.md that has one).
GPU_SILENT = {
    "race": "its racecheck covers shared memory only",
    "inactive-lane": "none of its tools checks a shuffle reading a lane that does not make the call",
    "oob": "memcheck stops a run at its first error, and another kernel of the file erred before this one ran",
}


def _why(k: dict) -> str:
    if k.get("faithful"):
        text = f"**the original is at fault**, the port does the same ({', '.join(k['original_findings'])} in both)"
        gpu = k.get("gpu")
        if not gpu and k.get("sized_from", "defaults") != "defaults":
            text += ("; compute-sanitizer on an H200: never saw it (llm.c's own run of this version stops at the "
                     "same check of main's sizes)")
        elif gpu is not None:
            reasons = [GPU_SILENT[f] for f in k["original_findings"] if f in GPU_SILENT]
            text += "; compute-sanitizer on an H200: " + (
                gpu[0][:90] if gpu else "nothing" + (f" ({reasons[-1]})" if reasons else ""))
        return text
    return k["why"][:110]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmc", help="a checkout of llm.c")
    ap.add_argument("--only", nargs="*", help="file names in dev/cuda")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per program run and per verification")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--table", help="print the table of an earlier --json")
    ap.add_argument("--no-check", action="store_true", help="verify without metal_kernel.check()")
    ap.add_argument("--double", choices=("reject", "float"), default="float",
                    help="port_cuda's double= (default: %(default)s; see above): 'float' computes local doubles in "
                         "float (MK1038 at each site), 'reject' leaves kernels using double out (MK1001)")
    ap.add_argument("--sanitizer", default=str(Path(__file__).resolve().parent / "results" / "sanitizer_h200.json"),
                    help="compute-sanitizer's reports on llm.c (llmc_cuda.py --sanitizer), to say for each kernel "
                         "whose original has findings what a real GPU's sanitizer said (default: %(default)s)")
    args = ap.parse_args()
    sanitizer = json.loads(Path(args.sanitizer).read_text()) if Path(args.sanitizer).exists() else {}
    if args.table:
        results = json.loads(Path(args.table).read_text())
        annotate(results, sanitizer)
        print(table(results))
        return
    if not args.llmc:
        ap.error("--llmc DIR is required")
    dev = Path(args.llmc) / "dev" / "cuda"
    if not (dev / "common.h").exists():
        sys.exit(f"{dev} is not llm.c's dev/cuda")
    files = sorted(p.name for p in dev.glob("*.cu") if not args.only or p.name in args.only)
    results = []
    with tempfile.TemporaryDirectory(prefix="llmc-port-") as tmp:
        work = Path(tmp) / "cuda"
        scaled_copy(dev, work, FILE_SIZES)
        for name in files:
            try:
                entry = port_file(work / name, work, args.timeout, not args.no_check, args.double)
            except Exception as e:  # noqa: BLE001 - one file's failure is a row, not the end of the run
                entry = {"file": name, "kernels": [], "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
            results.append(entry)
            annotate(results[-1:], sanitizer)
            ks = entry["kernels"]
            print(f"{name}: {len(ks)} kernels, {sum(k['translated'] for k in ks)} translated, "
                  f"{sum(k['verified'] for k in ks)} verified ({entry.get('seconds', 0)}s)"
                  + (f"  ERROR {entry['error']}" if entry.get("error") else "")
                  + "".join(f"\n    {k['kernel']}: {k['why'][:200]}" for k in ks if not k["verified"]), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    print()
    print(table(results))


if __name__ == "__main__":
    main()
