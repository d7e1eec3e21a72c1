"""What a port is made of: per kernel instantiation, its Metal name and
parameters (for launchers and verify), and the generated text as chunks
that can be left out one kernel at a time (a kernel whose port does not
compile must not take the others down)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from .diagnostics import Diagnostic

# CUDA scalar type (after typedefs and template arguments) -> numpy dtype name.
SCALAR_DTYPES = {
    "bool": "bool", "char": "int8", "signed char": "int8", "unsigned char": "uint8", "uchar": "uint8",
    "int8_t": "int8", "uint8_t": "uint8", "short": "int16", "short int": "int16", "unsigned short": "uint16",
    "unsigned short int": "uint16", "ushort": "uint16", "int16_t": "int16", "uint16_t": "uint16",
    "int": "int32", "signed": "int32", "signed int": "int32", "unsigned": "uint32", "unsigned int": "uint32",
    "uint": "uint32", "int32_t": "int32", "uint32_t": "uint32", "long": "int64", "long int": "int64",
    "long long": "int64", "long long int": "int64", "int64_t": "int64", "ptrdiff_t": "int64",
    "unsigned long": "uint64", "unsigned long int": "uint64", "unsigned long long": "uint64",
    "unsigned long long int": "uint64", "uint64_t": "uint64", "size_t": "uint64", "ulong": "uint64",
    "float": "float32", "double": "float64", "__half": "float16", "half": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "bfloat": "bfloat16",
}
# Element sizes of buffer element types (for argument checks).
ELEMENT_BYTES = {**{k: {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
                        "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[v]
                    for k, v in SCALAR_DTYPES.items()},
                 "float2": 8, "float4": 16, "int2": 8, "int4": 16, "uint2": 8, "uint4": 16, "__half2": 4,
                 "half2": 4, "__nv_bfloat162": 4, "float3": 12, "int3": 12, "uint3": 12, "char4": 4, "uchar4": 4,
                 "short2": 4, "ushort2": 4, "double2": 16}


def canonical_type(text: str, typedefs: dict[str, str]) -> str:
    """`const  unsigned   int` -> `unsigned int`, typedefs resolved."""
    t = re.sub(r"\b(const|volatile|__restrict__|struct|class)\b", " ", text)
    t = " ".join(t.split())
    for _ in range(8):
        if t in typedefs:
            t = " ".join(re.sub(r"\b(const|volatile)\b", " ", typedefs[t]).split())
        else:
            break
    return t


@dataclass
class ParamSpec:
    name: str
    kind: str  # "buffer", "scalar", "struct"
    cuda_type: str  # the declared type, template arguments substituted (pointee for buffers)
    dtype: str | None  # numpy dtype of a scalar / buffer element when known ("bfloat16" for bfloat)
    const: bool = False
    usage: str = "inout"  # buffers: "in", "out", "inout"
    elem_bytes: int | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class GlobalSpec:
    """A __constant__ / __device__ variable that is a buffer of the port."""
    name: str
    space: str  # "constant" or "device"
    cuda_type: str
    nbytes: int | None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class KernelPort:
    spelling: str  # as CUDA names it: `k`, `k<float, 4>`
    metal_name: str  # its function name in the Metal library
    file: str
    line: int
    params: list[ParamSpec] = field(default_factory=list)
    globals: list[GlobalSpec] = field(default_factory=list)
    dynamic_shared: bool = False
    max_threads: int = 1024
    diagnostics: list[Diagnostic] = field(default_factory=list)  # errors that keep it out of the port
    translated: bool = True
    present_mask: bool = False  # the kernel tests buffer parameters against NULL: a mask says which were given
    demoted: bool = False  # double="float": it (or a helper, type or constant it uses) computes double in float
    accumulations: list = field(default_factory=list)  # loops around its double locals' updates (doubles.py)

    def to_json(self) -> dict:
        return {"spelling": self.spelling, "metal_name": self.metal_name, "file": self.file, "line": self.line,
                "params": [p.to_json() for p in self.params], "globals": [g.to_json() for g in self.globals],
                "dynamic_shared": self.dynamic_shared, "max_threads": self.max_threads,
                "present_mask": self.present_mask, "demoted": self.demoted,
                "translated": self.translated, "why_not": [d.code for d in self.diagnostics]}


@dataclass
class Chunk:
    """A piece of the generated Metal. `kernels`: the kernel spellings that
    need it (a kernel's own chunk, or a helper they call); a chunk with
    kernels is left out (#if 0) when all of them are."""
    text: str
    kernels: frozenset = frozenset()
    name: str = ""
    function: bool = False  # a kernel's or helper's definition (a unit for compile-error isolation)
