"""Tables of a benchmark run: printed, and the generated parts of
docs/performance.md and README.md (from the committed runs in
benchmarks/results/, one per machine class). Depends on the standard
library only, so the docs test can import it without numpy or torch."""

from __future__ import annotations

import json
import re
from pathlib import Path

CLASSES = {"avx512": "AVX-512", "avx2": "AVX2"}
RESULTS = ("benchmarks", "results")
BEGIN = re.compile(r"<!-- generated: (?P<name>[\w-]+) \(python benchmarks/bench_runtime.py --doc\) -->\n")


# ------------------------------------------------------------ formatting --

def ms(side: dict | None) -> str:
    if not side:
        return "—"
    if side.get("status") != "ok":
        return side.get("status", "?")
    return f"{side['median_s'] * 1e3:.2f}"


def spread(side: dict | None) -> str:
    """The middle half of the runs, as ± around the median (ms)."""
    if not side or side.get("status") != "ok":
        return ""
    return f"{(side['q3_s'] - side['q1_s']) * 1e3 / 2:.2f}"


def num(x, fmt="{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def pct(x) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def rate(r: dict) -> str:
    """Median rate (fastest run's rate)."""
    if "rate" not in r:
        return "—"
    return f"{r['rate'] / 1e9:.1f} ({r['best_rate'] / 1e9:.1f}) {'GFLOP/s' if r['unit'] == 'flops' else 'GB/s'}"


def limit_name(r: dict) -> str:
    return {"triad": "triad", "copy": "copy", "read": "read", "sgemm": "sgemm"}[r["limit_kind"]]


def of_limit(r: dict) -> str:
    """The kernel against its limit: the median of the rounds' quotients
    (the limit runs in every round of the memory cases), then the fastest
    runs' quotient; the targets use the first where there is one."""
    fastest = f"{pct(r.get('fraction_of_limit'))} fastest"
    if r.get("fraction_of_limit_paired") is None:
        return f"{fastest} of {limit_name(r)}"
    return f"{pct(r['fraction_of_limit_paired'])} paired ({fastest}) of {limit_name(r)}"


def target_text(r: dict) -> str:
    parts = []
    for t in r.get("target_checks", []):
        what = f"PoCL ≤ {t['target']:g}" if t["name"] == "pocl" else f"≥ {100 * t['target']:.0f}% of {limit_name(r)}"
        state = "—" if t["met"] is None else ("met" if t["met"] else "**missed**")
        parts.append(f"{what}: {state}")
    return "; ".join(parts) or "—"


def pocl_setting(r: dict) -> str:
    best = r.get("pocl_best")
    if not best:
        return "—"
    return {"pocl": "fixed", "pocl_tree": "tree twin", "pocl_serial": "serial twin",
            "pocl_subgroups": "sub-groups"}.get(best, best.replace("pocl_local_", "local "))


def brief(r: dict) -> str:
    s = r.get("sides", {})
    if "error" in r:
        return f"error: {r['error']}"
    others = ", ".join(f"{k} {ms(v)}" for k, v in s.items() if k != "ours")
    return f"ours {ms(s.get('ours'))} ms; {others}"


def table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- tables --

def machine_line(doc: dict) -> str:
    m = doc["machine"]
    load = f"{m.get('loadavg_start')} → {m.get('loadavg_end')}"
    march = m.get("march", "native")
    how = ("every contender built for this CPU" if march == "native" else
           f"every contender built for {march} (AVX2): metal-kernel -march={march}, PoCL {doc.get('pocl_cpu')}, "
           f"OpenBLAS Haswell kernels, PyTorch AVX2 kernels")
    simd = m.get("simd_flags") or []
    isa = " (AVX-512)" if "avx512f" in simd else " (AVX2, no AVX-512)" if "avx2" in simd else ""
    return (f"{m.get('cpu')}{isa}, {m.get('usable_cpus')} cores ({m.get('mk_workers')} runtime workers, the same "
            f"thread count for every contender), {m.get('memory_gib')} GiB; {how}. {m.get('compiler')}; "
            f"PoCL: {m.get('pocl', '').split(' | ')[0]} (kernels built for {doc.get('pocl_cpu')}); "
            f"torch {m.get('torch')}. Load average (1/5/15 min) at start → end: {load}. "
            f"Medians of up to {doc['settings']['repeat']} interleaved runs after {doc['settings']['warmup']} "
            f"warm-up runs; ± is half the interquartile range.")


def limits_table(doc: dict) -> str:
    phases = doc["limits"]["phases"]
    best = doc["limits"]["best"]

    def gbs(kind):
        vals = [p["memory"][kind]["gbs"] for p in phases]
        return " / ".join(f"{v:.1f}" for v in vals)
    rows = [[f"STREAM {k} ({BYTES[k]} B per element)", gbs(k), gbs(f"{k}_streaming") if k != "read" else "—",
             f"{best[k + '_gbs']:.1f} GB/s"] for k in ("triad", "copy", "read")]
    fma = " / ".join(f"{p['fma']['gflops']:.0f}" for p in phases)
    rows.append([f"FMA loop ({phases[0]['fma']['vector_width']}-wide vectors)", fma, "—",
                 f"{best['fma_gflops']:.0f} GFLOP/s"])
    for n, v in best["sgemm_gflops"].items():
        runs = " / ".join(f"{p['sgemm'][n]['gflops']:.0f}" for p in phases if n in p["sgemm"])
        rows.append([f"OpenBLAS sgemm {n}³ (numpy)", runs, "—", f"{v:.0f} GFLOP/s"])
    return table(["limit", "medians before / after", "streaming stores, medians before / after",
                  "limit (fastest run)"], rows)


BYTES = {"triad": 12, "copy": 8, "read": 4}


def pocl_table(doc: dict) -> str:
    rows = []
    same_isa = any("ours_same_isa" in r.get("sides", {}) for r in doc["cases"])
    for r in doc["cases"]:
        if not any(k.startswith("pocl") for k in r.get("sides", {})):
            continue
        s = r["sides"]
        row = [f"{r['letter']} {r['title']}", r["size"], f"{ms(s.get('ours'))} ± {spread(s.get('ours'))}"]
        if same_isa:
            row.append(ms(s.get("ours_same_isa")))
        best = s.get(r.get("pocl_best")) if r.get("pocl_best") else None
        row += [f"{ms(best)} ({pocl_setting(r)})", num(r.get("ratio_pocl"))]
        if same_isa:
            row.append(num(r.get("ratio_pocl_same_isa")))
        row += [rate(r), of_limit(r), target_text(r)]
        rows.append(row)
    head = ["case", "size", "metal-kernel ms"]
    if same_isa:
        head.append(f"same ISA as PoCL ({doc.get('pocl_cpu')}) ms")
    head += ["PoCL best ms (setting)", "ours/PoCL (paired)"]
    if same_isa:
        head.append("same ISA/PoCL (paired)")
    head += ["rate (fastest run)", "against the limit", "targets"]
    return table(head, rows)


def pocl_settings_table(doc: dict) -> str:
    """Every PoCL setting tried, per case."""
    names = []
    for r in doc["cases"]:
        for k in r.get("sides", {}):
            if k.startswith("pocl") and k not in names:
                names.append(k)
    rows = []
    for r in doc["cases"]:
        s = r.get("sides", {})
        if not any(k.startswith("pocl") for k in s):
            continue
        rows.append([f"{r['letter']} {r['key']}"] + [ms(s.get(k)) if k in s else "" for k in names])
    return table(["case"] + [n.replace("pocl_local_", "local ").replace("pocl_", "").replace("pocl", "fixed")
                             for n in names], rows)


def others_table(doc: dict) -> str:
    rows = []
    for r in doc["cases"]:
        if any(k.startswith("pocl") for k in r.get("sides", {})):
            continue
        s = r.get("sides", {})
        rows.append([f"{r['letter']} {r['title']}", r.get("size", ""), f"{ms(s.get('ours'))} ± {spread(s.get('ours'))}",
                     rate(r), of_limit(r),
                     f"{ms(s.get('torch'))} ({r['torch_title']})" if r.get("torch_title") else "—",
                     num(r.get("ratio_torch")), target_text(r)])
    return table(["case", "size", "metal-kernel ms", "rate (fastest run)", "against the limit", "PyTorch CPU ms",
                  "ours/PyTorch", "targets"], rows)


def stores_table(doc: dict) -> str:
    """What streaming stores are worth here: STREAM with and without them,
    and saxpy with them (the default) and with METAL_KERNEL_STREAMING_STORES=0."""
    phases = doc["limits"]["phases"]
    rows = []
    for kind in ("triad", "copy"):
        plain = max(p["memory"][kind]["gbs"] for p in phases)
        nt = max(p["memory"][f"{kind}_streaming"]["gbs"] for p in phases)
        rows.append([f"STREAM {kind}", f"{plain:.1f} GB/s", f"{nt:.1f} GB/s", f"{nt / plain:.2f}"])
    by = {r["key"]: r for r in doc["cases"]}
    sx = by.get("saxpy", {}).get("sides", {})
    if sx.get("ours", {}).get("status") == "ok" and sx.get("ours_ordinary_stores", {}).get("status") == "ok":
        a, b = sx["ours_ordinary_stores"]["median_s"], sx["ours"]["median_s"]
        rows.append(["metal-kernel saxpy (out of place), ms", f"{a * 1e3:.2f}", f"{b * 1e3:.2f}", f"{a / b:.2f}"])
    ip = by.get("saxpy_inplace", {}).get("sides", {}).get("ours", {})
    if ip.get("status") == "ok":
        rows.append(["metal-kernel saxpy in place, ms (never streamed: y is read)", f"{ip['median_s'] * 1e3:.2f}",
                     "—", "—"])
    return table(["", "ordinary stores", "streaming stores", "speed-up"], rows)


def compile_table(doc: dict) -> str:
    comp, mem = doc.get("compile") or {}, doc.get("memory") or {}
    rows = []

    def add(label, d):
        if d and "compile_s" in d:
            rows.append([label, f"{d['compile_s'] * 1e3:.0f} ms"])
    add("first compile of a kernel including `c10/metal/utils.h` (empty cache)", comp.get("first_compile_empty_cache"))
    add("first compile of a new kernel (runtime library cached)", comp.get("first_compile_runtime_cached"))
    if "cache_hit_s" in comp:
        rows.append(["cache hit: `compile_shader` of the same source in a new process",
                     f"{comp['cache_hit_s'] * 1e3:.1f} ms"])
    for r in mem.get("runs", []):
        rows.append([f"peak RSS, {r['kernel']} over {mem['n'] >> 20}M floats",
                     f"{r['peak_over_buffers']:.2f}x the buffers"])
    return table(["", "measured"], rows) if rows else "(not measured in this run)\n"


# ------------------------------------------------------------------ docs --

def load_results(repo: Path) -> dict[str, dict]:
    out = {}
    for cls in CLASSES:
        p = repo.joinpath(*RESULTS, f"{cls}.json")
        if p.exists():
            out[cls] = json.loads(p.read_text())
    return out


def summary_line(cls: str, doc: dict) -> str:
    """One sentence of figures for the README."""
    by = {r["key"]: r for r in doc["cases"]}
    ratios = [r["ratio_pocl"] for r in doc["cases"] if "ratio_pocl" in r]

    def frac(key):
        r = by.get(key, {})
        return pct(r.get("fraction_of_limit_paired", r.get("fraction_of_limit")))
    comp = doc.get("compile") or {}
    new = comp.get("first_compile_runtime_cached", {}).get("compile_s")
    hit = comp.get("cache_hit_s")
    compile_text = (f"; a new kernel compiles in {new:.2f} s and a cached `compile_shader` in a new process "
                    f"takes {hit * 1e3:.0f} ms" if new is not None and hit is not None else "")
    return (f"- {CLASSES[cls]} ({doc['machine'].get('march')}): metal-kernel's time / PoCL's (round by round, "
            f"against PoCL's best setting) {min(ratios):.2f}–{max(ratios):.2f}; saxpy at {frac('saxpy')} of the measured triad "
            f"bandwidth, round by round (in place: {frac('saxpy_inplace')}); 16x16-tiled matmul at {frac('matmul')} and the "
            f"simdgroup-matrix GEMM at {frac('simd_gemm')} of OpenBLAS sgemm with the same threads"
            f"{compile_text}.\n")


def generated(repo: Path) -> dict[str, str]:
    """The text of every generated block, by name."""
    res = load_results(repo)
    out = {}
    for cls, doc in res.items():
        out[f"{cls}-machine"] = machine_line(doc) + "\n"
        out[f"{cls}-limits"] = limits_table(doc)
        out[f"{cls}-pocl"] = pocl_table(doc)
        out[f"{cls}-pocl-settings"] = pocl_settings_table(doc)
        out[f"{cls}-others"] = others_table(doc)
        out[f"{cls}-stores"] = stores_table(doc)
        out[f"{cls}-compile"] = compile_table(doc)
    out["readme-summary"] = "".join(summary_line(cls, doc) for cls, doc in res.items())
    return out


def fill(text: str, blocks: dict[str, str]) -> str:
    """`text` with every generated block replaced by its current content."""
    out, pos = [], 0
    for m in BEGIN.finditer(text):
        end = text.index(f"<!-- end: {m.group('name')} -->", m.end())
        out += [text[pos:m.end()], blocks.get(m.group("name"), f"(no data for {m.group('name')})\n")]
        pos = end
    out.append(text[pos:])
    return "".join(out)


DOCS = (("docs", "performance.md"), ("README.md",))


def write_docs(repo: Path) -> list[str]:
    blocks = generated(repo)
    changed = []
    for parts in DOCS:
        p = repo.joinpath(*parts)
        text = p.read_text()
        new = fill(text, blocks)
        if new != text:
            p.write_text(new)
            changed.append(str(p.relative_to(repo)))
    return changed


# ---------------------------------------------------------------- print --

def print_run(doc: dict):
    print(f"metal-kernel runtime benchmark — class {CLASSES.get(doc['machine'].get('class'), '?')}")
    print(machine_line(doc))
    print("\nThe machine's limits")
    print(limits_table(doc))
    print("Against PoCL")
    print(pocl_table(doc))
    print("PoCL settings tried (ms)")
    print(pocl_settings_table(doc))
    print("Against the limit and PyTorch")
    print(others_table(doc))
    print("Streaming stores")
    print(stores_table(doc))
    for r in doc["cases"]:
        for k, v in r.get("sides", {}).items():
            if v.get("status") not in ("ok", None) and v.get("reason"):
                print(f"  {r['letter']}) {k}: {v['status']}: {v['reason']}")
        if r.get("error"):
            print(f"  {r['letter']}) error: {r['error']}")
    print("Compile and memory")
    print(compile_table(doc))
    print(f"(total {doc['total_s']:.0f} s)")
