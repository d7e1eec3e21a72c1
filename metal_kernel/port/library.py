"""The CUDA library and kernel objects: `lib["k<float>"](*args, grid=,
block=, shared_mem=)`, on the runtime's dispatch (runtime/library.py)."""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

from ..runtime.compiler import CompiledLibrary
from ..runtime.errors import KernelError, KernelTimeout
from ..runtime.binding import Bound as _Bound
from ..runtime.binding import array_extent
from ..runtime.binding import is_ndarray as _is_ndarray
from ..runtime.binding import is_tensor as _is_tensor
from ..runtime.library import Kernel, Library, dispatch_interceptor
from ..runtime.native import CUDA_MAX_SHARED_MEMORY, DISPATCH_CUDA, ErrorInfo
from .analyse import normalise_spelling
from .binding import (BFLOAT16, BOOL, FLOAT, HALF, POINTER, SIGNED, UNSIGNED, ArgumentError, TypeCode,
                      element_size, value_bytes)

PRINTF_BUFFER_BYTES = 1 << 20  # CUDA's default printf FIFO (cudaLimitPrintfFifoSize)
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)


@dataclass(frozen=True)
class Printed:
    """One device printf: the block and thread that printed, and the text."""
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    text: str


class PrintfBuffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("capacity", ctypes.c_uint64), ("used", ctypes.c_uint64),
                ("dropped", ctypes.c_uint64)]


def _dims(v, what: str, kernel: str, limits) -> tuple[int, int, int]:
    if hasattr(v, "x") and hasattr(v, "y"):
        v = (v.x, v.y, getattr(v, "z", 1))
    if isinstance(v, int):
        v = (v,)
    try:
        v = tuple(int(x) for x in v)
    except TypeError:
        raise TypeError(f"kernel '{kernel}': {what} must be an int or a tuple of 1 to 3 ints, got {v!r}") from None
    if not 1 <= len(v) <= 3:
        raise ValueError(f"kernel '{kernel}': {what} must have 1 to 3 elements, got {len(v)}")
    v = v + (1,) * (3 - len(v))
    for x, lim, axis in zip(v, limits, "xyz"):
        if not 1 <= x <= lim:
            raise ValueError(f"kernel '{kernel}': {what}.{axis} = {x} is outside 1..{lim} (CUDA's limit)")
    return v


class CudaKernel(Kernel):
    """One kernel (or kernel template instantiation) of a CUDA library."""

    def __init__(self, library, entry, fn, sizes, param_types, fiber_fn=None, stream_fn=None, cdll=None):
        super().__init__(library, entry, fn, sizes, param_types, fiber_fn, stream_fn, cdll)
        lib = cdll
        n = ctypes.c_uint64.in_dll(lib, f"__mk_cuparams_{entry.symbol}").value
        codes = (ctypes.c_uint64 * (n + 1)).in_dll(lib, f"__mk_cuparams_{entry.symbol}")
        self.param_types = [TypeCode.decode(codes[1 + i]) for i in range(n)]
        self.param_names = [p.name for p in entry.params[:n]]

    def __repr__(self):
        return f"<metal_kernel.port.CudaKernel {self.name}>"

    def __call__(self, *args, grid, block, shared_mem: int = 0, timeout=None):
        """Launches the kernel as `<<<grid, block, shared_mem>>>` and waits
        for it. Returns what the kernel printed (a list of Printed, by block
        and thread, each thread's lines in order)."""
        if len(args) != len(self.param_types):
            raise TypeError(f"kernel '{self.name}' takes {len(self.param_types)} argument(s) "
                            f"({', '.join(self.param_names)}), got {len(args)}")
        g = _dims(grid, "grid", self.name, MAX_GRID)
        b = _dims(block, "block", self.name, MAX_BLOCK)
        threads = b[0] * b[1] * b[2]
        if threads > min(1024, self.max_threads_per_threadgroup):
            raise ValueError(f"kernel '{self.name}': a block of {b} has {threads} threads; this kernel allows at most "
                             f"{min(1024, self.max_threads_per_threadgroup)}")
        if not isinstance(shared_mem, int) or not 0 <= shared_mem <= CUDA_MAX_SHARED_MEMORY:
            raise ValueError(f"kernel '{self.name}': shared_mem must be 0..{CUDA_MAX_SHARED_MEMORY} bytes, "
                             f"got {shared_mem!r}")
        bound = self._bind_cuda(args)
        timeout_ms = self._timeout_ms(timeout)
        self._launch_args = (g, b)
        printf = self._library._printf_begin()
        grid_threads = [g[i] * b[i] for i in range(3)]
        interceptor = dispatch_interceptor()  # metal_kernel.check() covers CUDA kernels too
        if interceptor is not None:
            interceptor(self, args, bound, grid_threads, list(b), list(g), {0: shared_mem}, timeout_ms)
        else:
            self._launch(bound, grid_threads, list(b), list(g), {0: shared_mem}, timeout_ms)
        return self._library._printf_end(printf, g, b)

    # ------------------------------------------------------------ binding --
    def _bind_cuda(self, args) -> _Bound:
        bound = _Bound()
        for i, (a, t) in enumerate(zip(args, self.param_types)):
            what = f"kernel '{self.name}': argument {i} ('{self.param_names[i]}', {t.describe()})"
            if t.kind == POINTER:
                self._bind_pointer(bound, a, t, what)
            else:
                try:
                    bound.add_bytes(value_bytes(a, t, what), what)
                except ArgumentError as e:
                    raise TypeError(str(e)) from None
        return bound

    def _bind_pointer(self, bound: _Bound, a, t: TypeCode, what: str):
        if a is None:
            bound.ptrs.append(0)
            bound.sizes.append(0)
            bound.names.append("nullptr")
            return
        if _is_tensor(a):
            if a.device.type != "cpu":
                raise TypeError(f"{what} is on {a.device}; pass CPU tensors")
            ptr = a.data_ptr()
            size = a.untyped_storage().nbytes() - (ptr - a.untyped_storage().data_ptr())
        elif _is_ndarray(a):
            ptr, size = array_extent(a, what)  # float64 included: CUDA has double
        elif isinstance(a, (ctypes.Array, ctypes.Structure)):
            ptr, size = ctypes.addressof(a), ctypes.sizeof(a)
        else:
            raise TypeError(f"{what}: pass a tensor, a numpy array or None, not {type(a).__name__}")
        if t.elem_kind in (SIGNED, UNSIGNED, FLOAT, HALF, BFLOAT16, BOOL) and t.elem_size and \
                not isinstance(a, (ctypes.Array, ctypes.Structure)) and element_size(a) != t.elem_size:
            raise TypeError(f"{what}: the argument's elements are {element_size(a)} bytes "
                            f"({getattr(a, 'dtype', '?')}), the kernel's are {t.elem_size}")
        bound.keep.append(a)
        bound.ptrs.append(ptr)
        bound.sizes.append(size)
        bound.names.append(f"{type(a).__name__} {tuple(getattr(a, 'shape', ()))} {getattr(a, 'dtype', '')}")

    def _check_buffers(self, b):  # the CUDA binder checked each argument
        return None

    # ------------------------------------------------------------ dispatch --
    dispatch_flags = DISPATCH_CUDA

    def _error(self, err: ErrorInfo, b) -> KernelError:
        return self._localise(super()._error(err, b))

    def _localise(self, e: KernelError) -> KernelError:
        """Grid thread and threadgroup as CUDA names them: thread in block."""
        launch = getattr(self, "_launch_args", None)  # unset on a checked build's kernel (check() runs it)
        if not isinstance(e, KernelError) or e.thread is None or e.threadgroup is None or launch is None:
            return e
        _, block = launch
        tid = tuple(e.thread[i] - e.threadgroup[i] * block[i] for i in range(3))
        message = str(e).replace(f"thread {list(e.thread)} (threadgroup {list(e.threadgroup)})",
                                 f"thread {tid} of block {tuple(e.threadgroup)}")
        cls = KernelTimeout if isinstance(e, KernelTimeout) else KernelError
        out = cls(message, kernel=e.kernel, thread=tid, threadgroup=tuple(e.threadgroup), address=e.address)
        out.block = tuple(e.threadgroup)
        return out


class CudaLibrary(Library):
    """What load_cuda returns: `lib["name"]` / `lib.name` per kernel and
    instantiation, `set_constant` / `get_constant` for __constant__ and
    __device__ variables."""

    kernel_class = CudaKernel

    def __init__(self, compiled: CompiledLibrary):
        super().__init__(compiled)
        lib = self._lib
        n = ctypes.c_uint.in_dll(lib, "__mk_cuda_nsymbols").value
        names = (ctypes.c_char_p * max(n, 1)).in_dll(lib, "__mk_cuda_symbols")
        self._symbols = {}
        for i in range(n):
            kind, name = names[i].decode().split(":", 1)
            addr = ctypes.c_void_p.in_dll(lib, f"__mk_sym_{i}").value
            code = TypeCode.decode(ctypes.c_uint64.in_dll(lib, f"__mk_symtype_{i}").value)
            self._symbols[name] = (kind, addr, code)
        self.notes = [x for x in ctypes.c_char_p.in_dll(lib, "__mk_cuda_notes").value.decode().split("\n") if x]
        self._printf = PrintfBuffer.in_dll(lib, "__mk_cuda_printf")
        self._printf_memory = None
        self.printf_dropped = 0  # records the last launch's printf could not keep (buffer full)

    def __getitem__(self, name: str) -> CudaKernel:
        if name in self._kernels:
            return self._kernels[name]
        key = normalise_spelling(name)
        if key in self._kernels:
            return self._kernels[key]
        notes = "".join(f"\n  {n}" for n in self.notes)
        raise KeyError(f"no kernel named '{name}' in this library; it has: "
                       f"{', '.join(sorted(self._kernels)) or 'none'}{notes}")

    def __contains__(self, name: str) -> bool:
        try:
            self[name]
            return True
        except KeyError:
            return False

    def __iter__(self):
        return iter(sorted(self._kernels))

    def __repr__(self):
        return f"<metal_kernel.port.CudaLibrary kernels={sorted(self._kernels)}>"

    # ---------------------------------------------------------- constants --
    def _symbol(self, name: str):
        if name not in self._symbols:
            raise KeyError(f"no __constant__ or __device__ variable named '{name}' in this library; it has: "
                           f"{', '.join(sorted(self._symbols)) or 'none'}")
        return self._symbols[name]

    def set_constant(self, name: str, value, offset: int = 0):
        """cudaMemcpyToSymbol: writes `value` (a number, an array, a tensor,
        bytes or a ctypes structure) into the variable, converted to its type
        for a number. Values stay until changed, for every later launch."""
        kind, addr, t = self._symbol(name)
        what = f"{'__constant__' if kind == 'constant' else '__device__'} variable '{name}' ({t.describe()})"
        if t.kind == 9 and not isinstance(value, (bytes, bytearray, memoryview)) and \
                not (_is_ndarray(value) or _is_tensor(value)) and not isinstance(value, ctypes.Array):
            elem = TypeCode(t.elem_size, t.elem_kind, 0, 0)
            values = value if isinstance(value, (list, tuple)) else [value]
            data = b"".join(value_bytes(v, elem, what) for v in values)
        else:
            try:
                data = value_bytes(value, t, what)
            except ArgumentError as e:
                raise TypeError(str(e)) from None
        if offset < 0 or offset + len(data) > t.size:
            raise ValueError(f"{what} holds {t.size} bytes; cannot write {len(data)} bytes at offset {offset}")
        ctypes.memmove(addr + offset, data, len(data))

    def get_constant(self, name: str) -> bytes:
        """cudaMemcpyFromSymbol: the variable's bytes."""
        _, addr, t = self._symbol(name)
        return ctypes.string_at(addr, t.size)

    # ------------------------------------------------------------- printf --
    def _printf_begin(self):
        if self._printf_memory is None:
            self._printf_memory = ctypes.create_string_buffer(PRINTF_BUFFER_BYTES)
        self._printf.data = ctypes.addressof(self._printf_memory)
        self._printf.capacity = PRINTF_BUFFER_BYTES
        self._printf.used = 0
        self._printf.dropped = 0
        return self._printf_memory

    def _printf_end(self, memory, grid, block) -> list[Printed]:
        used = min(self._printf.used, PRINTF_BUFFER_BYTES)
        records = []
        raw = memory.raw
        at = 0
        while at + 16 <= used:
            size, thread, blk = struct.unpack_from("<IIQ", raw, at)
            if size < 16 or at + size > used:
                break
            text = raw[at + 16: at + size].split(b"\0", 1)[0].decode("utf-8", errors="replace")
            records.append((blk, thread, len(records), text))
            at += size
        self._printf.data = None
        records.sort()
        out = []
        for blk, thread, _, text in records:
            bxyz = (blk % grid[0], (blk // grid[0]) % grid[1], blk // (grid[0] * grid[1]))
            txyz = (thread % block[0], (thread // block[0]) % block[1], thread // (block[0] * block[1]))
            out.append(Printed(bxyz, txyz, text))
        self.printf_dropped = int(self._printf.dropped)
        return out
