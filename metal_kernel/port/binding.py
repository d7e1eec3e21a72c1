"""Python values -> the bytes of a CUDA kernel parameter or variable, by the
type code the library reports for it (mkcuda/abi.h)."""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

from ..runtime.binding import _bf16_bytes
from ..runtime.binding import is_ndarray as _is_ndarray
from ..runtime.binding import is_tensor as _is_tensor

POINTER, SIGNED, UNSIGNED, FLOAT, HALF, BFLOAT16, BOOL, OTHER, ARRAY = range(1, 10)
_KIND_NAMES = {POINTER: "pointer", SIGNED: "signed integer", UNSIGNED: "unsigned integer", FLOAT: "floating",
               HALF: "__half", BFLOAT16: "__nv_bfloat16", BOOL: "bool", OTHER: "struct", ARRAY: "array"}


@dataclass(frozen=True)
class TypeCode:
    size: int
    kind: int
    elem_kind: int  # of the pointee or array element
    elem_size: int

    @classmethod
    def decode(cls, code: int) -> "TypeCode":
        return cls(code & 0xFFFFFFFF, (code >> 32) & 0xF, (code >> 36) & 0xF, code >> 40)

    def describe(self) -> str:
        if self.kind == POINTER:
            inner = f"{_KIND_NAMES.get(self.elem_kind, 'void')} of {self.elem_size} bytes" if self.elem_size else "void"
            return f"pointer to {inner}"
        if self.kind in (SIGNED, UNSIGNED, FLOAT):
            return f"{self.size * 8}-bit {_KIND_NAMES[self.kind]}"
        return f"{_KIND_NAMES.get(self.kind, 'value')} of {self.size} bytes"


_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}


class ArgumentError(TypeError):
    pass


def scalar_bytes(value, t: TypeCode, what: str) -> bytes:
    """`value` as a scalar of type `t`; a clear error when it does not fit."""
    if _is_numpy_scalar(value):
        value = value.item()
    if t.kind == BOOL:
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bytes([int(value)])
        raise ArgumentError(f"{what} is a bool; got {value!r}")
    if t.kind in (SIGNED, UNSIGNED):
        if isinstance(value, float) or not isinstance(value, int):
            raise ArgumentError(f"{what} is a {t.describe()}; got {type(value).__name__} {value!r} "
                                "(convert it explicitly)")
        bits = t.size * 8
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t.kind == SIGNED else (0, (1 << bits) - 1)
        if not lo <= value <= hi:
            raise ArgumentError(f"{what} is a {t.describe()}; {value} does not fit (range {lo}..{hi})")
        fmt = _INT_FORMATS[t.size]
        return struct.pack("<" + (fmt if t.kind == SIGNED else fmt.upper()), value)
    if t.kind in (FLOAT, HALF, BFLOAT16):
        if not isinstance(value, (int, float)):
            raise ArgumentError(f"{what} is a {t.describe()}; got {type(value).__name__} {value!r}")
        value = float(value)
        if t.kind == BFLOAT16:
            return _bf16_bytes(value)
        fmt = {2: "e", 4: "f", 8: "d"}[t.size]
        try:
            return struct.pack("<" + fmt, value)
        except (OverflowError, struct.error):
            raise ArgumentError(f"{what} is a {t.describe()}; {value!r} is out of its range") from None
    raise ArgumentError(f"{what} is a {t.describe()}; got {type(value).__name__}")


def value_bytes(value, t: TypeCode, what: str) -> bytes:
    """Bytes for a by-value parameter (scalar or struct) or a variable."""
    if t.kind in (OTHER, ARRAY) or isinstance(value, (bytes, bytearray, memoryview, ctypes.Structure,
                                                      ctypes.Array, ctypes.Union)):
        if isinstance(value, (ctypes.Structure, ctypes.Array, ctypes.Union)):
            data = bytes(memoryview(value).cast("B"))
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
        elif _is_ndarray(value) or _is_tensor(value):
            data = _array_bytes(value)
        else:
            raise ArgumentError(f"{what} is a {t.describe()}; pass bytes, a ctypes structure or an array, "
                                f"not {type(value).__name__}")
        if t.kind == OTHER and len(data) != t.size:
            raise ArgumentError(f"{what} is a {t.describe()}; got {len(data)} bytes")
        return data
    if t.kind == POINTER:
        raise ArgumentError(f"{what} is a {t.describe()}; pass a tensor or an array")
    return scalar_bytes(value, t, what)


def _array_bytes(a) -> bytes:
    if _is_tensor(a):
        import torch

        return a.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return a.tobytes()


def element_size(a) -> int:
    return a.element_size() if _is_tensor(a) else a.dtype.itemsize


def _is_numpy_scalar(v) -> bool:
    return type(v).__module__ == "numpy" and hasattr(v, "dtype") and hasattr(v, "item") and not _is_ndarray(v)
