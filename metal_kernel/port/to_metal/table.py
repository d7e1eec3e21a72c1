"""The CUDA -> Metal mapping, as data: the one table the translator
(mapper.py), the statistics (stats.py) and docs/port-diagnostics.md
(docs.py) read.

- DIAGNOSTICS: every numbered diagnostic (MK1001 ...): severity, what it is,
  why Metal cannot express it, and the suggested fix.
- RULES: CUDA identifier -> Metal construct, with its category and the
  diagnostic each use raises. `metal` is the replacement: for calls, a
  pattern over the rewritten arguments ({0}, {1} ... ; {args} for all of
  them); for names and keywords, the text ("" removes it).

Severity: "error" (not translated: the kernel is left out of the port),
"warning" (translated, but the behaviour may differ: verify it), "note"
(translated by an emulation; the numbers may differ in the last bits).
"""

from __future__ import annotations

from dataclasses import dataclass

CATEGORIES = ("kernel", "device function", "memory", "synchronisation", "warp", "atomic", "math", "half",
              "cooperative groups", "launch", "type")
SEVERITIES = ("error", "warning", "note")


@dataclass(frozen=True)
class DiagnosticKind:
    code: str
    severity: str
    title: str
    why: str  # why Metal cannot express it as CUDA does
    suggestion: str


@dataclass(frozen=True)
class Rule:
    cuda: str
    metal: str
    category: str
    kind: str = "call"  # call | name | keyword | builtin | method | warp | atomic | flag | statement
    code: str = ""  # diagnostic raised at each use
    alt: str = ""  # warp functions with a width below 32: the emulating pattern
    helpers: tuple[str, ...] = ()  # Metal helper snippets (helpers.py) the replacement needs
    note: str = ""  # what differs, for the docs


_D = DiagnosticKind
DIAGNOSTICS: dict[str, DiagnosticKind] = {d.code: d for d in [
    _D("MK1001", "error", "double precision",
       "Apple GPUs have no 64-bit floating point: Metal rejects `double` at pipeline creation, and a silent "
       "demotion to float changes results.",
       "Where double is only computed inside the kernel (local accumulators, casts, math), port with "
       "`double=\"float\"` (`--double float`): it is computed in float, each site a MK1038 warning, and verify "
       "compares the results. A kernel parameter or a host-written global of a double type stays MK1001 even then "
       "(the host fills it with 8-byte doubles): make it float in the CUDA, or emulate double with float pairs "
       "(about 36-68x slower)."),
    _D("MK1002", "error", "inline assembly",
       "Metal has no inline assembly; PTX instructions have no Metal equivalent the translator could know.",
       "Rewrite the asm block with Metal functions (simd_* for lane ids and shuffles, atomic_* for atomics)."),
    _D("MK1003", "error", "texture or surface",
       "CUDA texture and surface objects have no counterpart in a compute kernel's buffer arguments; Metal "
       "textures are bound and sampled differently.",
       "Pass the data as a buffer, or port the kernel by hand to a `texture2d<T>` argument and a `sampler`."),
    _D("MK1004", "error", "grid-wide synchronisation",
       "Metal has no cooperative launch: threadgroups cannot wait for each other inside one dispatch "
       "(`grid.sync()`, `this_grid()`, `this_multi_grid()`).",
       "Split the kernel at the grid barrier into two dispatches; the end of a dispatch orders everything."),
    _D("MK1005", "error", "dynamic parallelism",
       "Metal kernels cannot launch kernels.",
       "Launch the child kernel from the host after the parent, or use indirect command buffers."),
    _D("MK1006", "warning", "printf in device code",
       "Metal has no device printf (os_log exists only on recent OS versions and is not captured by this "
       "runtime); the call is removed from the port.",
       "Write what you need to a debug buffer, or use os_log on macOS 15 / iOS 18 and later."),
    _D("MK1007", "error", "warp size other than 32",
       "Apple GPU simdgroups are 32 threads wide; code written for another warp width (64-wide wavefronts, "
       "shuffle widths above 32) computes something else.",
       "Write the code for a width of 32 (use warpSize, which the port maps to 32)."),
    _D("MK1008", "error", "more than 31 buffers",
       "A Metal compute function binds at most 31 buffers ([[buffer(0)]] to [[buffer(30)]]).",
       "Pack parameters into a struct passed by value, or put pointers in an argument buffer."),
    _D("MK1009", "error", "__constant__ above 64 KiB",
       "CUDA's constant bank holds 64 KiB; a larger __constant__ variable would not have compiled with nvcc "
       "either, and Metal's constant address space is meant for small uniform data.",
       "Make it a `device const` buffer parameter."),
    _D("MK1010", "error", "threadgroup memory above 32 KiB",
       "Every Apple GPU has 32 KiB of threadgroup memory per threadgroup; CUDA blocks on recent GPUs have "
       "up to 227 KiB of shared memory.",
       "Tile the kernel so that a block's shared arrays fit in 32 KiB, or keep the data in device memory."),
    _D("MK1011", "warning", "partial warp mask",
       "Metal's simd functions take no mask: they combine the lanes that are active at the call (same "
       "control flow). A CUDA mask naming other lanes (a subset, or lanes in another branch) has no Metal "
       "spelling, so the port's result equals CUDA's only when the mask equals the active lanes.",
       "Make the mask the active lanes (call the warp function in converged code with the full mask, or "
       "use __activemask()), and keep `verify` on inputs that take this path."),
    _D("MK1012", "error", "64-bit atomic",
       "Metal has no 64-bit atomic read-modify-write (only non-returning ulong min/max on Apple8+).",
       "Use 32-bit atomics (e.g. split a counter), or reduce per threadgroup and combine on the host."),
    _D("MK1013", "warning", "atomic emulated by compare-and-swap",
       "Metal has no atomic for this operation and type (float min/max, 16-bit or half2 types, wrapping "
       "increment/decrement); the port uses a compare-and-swap loop on the 32-bit word, which is atomic but "
       "slower under contention.",
       "Nothing to do if the loop is acceptable; otherwise restructure (e.g. reduce in threadgroup memory)."),
    _D("MK1014", "warning", "unknown identifier",
       "The translator does not know this CUDA name and left it as it is: Metal probably does not have it.",
       "Replace it with a Metal equivalent or a helper function, then run verify."),
    _D("MK1015", "warning", "assert in device code",
       "Metal kernels cannot abort; the assertion is removed from the port.",
       "Check the condition on the host, or write a flag to a debug buffer."),
    _D("MK1016", "error", "CUB primitive",
       "CUB's block and warp collectives are C++ templates over CUDA intrinsics; Metal has no CUB.",
       "Use simd_sum / simd_prefix_inclusive_sum within a simdgroup and threadgroup memory across them."),
    _D("MK1017", "error", "unsupported CUDA construct",
       "This CUDA feature has no Metal counterpart the translator can emit.",
       "Rewrite this part by hand (see the message for the construct)."),
    _D("MK1018", "warning", "directed rounding",
       "Metal converts and computes with round-to-nearest-even only; CUDA's _rz/_ru/_rd intrinsics round "
       "toward zero, up or down. The port rounds to nearest.",
       "Accept round-to-nearest, or emulate the direction with nextafter on the result."),
    _D("MK1019", "note", "double-precision literal computed in float",
       "CUDA evaluates an expression with an unsuffixed floating literal (`0.5`) in double; Metal has no "
       "double, so the port gives the literal an `f` suffix and computes in float.",
       "Nothing to do unless verify reports differences in the last bits; then reorder the computation."),
    _D("MK1020", "error", "pointer with two address spaces",
       "Metal pointers carry an address space (device, threadgroup, constant, thread); this variable points "
       "into two of them, which one Metal pointer cannot.",
       "Use one variable per address space (or copy the data into one space first)."),
    _D("MK1021", "error", "port does not compile",
       "The generated Metal does not compile: a construct the translator did not handle.",
       "Read the compiler's message at the line of kernels.metal it names, fix the CUDA or the Metal, verify."),
    _D("MK1022", "error", "template kernel without a named instantiation",
       "Metal kernels are instantiated explicitly with [[host_name]]; the CUDA file launches this template "
       "with deduced template arguments (or not at all), so the instantiation has no name.",
       "Launch it as `k<float><<<...>>>` or add `template __global__ void k<float>(...);`."),
    _D("MK1023", "note", "global variable as a buffer",
       "Metal has no program-scope device variables set by the host: each __constant__ or __device__ "
       "variable the host can write becomes a buffer parameter after the kernel's own, and the launcher "
       "binds it (set it with lib.set_constant).",
       "Nothing to do with the generated launcher; a native host must bind the buffer itself."),
    _D("MK1024", "error", "function passed as a template argument needs dynamic shared memory or globals",
       "Metal has no function pointers: a device function passed as a template argument becomes a functor "
       "type. Its call passes the thread indices (threadIdx & co., which Metal passes as parameters), and its "
       "static __shared__ variables (the functor declares them as a struct type, which the kernel allocates in "
       "threadgroup memory), but not dynamic shared memory or __device__ globals, nor the __shared__ variables "
       "of a function template or of one called through a template parameter of a device function: the kernel "
       "template does not know which function it calls, so it cannot bind them.",
       "Call the helper directly, or declare the shared memory in the kernel and pass it to the function."),
    _D("MK1025", "note", "emulated function",
       "Metal has no such function; the port calls a helper written with Metal functions (its accuracy "
       "is within a few units in the last place of CUDA's, not bit for bit).",
       "Nothing to do unless verify reports a difference beyond the tolerance."),
    _D("MK1026", "error", "dynamic threadgroup memory above 32 KiB",
       "The launch asks for more threadgroup memory (dynamic plus static) than an Apple GPU has (32 KiB).",
       "Launch with less shared memory (smaller blocks or tiles)."),
    _D("MK1027", "error", "verification failed",
       "The port computed something else than the original on the same inputs.",
       "Read the first differing element and its thread in the report, and the diagnostics of this kernel."),
    _D("MK1028", "warning", "timing or sleep removed",
       "Metal has no device clock or sleep; the call is removed (nanosleep) or reads 0 (clock).",
       "Time on the host with command-buffer timestamps."),
    _D("MK1029", "error", "warp operation on a 64-bit or aggregate type",
       "Metal's simd shuffles and reductions take 32-bit and smaller scalars and vectors only.",
       "Shuffle the two 32-bit halves (as_type<uint2>) and reassemble."),
    _D("MK1030", "note", "3-component vector in memory",
       "Metal's float3/int3 are 16 bytes (CUDA's are 12); in buffers and structs the port uses "
       "packed_float3 so that the layout matches CUDA's.",
       "Nothing to do; keep packed types in host structs too."),
    _D("MK1031", "error", "null buffer",
       "Metal cannot bind a null buffer, so a kernel that tests a pointer against nullptr sees a valid "
       "buffer in the port.",
       "Pass a (small) buffer, and a flag if the kernel must skip the work."),
    _D("MK1032", "error", "pointer-to-pointer parameter",
       "A Metal buffer argument holds data, not pointers into other buffers (that needs argument buffers).",
       "Pass the arrays as separate buffers, or use an argument buffer by hand."),
    _D("MK1033", "error", "threadgroup variable of a deduced template type",
       "Metal declares threadgroup memory in the kernel, so the port moves a helper's __shared__ array there; "
       "its type depends on template arguments the call deduces, which the kernel cannot name.",
       "Call the helper with explicit template arguments (`f<float>(...)`)."),
    _D("MK1034", "note", "barrier vote emulated",
       "__syncthreads_count/_and/_or are emulated with a threadgroup counter and three barriers; like "
       "__syncthreads they must be reached by every thread of the block.",
       "Nothing to do when the call is in converged code."),
    _D("MK1036", "warning", "no inputs to verify on",
       "The file's own program never launches this kernel (or it has no main), so there are no sizes or "
       "inputs of its own; random inputs at arbitrary sizes would index out of bounds in most real kernels.",
       "Verify it with inputs you choose: p.verify(name, *args, grid=, block=), or verify_all(sizes=...)."),
    _D("MK1037", "note", "C++17 construct rewritten",
       "Metal is based on C++14: `if constexpr` becomes a plain `if` on the same constant condition, so both "
       "branches must compile for every instantiation (the compiler still drops the dead one).",
       "Nothing to do when the port compiles; otherwise specialise the template instead."),
    _D("MK1035", "warning", "warp function in divergent code",
       "Under CUDA's independent thread scheduling a full-mask warp function waits for every lane, so lanes "
       "in the other branch of an `if` (or that took another number of loop iterations) exchange values "
       "with this one, and lanes that returned read as 0 on current GPUs. A Metal simd function combines only "
       "the lanes active at the call: the port's result differs whenever the lanes diverge here.",
       "Move the warp function out of the lane-dependent branch (compute both sides, then select), or keep "
       "`verify` on inputs that take every path."),
    _D("MK1038", "warning", "double computed in float",
       "Apple GPUs have no 64-bit floating point. With `double=\"float\"` (`--double float`) the port computes "
       "this `double` (a local variable, a cast, `double2`..`double4`, `make_double*`, math on them, a template "
       "argument used for locals) in float, so the results differ from CUDA's by float rounding: a sum of n terms "
       "carries about n times float's unit roundoff (2^-24) instead of double's (2^-53). Only what stays inside "
       "the kernel is demoted; a parameter or host-written global of a double type keeps MK1001.",
       "Verify the kernel (verify compares the port with the original computing in double); if it fails, the "
       "kernel needs double's precision: reorder the computation (pairwise or compensated sums) or emulate "
       "double with float pairs."),
    _D("MK1039", "warning", "__trap() ends the thread",
       "Metal kernels cannot abort. The port ends this thread (`return;`) where CUDA aborts the whole grid and "
       "the host gets an error, so the outputs differ only on inputs where the original traps; the other "
       "threads run on (a barrier after it must not be waited for by the threads that returned).",
       "Check the trap's condition on the host before the launch (or write a flag to a debug buffer), and verify "
       "on inputs that do not trap."),
    _D("MK1040", "note", "device memory handed between threadgroups",
       "The kernel orders device memory across thread blocks with __threadfence() and an atomic (a last-block "
       "reduction, a flag). CUDA needs the fence on the writer's side only. Metal (MSL 3.2) orders such memory "
       "only in buffers declared coherent(device), and only for a thread that fences after the atomic that saw "
       "the other group's release (its atomics are relaxed). The port declares coherent(device) the writable "
       "buffers the kernel reads after its first device atomic (from the start of a loop around it), where "
       "the handed-over data is, and fences after each of its device atomics (mk_acquire).",
       "Nothing to do for the port (it needs macOS 15 / MSL 3.2). The fence must come before the atomic in the "
       "original: without it neither side is ordered, and check() reports the race in both."),
]}

# --------------------------------------------------------------------- rules --
_DEMOTE_NOTE = ("the Metal only with `double=\"float\"` (`--double float`), each use a MK1038 warning; by default, "
                "and in a kernel parameter or a host-written global, MK1001")
_NO_FLOAT = "no float counterpart ({}): MK1001 with either `double=`"
K, DF, MEM, SYNC, WARP, ATOM, MATH, HALF, CG, LAUNCH, TYPE = CATEGORIES
_R = Rule


def _math(cuda: str, metal: str, note: str = "", helpers=(), code="") -> Rule:
    return _R(cuda, metal, MATH, helpers=tuple(helpers), note=note, code=code)


def _half(cuda: str, metal: str, note: str = "", code="") -> Rule:
    return _R(cuda, metal, HALF, note=note, code=code)


_PRECISE = ["exp", "exp2", "exp10", "log", "log2", "log10", "pow", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
            "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sinpi", "cospi"]
_FAST = {"__expf": "exp", "__exp10f": "exp10", "__logf": "log", "__log2f": "log2", "__log10f": "log10",
         "__sinf": "sin", "__cosf": "cos", "__tanf": "tan", "__powf": "pow", "__tanhf": "tanh"}
_SAME_MATH = {"fabsf": "fabs", "fminf": "fmin", "fmaxf": "fmax", "floorf": "floor", "ceilf": "ceil",
              "truncf": "trunc", "roundf": "round", "rintf": "rint", "nearbyintf": "rint", "fmodf": "fmod",
              "copysignf": "copysign", "fmaf": "fma", "fdimf": "fdim", "ldexpf": "ldexp", "frexpf": "frexp",
              "modff": "modf", "__saturatef": "saturate", "__fmaf_rn": "fma", "__fma_rn": "fma"}

RULES: list[Rule] = [
    # ----------------------------------------------------------- kernels --
    _R("__global__", "kernel", K, "keyword", note="`kernel void`, [[buffer(i)]] per parameter in CUDA order"),
    _R("__launch_bounds__", "[[max_total_threads_per_threadgroup({0})]]", K, "keyword",
       note="the minimum-blocks argument has no Metal counterpart and is dropped"),
    _R("threadIdx", "[[thread_position_in_threadgroup]]", K, "builtin", note="a uint3 parameter named threadIdx"),
    _R("blockIdx", "[[threadgroup_position_in_grid]]", K, "builtin", note="a uint3 parameter named blockIdx"),
    _R("blockDim", "[[threads_per_threadgroup]]", K, "builtin", note="a uint3 parameter named blockDim"),
    _R("gridDim", "[[threadgroups_per_grid]]", K, "builtin", note="a uint3 parameter named gridDim"),
    _R("warpSize", "32", WARP, "name", note="Apple simdgroups are 32 wide (threads_per_simdgroup)"),
    # ---------------------------------------------------- device functions --
    _R("__device__", "", DF, "keyword", note="helpers are plain functions; pointer parameters get the address "
                                                "space of their call sites (one overload per combination)"),
    _R("__host__", "", DF, "keyword"),
    _R("__forceinline__", "inline", DF, "keyword"),
    _R("__inline__", "inline", DF, "keyword"),
    _R("__noinline__", "", DF, "keyword"),
    _R("__restrict__", "", MEM, "keyword", note="Metal buffers need no restrict qualifier"),
    # ------------------------------------------------------------- memory --
    _R("__shared__", "threadgroup", MEM, "keyword",
       note="declared at the top of the kernel; a helper's __shared__ array moves to each kernel that calls "
            "it and is passed by reference"),
    _R("extern __shared__", "[[threadgroup(0)]]", MEM, "keyword",
       note="a `threadgroup T*` parameter; its length is the launch's shared_mem"),
    _R("__constant__", "constant", MEM, "keyword", code="MK1023",
       note="a `constant` buffer parameter the launcher binds (program-scope constant when the host never "
            "writes it)"),
    _R("__managed__", "device", MEM, "keyword", code="MK1023"),
    _R("__ldg", "*({0})", MEM), _R("__ldcs", "*({0})", MEM), _R("__ldcg", "*({0})", MEM),
    _R("__ldca", "*({0})", MEM), _R("__ldlu", "*({0})", MEM), _R("__ldcv", "*({0})", MEM),
    _R("__stcs", "(*({0}) = {1})", MEM), _R("__stcg", "(*({0}) = {1})", MEM), _R("__stwb", "(*({0}) = {1})", MEM),
    _R("__stwt", "(*({0}) = {1})", MEM),
    # {S0}, {S1}: the address spaces of the first and second arguments.
    _R("memcpy", "mk_memcpy(({S0} uchar*)({0}), ({S1} const uchar*)({1}), {2})", MEM, helpers=("memcpy",),
       note="a byte loop (Metal has no memcpy)"),
    _R("memset", "mk_memset(({S0} uchar*)({0}), {1}, {2})", MEM, helpers=("memcpy",),
       note="a byte loop (Metal has no memset)"),
    # ---------------------------------------------------- synchronisation --
    _R("__syncthreads", "threadgroup_barrier(mem_flags::mem_threadgroup)", SYNC,
       note="adds mem_flags::mem_device when device memory written before the barrier is read after it"),
    _R("__syncthreads_count", "mk_syncthreads_count({0}, {sync})", SYNC, helpers=("syncthreads_vote",),
       code="MK1034"),
    _R("__syncthreads_and", "mk_syncthreads_and({0}, {sync})", SYNC, helpers=("syncthreads_vote",),
       code="MK1034"),
    _R("__syncthreads_or", "mk_syncthreads_or({0}, {sync})", SYNC, helpers=("syncthreads_vote",), code="MK1034"),
    _R("__syncwarp", "simdgroup_barrier(mem_flags::mem_threadgroup)", SYNC, "warp",
       note="a mask other than the full one is diagnosed (MK1011)"),
    _R("__threadfence", "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device)",
       SYNC),
    _R("__threadfence_block", "atomic_thread_fence(mem_flags::mem_device | mem_flags::mem_threadgroup, "
                              "memory_order_seq_cst, thread_scope_threadgroup)", SYNC),
    _R("__threadfence_system", "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, "
                               "thread_scope_device)", SYNC, note="no system scope in Metal: device scope"),
    # ------------------------------------------------------------- warp --
    _R("__shfl_sync", "simd_shuffle({1}, ushort(({2}) & 31))", WARP, "warp", alt="mk_shfl({1}, {2}, {3}, mk_lane)",
       helpers=("shfl",)),
    _R("__shfl_up_sync", "simd_shuffle_up({1}, ushort(({2}) & 31))", WARP, "warp",
       alt="mk_shfl_up({1}, {2}, {3}, mk_lane)", helpers=("shfl",)),
    _R("__shfl_down_sync", "simd_shuffle_down({1}, ushort(({2}) & 31))", WARP, "warp",
       alt="mk_shfl_down({1}, {2}, {3}, mk_lane)", helpers=("shfl",)),
    _R("__shfl_xor_sync", "simd_shuffle_xor({1}, ushort(({2}) & 31))", WARP, "warp",
       alt="mk_shfl_xor({1}, {2}, {3}, mk_lane)", helpers=("shfl",)),
    _R("__ballot_sync", "uint(simd_vote::vote_t(simd_ballot(bool({1}))))", WARP, "warp"),
    _R("__any_sync", "int(simd_any(bool({1})))", WARP, "warp"),
    _R("__all_sync", "int(simd_all(bool({1})))", WARP, "warp"),
    _R("__activemask", "uint(simd_vote::vote_t(simd_active_threads_mask()))", WARP),
    _R("__reduce_add_sync", "simd_sum({1})", WARP, "warp"),
    _R("__reduce_min_sync", "simd_min({1})", WARP, "warp"),
    _R("__reduce_max_sync", "simd_max({1})", WARP, "warp"),
    _R("__reduce_and_sync", "simd_and({1})", WARP, "warp"),
    _R("__reduce_or_sync", "simd_or({1})", WARP, "warp"),
    _R("__reduce_xor_sync", "simd_xor({1})", WARP, "warp"),
    _R("__match_any_sync", "mk_match_any({1}, mk_lane)", WARP, "warp", helpers=("match",), code="MK1025",
       note="32 shuffles: every lane compares with every other"),
    _R("__match_all_sync", "mk_match_all({1}, {2}, mk_lane)", WARP, "warp", helpers=("match",), code="MK1025"),
    # ------------------------------------------------------------ atomics --
    # {T}: the element type, {S}: the address space of the first argument.
    _R("atomicAdd", "atomic_fetch_add_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)", ATOM, "atomic"),
    _R("atomicSub", "atomic_fetch_sub_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)", ATOM, "atomic"),
    _R("atomicExch", "atomic_exchange_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)", ATOM, "atomic"),
    _R("atomicMin", "atomic_fetch_min_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)", ATOM, "atomic"),
    _R("atomicMax", "atomic_fetch_max_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)", ATOM, "atomic"),
    _R("atomicAnd", "atomic_fetch_and_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)", ATOM, "atomic"),
    _R("atomicOr", "atomic_fetch_or_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)", ATOM, "atomic"),
    _R("atomicXor", "atomic_fetch_xor_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)", ATOM, "atomic"),
    *[_R(f"{op}{scope}", f"atomic_fetch_{op[6:].lower()}_explicit(({{S}} atomic<{{T}}>*)({{0}}), {{1}}, "
                             "memory_order_relaxed)", ATOM, "atomic", note="as without the scope suffix")
      for op in ("atomicAdd", "atomicSub", "atomicMin", "atomicMax", "atomicAnd", "atomicOr", "atomicXor")
      for scope in ("_block", "_system")],
    *[_R(f"atomicExch{scope}", "atomic_exchange_explicit(({S} atomic<{T}>*)({0}), {1}, memory_order_relaxed)",
         ATOM, "atomic") for scope in ("_block", "_system")],
    *[_R(f"atomicCAS{scope}", "mk_atomic_cas(({S} atomic<{T}>*)({0}), {1}, {2})", ATOM, "atomic",
         helpers=("atomic_cas",)) for scope in ("_block", "_system")],
    _R("atomicCAS", "mk_atomic_cas(({S} atomic<{T}>*)({0}), {1}, {2})", ATOM, "atomic", helpers=("atomic_cas",),
       note="a strong compare-and-swap from Metal's weak one (retried while it fails spuriously); 16-bit "
            "values by a compare-and-swap of their 32-bit word"),
    _R("atomicInc", "mk_atomic_inc(({S} atomic_uint*)({0}), {1})", ATOM, "atomic", helpers=("atomic_inc_dec",),
       code="MK1013"),
    _R("atomicDec", "mk_atomic_dec(({S} atomic_uint*)({0}), {1})", ATOM, "atomic", helpers=("atomic_inc_dec",),
       code="MK1013"),
    # -------------------------------------------------------------- half --
    _R("__half", "half", HALF, "name"), _R("__half2", "half2", HALF, "name"),
    _R("__nv_bfloat16", "bfloat", HALF, "name", note="Metal 3.1"), _R("nv_bfloat16", "bfloat", HALF, "name"),
    _R("__nv_bfloat162", "bfloat2", HALF, "name"), _R("nv_bfloat162", "bfloat2", HALF, "name"),
    _R("__half_raw", "ushort", HALF, "name"), _R("__nv_bfloat16_raw", "ushort", HALF, "name"),
    _half("__float2half", "half({0})"), _half("__float2half_rn", "half({0})"),
    *[_R(f"__float2half_{m}", f"mk_round_{m}<half>({{0}})", HALF, helpers=("round",),
         note="round to nearest, then one step toward the direction when that went the wrong way (exact)")
      for m in ("rz", "ru", "rd")],
    _half("__half2float", "float({0})"), _half("__low2float", "float(({0}).x)"), _half("__high2float", "float(({0}).y)"),
    _half("__float2bfloat16", "bfloat({0})"), _half("__float2bfloat16_rn", "bfloat({0})"),
    *[_R(f"__float2bfloat16_{m}", f"mk_round_{m}<bfloat>({{0}})", HALF, helpers=("round",))
      for m in ("rz", "ru", "rd")],
    _half("__bfloat162float", "float({0})"), _half("__low2bfloat16", "({0}).x"), _half("__high2bfloat16", "({0}).y"),
    _half("__bfloat162bfloat162", "bfloat2({0})"), _half("__lows2bfloat162", "bfloat2(({0}).x, ({1}).x)"),
    _half("__highs2bfloat162", "bfloat2(({0}).y, ({1}).y)"), _half("__low2half2", "half2(({0}).x)"),
    _half("__hadd", "({0} + {1})"), _half("__hsub", "({0} - {1})"), _half("__hmul", "({0} * {1})"),
    _half("__hdiv", "({0} / {1})"), _half("__hneg", "(-({0}))"), _R("__hfma", "mk_hfma({0}, {1}, {2})", HALF, helpers=("hmath",)),
    _R("__habs", "mk_habs({0})", HALF, helpers=("hmath",)), _R("__hmax", "mk_hmax({0}, {1})", HALF, helpers=("hmath",)),
    _R("__hmin", "mk_hmin({0}, {1})", HALF, helpers=("hmath",)),
    _half("__heq", "({0} == {1})"), _half("__hne", "({0} != {1})"), _half("__hlt", "({0} < {1})"),
    _half("__hle", "({0} <= {1})"), _half("__hgt", "({0} > {1})"), _half("__hge", "({0} >= {1})"),
    _half("__hisnan", "isnan({0})"), _half("__hisinf", "(isinf({0}) ? (({0}) < 0 ? -1 : 1) : 0)"),
    _half("__hadd2", "({0} + {1})"), _half("__hsub2", "({0} - {1})"), _half("__hmul2", "({0} * {1})"),
    _half("__h2div", "({0} / {1})"), _R("__hfma2", "mk_hfma({0}, {1}, {2})", HALF, helpers=("hmath",)), _half("__hneg2", "(-({0}))"),
    _R("__habs2", "mk_habs({0})", HALF, helpers=("hmath",)), _R("__hmax2", "mk_hmax({0}, {1})", HALF, helpers=("hmath",)),
    _R("__hmin2", "mk_hmin({0}, {1})", HALF, helpers=("hmath",)),
    _half("__half22float2", "float2({0})"), _half("__float22half2_rn", "half2({0})"),
    _half("__floats2half2_rn", "half2({0}, {1})"), _half("__float2half2_rn", "half2(half({0}))"),
    _half("__halves2half2", "half2({0}, {1})"), _half("__low2half", "({0}).x"), _half("__high2half", "({0}).y"),
    _half("__lows2half2", "half2(({0}).x, ({1}).x)"), _half("__highs2half2", "half2(({0}).y, ({1}).y)"),
    _half("__lowhigh2highlow", "({0}).yx"),
    _half("__high2half2", "half2(({0}).y)"),
    _half("__bfloat1622float2", "float2({0})"), _half("__float22bfloat162_rn", "bfloat2({0})"),
    _half("__floats2bfloat162_rn", "bfloat2({0}, {1})"), _half("__halves2bfloat162", "bfloat2({0}, {1})"),
    _half("__half_as_ushort", "as_type<ushort>(half({0}))"), _half("__ushort_as_half", "as_type<half>(ushort({0}))"),
    _half("__half_as_short", "as_type<short>(half({0}))"), _half("__short_as_half", "as_type<half>(short({0}))"),
    _half("__bfloat16_as_ushort", "as_type<ushort>(bfloat({0}))"), _half("__ushort_as_bfloat16", "as_type<bfloat>(ushort({0}))"),
    _half("hexp", "exp({0})"), _half("hlog", "log({0})"), _half("hsqrt", "sqrt({0})"), _half("hrsqrt", "rsqrt({0})"),
    _half("hrcp", "(1.0h / ({0}))"), _half("hsin", "sin({0})"), _half("hcos", "cos({0})"),
    _half("h2exp", "exp({0})"), _half("h2log", "log({0})"), _half("h2sqrt", "sqrt({0})"),
    _half("h2rsqrt", "rsqrt({0})"), _half("h2rcp", "(1.0h / ({0}))"),
    # -------------------------------------------------------------- math --
    *[_math(f + "f", f"precise::{f}({{args}})", "CUDA's correctly rounded or few-ulp version") for f in _PRECISE],
    *[_math(f, f"precise::{f}({{args}})", "the float overload") for f in _PRECISE],
    *[_math(c, f"fast::{m}({{args}})", "the fast approximate instruction") for c, m in _FAST.items()],
    *[_math(c, f"{m}({{args}})") for c, m in _SAME_MATH.items()],
    _math("__builtin_inff", "INFINITY", "C's INFINITY"), _math("__builtin_huge_valf", "INFINITY"),
    _math("__builtin_inf", "INFINITY"), _math("__builtin_huge_val", "INFINITY"),
    _math("__builtin_nanf", "NAN", "C's NAN"), _math("__builtin_nan", "NAN"),
    _math("__fdividef", "fast::divide({0}, {1})"), _math("fdividef", "fast::divide({0}, {1})"),
    _math("__frcp_rn", "(1.0f / ({0}))"), _math("__fsqrt_rn", "precise::sqrt({0})"),
    _math("__frsqrt_rn", "precise::rsqrt({0})"),
    _math("__fadd_rn", "({0} + {1})"), _math("__fsub_rn", "({0} - {1})"), _math("__fmul_rn", "({0} * {1})"),
    _math("__fdiv_rn", "({0} / {1})"),
    _math("erff", "mk_erf({0})", helpers=("erf",), code="MK1025"), _math("erf", "mk_erf({0})", helpers=("erf",),
                                                                       code="MK1025"),
    _math("erfcf", "mk_erfc({0})", helpers=("erf",), code="MK1025"),
    _math("normcdff", "(0.5f * mk_erfc(-({0}) * 0.70710678118654752f))", helpers=("erf",), code="MK1025"),
    _math("log1pf", "mk_log1p({0})", helpers=("log1p",), code="MK1025"),
    _math("log1p", "mk_log1p({0})", helpers=("log1p",), code="MK1025"),
    _math("expm1f", "mk_expm1({0})", helpers=("expm1",), code="MK1025"),
    _math("expm1", "mk_expm1({0})", helpers=("expm1",), code="MK1025"),
    _math("cbrtf", "mk_cbrt({0})", helpers=("cbrt",), code="MK1025"),
    _math("hypotf", "mk_hypot({0}, {1})", helpers=("hypot",), code="MK1025"),
    _math("sincosf", "mk_sincos({0}, {1}, {2})", helpers=("sincos",)),
    _math("sincos", "mk_sincos({0}, {1}, {2})", helpers=("sincos",)),
    _math("__sincosf", "mk_sincos_fast({0}, {1}, {2})", helpers=("sincos",)),
    _math("__int_as_float", "as_type<float>(int({0}))"), _math("__float_as_int", "as_type<int>(float({0}))"),
    _math("__uint_as_float", "as_type<float>(uint({0}))"), _math("__float_as_uint", "as_type<uint>(float({0}))"),
    *[_math(f"__float2{t}_{m}", f"mk_f2{t[0]}({f}({{0}}))", "saturating, NaN -> 0, as CUDA's cvt",
            helpers=("convert",))
      for t in ("int", "uint") for m, f in (("rn", "rint"), ("rz", "trunc"), ("rd", "floor"), ("ru", "ceil"))],
    _math("__float2ll_rn", "long(rint({0}))"), _math("__float2ll_rz", "long({0})"),
    _math("__int2float_rn", "float({0})"), _math("__uint2float_rn", "float({0})"),
    _math("__ll2float_rn", "float({0})"), _math("__ull2float_rn", "float({0})"),
    _math("__int2float_rz", "float({0})", code="MK1018"), _math("__uint2float_rz", "float({0})", code="MK1018"),
    _math("__popc", "popcount({0})"), _math("__popcll", "popcount({0})"), _math("__clz", "clz({0})"),
    _math("__clzll", "clz({0})"), _math("__brev", "reverse_bits({0})"), _math("__brevll", "reverse_bits({0})"),
    _math("__ffs", "mk_ffs({0})", helpers=("bits",)), _math("__ffsll", "mk_ffs({0})", helpers=("bits",)),
    _math("__mulhi", "mulhi({0}, {1})"), _math("__umulhi", "mulhi({0}, {1})"),
    _math("__mul64hi", "mulhi({0}, {1})"), _math("__umul64hi", "mulhi({0}, {1})"),
    _math("__mul24", "mul24({0}, {1})"), _math("__umul24", "mul24({0}, {1})"),
    _math("__rhadd", "rhadd({0}, {1})"), _math("__urhadd", "rhadd({0}, {1})"), _math("__uhadd", "hadd({0}, {1})"),
    _math("__sad", "(absdiff({0}, {1}) + {2})"), _math("__usad", "(absdiff({0}, {1}) + {2})"),
    _math("__byte_perm", "mk_byte_perm({0}, {1}, {2})", helpers=("bits",)),
    _math("__funnelshift_l", "mk_funnelshift_l({0}, {1}, {2})", helpers=("bits",)),
    _math("__funnelshift_r", "mk_funnelshift_r({0}, {1}, {2})", helpers=("bits",)),
    _math("__dp4a", "mk_dp4a({0}, {1}, {2})", helpers=("bits",)),
    # ------------------------------------------------ cooperative groups --
    _R("this_thread_block", "this_thread_block(threadIdx, blockIdx, blockDim)", CG, helpers=("cg",),
       note="a Metal implementation of cooperative_groups (helpers.py) over simd_* and quad_* functions"),
    _R("tiled_partition", "tiled_partition", CG, "name", helpers=("cg",),
       note="tiles of 32 are the simdgroup; smaller tiles are width-limited shuffles"),
    _R("thread_block", "thread_block", CG, "name", helpers=("cg",)),
    _R("thread_block_tile", "thread_block_tile", CG, "name", helpers=("cg",)),
    _R("reduce", "reduce", CG, "name", helpers=("cg",), note="simd_sum/min/max/and/or/xor for 32-wide tiles, "
                                                                "quad_* for 4-wide, shuffle trees otherwise"),
    _R("inclusive_scan", "inclusive_scan", CG, "name", helpers=("cg",)),
    _R("exclusive_scan", "exclusive_scan", CG, "name", helpers=("cg",)),
    # ------------------------------------------------------------- launch --
    _R("dim3", "uint3", LAUNCH, "name"),
    _R("std", "metal", TYPE, "name", note="std::numeric_limits, std::is_same, std::bool_constant ...: Metal's "
                                          "standard library has them in namespace metal"),
    # -------------------------------------------------------------- types --
    _R("long long", "long", TYPE, "name"), _R("unsigned long long", "ulong", TYPE, "name"),
    _R("long long int", "long", TYPE, "name"), _R("unsigned long long int", "ulong", TYPE, "name"),
    *[_R(f"make_{t}{n}", f"{t}{n}({{args}})", TYPE)
      for t in ("float", "int", "uint", "short", "ushort", "char", "uchar", "half") for n in (2, 3, 4)],
    _R("make_half2", "half2({args})", HALF),
    _R("longlong2", "long2", TYPE, "name"), _R("ulonglong2", "ulong2", TYPE, "name"),
    _R("longlong4", "long4", TYPE, "name"), _R("ulonglong4", "ulong4", TYPE, "name"),
    _R("float3", "packed_float3", TYPE, "name", code="MK1030",
       note="only in buffers and structs; local float3 stay float3"),
    _R("int3", "packed_int3", TYPE, "name", code="MK1030", note="only in buffers and structs"),
    _R("uint3", "packed_uint3", TYPE, "name", code="MK1030", note="only in buffers and structs"),
    # -------------------------------------------- flagged, not translated --
    # double: the Metal is what double="float" computes it with (doubles.py)
    _R("double", "float", MATH, "flag", code="MK1001", note=_DEMOTE_NOTE),
    *[_R(f"double{n}", f"float{n}", MATH, "flag", code="MK1001", note=_DEMOTE_NOTE) for n in (2, 3, 4)],
    *[_R(f"make_double{n}", f"float{n}({{args}})", MATH, "flag", code="MK1001", note=_DEMOTE_NOTE) for n in (2, 3, 4)],
    _R("__dadd_rn", "({0} + {1})", MATH, "flag", code="MK1001", note=_DEMOTE_NOTE),
    _R("__dmul_rn", "({0} * {1})", MATH, "flag", code="MK1001", note=_DEMOTE_NOTE),
    _R("__double2float_rn", "float({0})", MATH, "flag", code="MK1001", note=_DEMOTE_NOTE),
    _R("__int2double_rn", "float({0})", MATH, "flag", code="MK1001", note=_DEMOTE_NOTE),
    _R("double1", "", MATH, "flag", code="MK1001", note=_NO_FLOAT.format("Metal has no 1-component vector")),
    *[_R(f, "", MATH, "flag", code="MK1001", note=_NO_FLOAT.format("the bits of a double"))
      for f in ("__double_as_longlong", "__longlong_as_double", "__double2hiint", "__double2loint",
                "__hiloint2double")],
    _R("asm", "", K, "flag", code="MK1002"),
    _R("printf", "", K, "statement", code="MK1006"),
    _R("assert", "", K, "statement", code="MK1015"),
    _R("__mk_cuda_assert_fail", "", K, "statement", code="MK1015", note="assert(), as pass 1 expands it"),
    _R("__nanosleep", "", SYNC, "statement", code="MK1028"),
    _R("clock", "0", SYNC, "flag", code="MK1028"), _R("clock64", "0", SYNC, "flag", code="MK1028"),
    _R("this_grid", "", SYNC, "flag", code="MK1004"), _R("grid_group", "", SYNC, "flag", code="MK1004"),
    _R("this_multi_grid", "", SYNC, "flag", code="MK1004"),
    _R("coalesced_threads", "", CG, "flag", code="MK1017"),
    _R("cub", "", K, "flag", code="MK1016"),
    *[_R(f, "", WARP, "flag", code="MK1017", note="pre-Volta warp function without a mask")
      for f in ("__shfl", "__shfl_up", "__shfl_down", "__shfl_xor", "__ballot", "__any", "__all")],
    _R("__trap", "", K, "flag", code="MK1017",
       note="a `__trap();` statement in a kernel's own body is `return;` (MK1039); in a device function MK1017"),
    _R("__brkpt", "", K, "flag", code="MK1017"),
    _R("__prof_trigger", "", K, "flag", code="MK1017"),
]

# Texture, surface, cuRAND and fp8 names (prefix matches) are flagged in mapper.py with the
# same codes: (prefix, code, what).
FLAGGED_PREFIXES = [
    ("tex1D", "MK1003", "texture fetch"), ("tex2D", "MK1003", "texture fetch"),
    ("tex3D", "MK1003", "texture fetch"), ("texCubemap", "MK1003", "texture fetch"),
    ("tex1Dfetch", "MK1003", "texture fetch"), ("surf1D", "MK1003", "surface access"),
    ("surf2D", "MK1003", "surface access"), ("surf3D", "MK1003", "surface access"),
    ("cudaTextureObject_t", "MK1003", "texture object"), ("cudaSurfaceObject_t", "MK1003", "surface object"),
    ("curand", "MK1017", "the cuRAND device API"), ("__nv_fp8", "MK1017", "8-bit floating point"),
]

# Syntax Metal has no counterpart for, by tree-sitter node type: (code, what).
FLAGGED_NODES = {
    "gnu_asm_expression": ("MK1002", "inline PTX assembly (asm)"),
    "kernel_call_syntax": ("MK1005", "a kernel launch from device code (dynamic parallelism)"),
    "goto_statement": ("MK1017", "goto: Metal has no goto"),
    "new_expression": ("MK1017", "new: Metal has no dynamic allocation"),
    "delete_expression": ("MK1017", "delete: Metal has no dynamic allocation"),
    "base_class_clause": ("MK1017", "a derived class: Metal has no inheritance"),
    "virtual": ("MK1017", "a virtual function: Metal has none"),
    "throw_statement": ("MK1017", "throw: Metal has no exceptions"),
    "try_statement": ("MK1017", "try: Metal has no exceptions"),
}

# Names that mean the same in Metal: known (never "unknown"), not counted as conversions.
SAME_IN_METAL = frozenset("""
min max abs fabs fmin fmax floor ceil trunc round rint fmod copysign fma sqrt rsqrt exp exp2 log log2
clamp select isnan isinf isfinite signbit sign saturate mix step smoothstep popcount clz ctz
sizeof static_cast reinterpret_cast const_cast static_assert alignof decltype
float half int uint short ushort char uchar bool long ulong size_t ptrdiff_t
int8_t uint8_t int16_t uint16_t int32_t uint32_t int64_t uint64_t uintptr_t intptr_t
float2 float4 int2 int4 uint2 uint4 short2 short4 ushort2 ushort4 char2 char4 uchar2 uchar4 half2 half4
bfloat bfloat2 bfloat4 half3 int3 uint3 float3 operator
cooperative_groups cg sync thread_rank size num_threads meta_group_rank meta_group_size thread_index
group_index dim_threads group_dim shfl shfl_up shfl_down shfl_xor ballot any all plus less greater
bit_and bit_or bit_xor
""".split())

BY_NAME: dict[str, Rule] = {}
for _rule in RULES:
    BY_NAME.setdefault(_rule.cuda, _rule)

# Keywords are matched as tokens of the syntax tree, the rest as identifiers.
KEYWORDS = {r.cuda: r for r in RULES if r.kind == "keyword"}
BUILTINS = {r.cuda: r for r in RULES if r.kind == "builtin"}

# The index builtins and the lane id as Metal kernel parameters: (type, attribute).
BUILTIN_PARAMS = {
    "threadIdx": ("uint3", "thread_position_in_threadgroup"),
    "blockIdx": ("uint3", "threadgroup_position_in_grid"),
    "blockDim": ("uint3", "threads_per_threadgroup"),
    "gridDim": ("uint3", "threadgroups_per_grid"),
    "mk_lane": ("uint", "thread_index_in_simdgroup"),
}

FULL_MASKS = {"0xffffffff", "0xffffffffu", "0xFFFFFFFF", "0xFFFFFFFFU", "0xFFFFFFFFu", "0xffffffffU", "-1",
              "~0", "~0u", "~0U", "4294967295", "4294967295u", "4294967295U", "(unsigned)-1", "0xffffffffUL",
              "0xffffffffull", "0xFFFFFFFFULL", "0xFFFFFFFFull", "0xffffffffULL"}

# Names of Metal's standard library a kernel or helper of the port must not
# take (the port renames it: `atomic_int` -> `atomic_int_kernel`).
METAL_RESERVED = frozenset("""
atomic_int atomic_uint atomic_bool atomic_float atomic_ulong atomic half bfloat uint ushort uchar ulong
float2 float3 float4 half2 half3 half4 int2 int3 int4 uint2 uint3 uint4 vec packed_float3 simd_vote
min max abs clamp exp exp2 log log2 pow sqrt rsqrt sin cos tan fma fmin fmax floor ceil round trunc
select mix step sign dot cross length normalize distance popcount clz ctz reverse_bits mulhi
threadgroup_barrier simdgroup_barrier simd_sum simd_shuffle as_type kernel device constant thread threadgroup
sampler texture1d texture2d texture3d vertex fragment threadgroup_imageblock
transpose determinant reflect refract faceforward any all isnan isinf isfinite signbit saturate smoothstep
fract modf frexp ldexp atan2 sinh cosh tanh asin acos atan exp10 log10 powr rint fdim copysign nextafter
absdiff addsat subsat hadd rhadd madhi madsat mad24 mul24 rotate extract_bits insert_bits median3 min3 max3
simd_max simd_min simd_ballot simd_broadcast quad_sum atomic_fetch_add_explicit
""".split())

# Metal keywords a CUDA identifier may be (Packed128::constant in llm.c): the
# port appends an underscore wherever the identifier appears.
METAL_KEYWORDS = frozenset("""
device constant thread threadgroup threadgroup_imageblock kernel vertex fragment ray_data object_data
visible stitchable sampler texture1d texture2d texture3d patch
""".split())


def safe_name(name: str) -> str:
    return name + "_" if name in METAL_KEYWORDS else name


# Metal's limits the translator checks.
MAX_BUFFERS = 31
MAX_THREADGROUP_MEMORY = 32 * 1024
MAX_CONSTANT_BYTES = 64 * 1024


def rule(name: str) -> Rule | None:
    return BY_NAME.get(name)


def diagnostic(code: str) -> DiagnosticKind:
    return DIAGNOSTICS[code]
