"""Which MSL features the runtime supports, and why not where it does not.

One table, used twice: the rewriter rejects the words and attributes marked
"rejected" here with the reason given, and docs/compatibility.md's feature
section is generated from it (`python -m metal_kernel.runtime.features`).
Every "supported" row names the test that shows it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Feature:
    area: str
    name: str
    status: str  # "supported", "partial", "rejected" (a clear compile error)
    why: str  # for "supported": the test that shows it; otherwise the reason
    words: tuple[str, ...] = ()  # identifiers the rewriter rejects with `why`
    attributes: tuple[str, ...] = ()  # parameter attributes it rejects with `why`


FEATURES: tuple[Feature, ...] = (
    # ---------------------------------------------------------- language --
    Feature("language", "C++17 templates, constexpr, if constexpr, decltype, static_assert", "supported",
            "clang compiles them (tests/runtime/test_language.py)"),
    Feature("language", "`double`", "rejected",
            "Apple GPUs have no 64-bit floating point; the Metal compiler rejects it too"),
    Feature("language", "function constants `[[function_constant(n)]]`, `is_function_constant_defined`",
            "supported", "values from compile_shader(function_constants=...) "
            "(tests/runtime/test_fidelity_rewriter.py)"),
    Feature("language", "`#pragma unroll(N)` with N a macro", "supported",
            "the macro is expanded before pass 2 (tests/runtime/test_fidelity_rewriter.py)"),
    Feature("language", "kernel and template names that shadow library functions (`max`, `exp`) or "
            "one-letter names", "supported",
            "generated entry code calls kernels by qualified name (tests/runtime/test_fidelity_rewriter.py)"),
    # ----------------------------------------------------------- kernels --
    Feature("kernels", "explicit instantiation with `[[host_name]]`, with or without template arguments, "
            "`decltype`/typedef forms, overloaded kernel templates", "supported",
            "tests/runtime/test_fidelity_rewriter.py"),
    Feature("kernels", "kernel returning a value", "rejected",
            "Metal kernels return void and write results to buffers"),
    Feature("kernels", "pointer or reference parameter without an address space", "rejected",
            "Metal requires `device`, `constant` or `threadgroup` on kernel pointer parameters"),
    Feature("kernels", "scalar or vector parameter without an attribute", "rejected",
            "Metal passes scalars in buffers: `constant uint& n [[buffer(k)]]`"),
    Feature("kernels", "buffer parameters without `[[buffer(n)]]`", "supported",
            "bound in parameter order, as Metal does (tests/runtime/test_calling_convention.py)"),
    Feature("kernels", "textures, samplers (`[[texture(n)]]`, `[[sampler(n)]]`)", "rejected",
            "not implemented: no ML kernel in the measured corpora uses them",
            attributes=("texture", "sampler")),
    Feature("kernels", "`[[stage_in]]`", "rejected", "vertex inputs do not exist in compute kernels",
            attributes=("stage_in",)),
    # ------------------------------------------------------ address spaces --
    Feature("address spaces", "`device`, `constant`, `thread`, `threadgroup`", "supported",
            "tests/runtime/test_execution_model.py"),
    Feature("address spaces", "threadgroup arrays with an initializer (`threadgroup float b[32] = {0};`)",
            "partial", "accepted as Metal does; the initializer is not applied (threadgroup memory starts "
            "uninitialised, as on the GPU): initialise it explicitly before a barrier"),
    Feature("address spaces", "`threadgroup_imageblock`", "rejected",
            "imageblocks are tile memory of Apple GPUs; not implemented", words=("threadgroup_imageblock",)),
    Feature("address spaces", "`ray_data`", "rejected",
            "ray-tracing intersection payloads do not exist in compute kernels", words=("ray_data",)),
    Feature("address spaces", "`object_data`", "rejected",
            "mesh/object shader payloads do not exist in compute kernels", words=("object_data",)),
    # ---------------------------------------------------------- dispatch --
    Feature("dispatch", "`threadgroup_memory=` (dynamic `[[threadgroup(n)]]` buffers) up to 32 KiB in all",
            "supported", "more is refused as on Apple GPUs (tests/runtime/test_fidelity_binding.py)"),
    Feature("dispatch", "endless loops", "supported",
            "never deleted by the optimiser (-fno-finite-loops); `timeout=` stops them "
            "(tests/runtime/test_fidelity_binding.py)"),
    Feature("dispatch", "Python scalars for `constant T&` parameters", "supported",
            "a Python int for a float parameter, or a float for an integer or half one, is refused "
            "with the fix (tests/runtime/test_fidelity_binding.py)"),
    Feature("dispatch", "read-only, broadcast (stride 0) or self-overlapping arrays as writable buffers",
            "rejected", "the kernel would write memory the array does not own or that other elements share"),
)


def rejected_words() -> dict[str, str]:
    """Identifier -> why the rewriter rejects it."""
    return {w: f.why for f in FEATURES if f.status == "rejected" for w in f.words}


def rejected_attributes() -> dict[str, str]:
    """Parameter attribute -> why the rewriter rejects it."""
    return {a: f.why for f in FEATURES if f.status == "rejected" for a in f.attributes}


def markdown() -> str:
    """The feature table of docs/compatibility.md."""
    rows = ["| area | feature | status | why / shown by |", "|---|---|---|---|"]
    for f in FEATURES:
        rows.append(f"| {f.area} | {f.name} | {f.status} | {f.why} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
