"""Pass 2: the rewritten C++ of some kernels -> a loadable library.

A *unit* (some kernels of a file) is built in stages, each decided from the
compiled code rather than from the source text:

1. C++ -> optimised LLVM IR (plain build). For each kernel the IR tells
   whether its direct loop reaches a synchronising call (a barrier, a simd
   function), asks which lane runs (simdgroup matrix loads), and how much
   threadgroup memory its body declares (the constant sizes of its
   `__mk_tg_alloc` calls).
2. Kernels that never synchronise ("direct"): streaming-store variants
   (runtime/streaming.py) and code generation from that IR.
3. Kernels that synchronise: a second C++ -> IR build with per-thread
   functions, cut into work-item loops (runtime/workitem/), then code
   generation; on fibers when that is off or fails. Only these kernels
   ever go through the work-item pass. A unit that multiplies simdgroup
   matrices is also built with whole matrices (-DMK_SGU, beside the
   work-item build): kernels whose lanes cannot tell each other apart get
   a whole-simdgroup function linked next to their work-item loops
   (runtime/simdgroup_uniform.py).

`syntax_check` is the cheap whole-file check (no code generation) that a
file compiled kernel by kernel gets at compile_shader time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

from .diagnostics import only_zig_rename
from .rewriter import KernelEntry, RewriteResult
from .toolchain import Toolchain

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE / "include"
PRELUDE = INCLUDE_DIR / "mk" / "prelude.h"
BINDING = INCLUDE_DIR / "mk" / "binding.h"

COMMON_FLAGS = [
    "-std=c++17",
    "-fPIC",
    "-fno-exceptions",
    "-fno-rtti",
    "-fno-math-errno",
    "-fwrapv",  # GPU integer arithmetic wraps
    # A loop without side effects may not end, as in Metal: C++'s forward
    # progress rule would delete `for (;;) o[i] += 1;`-style endless loops,
    # which must run until timeout= stops them.
    "-fno-finite-loops",
    "-fno-omit-frame-pointer",  # the scheduler tells simd call paths apart by them
    # x86 traps on integer division by zero; report it (see mk/prelude.h)
    "-fsanitize=integer-divide-by-zero", "-fsanitize-minimal-runtime", "-fno-sanitize-recover=all",
    "-fdeclspec",  # vector swizzles are declspec properties
    "-Xclang", "-ffloat16-excess-precision=none",  # half rounds at every op
    "-Xclang", "-fbfloat16-excess-precision=none",
    "-g0",  # zig's driver emits debug info unless told not to
]
# The AVX-512 BF16 / AVX-NE-CONVERT float->bfloat instructions flush
# subnormals; mk/types.h converts with exact round-to-nearest-even instead.
NO_BF16_INSTRUCTIONS = ["-mno-avx512bf16", "-mno-avxneconvert"]

# Marker functions (mk/runtime.h) whose calls make a kernel synchronise, or
# ask which lane runs.
SYNC_MARKERS = ("__mk_sync_barrier", "__mk_sync_simd")
LANE_MARKER = "__mk_thread_index"
TG_ALLOC = "__mk_tg_alloc"


def extra_flags() -> list[str]:
    """$METAL_KERNEL_CXXFLAGS: extra pass-2 flags (e.g. -g), part of the cache key."""
    return shlex.split(os.environ.get("METAL_KERNEL_CXXFLAGS", ""))


def cxx_flags(tc: Toolchain, optimize: str, *defines: str, include_dirs: tuple[str, ...] = ()) -> list[str]:
    """Flags for compiling the rewritten C++ (the prelude and input follow)."""
    includes = ["-I", str(INCLUDE_DIR)]
    for d in include_dirs:
        includes += ["-I", d]
    return ["-x", "c++", *COMMON_FLAGS, *tc.march(), *NO_BF16_INSTRUCTIONS, optimize, "-w", "-ferror-limit=20",
            "-fno-caret-diagnostics", *extra_flags(), *defines, *includes]


def codegen_flags(tc: Toolchain, optimize: str) -> list[str]:
    """Flags for compiling IR (not C++) into the library's object."""
    return [optimize, "-fPIC", *tc.march(), *NO_BF16_INSTRUCTIONS, "-g0", "-w", *extra_flags()]


def target_vector_bytes(tc: Toolchain) -> int:
    """Bytes of the widest vector clang uses for a float loop on the kernels'
    target (this CPU, or $METAL_KERNEL_MARCH): 32 with AVX2, 64 with
    AVX-512 where the CPU prefers full-width vectors, 16 with SSE only."""
    key = (tuple(tc.march()), tuple(extra_flags()))
    if key not in _VECTOR_BYTES:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="mk-probe-") as tmp:
            src = os.path.join(tmp, "probe.cpp")
            Path(src).write_text("void f(float* __restrict a, const float* __restrict b, int n) "
                                 "{ for (int i = 0; i < n; ++i) a[i] = b[i] * 3.0f; }\n")
            out = os.path.join(tmp, "probe.ll")
            subprocess.run(tc.cxx("-x", "c++", "-O2", *tc.march(), *extra_flags(), "-g0", "-S", "-emit-llvm",
                                  src, "-o", out), capture_output=True, text=True, cwd=tmp)
            text = Path(out).read_text() if os.path.exists(out) else ""
        lanes = [int(n) for n in re.findall(r"<(\d+) x float>", text)]
        _VECTOR_BYTES[key] = 4 * max(lanes, default=1)
    return _VECTOR_BYTES[key]


_VECTOR_BYTES: dict[tuple, int] = {}


def _sha(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


# ---------------------------------------------------------------- prelude --
_PCH_TROUBLE = ("precompiled", "pch", "PCH")


def _prelude(tc: Toolchain, flags: list[str], cache: Path, version: str, header: Path,
             extras: tuple[Path, ...]) -> list[str]:
    """Arguments that give a compile with `flags` the front end's standard
    library (`header`, for Metal mk/prelude.h) and `extras`: a precompiled
    header (built once per flags, runtime version and compiler, in the
    cache), which saves ~100 ms per library — clang parses the prelude's C++
    in ~140 ms, loads the PCH in ~40 — or, when no PCH can be built, the
    header itself."""
    key = _sha("pch", tc.identity, version, flags, header)
    pch = cache / f"prelude-{key}.pch"
    after = [a for x in extras for a in ("-include", str(x))]
    if not pch.exists():
        tmp = pch.with_name(f"{pch.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            # No timestamps in the PCH: the key covers the headers' content,
            # and zig's cache hands back a PCH built earlier from the same
            # bytes, whose recorded mtimes a checkout or reinstall has since
            # changed (clang would reject it at every compile).
            proc = subprocess.run(tc.cxx(*flags, "-Xclang", "-fno-pch-timestamp", "-x", "c++-header", str(header),
                                         "-o", str(tmp)), capture_output=True, text=True)
            if proc.returncode != 0:
                return ["-include", str(header), *after]
            os.replace(tmp, pch)  # atomic: concurrent builders write the same bytes
        except OSError:
            return ["-include", str(header), *after]
        finally:
            tmp.unlink(missing_ok=True)
    return ["-include-pch", str(pch), *after]


@dataclasses.dataclass
class Context:
    """What every compile of one library shares."""

    tc: Toolchain
    optimize: str
    cache: Path  # where precompiled preludes go
    version: str  # runtime version (part of the PCH key)
    tmp: str  # a private working directory
    prelude: Path = PRELUDE  # the front end's (runtime/compiler.py's Frontend)
    include_dirs: tuple[str, ...] = ()
    extra_includes: tuple[Path, ...] = (BINDING,)
    # The front end's own code-generation rules and the options' defines
    # (math mode): part of every C++ compile of the library.
    language_flags: tuple[str, ...] = ()

    def compile_cxx(self, cpp: str, rest: list[str], *defines: str,
                    flags: list[str] | None = None) -> subprocess.CompletedProcess:
        """clang on C++ text with the prelude (`flags`: instead of the usual
        ones, e.g. the checked build's); a precompiled prelude that clang
        rejects (stale, foreign) costs a retry with the header, never an error."""
        # Named by the defines too: two builds of one text may run at once
        # (the work-item and the whole-simdgroup build).
        path = os.path.join(self.tmp, f"unit-{_sha(cpp, *defines)[:12]}.cpp")
        Path(path).write_text(cpp)
        flags = flags or self.flags(*defines)
        prelude = _prelude(self.tc, flags, self.cache, self.version, self.prelude, self.extra_includes)
        proc = self._run([*flags, *prelude, path, *rest])
        if proc.returncode != 0 and prelude[0] == "-include-pch" and any(w in proc.stderr for w in _PCH_TROUBLE):
            Path(prelude[1]).unlink(missing_ok=True)  # rebuilt by the next compile
            headers = [a for x in (self.prelude, *self.extra_includes) for a in ("-include", str(x))]
            proc = self._run([*flags, *headers, path, *rest])
        return proc

    def flags(self, *defines: str) -> list[str]:
        return [*cxx_flags(self.tc, self.optimize, *defines, include_dirs=self.include_dirs), *self.language_flags]

    def _run(self, args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(self.tc.cxx(*args), capture_output=True, text=True, cwd=self.tmp)

    def to_ir(self, cpp: str, out_name: str, *defines: str,
              flags: list[str] | None = None) -> tuple[subprocess.CompletedProcess, str]:
        ll = os.path.join(self.tmp, out_name)
        return self.compile_cxx(cpp, ["-S", "-emit-llvm", "-o", ll], *defines, flags=flags), ll

    def optimise_ir(self, ll: str, out_ll: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """IR -> IR through the same optimisation link_ir runs before code
        generation (so that a pass can run between the two)."""
        return self._run([*codegen_flags(self.tc, self.optimize), *extra, ll, "-S", "-emit-llvm", "-o", out_ll])

    def link_ir(self, ll: str, out: str, optimise_again: bool, extra: tuple[str, ...] = (),
                objects: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """IR -> shared library (with `objects` linked in; `extra`: more
        code-generation flags). IR that is optimised already gets code
        generation only (new blocks stay as written)."""
        flags = [*codegen_flags(self.tc, self.optimize), *extra]
        if not optimise_again:
            flags += ["-Xclang", "-disable-llvm-passes"]
        obj = out + ".o"
        proc = self._run([*flags, ll, "-c", "-o", obj])
        if proc.returncode != 0:
            return proc
        return subprocess.run(self.tc.link_shared(obj, out, *objects), capture_output=True, text=True, cwd=self.tmp)


def syntax_check(ctx: Context, cpp: str) -> subprocess.CompletedProcess | None:
    """None when `cpp` has no error (semantic analysis of every kernel and
    instantiation, no code generation), else clang's result."""
    proc = ctx.compile_cxx(cpp, ["-fsyntax-only"])
    if proc.returncode == 0 or (ctx.tc.is_zig and only_zig_rename(proc.stderr)):
        return None
    return proc


# ---------------------------------------------------------- IR analysis --
_DEFINE = re.compile(r'^define [^@]*@("[^"]+"|[-\w$.]+)\(')
_CALLEE = re.compile(r'@("[^"]+"|[-\w$.]+)\(')
_TG_CALL = re.compile(r"@__mk_tg_alloc\(i32 (?:noundef )?(\d+), i64 (?:noundef )?(\d+), i64 (?:noundef )?(\d+)\)")


class IRIndex:
    """Functions of a textual LLVM module and whom they call."""

    def __init__(self, text: str):
        self.bodies: dict[str, str] = {}
        name, start = None, 0
        lines = text.split("\n")
        for i, line in enumerate(lines):
            m = _DEFINE.match(line)
            if m:
                name, start = m.group(1).strip('"'), i
            elif line == "}" and name is not None:
                self.bodies[name] = "\n".join(lines[start:i + 1])
                name = None
        self.calls = {f: {c.strip('"') for c in _CALLEE.findall(body.split("\n", 1)[-1])}
                      for f, body in self.bodies.items()}

    def reachable(self, root: str) -> set[str]:
        """Functions `root` may call, transitively (itself included)."""
        seen, todo = set(), [root]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            todo += [c for c in self.calls.get(f, ()) if c not in seen]
        return seen

    def tg_bytes(self, root: str) -> int | None:
        """Threadgroup memory the kernel behind entry `root` declares: the
        sum of its constant-size allocations (None if one is not constant)."""
        slots: dict[int, int] = {}
        for f in self.reachable(root):
            body = self.bodies.get(f, "")
            if f"@{TG_ALLOC}(" not in body:
                continue
            found = _TG_CALL.findall(body)
            if len(found) != body.count(f"@{TG_ALLOC}("):
                return None
            for slot, size, _ in found:
                slots[int(slot)] = int(size)
        return sum(slots.values())


def classify(ir: IRIndex, kernels: list[KernelEntry]) -> list[int]:
    """Sets each kernel's mode as far as the plain build tells it ("direct",
    "direct-tracked", or "fibers" for now) and its threadgroup memory;
    returns the kernels that synchronise."""
    sync = []
    for k in kernels:
        reach = ir.reachable(f"__mk_fast_{k.symbol}")
        k.tg_bytes = ir.tg_bytes(f"__mk_entry_{k.symbol}")
        if any(m in reach for m in SYNC_MARKERS):
            k.mode = "fibers"
            sync.append(k.symbol)
        else:
            k.mode = "direct-tracked" if LANE_MARKER in reach else "direct"
    return sync


# ------------------------------------------------------------ streaming --
def streaming_setting() -> str:
    """$METAL_KERNEL_STREAMING_STORES as "auto" (the default: streaming
    stores for dispatches larger than the last-level cache), "always" or
    "never"."""
    value = os.environ.get("METAL_KERNEL_STREAMING_STORES", "auto").strip().lower()
    if value in ("1", "true", "yes", "on", "always"):
        return "always"
    if value in ("0", "false", "no", "off", "never"):
        return "never"
    return "auto"


def streaming_enabled() -> bool:
    """Whether libraries get streaming-store variants at all (part of the
    cache key; runtime/library.py decides per dispatch when to use them)."""
    return streaming_setting() != "never"


def _add_streaming(text: str, kernels: list[KernelEntry]) -> str:
    """`text` with __mk_stream_N variants for direct kernels without
    threadgroup memory; sets each kernel's `streaming`."""
    from .streaming import add_streaming_variants

    symbols = [k.symbol for k in kernels
               if k.mode == "direct" and not k.tg_bytes and not any(p.kind == "threadgroup" for p in k.params)]
    if not streaming_enabled() or not symbols:
        return text
    try:
        result = add_streaming_variants(text, symbols)
    except Exception:  # noqa: BLE001 - a bug of ours: no variants, same kernels
        return text
    for k in kernels:
        k.streaming = k.symbol in result.symbols
    return result.text


# ------------------------------------------------------ work-item loops --
def _switched_on(name: str) -> bool:
    """An on/off environment switch that defaults to on."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


def workitem_enabled() -> bool:
    """$METAL_KERNEL_WORKITEM_LOOPS=0 keeps every synchronising kernel on
    fibers (part of the cache key)."""
    return _switched_on("METAL_KERNEL_WORKITEM_LOOPS")


def loop_points_enabled() -> bool:
    """$METAL_KERNEL_LOOP_POINTS=0 leaves strided loops inside regions to
    run thread after thread (workitem/loop_points.py; part of the cache key)."""
    return _switched_on("METAL_KERNEL_LOOP_POINTS")


def interleave_enabled() -> bool:
    """$METAL_KERNEL_INTERLEAVE=0 leaves the loop functions' blocks in
    LLVM's order (workitem/interleave.py; part of the cache key)."""
    return _switched_on("METAL_KERNEL_INTERLEAVE")


def _workitem_debug() -> bool:
    return os.environ.get("METAL_KERNEL_WI_DEBUG", "") not in ("", "0")


def _debug(message: str):
    if _workitem_debug():
        print(f"metal-kernel: {message}", file=sys.stderr)


def _force_inline(ll: str, names: set[str]) -> str:
    """Marks the given function definitions alwaysinline (unless noinline)."""
    out = []
    for line in ll.split("\n"):
        if line.startswith("define "):
            m = re.search(r"@(\"[^\"]*\"|[-a-zA-Z$._0-9]+)\(", line)
            name = m.group(1).strip('"') if m else ""
            if name in names and " noinline" not in line:
                close = line.rindex(")")
                # after the parameter list: ... ) local_unnamed_addr #N {
                hash_at = line.find(" #", close)
                at = hash_at if hash_at >= 0 else line.rindex("{") - 1
                line = line[:at] + " alwaysinline" + line[at:]
        out.append(line)
    return "\n".join(out)


def _background(fn, *args, default=None):
    """Runs fn(*args) in a thread (its time is in subprocesses); the returned
    function waits for the result (`default` if fn raised)."""
    out = []

    def run():
        try:
            out.append(fn(*args))
        except Exception as e:  # noqa: BLE001 - the caller gets the default
            _debug(f"{fn.__name__} failed: {type(e).__name__}: {e}")
    t = threading.Thread(target=run, daemon=True)
    t.start()

    def wait():
        t.join()
        return out[0] if out else default
    return wait


def _whole_simdgroup_build(ctx: Context, cpp: str, syms: list[int]):
    """The unit's kernels that may run once per simdgroup, built with the
    whole-matrix simdgroup_matrix (runtime/simdgroup_uniform.py): their
    symbols and the object to link. Nothing when the unit multiplies no
    simdgroup matrices, or when anything on the way fails."""
    from . import simdgroup_fuse
    from . import simdgroup_uniform as sgu

    none = sgu.Built()
    if not sgu.uses_matrices(cpp):
        return none
    proc, ll = ctx.to_ir(cpp, "sgu.ll", "-DMK_WORKITEM=1", sgu.DEFINE_FLAG)
    if proc.returncode != 0:
        _debug(f"no whole-simdgroup build: {proc.stderr[:2000]}")
        return none
    try:
        sel = sgu.select(Path(ll).read_text(), syms)
    except Exception as e:  # noqa: BLE001 - a surprise in the IR: without it
        _debug(f"no whole-simdgroup build: {type(e).__name__}: {e}")
        return none
    for s, why in sorted(sel.reasons.items()):
        _debug(f"kernel {s} runs per lane: {why}")
    if not sel.symbols:
        return none
    try:
        fused = simdgroup_fuse.fuse(sel.text)
    except Exception as e:  # noqa: BLE001 - a surprise in the IR: without it
        _debug(f"no whole-simdgroup build: products not resolved: {type(e).__name__}: {e}")
        return none
    _debug(f"whole-simdgroup build: {fused.pairs} pairs of products share their left operand, "
           f"{fused.singles} alone")
    ll2 = os.path.join(ctx.tmp, "sgu.internal.ll")
    Path(ll2).write_text(fused.text)
    obj = os.path.join(ctx.tmp, "sgu.o")
    proc = ctx._run([*codegen_flags(ctx.tc, ctx.optimize), ll2, "-c", "-o", obj])
    if proc.returncode != 0:
        _debug(f"whole-simdgroup module rejected: {proc.stderr[:2000]}")
        return none
    return sgu.Built(sel.symbols, (obj,))


def _cut(ctx: Context, text: str, syms: list[int], uniform=frozenset()):
    """workitem.transform of IR `text` (helpers that synchronise inlined
    first when needed), or None when it fails (a bug, never the user's).
    `uniform`: kernels with a whole-simdgroup function to link."""
    from . import workitem

    # Rows of 2-D groups run together (emit_loop._jammed_rows), interleaved
    # twice where a vector is 8 floats (AVX2): a 16-wide row is then one
    # iteration of two independent halves.
    jam = {"row_jam": workitem.ROW_JAM, "jam_interleave": 2 if target_vector_bytes(ctx.tc) == 32 else 1,
           "loop_points": loop_points_enabled()}
    try:
        result = workitem.transform(text, syms, uniform=uniform, **jam)
    except Exception as e:  # noqa: BLE001
        _debug(f"work-item loops off for this library: {type(e).__name__}: {e}")
        return None
    if result.force_inline:
        # A helper that synchronises was not inlined into a per-thread
        # function: inline it and optimise once more.
        ll2 = os.path.join(ctx.tmp, "wi.inl.ll")
        Path(ll2).write_text(_force_inline(text, result.force_inline))
        ll3 = os.path.join(ctx.tmp, "wi.opt.ll")
        p2 = ctx._run([ll2, ctx.optimize, "-w", "-S", "-emit-llvm", "-o", ll3])
        if p2.returncode == 0:
            try:
                again = workitem.transform(Path(ll3).read_text(), syms, uniform=uniform, **jam)
            except Exception:  # noqa: BLE001 - keep the first result
                again = result
            if sum(m == "workitem-loops" for m in again.modes.values()) > \
                    sum(m == "workitem-loops" for m in result.modes.values()):
                result = again
    return result


def _interleaved(ctx: Context, wi_ll: str) -> tuple[str, bool]:
    """The transformed IR optimised, then its loop functions' chains
    interleaved (workitem/interleave.py): (IR to link, whether it still
    needs optimising). On any failure the transformed IR as it was."""
    from . import workitem
    from .workitem.interleave import interleave_module

    opt_ll = os.path.join(ctx.tmp, "wi.sched.ll")
    proc = ctx.optimise_ir(wi_ll, opt_ll, extra=workitem.CODEGEN_FLAGS)
    if proc.returncode != 0:
        _debug("optimising the transformed IR failed:\n" + proc.stderr[:4000])
        return wi_ll, True
    text, changed = interleave_module(Path(opt_ll).read_text())
    _debug(f"interleaved the chains of {changed} block(s)")
    if changed:
        Path(opt_ll).write_text(text)
    return opt_ll, False


def _link_cut(ctx: Context, result, kernels: list[KernelEntry], out: str, uniform=None) -> bool:
    """Links the transformed IR (with the whole-simdgroup build `uniform`,
    a simdgroup_uniform.Built, when there is one); False when clang rejects
    it (a transform bug). Sets each kernel's `whole_simdgroup`."""
    from . import workitem

    symbols, objects = (uniform.symbols, uniform.objects) if uniform is not None else (set(), ())
    for k in kernels:
        k.whole_simdgroup = k.mode == "workitem-loops" and k.symbol in symbols
    wi_ll = os.path.join(ctx.tmp, "wi.out.ll")
    Path(wi_ll).write_text(_add_streaming(result.text, kernels))
    # Nothing cut (every kernel on fibers or direct): the IR is optimised already.
    again = any(k.mode == "workitem-loops" for k in kernels)
    # Only jammed rows (emit_loop._jammed_rows, kernels that read y) have the
    # chains the pass interleaves: elsewhere it would cost the separate
    # optimisation step (~0.2 s) for nothing.
    jammed = re.search(r"^L\d+\.jam:", result.text, re.MULTILINE) is not None
    ll, again = _interleaved(ctx, wi_ll) if again and jammed and interleave_enabled() else (wi_ll, again)
    proc = ctx.link_ir(ll, out, optimise_again=again, extra=workitem.CODEGEN_FLAGS, objects=objects)
    if proc.returncode != 0 and ll != wi_ll:
        _debug("interleaved IR rejected, linked as optimised:\n" + proc.stderr[:4000])
        ll, again = wi_ll, True
        proc = ctx.link_ir(ll, out, optimise_again=again, extra=workitem.CODEGEN_FLAGS, objects=objects)
    if proc.returncode != 0 and objects:
        # A bug of the whole-simdgroup build, never the user's: link without
        # it (its functions are weak references, null when absent).
        _debug("whole-simdgroup object not linked:\n" + proc.stderr[:4000])
        for k in kernels:
            k.whole_simdgroup = False
        proc = ctx.link_ir(ll, out, optimise_again=again, extra=workitem.CODEGEN_FLAGS)
    if proc.returncode != 0:
        _debug("clang rejected the transformed IR:\n" + proc.stderr[:4000])
        return False
    for k in kernels:
        why = result.reasons.get(k.symbol)
        _debug(f"kernel {k.host_name}: {k.mode}" + (f" ({why})" if why else ""))
    return True


def _workitem_library(ctx: Context, rw: RewriteResult, kernels: list[KernelEntry], out: str) -> bool:
    """The kernels (which synchronise) built with work-item loops into
    `out`; sets their modes. False when the transform or its compile failed
    (a bug, never the user's): they then stay on fibers."""
    from .simdgroup_uniform import Built

    syms = [k.symbol for k in kernels]
    cpp = rw.source(syms, workitem=True)
    # The whole-simdgroup build is independent of this one: side by side.
    uniform_job = _background(_whole_simdgroup_build, ctx, cpp, syms, default=Built())
    proc, ll = ctx.to_ir(cpp, "wi.ll", "-DMK_WORKITEM=1")
    uniform = uniform_job()
    if proc.returncode != 0:
        _debug(f"work-item build failed:\n{proc.stderr[:4000]}")
        return False
    result = _cut(ctx, Path(ll).read_text(), syms, uniform.symbols)
    if result is None:
        return False
    modes = {k.symbol: k.mode for k in kernels}
    for k in kernels:
        k.mode = result.modes.get(k.symbol, "fibers")
        if k.mode == "direct":  # the plain build saw a synchronising call: keep it tracked
            k.mode = "fibers"
    if not _link_cut(ctx, result, kernels, out, uniform):
        for k in kernels:
            k.mode = modes[k.symbol]
            k.whole_simdgroup = False
        return False
    return True


# ------------------------------------------------------------------ units --
class BuildError(Exception):
    """clang rejected the user's code; `proc` holds its output."""

    def __init__(self, proc: subprocess.CompletedProcess):
        super().__init__(proc.stderr)
        self.proc = proc


def build_unit(ctx: Context, rw: RewriteResult, symbols: list[int], out_base: str) -> list[KernelEntry]:
    """Builds the kernels `symbols` into `out_base`.so (and `out_base`.wi.so
    for those with work-item loops). Returns their entries with mode,
    streaming, threadgroup size and `object` (the file holding them) set.
    Raises BuildError when clang rejects the code."""
    kernels = [dataclasses.replace(rw.kernels[s]) for s in symbols]
    proc, ll = ctx.to_ir(rw.source(symbols), "plain.ll")
    if proc.returncode != 0:
        raise BuildError(proc)
    text = Path(ll).read_text()
    sync = classify(IRIndex(text), kernels)
    wi = [k for k in kernels if k.symbol in sync] if workitem_enabled() and ctx.optimize != "-O0" else []
    if wi and _workitem_library(ctx, rw, wi, out_base + ".wi.so"):
        for k in wi:
            k.object = os.path.basename(out_base) + ".wi.so"
    else:
        wi = []
    plain = [k for k in kernels if k.symbol not in {w.symbol for w in wi}]
    if plain:
        out_ll = os.path.join(ctx.tmp, "plain.out.ll")
        Path(out_ll).write_text(_add_streaming(text, plain))
        proc = ctx.link_ir(out_ll, out_base + ".so", optimise_again=False)
        if proc.returncode != 0 and any(k.streaming for k in plain):
            # A bug of streaming.py, never the user's: build without the variants.
            for k in plain:
                k.streaming = False
            proc = ctx.link_ir(ll, out_base + ".so", optimise_again=False)
        if proc.returncode != 0:
            raise RuntimeError("metal-kernel could not generate code for compiled kernels:\n" + proc.stderr[:4000])
        for k in plain:
            k.object = os.path.basename(out_base) + ".so"
    return kernels


def build_single(ctx: Context, rw, symbols: list[int], out_base: str) -> list[KernelEntry]:
    """Builds the kernels `symbols` into the one library `out_base`.so, for
    front ends whose program-scope variables must exist once (CUDA's
    __constant__ / __device__): the work-item build of every kernel, the
    transform deciding per kernel from the IR whether it synchronises (the
    others stay direct, with streaming variants). Raises BuildError when
    clang rejects the code."""
    kernels = [dataclasses.replace(rw.kernels[s]) for s in symbols]
    name = os.path.basename(out_base) + ".so"
    for k in kernels:
        k.object = name
    if workitem_enabled() and ctx.optimize != "-O0":
        proc, ll = ctx.to_ir(rw.source(symbols, workitem=True), "wi.ll", "-DMK_WORKITEM=1")
        if proc.returncode != 0:
            raise BuildError(proc)
        text = Path(ll).read_text()
        index = IRIndex(text)
        for k in kernels:
            k.tg_bytes = index.tg_bytes(f"__mk_entry_{k.symbol}")
        result = _cut(ctx, text, symbols)
        if result is not None:
            for k in kernels:
                k.mode = result.modes.get(k.symbol, "fibers")
            if _link_cut(ctx, result, kernels, out_base + ".so"):
                return kernels
    # Without work-item loops (off, or the transform failed): the plain
    # build, each kernel direct or on fibers as its IR says.
    proc, ll = ctx.to_ir(rw.source(symbols), "plain.ll")
    if proc.returncode != 0:
        raise BuildError(proc)
    text = Path(ll).read_text()
    classify(IRIndex(text), kernels)
    for k in kernels:
        k.streaming = False
    proc = ctx.link_ir(ll, out_base + ".so", optimise_again=False)
    if proc.returncode != 0:
        raise RuntimeError("metal-kernel could not generate code for compiled kernels:\n" + proc.stderr[:4000])
    return kernels
