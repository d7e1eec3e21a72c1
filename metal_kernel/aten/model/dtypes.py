"""dtype tables: the single source of truth for every dtype mapping in `aten`.

`METAL_TYPE` is the name `scalarToMetalTypeString` gives a dtype: it is what the
host uses to build kernel names (`<op>_dense_<out>_<in>`) and what the
`REGISTER_*` macros stringify, so registrations use exactly these spellings.
`SCALAR_TYPE` is c10's ScalarType enum value (`c10/metal/common.h`), passed to
castout kernels at run time.
"""

from __future__ import annotations

import torch

METAL_TYPE: dict[torch.dtype, str] = {
    torch.uint8: "uchar",
    torch.int8: "char",
    torch.int16: "short",
    torch.int32: "int",
    torch.int64: "long",
    torch.float16: "half",
    torch.float32: "float",
    torch.complex32: "half2",
    torch.complex64: "float2",
    torch.bool: "bool",
    torch.bfloat16: "bfloat",
    torch.uint16: "ushort",
    torch.uint32: "uint",
    torch.uint64: "ulong",
}

SCALAR_TYPE: dict[torch.dtype, int] = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 2,
    torch.int32: 3,
    torch.int64: 4,
    torch.float16: 5,
    torch.float32: 6,
    torch.complex32: 8,
    torch.complex64: 9,
    torch.bool: 11,
    torch.bfloat16: 15,
    torch.uint16: 27,
    torch.uint32: 28,
    torch.uint64: 29,
}

# c10::ScalarType's name (`toString(ScalarType)`), as TORCH_CHECK messages print it.
SCALAR_TYPE_NAME: dict[torch.dtype, str] = {
    torch.uint8: "Byte",
    torch.int8: "Char",
    torch.int16: "Short",
    torch.int32: "Int",
    torch.int64: "Long",
    torch.float16: "Half",
    torch.float32: "Float",
    torch.float64: "Double",
    torch.complex32: "ComplexHalf",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
    torch.bool: "Bool",
    torch.bfloat16: "BFloat16",
    torch.uint16: "UInt16",
    torch.uint32: "UInt32",
    torch.uint64: "UInt64",
}

# Types the MPS backend does not have at all.
UNSUPPORTED_ON_MPS = frozenset({torch.float64, torch.complex128})

# Low-precision float types every floating MPS kernel is instantiated for
# (REGISTER_FLOAT_* convention); added when an op supports float32.
MPS_LOW_PRECISION_FLOATS = (torch.float16, torch.bfloat16)

# Tolerances of test_mps's TestConsistency (`_compute_tolerances`); other dtypes
# use torch.testing.assert_close defaults (None, None).
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (2e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}

# Stable, readable order for reports and registrations.
ORDER = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.complex32,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.bool,
)


def sort_dtypes(dtypes) -> list[torch.dtype]:
    dtypes = set(dtypes)
    return [d for d in ORDER if d in dtypes]


def short_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def test_mps_dtypes() -> list[torch.dtype]:
    """The dtypes test_mps.py's TestConsistency runs (`MPS_DTYPES`): torch's
    get_all_dtypes() without MPS_UNSUPPORTED_TYPES (float64, complex128). No
    complex32 and no uint16/32/64: those are never compared with the CPU there."""
    from torch.testing._internal.common_dtype import get_all_dtypes

    return [d for d in get_all_dtypes() if d not in UNSUPPORTED_ON_MPS]


def mps_dtypes(cpu_dtypes) -> list[torch.dtype]:
    """dtypes to instantiate on MPS for an op with these CPU dtypes: the ones test_mps
    checks, plus half and bfloat16 for an op with float32 (PyTorch's REGISTER_FLOAT_*
    convention; the CPU may lack them, test_mps then compares with float32 cast down)."""
    tested = set(test_mps_dtypes())
    chosen = {d for d in cpu_dtypes if d in tested and d in METAL_TYPE}
    if torch.float32 in chosen:
        chosen.update(MPS_LOW_PRECISION_FLOATS)
    return sort_dtypes(chosen)
