"""One benchmark run: the libraries, the limits before and after, every
case, compile times and peak memory; the document --json writes."""

from __future__ import annotations

import os
import statistics
import sys
import time
import traceback

import cases as case_table
import children
import kernels
import limits as lim
import machine
import report
from pocl import OpenCL
from timing import Side, bench, first_line

SCHEMA = 1


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def compile_libraries(extra_flags: str | None = None) -> dict:
    """Every kernel library; with `extra_flags` appended to
    METAL_KERNEL_CXXFLAGS while compiling (a separate cache entry)."""
    import metal_kernel

    saved = os.environ.get("METAL_KERNEL_CXXFLAGS")
    if extra_flags:
        os.environ["METAL_KERNEL_CXXFLAGS"] = f"{saved or ''} {extra_flags}".strip()
    libs = {}
    try:
        for name, src in kernels.LIBRARIES.items():
            t = time.perf_counter()
            try:
                libs[name] = {"lib": metal_kernel.compile_shader(src), "compile_s": time.perf_counter() - t}
            except Exception as e:  # noqa: BLE001
                libs[name] = {"error": first_line(e, 300), "compile_s": time.perf_counter() - t}
            else:
                # The steady state of a kernel called again and again: its
                # store proofs compiled (Kernel.prove_stores), so that a
                # dispatch whose stores are proven in bounds writes the
                # buffers directly instead of fenced copies of them.
                t = time.perf_counter()
                lib = libs[name]["lib"]
                libs[name]["stores_proven"] = {k: getattr(lib, k).prove_stores() for k in dir(lib)}
                libs[name]["prove_s"] = time.perf_counter() - t
            log(f"  compiled {name}{' (' + extra_flags + ')' if extra_flags else ''} in "
                f"{libs[name]['compile_s']:.2f} s" + (f": {libs[name]['error']}" if "error" in libs[name] else ""))
    finally:
        if extra_flags:
            if saved is None:
                os.environ.pop("METAL_KERNEL_CXXFLAGS", None)
            else:
                os.environ["METAL_KERNEL_CXXFLAGS"] = saved
    return libs


def pool_size() -> int:
    from metal_kernel.runtime.native import runtime

    return int(runtime().mkrt_init(0))  # the pool size once started


def select(text: str | None):
    """The chosen cases and whether to run the compile / memory reports."""
    table = case_table.CASES
    if not text:
        return table, True, True
    want = [w.strip() for w in text.split(",") if w.strip()]
    chosen = [c for c in table if c.key in want or c.letter in want]
    unknown = set(want) - {c.key for c in table} - {c.letter for c in table} - {"compile", "memory"}
    if unknown:
        names = ", ".join([f"{c.letter}/{c.key}" for c in table] + ["compile", "memory"])
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; choose from {names}")
    return chosen, "compile" in want, "memory" in want


class RemoteTorch:
    """PyTorch's operator for a case, timed in the worker process."""

    def __init__(self, worker: lim.Worker, name: str, size):
        worker.ask(op="torch", case=name, size=list(size), threads=worker.threads)
        self.worker, self.err = worker, None

    key = "torch"

    def run(self) -> float:
        out = self.worker.ask(op="run", key=self.key)
        self.err = out["err"]
        return out["s"]

    def side(self) -> Side:
        return Side(self.run, lambda: None, lambda: self.err, lambda err: err)


class RemoteSgemm(RemoteTorch):
    """OpenBLAS's sgemm at a matmul case's size, timed in the worker process
    in the same rounds as the kernels (its threads sleep right after each
    call: limits.Worker)."""

    key = "sgemm"

    def __init__(self, worker: lim.Worker, n: int):
        worker.ask(op="sgemm_case", n=n)
        self.worker, self.err = worker, None


def run_case(case, args, ctx) -> dict:
    size = case.quick if args.quick else case.full
    res = {"key": case.key, "letter": case.letter, "title": case.title, "size": case.size_text(size),
           "dims": list(size), "work": case.work(size), "unit": case.unit, "limit_kind": case.limit,
           "targets": case.targets, "torch_title": case.torch_title, "notes": list(case.notes)}
    d = case.setup(size)
    sides, failed = {}, {}
    for name, libs in (("ours", ctx["libs"]), ("ours_same_isa", ctx["libs_same_isa"])):
        if libs is None:
            continue
        entry = libs[case.library]
        if "error" in entry:
            failed[name] = {"status": "error", "reason": entry["error"]}
            continue
        try:
            sides[name] = case.ours(entry["lib"], d)
            if name == "ours" and case.ordinary_stores_side:
                sides["ours_ordinary_stores"] = case_table.with_ordinary_stores(case.ours(entry["lib"], d))
        except Exception as e:  # noqa: BLE001
            failed[name] = {"status": "error", "reason": first_line(e, 300)}
    ocl = ctx["ocl"]
    if case.pocl is not None:
        if not ocl.ok:
            failed["pocl"] = {"status": "n/a", "reason": ocl.reason}
        else:
            try:
                sides.update(case.pocl(ocl, d))
            except Exception as e:  # noqa: BLE001
                failed["pocl"] = {"status": "error", "reason": first_line(e, 300)}
    if case.torch is not None:
        try:
            sides["torch"] = RemoteTorch(ctx["worker"], case.torch, size).side()
        except Exception as e:  # noqa: BLE001
            failed["torch"] = {"status": "error", "reason": first_line(e, 300)}
    # The limit also runs in the same rounds as the kernels: a memory loop
    # here, sgemm in the worker process.
    if case.limit == "sgemm":
        try:
            sides["limit"] = RemoteSgemm(ctx["worker"], size[0]).side()
            res["limit_work"] = case.work(size)
            res["limit_side"] = "sgemm"
        except Exception as e:  # noqa: BLE001
            failed["limit"] = {"status": "error", "reason": first_line(e, 300)}
    else:
        try:
            sides["limit"] = ctx["limits"].side(case.limit, ctx["streaming"][case.limit])
            res["limit_work"] = sides["limit"].work
            res["limit_side"] = case.limit + (" (streaming stores)" if ctx["streaming"][case.limit] else "")
        except Exception as e:  # noqa: BLE001
            failed["limit"] = {"status": "error", "reason": first_line(e, 300)}
    res["sides"] = {**bench(sides, args.warmup, args.repeat, args.budget, args.verbose), **failed}
    return res


def paired_ratio(ours: list[float], theirs: list[float]) -> float | None:
    """Median over the rounds of ours / theirs in the same round: both sides
    saw the same state of the machine (whose bandwidth drifts by a third
    over seconds on a shared VM), as the limit fractions are paired."""
    pairs = [a / b for a, b in zip(ours, theirs) if a > 0 and b > 0]
    return statistics.median(pairs) if pairs else None


def against_best(s: dict, ours: str, pocl: list[str]) -> tuple[str, float] | None:
    """PoCL's setting that does best against `ours`, round by round: the
    highest paired ratio over the settings. Choosing the setting with the
    lowest median and quoting the medians' quotient would favour whichever
    side the noise favours; the highest of several paired ratios errs
    against metal-kernel (settings that tie each get their own chance to
    look best), which is the side a comparison should err on."""
    ratios = {k: paired_ratio(s[ours]["times_s"], s[k]["times_s"]) for k in pocl}
    ratios = {k: v for k, v in ratios.items() if v is not None}
    if not ratios:
        return None
    best = max(ratios, key=ratios.get)
    return best, ratios[best]


def derive(res: dict, best_limits: dict):
    """Ratios against PoCL's best and PyTorch, the fraction of the limit,
    and the targets met or missed."""
    s = res["sides"]

    def med(name):
        return s[name]["median_s"] if s.get(name, {}).get("status") == "ok" else None

    ours = med("ours")
    pocl = [k for k, v in s.items() if k.startswith("pocl") and v.get("status") == "ok"]
    if pocl:
        res["pocl_best"] = min(pocl, key=lambda k: s[k]["median_s"])
    found = against_best(s, "ours", pocl) if ours is not None and pocl else None
    if found:
        # the setting PoCL does best with against ours, round by round
        res["pocl_best"], res["ratio_pocl"] = found
        res["ratio_pocl_by_setting"] = {k: paired_ratio(s["ours"]["times_s"], s[k]["times_s"]) for k in pocl}
        res["ratio_pocl_medians"] = ours / min(s[k]["median_s"] for k in pocl)
        if med("ours_same_isa") is not None:
            same = against_best(s, "ours_same_isa", pocl)
            if same:
                res["ratio_pocl_same_isa"] = same[1]
    if ours is not None and med("torch") is not None:
        res["ratio_torch"] = ours / med("torch")
    # Fraction of the limit: the kernel's fastest run against the fastest
    # run of its limit (either phase, or the runs interleaved with the
    # kernels). On a shared machine a median shows how much other work got
    # in the way as much as the kernel's own speed, and a limit with threads
    # that spin (OpenBLAS) suffers most; the fastest runs are the least
    # disturbed of both. The medians' quotient is kept as well.
    if res["limit_kind"] == "sgemm":
        limit = (best_limits.get("sgemm_gflops", {}).get(str(res["dims"][0])) or 0) * 1e9
    else:
        limit = (best_limits.get(f"{res['limit_kind']}_gbs") or 0) * 1e9
    side = s.get("limit", {})
    if side.get("status") == "ok" and res.get("limit_work"):
        limit = max(limit, res["limit_work"] / side["min_s"])
        if ours is not None:
            res["fraction_of_limit_medians"] = (res["work"] / ours) / (res["limit_work"] / side["median_s"])
            # Round by round: the kernel's rate over the rate its limit had in
            # the same round (the machine's bandwidth drifts by a third over
            # seconds on a shared VM; a round sees one state of it), median
            # over the rounds. The fastest runs' quotient above compares the
            # kernel with the best moment of many more limit runs.
            pairs = [(res["work"] / t) / (res["limit_work"] / lt)
                     for t, lt in zip(s["ours"]["times_s"], side["times_s"]) if t > 0 and lt > 0]
            if pairs:
                res["fraction_of_limit_paired"] = statistics.median(pairs)
    if ours is not None and limit:
        res["rate"] = res["work"] / ours
        res["best_rate"] = res["work"] / s["ours"]["min_s"]
        res["limit"] = limit
        res["fraction_of_limit"] = res["best_rate"] / limit
    checks = []
    for name, target in res["targets"].items():
        value = res.get("ratio_pocl") if name == "pocl" else res.get("fraction_of_limit_paired",
                                                                         res.get("fraction_of_limit"))
        met = None if value is None else (value <= target if name == "pocl" else value >= target)
        checks.append({"name": name, "target": target, "value": value, "met": met})
    res["target_checks"] = checks


def run(args) -> dict:
    t_start = time.perf_counter()
    chosen, do_compile, do_memory = select(args.cases)
    cls = machine.current_class()
    ocl = OpenCL() if any(c.pocl for c in chosen) else None
    if ocl is None:
        ocl = OpenCL.__new__(OpenCL)
        ocl.ok, ocl.reason, ocl.describe = False, "not needed", ""
    workers = pool_size()
    info = machine.describe(ocl.describe if ocl.ok else f"n/a ({ocl.reason})", workers)
    log(f"class {cls}, {workers} workers, load {info['loadavg_start']}")
    libs = compile_libraries()
    same_isa = None
    pocl_cpu = ocl.cpu_name() if ocl.ok else None
    if cls == "avx512" and pocl_cpu:
        # The runtime built for the CPU PoCL's kernels are built for.
        from metal_kernel.runtime.toolchain import find_toolchain

        same_isa = compile_libraries(f"-march={machine.zig_spelling(pocl_cpu, find_toolchain().is_zig)}")
    worker = lim.Worker(workers)
    bandwidth_n = max(c.full[0] if c.unit == "bytes" and len(c.full) == 1 else 0 for c in case_table.CASES)
    if args.quick:
        bandwidth_n = 1 << 20
    gemm_sizes = sorted({(c.quick if args.quick else c.full)[0] for c in chosen if c.limit == "sgemm"})
    limits = lim.Limits(machine.class_march(cls), workers, bandwidth_n)
    phases = []
    ctx = {"libs": libs, "libs_same_isa": same_isa, "ocl": ocl, "worker": worker, "limits": limits}
    results = []
    try:
        log("limits (before) ...")
        phases.append(lim.measure(limits, worker, gemm_sizes, args.repeat))
        # Per memory kernel, the store kind that was faster here.
        mem = phases[0]["memory"]
        ctx["streaming"] = {k: mem[f"{k}_streaming"]["median_s"] < mem[k]["median_s"] if f"{k}_streaming" in mem
                            else False for k in ("triad", "copy", "read")}
        for c in chosen:
            log(f"case {c.letter}) {c.key} ...")
            t = time.perf_counter()
            try:
                r = run_case(c, args, ctx)
            except Exception as e:  # noqa: BLE001
                if args.verbose:
                    traceback.print_exc()
                r = {"key": c.key, "letter": c.letter, "title": c.title, "sides": {},
                     "error": first_line(e, 300), "targets": c.targets, "limit_kind": c.limit}
            r["case_wall_s"] = time.perf_counter() - t
            log(f"  {report.brief(r)} ({r['case_wall_s']:.1f} s)")
            results.append(r)
        log("limits (after) ...")
        phases.append(lim.measure(limits, worker, gemm_sizes, args.repeat))
    finally:
        worker.close()
    best = lim.best(phases)
    for r in results:
        if "sides" in r and "work" in r:
            derive(r, best)
    comp = mem = None
    if do_compile:
        log("compile times ...")
        comp = children.compile_report(args)
    if do_memory:
        log("peak memory ...")
        mem = children.memory_report(args)
    info["loadavg_end"] = machine.loadavg()
    return {"schema": SCHEMA, "machine": info, "pocl_cpu": pocl_cpu,
            "settings": {"repeat": args.repeat, "warmup": args.warmup, "quick": args.quick, "budget_s": args.budget,
                         "bandwidth_elements": bandwidth_n, "pocl_local_sizes": [
                             x or "null" for x in case_table.POCL_LOCAL_SIZES]},
            "library_compile_s": {k: v["compile_s"] for k, v in libs.items()},
            "stores_proven": {k: v.get("stores_proven") for k, v in libs.items()},
            "limits": {"phases": phases, "best": best}, "cases": results, "compile": comp, "memory": mem,
            "total_s": time.perf_counter() - t_start}
