"""Which MSL features the runtime supports, and why not where it does not.

One table, used three times: the rewriter rejects the words and parameter
attributes of the "rejected" rows with the reason given, and the feature
tables of README.md and docs/compatibility.md are generated from it:

    python -m metal_kernel.runtime.features --update README.md docs/compatibility.md

(tests/runtime/test_features_doc.py fails when they are stale). A supported
row names the tests that show it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

# status: "yes", "partial", "rejected" (a clear compile error naming the
# line, as Apple's compiler gives for what Metal itself rejects), "no"
# (not implemented: compiling fails or the construct is refused).


@dataclass(frozen=True)
class Feature:
    name: str
    status: str
    notes: str  # how it behaves, or why not
    shown_by: str = ""  # tests
    words: tuple[str, ...] = ()  # identifiers the rewriter rejects with `notes`
    attributes: tuple[str, ...] = ()  # parameter attributes it rejects with `notes`


_T = "tests/runtime/"

FEATURES: tuple[Feature, ...] = (
    Feature("`device` / `constant` / `threadgroup` / `thread` address spaces, pointer casts", "yes",
            "one CPU address space; `constant` is `const`, so `constant`/`device` overloads stay distinct; "
            "vectors at any 4-byte-aligned address, as Apple GPUs allow",
            _T + "test_language.py, test_vector_alignment.py"),
    Feature("members and functions repeated per address space (`complex_t() thread` / `threadgroup`, "
            "`f(device T*)` / `f(constant T*)`, `X<device T*>` specialisations)", "partial",
            "copies that are the same code are kept once (address_spaces.py); copies with different bodies "
            "are a clear compile error naming both lines (one CPU address space)",
            _T + "test_address_spaces.py"),
    Feature("`threadgroup_imageblock` address space", "rejected",
            "imageblocks are tile memory of Apple GPUs; not implemented", _T + "test_fidelity_rewriter.py",
            words=("threadgroup_imageblock",)),
    Feature("`ray_data`, `object_data` address spaces", "rejected",
            "ray-tracing and mesh-shader payloads do not exist in compute kernels",
            _T + "test_fidelity_rewriter.py", words=("ray_data", "object_data")),
    Feature("buffer binding by `[[buffer(n)]]` or by parameter order; array parameters", "yes",
            "as Metal binds them", _T + "test_calling_convention.py, test_fidelity_rewriter.py"),
    Feature("`constant T&` scalars and structs with 64-bit fields", "yes",
            "size-checked against the buffer given; a Python number whose bytes the declared type would "
            "misread (an int for a `float`, a float for a `half` or an integer) is refused with the fix",
            _T + "test_calling_convention.py, test_fidelity_binding.py"),
    Feature("kernels that return a value, pointer parameters without an address space, scalar "
            "parameters without an attribute", "rejected", "Apple's compiler rejects them too",
            _T + "test_fidelity_rewriter.py"),
    Feature("every thread / threadgroup / simdgroup / quadgroup attribute, `uint`/`ushort`/vector forms",
            "yes", "partial threadgroups report their actual size in `threads_per_threadgroup`",
            _T + "test_execution_model.py"),
    Feature("`threadgroup` arrays in kernel bodies (any declarator: `vec<T, 2> a[n]`, sizes from "
            "kernel-local constants), `[[threadgroup(n)]]` parameters", "yes",
            "32 KiB per threadgroup in all, as on Apple GPUs; more is refused",
            _T + "test_execution_model.py, test_fidelity_rewriter.py, test_fidelity_binding.py"),
    Feature("`threadgroup` arrays with an initializer (`threadgroup float b[32] = {0};`)", "partial",
            "accepted as Metal accepts it; the initializer is not applied (threadgroup memory starts "
            "uninitialised, as on the GPU): write it before a barrier", _T + "test_fidelity_rewriter.py"),
    Feature("`threadgroup_barrier` (all `mem_flags`), `simdgroup_barrier`", "yes", "",
            _T + "test_execution_model.py"),
    Feature("scalar and vector types, swizzles (rvalue and lvalue), mixed constructors, subscripts", "yes",
            "no 8/16-wide vectors", _T + "test_language.py"),
    Feature("`half` (IEEE binary16, rounded per operation), `bfloat` (round-to-nearest-even)", "yes",
            "`bfloat` converts implicitly to float, bool and integer types other than `int` (`int n = b` "
            "needs `int(b)`), integers to `bfloat`, float and half only explicitly, as in Metal "
            "(`c ? b : 0` is a bfloat, `c ? b : 1.0f` a float)",
            _T + "test_language.py, test_stdlib_surface.py"),
    Feature("`packed_*`, `vec<T,N>`, `metal::array`, matrix types (`float4x4`, `matrix<T,C,R>`)", "yes", "",
            _T + "test_language.py"),
    Feature("math library, `precise::`", "yes",
            "within 2 ulp of numpy (half/bfloat computed in float, rounded once); exactly Apple's overload "
            "set (no bfloat overloads, no scalar `dot`; `precise::`/`fast::` hold float functions only), "
            "so libraries' own extensions of `namespace metal` do not collide",
            _T + "test_language.py, test_stdlib_surface.py"),
    Feature("`fast::`", "yes",
            "same as precise by default (more accurate than Metal requires); `math=\"bounds\"` / "
            "`METAL_KERNEL_MATH=bounds` draws math results within the specification's accuracy tables "
            "(docs/math-bounds.md)", _T + "test_language.py, test_math_bounds.py"),
    Feature("`as_type`, `select`, type traits, `numeric_limits` (and `_numeric_limits_impl`), "
            "`uniform<T>`, `os_log` (to stderr), `coherent(...)`, Apple's `__metal_*` builtins", "yes", "",
            _T + "test_language.py, test_stdlib_surface.py"),
    Feature("integer functions (`absdiff`, `madsat`, `addsat`, `clz`, ...)", "yes",
            "exact at the edges of all 8 integer types (`absdiff` returns the unsigned type)",
            _T + "test_integer_functions.py"),
    Feature("C++17: templates, `constexpr`, `if constexpr`, `decltype`, `static_assert`", "yes",
            "clang compiles them", _T + "test_language.py"),
    Feature("`[[host_name]]` instantiation with or without template arguments, `typedef decltype(...)` "
            "and `decltype` forms, several kernel templates of one name, `[[kernel]]`", "yes", "",
            _T + "test_language.py, test_fidelity_rewriter.py"),
    Feature("kernels named like library functions (`max`, `exp`) or one-letter names", "yes",
            "the generated entry points call kernels by qualified name", _T + "test_fidelity_rewriter.py"),
    Feature("function constants (`static constant constexpr const` spellings too), "
            "`is_function_constant_defined`", "yes", "values from compile_shader(function_constants=...)",
            _T + "test_execution_model.py, test_fidelity_rewriter.py"),
    Feature("`#pragma unroll(N)` with N a macro", "yes", "the macro is expanded before the C++ pass",
            _T + "test_fidelity_rewriter.py"),
    Feature("`__METAL__`, `__METAL_VERSION__`, `#include <c10/metal/...>`", "yes",
            "every header of the installed torch compiles unmodified", _T + "test_c10_headers.py"),
    Feature("`simd_*` and `quad_*` functions over the active lanes", "yes",
            "divergent branches, loops, partial simdgroups", _T + "test_simd.py"),
    Feature("`simdgroup_matrix<T,8,8>` (float, half, bfloat): load/store/transpose, multiply(-accumulate), "
            "`thread_elements()`", "yes", "Apple's lane layout", _T + "test_simdgroup_matrix.py"),
    Feature("atomics (`atomic_int/uint/float/bool/ulong`), every `atomic_*_explicit`, 64-bit min/max", "yes",
            "on device and threadgroup memory, correct across cores", _T + "test_atomics.py"),
    Feature("`double`", "rejected", "Apple GPUs have no 64-bit floating point; Metal rejects it too",
            _T + "test_calling_convention.py"),
    Feature("integer division by zero, wild pointers, stack overflow", "yes",
            "reported as `KernelError`; the process survives", _T + "test_faults.py"),
    Feature("endless loops", "yes",
            "never deleted by the optimiser (C++'s forward-progress rule is off); stopped by `timeout=` / "
            "`METAL_KERNEL_TIMEOUT` (`KernelTimeout`) or Ctrl-C; no timeout by default",
            _T + "test_timeouts.py, test_fidelity_binding.py"),
    Feature("read-only, broadcast (stride 0) or self-overlapping arrays for a parameter the kernel may "
            "write", "rejected", "the kernel would write memory the array does not own, or that several "
            "elements share", _T + "test_fidelity_binding.py"),
    Feature("textures, samplers (`[[texture(n)]]`, `[[sampler(n)]]`)", "rejected",
            "not implemented: no kernel of the measured ML corpora uses them", "",
            attributes=("texture", "sampler")),
    Feature("`[[stage_in]]`", "rejected", "vertex inputs do not exist in compute kernels", "",
            attributes=("stage_in",)),
    Feature("Metal 4 tensors, MetalPerformancePrimitives", "no", "not implemented"),
    Feature("stores past either end of a device buffer in an ordinary (unchecked) dispatch", "yes",
            "never reach the process's memory: proven in bounds before the dispatch, or run on fenced copies "
            "and reported as a KernelError naming thread, buffer and byte offset (runtime/store_guard.py; "
            "`METAL_KERNEL_BOUNDS_CHECK=0` turns it off)", _T + "test_store_guard.py"),
    Feature("out-of-bounds accesses, races, barrier divergence, uninitialised and inactive-lane reads", "partial",
            "found by `metal_kernel.check()` (docs/checking.md); an unchecked run only fences device-buffer "
            "stores (row above)", "tests/check/test_corpus.py"),
)


def rejected_words() -> dict[str, str]:
    """Identifier -> why the rewriter rejects it."""
    return {w: f.notes for f in FEATURES if f.status == "rejected" for w in f.words}


def rejected_attributes() -> dict[str, str]:
    """Parameter attribute -> why the rewriter rejects it."""
    return {a: f.notes for f in FEATURES if f.status == "rejected" for a in f.attributes}


BEGIN, END = "<!-- features:begin (generated from metal_kernel/runtime/features.py) -->", "<!-- features:end -->"


def markdown() -> str:
    rows = ["| Feature | Status | Notes | Shown by |", "|---|---|---|---|"]
    rows += [f"| {f.name} | {f.status} | {f.notes} | {f.shown_by} |" for f in FEATURES]
    return "\n".join(rows) + "\n"


def with_table(text: str) -> str:
    """`text` with the table between its markers replaced by the current one."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + markdown() + text[end:]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--update"]:
        for name in argv[1:]:
            path = Path(name)
            path.write_text(with_table(path.read_text()))
        return 0
    print(markdown(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
