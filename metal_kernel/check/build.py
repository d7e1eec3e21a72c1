"""The checked build of a kernel library: the runtime's pipeline with the
instrumentation pass in the middle.

    rewritten C++ --clang -O2 -gline-tables-only, MK_WORKITEM, MK_CHECK--> IR
        --instrument.py (checks, sites; debug info stripped)-->
        --runtime/workitem.py (every kernel, one region at least)--> IR
        --clang -O2--> checked kernel library

Called by runtime/compiler.py for CompileOptions(checked=True), so checked
libraries share the on-disk cache (keyed apart by that option)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from ..runtime import compiler as C
from ..runtime import workitem
from . import instrument as I

# The first optimisation keeps accesses scalar (no masked or gathered vector
# accesses for the pass to handle); the last one vectorises what it can.
FIRST_STAGE_FLAGS = ["-gline-tables-only", "-fno-vectorize", "-fno-slp-vectorize", "-fno-unroll-loops"]


def build_checked(pp: str, fcs: dict, opts, tc, tmp: str, out_so: str, source: str) -> dict:
    """Builds the checked library of preprocessed source `pp` into `out_so`;
    returns the library's metadata (kernels, sites, what each kernel writes)."""
    cpp_path = os.path.join(tmp, "kernel.cpp")
    ll = os.path.join(tmp, "kernel.ll")
    flags = [f for f in C._pass2_flags(opts, "-DMK_WORKITEM=1", "-DMK_CHECK=1") if f != "-g0"] + FIRST_STAGE_FLAGS
    tg_known = True
    fe = C.frontend_of(opts)  # Metal or CUDA source: the same pipeline after the rewrite
    result = fe.rewrite(pp, fcs, True, True)
    Path(cpp_path).write_text(result.text)
    proc = C._compile_with_prelude(tc, flags, [cpp_path, "-S", "-emit-llvm", "-o", ll], tmp, header=fe.prelude)
    if proc.returncode != 0 and any(e.has_tg_size for e in result.kernels):
        retry = fe.rewrite(pp, fcs, False, True)
        Path(cpp_path).write_text(retry.text)
        proc2 = C._compile_with_prelude(tc, flags, [cpp_path, "-S", "-emit-llvm", "-o", ll], tmp,
                                        header=fe.prelude)
        if proc2.returncode == 0:
            result, proc, tg_known = retry, proc2, False
    if proc.returncode != 0:
        raise C._compile_error(proc.stderr, opts, source, tmp)
    syms = [k.symbol for k in result.kernels]
    text = Path(ll).read_text()
    # Helpers the optimiser kept out of line: inline them, so that their
    # accesses are checked with the kernel's thread and objects.
    for _ in range(2):
        helpers = I.functions_to_inline(text, syms)
        if not helpers:
            break
        Path(ll).write_text(C._force_inline(text, helpers))
        ll2 = os.path.join(tmp, "kernel.inl.ll")
        p2 = subprocess.run(tc.cxx(ll, opts.optimize, "-w", "-S", "-emit-llvm", "-o", ll2),
                            capture_output=True, text=True, cwd=tmp)
        if p2.returncode != 0:
            break
        text = Path(ll2).read_text()
    inst = I.instrument(text, syms)
    text = _declare(inst.text)
    try:
        wi = workitem.transform(text, syms, every_kernel=True)
    except Exception as e:  # noqa: BLE001 - a bug of the transform: the plain build, nothing checked
        return _unchecked_build(result, opts, tc, tmp, out_so, source, tg_known,
                                f"the work-item compiler failed ({type(e).__name__}: {e})")
    reasons = {}
    for k in result.kernels:
        k.mode = wi.modes.get(k.symbol, "fibers")
        k.streaming = False
        if k.mode != "workitem-loops":
            reasons[k.symbol] = wi.reasons.get(k.symbol, "the work-item compiler left it on fibers")
    wi_ll = os.path.join(tmp, "kernel.wi.ll")
    Path(wi_ll).write_text(wi.text)
    proc = C._compile_and_link(tc, [*C._codegen_flags(opts), wi_ll], os.path.join(tmp, "kernel.so"), tmp)
    if proc.returncode != 0:
        raise RuntimeError("metal-kernel could not build the checked library (a bug of the checker, "
                           "not of your kernel):\n" + proc.stderr[:4000])
    os.replace(os.path.join(tmp, "kernel.so"), out_so)
    kernels = {str(sym): info.to_json() for sym, info in inst.kernels.items()}
    for sym, why in reasons.items():
        kernels.setdefault(str(sym), {})["not_checked"] = why
    return {
        "kernels": C._entries_to_json(result.kernels),
        "tg_sizes_known": tg_known,
        "check": {
            "sites": [[s.file, s.line, s.column, s.function, s.what] for s in inst.sites],
            "kernels": kernels,
            "globals": inst.globals,
            "tg_names": _threadgroup_names(result.text),
        },
    }


def _unchecked_build(result, opts, tc, tmp: str, out_so: str, source: str, tg_known: bool, why: str) -> dict:
    """The library built the ordinary way (fibers), every kernel marked as
    not checked, so that a failure of the checked pipeline never keeps a
    program from running."""
    for k in result.kernels:
        k.mode = "fibers"
        k.streaming = False
    proc = C._pass2(tc, os.path.join(tmp, "kernel.cpp"), os.path.join(tmp, "kernel.so"), opts, result.kernels)
    if proc.returncode != 0:
        raise C._compile_error(proc.stderr, opts, source, tmp)
    os.replace(os.path.join(tmp, "kernel.so"), out_so)
    return {"kernels": C._entries_to_json(result.kernels), "tg_sizes_known": tg_known,
            "check": {"sites": [], "globals": [], "tg_names": {},
                      "kernels": {str(k.symbol): {"not_checked": why} for k in result.kernels}}}


def _threadgroup_names(cpp: str) -> dict[str, str]:
    """Threadgroup variables of kernel bodies by slot, from the rewriter's
    `auto& name = ::mk::tg_ref<T>(slot);` lines."""
    return {m.group(2): m.group(1) for m in re.finditer(r"auto& (\w+) = ::mk::tg_ref<(?:(?!;).)*?>\((\d+)u\);", cpp)}


def _declare(text: str) -> str:
    """Declarations the inserted code needs."""
    if "declare void @llvm.memset.p0.i64(" not in text and "@llvm.memset.p0.i64(" in text:
        text += "\ndeclare void @llvm.memset.p0.i64(ptr, i8, i64, i1)\n"
    return text
