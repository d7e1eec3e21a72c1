"""Arguments -> buffers: torch.mps.compile_shader's calling convention, with
the checks a CPU runtime can afford because it knows every parameter's type
(mk/binding.h describes them from the compiled code).

Refused (an error naming the kernel, the argument and the fix):
- a Python number whose bytes would be read as another type: an int for a
  `constant float&` (2.8e-45 on a GPU), a float for a `constant half&` (0),
  a float for an integer;
- a read-only numpy array, or a view whose elements share memory (stride 0:
  `expand`, `np.broadcast_to`; or overlapping strides), for a parameter the
  kernel may write;
- a buffer smaller than the `constant T&` read from it.
Warned about (legal in Metal, usually a mistake): a tensor whose element
type differs from the pointer's (an int tensor for a `device float*`), and
arguments past the last buffer the kernel reads.
"""

from __future__ import annotations

import ctypes
import struct
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class BindingWarning(UserWarning):
    """An argument that Metal would accept but that is probably a mistake."""


# arg_casts names (torch's) -> struct format
_CASTS = {
    "fp16": "e", "float16": "e", "half": "e",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp32": "f", "float32": "f", "float": "f",
    "int64": "q", "long": "q",
    "int32": "i", "int": "i",
    "int16": "h", "short": "h",
    "int8": "b", "char": "b",
    "uint8": "B", "uchar": "B",
    "bool": "?",
}

# ----------------------------------------------------- parameter types --
_FORMS = {0: "value", 1: "pointer", 2: "reference"}
_KINDS = {0: "other", 1: "float", 2: "half", 3: "bfloat", 4: "int", 5: "uint", 6: "bool", 7: "void"}
_FLOATS = ("float", "half", "bfloat")
_INTS = ("int", "uint", "bool")
# What to write instead, per declared scalar kind.
_CAST_FOR = {"float": "fp32", "half": "fp16", "bfloat": "bf16"}


@dataclass(frozen=True)
class ParamType:
    """One kernel parameter, as mk/binding.h's param_code describes it."""

    form: str  # "value", "pointer", "reference"
    read_only: bool
    kind: str  # element: "float", "half", "bfloat", "int", "uint", "bool", "void", "other"
    size: int  # bytes of the element's scalar
    lanes: int  # vector width, 1 for a scalar

    @classmethod
    def decode(cls, code: int) -> "ParamType":
        return cls(_FORMS.get(code & 3, "value"), bool(code & 4), _KINDS.get((code >> 4) & 15, "other"),
                   (code >> 8) & 255, (code >> 16) & 255)

    @property
    def writable(self) -> bool:
        return self.form in ("pointer", "reference") and not self.read_only

    def spelled(self, name: str) -> str:
        """How the parameter reads in MSL, roughly: `constant float& scale`."""
        scalar = {"float": "float", "half": "half", "bfloat": "bfloat", "bool": "bool", "void": "void",
                  "other": "T"}.get(self.kind) or (
            {1: "char", 2: "short", 4: "int", 8: "long"}.get(self.size, "int")
            if self.kind == "int" else {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}.get(self.size, "uint"))
        elem = scalar + (str(self.lanes) if self.lanes > 1 else "")
        space = "constant" if self.read_only else "device"
        return f"{space} {elem}{'&' if self.form == 'reference' else '*' if self.form == 'pointer' else ''} {name}"


# ----------------------------------------------------------- packing --
def _bf16_bytes(value: float) -> bytes:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:  # NaN stays NaN
        return struct.pack("<H", (bits >> 16) | 0x40)
    bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
    return struct.pack("<H", (bits >> 16) & 0xFFFF)


def _pack(values: Sequence, fmt: str) -> bytes:
    if fmt == "bf16":
        return b"".join(_bf16_bytes(float(v)) for v in values)
    return struct.pack("<" + fmt * len(values), *values)


def _cast_name(c) -> str:
    name = str(c).replace("torch.", "")
    if name not in _CASTS:
        raise ValueError(f"unknown arg_casts type {c!r}; use one of {', '.join(sorted(_CASTS))}")
    return _CASTS[name]


def parse_casts(arg_casts, nargs: int) -> dict[int, str]:
    if isinstance(arg_casts, Mapping):
        return {int(k): _cast_name(v) for k, v in arg_casts.items()}
    if arg_casts is not None:
        c = _cast_name(arg_casts)
        return {i: c for i in range(nargs)}
    return {}


class Bound:
    """Addresses and sizes of one call's arguments, kept alive for the call."""

    def __init__(self):
        self.warned = False  # a BindingWarning was issued (runtime/dispatch_plan.py binds such calls every time)
        self.keep = []
        self.ptrs: list[int] = []
        self.sizes: list[int] = []
        self.names: list[str | Described] = []

    def add(self, obj, ptr: int, size: int, what: str | Described):
        self.keep.append(obj)
        self.ptrs.append(ptr)
        self.sizes.append(size)
        self.names.append(what)

    def add_bytes(self, data: bytes, what: str):
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        self.add(buf, ctypes.addressof(buf), len(data), what)


# ------------------------------------------------------------ arrays --
_TENSOR_TYPES: dict[type, bool] = {}  # type -> whether it is torch.Tensor or a subclass (asked per argument)


def is_tensor(a) -> bool:
    t = type(a)
    known = _TENSOR_TYPES.get(t)
    if known is None:
        known = _TENSOR_TYPES[t] = any(c.__module__.startswith("torch") and c.__name__ == "Tensor" for c in t.__mro__)
    return known


class Described:
    """How an error message names a bound tensor or array ("array (4,)
    float32"): formatted only when a message needs it (formatting a dtype
    costs microseconds per argument on every call)."""
    __slots__ = ("kind", "a")

    def __init__(self, kind: str, a):
        self.kind, self.a = kind, a

    def __str__(self) -> str:
        return f"{self.kind} {tuple(self.a.shape)} {self.a.dtype}"


def is_ndarray(a) -> bool:
    return type(a).__module__ == "numpy" and type(a).__name__ == "ndarray"


def _tensor_binding(t, index: int, kernel: str):
    import torch

    if t.device.type != "cpu":
        raise TypeError(f"kernel '{kernel}': argument {index} is on {t.device}; "
                        "metal-kernel runs on CPU tensors (use .cpu())")
    if t.layout != torch.strided:
        raise TypeError(f"kernel '{kernel}': argument {index} has layout {t.layout}; only strided tensors bind to buffers")
    if t.dtype in (torch.float64, torch.complex128):
        raise TypeError(
            f"kernel '{kernel}': argument {index} is {t.dtype}, which Metal does not support "
            "(Apple GPUs have no 64-bit floating point); convert it to float32"
        )
    if t.is_quantized:
        raise TypeError(f"kernel '{kernel}': argument {index} is a quantized tensor; not supported")
    storage = t.untyped_storage()
    start = storage.data_ptr()
    ptr = t.data_ptr() if t.numel() else start + t.storage_offset() * t.element_size()
    return ptr, start + storage.nbytes() - ptr


def _numpy_binding(a, index: int, kernel: str):
    import numpy as np

    if a.dtype == np.float64 or a.dtype == np.complex128:
        raise TypeError(
            f"kernel '{kernel}': argument {index} is a {a.dtype} array, which Metal does not "
            "support (no 64-bit floating point); convert it with .astype(np.float32)"
        )
    return array_extent(a, f"kernel '{kernel}': argument {index}")


def array_extent(a, what: str):
    """A numpy array's address and the bytes from there to the end of its
    underlying allocation (the CUDA binder shares it)."""
    if a.dtype.hasobject:
        raise TypeError(f"{what} is an object array; not bindable")
    ptr = a.__array_interface__["data"][0]
    if a.base is None and a.flags.c_contiguous:
        return ptr, a.nbytes  # its own allocation: it ends where the array does
    _, hi = allocation_bounds(a)
    return ptr, hi - ptr


def allocation_bounds(a) -> tuple[int, int]:
    """First and one-past-last byte address of the allocation under numpy
    array `a` (its outermost base array)."""
    import numpy as np

    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # numpy < 2
        byte_bounds = np.byte_bounds
    return byte_bounds(root)


def _shape_strides(a) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides in bytes of a tensor or an array."""
    if is_tensor(a):
        return tuple(a.shape), tuple(s * a.element_size() for s in a.stride())
    return tuple(a.shape), tuple(a.strides)


def overlaps_itself(a) -> bool:
    """Whether two elements of `a` share memory (stride 0 in a dimension of
    size > 1, or strides that interleave)."""
    if a.is_contiguous() if is_tensor(a) else a.flags.c_contiguous:
        return False
    shape, strides = _shape_strides(a)
    dims = sorted((abs(st), n) for n, st in zip(shape, strides) if n > 1)
    item = a.element_size() if is_tensor(a) else a.itemsize
    extent = item  # bytes covered by the dimensions so far
    for stride, n in dims:
        if stride < extent:
            return True
        extent = stride * (n - 1) + extent
    return False


def element_type(a) -> tuple[str, int]:
    """(kind, bytes) of a tensor's or an array's elements, as ParamType names them."""
    if is_tensor(a):
        import torch

        dt = a.dtype
        if dt.is_complex:
            return "float", a.element_size() // 2
        if dt == torch.float16:
            return "half", 2
        if dt == torch.bfloat16:
            return "bfloat", 2
        if dt.is_floating_point:
            return "float", a.element_size()
        if dt == torch.bool:
            return "bool", 1
        return ("uint" if dt == torch.uint8 or not dt.is_signed else "int"), a.element_size()
    k = a.dtype.kind
    if k == "c":
        return "float", a.itemsize // 2
    if k == "f":
        return ("half" if a.itemsize == 2 else "float"), a.itemsize
    return {"b": "bool", "u": "uint", "i": "int"}.get(k, "other"), a.itemsize


# ------------------------------------------------------------ binding --
def bind(kernel: str, args: Sequence, casts: dict[int, str], params: dict[int, tuple[str, ParamType | None]]) -> Bound:
    """Binds `args` (argument i to buffer i). `params` maps a buffer index to
    the parameter's name and type (None when not known)."""
    b = Bound()
    for i, a in enumerate(args):
        name, ptype = params.get(i, ("", None))
        _bind_one(b, kernel, i, a, casts.get(i), name, ptype)
    return b


def _describe(kernel: str, i: int, name: str) -> str:
    return f"kernel '{kernel}': argument {i}" + (f" ('{name}')" if name else "")


def _check_array(kernel: str, i: int, a, name: str, ptype: ParamType | None) -> bool:
    """Refuses a read-only or self-overlapping array for a parameter the
    kernel may write; warns when its elements are not the pointer's (and
    returns True)."""
    if ptype is None:
        return False
    where = _describe(kernel, i, name)
    if ptype.writable:
        if is_ndarray(a) and not a.flags.writeable:
            raise ValueError(f"{where} is a read-only numpy array but `{ptype.spelled(name)}` may be written; "
                             "pass a writable copy (np.array(x)), or declare the parameter `constant` / "
                             "`device const`")
        if overlaps_itself(a):
            raise ValueError(f"{where} is a view whose elements share memory (stride 0, as from expand() or "
                             f"np.broadcast_to, or overlapping strides) but `{ptype.spelled(name)}` may be "
                             "written; pass a contiguous copy (.contiguous() / np.ascontiguousarray)")
    kind, size = element_type(a)
    if ptype.form != "pointer" or ptype.kind in ("other", "void") or kind == "other":
        return False
    if ptype.kind in _INTS and ptype.size == 1:
        return False  # char/uchar/bool pointers: byte views of any data
    mismatch = (ptype.kind in _FLOATS) != (kind in _FLOATS) or (
        ptype.kind in _FLOATS and (ptype.kind, ptype.size) != (kind, size)) or (
        ptype.kind not in _FLOATS and ptype.size != size)
    if mismatch:
        what = f"{a.dtype}" if is_tensor(a) else f"a {a.dtype} array"
        warnings.warn(f"{where} holds {what} elements but the kernel reads them as `{ptype.spelled(name)}`; "
                      "the bytes are reinterpreted, not converted", BindingWarning, stacklevel=4)
        return True
    return False


def _check_scalar(kernel: str, i: int, value, cast: str | None, name: str, ptype: ParamType | None):
    """Refuses a Python number whose bytes the parameter would read as
    another type."""
    if ptype is None or cast is not None or ptype.kind in ("other", "void") or ptype.form == "value":
        return
    where = _describe(kernel, i, name)
    spelled = f"`{ptype.spelled(name)}`"
    if isinstance(value, (bool, int)) and ptype.kind in _FLOATS:
        fix = f"pass {float(value)!r} or " if ptype.kind == "float" else ""
        raise TypeError(f"{where} is the Python int {value!r}, which binds as an int64, but {spelled} reads a "
                        f"{ptype.kind}: {fix}pass arg_casts={{{i}: '{_CAST_FOR[ptype.kind]}'}}")
    if isinstance(value, float) and ptype.kind in _INTS:
        raise TypeError(f"{where} is the Python float {value!r}, which binds as a float32, but {spelled} reads "
                        f"an integer: pass an int (e.g. {int(value)})")
    if isinstance(value, float) and ptype.kind in ("half", "bfloat"):
        raise TypeError(f"{where} is the Python float {value!r}, which binds as a float32, but {spelled} reads "
                        f"a {ptype.kind}: pass arg_casts={{{i}: '{_CAST_FOR[ptype.kind]}'}}")
    if isinstance(value, int) and not isinstance(value, bool) and ptype.kind in ("int", "uint") and ptype.size < 8:
        lo, hi = ((-(1 << (8 * ptype.size - 1)), (1 << (8 * ptype.size - 1)) - 1) if ptype.kind == "int"
                  else (0, (1 << (8 * ptype.size)) - 1))
        if not lo <= value <= hi:
            raise ValueError(f"{where} is {value}, which does not fit {spelled} ({lo}..{hi})")


def _bind_one(b: Bound, kernel: str, i: int, a, cast, name: str, ptype: ParamType | None):
    mod = type(a).__module__
    if is_tensor(a):  # Tensor, Parameter and other subclasses
        ptr, size = _tensor_binding(a, i, kernel)
        b.warned |= _check_array(kernel, i, a, name, ptype)
        b.add(a, ptr, size, Described("tensor", a))
        return
    if is_ndarray(a):
        ptr, size = _numpy_binding(a, i, kernel)
        b.warned |= _check_array(kernel, i, a, name, ptype)
        b.add(a, ptr, size, Described("array", a))
        return
    if isinstance(a, bool):
        _check_scalar(kernel, i, a, cast, name, ptype)
        b.add_bytes(_pack([a], cast or "q"), "bool")
        return
    if isinstance(a, int):
        _check_scalar(kernel, i, a, cast, name, ptype)
        try:
            b.add_bytes(_pack([a], cast or "q"), "int")
        except struct.error as e:
            raise ValueError(f"kernel '{kernel}': argument {i} ({a}) does not fit: {e}") from None
        return
    if isinstance(a, float):
        _check_scalar(kernel, i, a, cast, name, ptype)
        b.add_bytes(_pack([a], cast or "f"), "float")
        return
    if mod == "numpy" and hasattr(a, "dtype") and hasattr(a, "tobytes"):  # numpy scalar
        b.add_bytes(a.tobytes(), f"{a.dtype} scalar")
        return
    if isinstance(a, (list, tuple)):
        if not a:
            raise ValueError(f"kernel '{kernel}': argument {i} is an empty list")
        if all(isinstance(x, int) for x in a):
            fmt = cast or "q"
        elif all(isinstance(x, (int, float)) for x in a):
            fmt = cast or "f"
        else:
            raise TypeError(f"kernel '{kernel}': argument {i}: lists must hold only numbers")
        _check_scalar(kernel, i, a[0] if fmt == "q" else float(a[0]), cast, name, ptype)
        b.add_bytes(_pack(a, fmt), f"list[{len(a)}]")
        return
    if isinstance(a, (bytes, bytearray, memoryview)):
        b.add_bytes(bytes(a), f"bytes[{len(a)}]")
        return
    if isinstance(a, ctypes.Structure) or isinstance(a, ctypes.Array):
        b.add(a, ctypes.addressof(a), ctypes.sizeof(a), type(a).__name__)
        return
    if a is None:
        b.add(None, 0, 0, "None")
        return
    raise TypeError(
        f"kernel '{kernel}': argument {i} has type {type(a).__name__}; pass a tensor, a numpy "
        "array, an int, a float, a list of numbers, bytes or a ctypes structure"
    )
