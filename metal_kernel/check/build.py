"""The checked build of a kernel library: the runtime's pipeline with the
instrumentation pass in the middle.

    rewritten C++ --clang -O2 -gline-tables-only, MK_WORKITEM, MK_CHECK--> IR
        --instrument.py (checks, sites; debug info stripped)-->
        --runtime/workitem/ (every kernel, one region at least)--> IR
        --clang -O2--> checked kernel library

Called by runtime/compiler.py for CompileOptions(checked=True), so checked
libraries share the on-disk cache (keyed apart by that option). A small
file's checked build holds every kernel; a large file's kernels are built
checked on first use, a template's instantiations at a time (as its
ordinary build is), each unit with its own sites."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

from ..runtime import compiler as C
from ..runtime import pass2, workitem
from . import instrument as I

# The first optimisation keeps accesses scalar (no masked or gathered vector
# accesses for the pass to handle); the last one vectorises what it can.
FIRST_STAGE_FLAGS = ["-gline-tables-only", "-fno-vectorize", "-fno-slp-vectorize", "-fno-unroll-loops"]


def build_checked(ctx: pass2.Context, result, opts, source: str, out_base: str,
                  symbols: list[int] | None = None) -> dict:
    """Builds the checked library of a rewritten file (`result`; its
    kernels `symbols`, every one by default) into `out_base`.so; returns the
    library's metadata (kernels, sites, what each kernel writes)."""
    tmp = ctx.tmp
    wanted = [k for k in result.kernels if symbols is None or k.symbol in symbols]
    syms = [k.symbol for k in wanted]
    cpp = result.source(syms, workitem=True)
    defines = ["-DMK_WORKITEM=1", "-DMK_CHECK=1"]
    flags = [f for f in ctx.flags(*defines) if f != "-g0"] + FIRST_STAGE_FLAGS
    proc, ll = ctx.to_ir(cpp, "kernel.ll", *defines, flags=flags)
    if proc.returncode != 0:
        raise C._error(proc.stderr, opts, source, tmp, result)
    text = Path(ll).read_text()
    index = pass2.IRIndex(text)
    kernels_out = [dataclasses.replace(k, tg_bytes=index.tg_bytes(f"__mk_entry_{k.symbol}")) for k in wanted]
    # Helpers the optimiser kept out of line are inlined, so that their
    # accesses are checked with the kernel's thread and objects.
    text = _inline_helpers(ctx, ll, text, syms, "kernel.inl.ll")
    inst = I.instrument(text, syms)
    text = _declare(inst.text)
    try:
        wi = workitem.transform(text, syms, every_kernel=True)
    except Exception as e:  # noqa: BLE001 - a bug of the transform: the plain build, nothing checked
        return _unchecked_build(ctx, result, opts, source, out_base, syms,
                                f"the work-item compiler failed ({type(e).__name__}: {e})")
    reasons = {}
    for k in kernels_out:
        k.mode = wi.modes.get(k.symbol, "fibers")
        k.streaming = False
        k.object = os.path.basename(out_base) + ".so"
        if k.mode != "workitem-loops":
            reasons[k.symbol] = wi.reasons.get(k.symbol, "the work-item compiler left it on fibers")
    wi_ll = os.path.join(tmp, "kernel.wi.ll")
    Path(wi_ll).write_text(wi.text)
    proc = ctx.link_ir(wi_ll, out_base + ".so", optimise_again=True)
    if proc.returncode != 0:  # a bug of the checker's passes: run the kernels, say they were not checked
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), "").rsplit("error:", 1)[-1].strip()
        return _unchecked_build(ctx, result, opts, source, out_base, syms,
                                f"its checked build did not compile ({first or 'clang failed'}; a bug of the checker)")
    kernels = {str(sym): info.to_json() for sym, info in inst.kernels.items()}
    for sym, why in reasons.items():
        kernels.setdefault(str(sym), {})["not_checked"] = why
    return {
        "kernels": C._entries_to_json(kernels_out),
        "lazy": False,
        "main_object": os.path.basename(out_base) + ".so",  # one file (CUDA's globals live there)
        "check": {
            "sites": [[s.file, s.line, s.column, s.function, s.what] for s in inst.sites],
            "kernels": kernels,
            "globals": inst.globals,
            "tg_names": _threadgroup_names(cpp),
        },
    }


def kernel_facts(ctx: pass2.Context, result, symbol: int) -> dict:
    """What the runtime proves one kernel's stores in bounds with at a
    dispatch (runtime/store_guard.py): its per-thread function compiled as
    the checked build's first stage, described (instrument.describe), not
    instrumented. A kernel that cannot be described gets
    {"writes_unknown": True, "why": ...}: its stores are never proven."""
    cpp = result.source([symbol], workitem=True)
    defines = ["-DMK_WORKITEM=1", "-DMK_CHECK=1"]
    flags = ctx.flags(*defines) + FIRST_STAGE_FLAGS[1:]
    proc, ll = ctx.to_ir(cpp, f"facts{symbol}.ll", *defines, flags=flags)
    if proc.returncode != 0:
        return {"writes_unknown": True, "why": "its per-thread function did not compile"}
    text = _inline_helpers(ctx, ll, Path(ll).read_text(), [symbol], f"facts{symbol}.inl.ll")
    if I.functions_to_inline(text, [symbol]):
        return {"writes_unknown": True, "why": "it calls functions that stay out of line"}
    info = I.describe(text, [symbol]).get(symbol)
    if info is None or info.not_instrumented:
        return {"writes_unknown": True, "why": info.not_instrumented if info else "no per-thread function"}
    return info.to_json()


def _inline_helpers(ctx: pass2.Context, ll: str, text: str, syms: list[int], out_name: str) -> str:
    """`text` (the IR in file `ll`) with the helpers the optimiser kept out
    of line inlined and optimised again (two rounds), so that their accesses
    are seen with the kernel's thread and objects."""
    for _ in range(2):
        helpers = I.functions_to_inline(text, syms)
        if not helpers:
            break
        Path(ll).write_text(pass2._force_inline(text, helpers))
        out = os.path.join(ctx.tmp, out_name)
        proc = subprocess.run(ctx.tc.cxx(ll, ctx.optimize, "-w", "-S", "-emit-llvm", "-o", out),
                              capture_output=True, text=True, cwd=ctx.tmp)
        if proc.returncode != 0:
            break
        text = Path(out).read_text()
    return text


def _unchecked_build(ctx: pass2.Context, result, opts, source: str, out_base: str, syms: list[int],
                     why: str) -> dict:
    """The library built the ordinary way, as one file, every kernel marked
    as not checked, so that a failure of the checked pipeline never keeps a
    program from running."""
    try:
        kernels = pass2.build_single(ctx, result, syms, out_base)
    except pass2.BuildError as e:
        raise C._error(e.proc.stderr, opts, source, ctx.tmp, result) from None
    return {"kernels": C._entries_to_json(kernels), "lazy": False, "main_object": os.path.basename(out_base) + ".so",
            "check": {"sites": [], "globals": [], "tg_names": {},
                      "kernels": {str(k.symbol): {"not_checked": why} for k in kernels}}}


def _threadgroup_names(cpp: str) -> dict[str, str]:
    """Threadgroup variables of kernel bodies by slot, from the rewriter's
    `auto& name = ::mk::tg_ref<T>(slot);` lines."""
    return {m.group(2): m.group(1) for m in re.finditer(r"auto& (\w+) = ::mk::tg_ref<(?:(?!;).)*?>\((\d+)u\);", cpp)}


def _declare(text: str) -> str:
    """Declarations the inserted code needs."""
    if "declare void @llvm.memset.p0.i64(" not in text and "@llvm.memset.p0.i64(" in text:
        text += "\ndeclare void @llvm.memset.p0.i64(ptr, i8, i64, i1)\n"
    return text
