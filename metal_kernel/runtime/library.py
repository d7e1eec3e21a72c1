"""The user-facing library and kernel objects: torch.mps.compile_shader's
calling convention on CPU tensors and numpy arrays."""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import threading
from collections.abc import Mapping, Sequence

from .compiler import CompiledLibrary, CompileOptions, compile_library, math_mode, streaming_setting
from .errors import KernelError, KernelTimeout
from .native import (DISPATCH_COALESCE, DISPATCH_NEVER_SYNCS, DISPATCH_NO_FIBER, WORKITEM_MAX_BUFFERS,
                     WORKITEM_MAX_TG_BUFFERS, ErrorInfo, Launch, U3, load_kernel_library, runtime)
from .rewriter import KernelEntry

MAX_THREADS_PER_THREADGROUP = 1024
THREAD_EXECUTION_WIDTH = 32

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


class _Bound:
    """Addresses and sizes of one call's arguments, kept alive for the call."""

    def __init__(self):
        self.keep = []
        self.ptrs: list[int] = []
        self.sizes: list[int] = []
        self.names: list[str] = []

    def add_bytes(self, data: bytes, what: str):
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        self.keep.append(buf)
        self.ptrs.append(ctypes.addressof(buf))
        self.sizes.append(len(data))
        self.names.append(what)


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
    underlying allocation."""
    import numpy as np

    if a.dtype.hasobject:
        raise TypeError(f"{what} is an object array; not bindable")
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # numpy < 2
        byte_bounds = np.byte_bounds
    lo, hi = byte_bounds(root)
    ptr = a.__array_interface__["data"][0]
    return ptr, hi - ptr


# A dispatch interceptor (metal_kernel.check installs one while checking):
# it receives every dispatch and runs it in its own way. Per thread, with a
# process-wide fallback ($METAL_KERNEL_CHECK=1).
_interceptors = threading.local()
_global_interceptor = None


def dispatch_interceptor():
    return getattr(_interceptors, "fn", None) or _global_interceptor


def set_dispatch_interceptor(fn, process_wide: bool = False):
    """Installs `fn(kernel, args, bound, grid, group, ngroups,
    threadgroup_memory, timeout_ms)` (None removes it); returns the previous
    one."""
    global _global_interceptor
    if process_wide:
        prev, _global_interceptor = _global_interceptor, fn
        return prev
    prev = getattr(_interceptors, "fn", None)
    _interceptors.fn = fn
    return prev


# ErrorInfo.kind values set by the dispatcher itself (src/mkrt.cpp), and the
# coordinate meaning "not known".
_ERR_TIMEOUT = 5
_ERR_INTERRUPTED = 6
_UNKNOWN = 0xFFFFFFFF


class Kernel:
    """One kernel of a library; call it like torch's compiled shader kernels."""

    dispatch_flags = 0  # MK_DISPATCH_* added to every dispatch (CUDA kernels: DISPATCH_CUDA)

    def __init__(self, library: "Library", entry: KernelEntry, fn, sizes, tg_mem, fiber_fn=None,
                 stream_fn=None):
        self._library = library
        self._entry = entry
        self._fn = fn
        self._stream_fn = stream_fn  # direct kernels: the variant with non-temporal stores
        self._fiber_fn = fiber_fn  # work-item kernels: the fiber entry, to name a faulting thread
        self._needed = sizes  # buffer index -> bytes a `constant T&` reads
        self.name = entry.host_name
        self.max_threads_per_threadgroup = min(entry.max_threads, MAX_THREADS_PER_THREADGROUP)
        self.thread_execution_width = THREAD_EXECUTION_WIDTH
        self._static_tg = tg_mem

    @property
    def execution_mode(self) -> str:
        """How a threadgroup runs: "direct" (a plain loop over the threads:
        the kernel never synchronises; "direct-tracked" when it still asks
        which lane it is, e.g. simdgroup_load), "workitem-loops" (barriers and simd
        functions compiled into loops over the threads between them) or
        "fibers" (a fiber per thread; what the work-item compiler does not
        handle, or METAL_KERNEL_WORKITEM_LOOPS=0)."""
        return self._entry.mode

    @property
    def whole_simdgroup(self) -> bool:
        """Whether this work-item kernel runs once per simdgroup, matrices
        held whole, when its threadgroups are whole simdgroups: it never
        asks which lane runs (see runtime/simdgroup_uniform.py)."""
        return self._entry.whole_simdgroup

    @property
    def streaming_stores(self) -> bool:
        """Whether this direct kernel has a variant that writes its vector
        stores around the cache (non-temporal), used for dispatches whose
        buffers exceed the last-level cache or when
        $METAL_KERNEL_STREAMING_STORES=1 (see runtime/streaming.py)."""
        return self._stream_fn is not None

    @property
    def static_thread_group_memory_length(self) -> int:
        return self._static_tg if self._static_tg is not None else 0

    def __repr__(self):
        return f"<metal_kernel.Kernel {self.name}>"

    # ------------------------------------------------------------ binding --
    def _bind(self, args, arg_casts) -> _Bound:
        b = _Bound()
        casts = {}
        if isinstance(arg_casts, Mapping):
            casts = {int(k): _cast_name(v) for k, v in arg_casts.items()}
        elif arg_casts is not None:
            c = _cast_name(arg_casts)
            casts = {i: c for i in range(len(args))}
        for i, a in enumerate(args):
            self._bind_one(b, i, a, casts.get(i))
        return b

    def _bind_one(self, b: _Bound, i: int, a, cast):
        kernel = self.name
        mod = type(a).__module__
        if _is_tensor(a):  # Tensor, Parameter and other subclasses
            ptr, size = _tensor_binding(a, i, kernel)
            b.keep.append(a)
            b.ptrs.append(ptr)
            b.sizes.append(size)
            b.names.append(f"tensor {tuple(a.shape)} {a.dtype}")
            return
        if _is_ndarray(a):
            ptr, size = _numpy_binding(a, i, kernel)
            b.keep.append(a)
            b.ptrs.append(ptr)
            b.sizes.append(size)
            b.names.append(f"array {a.shape} {a.dtype}")
            return
        if isinstance(a, bool):
            b.add_bytes(_pack([a], cast or "q"), "bool")
            return
        if isinstance(a, int):
            try:
                b.add_bytes(_pack([a], cast or "q"), "int")
            except struct.error as e:
                raise ValueError(f"kernel '{kernel}': argument {i} ({a}) does not fit: {e}") from None
            return
        if isinstance(a, float):
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
            b.add_bytes(_pack(a, fmt), f"list[{len(a)}]")
            return
        if isinstance(a, (bytes, bytearray, memoryview)):
            b.add_bytes(bytes(a), f"bytes[{len(a)}]")
            return
        if isinstance(a, ctypes.Structure) or isinstance(a, ctypes.Array):
            b.keep.append(a)
            b.ptrs.append(ctypes.addressof(a))
            b.sizes.append(ctypes.sizeof(a))
            b.names.append(type(a).__name__)
            return
        if a is None:
            b.ptrs.append(0)
            b.sizes.append(0)
            b.names.append("None")
            return
        raise TypeError(
            f"kernel '{kernel}': argument {i} has type {type(a).__name__}; pass a tensor, a numpy "
            "array, an int, a float, a list of numbers, bytes or a ctypes structure"
        )

    def _check_buffers(self, b: _Bound):
        for p in self._entry.params:
            if p.kind != "buffer":
                continue
            if p.index >= len(b.ptrs):
                buffers = sorted(q.index for q in self._entry.params if q.kind == "buffer")
                raise TypeError(
                    f"kernel '{self.name}' reads buffer {p.index} ('{p.name}') but was called with "
                    f"{len(b.ptrs)} argument(s); it takes {len(buffers)} buffer(s): "
                    + ", ".join(f"{q.index}:{q.name}" for q in self._entry.params if q.kind == "buffer")
                )
            need = self._needed.get(p.index, 0)
            if need and b.sizes[p.index] < need and b.ptrs[p.index]:
                raise ValueError(
                    f"kernel '{self.name}': buffer {p.index} ('{p.name}') holds {b.sizes[p.index]} "
                    f"bytes ({b.names[p.index]}) but the kernel reads {need} bytes from it"
                )

    # ----------------------------------------------------------- dispatch --
    def __call__(self, *args, threads=None, group_size=None, arg_casts=None,
                 threadgroups=None, threadgroup_memory=None, timeout=None):
        """Runs the kernel to completion. `timeout` (seconds; default
        $METAL_KERNEL_TIMEOUT, else none) stops a dispatch that runs longer
        with KernelTimeout; Ctrl-C stops it with KeyboardInterrupt."""
        b = self._bind(args, arg_casts)
        self._check_buffers(b)
        grid, group, ngroups = self._geometry(args, threads, group_size, threadgroups)
        timeout_ms = self._timeout_ms(timeout)
        if 0 in grid:
            return None
        interceptor = dispatch_interceptor()
        if interceptor is not None:
            return interceptor(self, args, b, grid, group, ngroups, threadgroup_memory, timeout_ms)
        self._launch(b, grid, group, ngroups, threadgroup_memory, timeout_ms)
        return None

    def dispatch_threadgroups(self, *args, threadgroups, group_size, arg_casts=None,
                              threadgroup_memory=None, timeout=None):
        """dispatchThreadgroups: a count of whole groups (CUDA's <<<grid, block>>>)."""
        return self(*args, threadgroups=threadgroups, group_size=group_size, arg_casts=arg_casts,
                    threadgroup_memory=threadgroup_memory, timeout=timeout)

    def _timeout_ms(self, timeout) -> int:
        where = "timeout="
        if timeout is None:
            timeout = os.environ.get("METAL_KERNEL_TIMEOUT", "").strip() or None
            where = "$METAL_KERNEL_TIMEOUT"
            if timeout is None:
                return 0
        try:
            seconds = float(timeout)
        except (TypeError, ValueError):
            raise ValueError(f"kernel '{self.name}': {where} must be a number of seconds, got {timeout!r}") from None
        if not seconds > 0:
            raise ValueError(f"kernel '{self.name}': {where} must be positive, got {timeout!r}")
        if seconds == float("inf"):
            return 0  # no limit
        return min(max(1, round(seconds * 1000)), 10**12)  # ~30 years; the runtime counts ns in 64 bits

    def _geometry(self, args, threads, group_size, threadgroups):
        def as3(v, what):
            if isinstance(v, int):
                v = [v]
            v = [int(x) for x in v]
            if not 1 <= len(v) <= 3:
                raise ValueError(f"kernel '{self.name}': {what} must have 1 to 3 elements, got {len(v)}")
            if any(x < 0 for x in v):
                raise ValueError(f"kernel '{self.name}': {what} must not be negative: {v}")
            return v + [1] * (3 - len(v)), len(v)

        if threadgroups is not None:
            if group_size is None:
                raise ValueError(f"kernel '{self.name}': threadgroups= needs group_size=")
            ng, _ = as3(threadgroups, "threadgroups")
            group, _ = as3(group_size, "group_size")
            grid = [n * g for n, g in zip(ng, group)]
        else:
            if threads is None:
                first = next((a for a in args if _is_tensor(a) or _is_ndarray(a)), None)
                if first is None:
                    raise ValueError(
                        f"kernel '{self.name}': threads= is required when no tensor is passed"
                    )
                threads = int(first.numel() if _is_tensor(first) else first.size)
            grid, dims = as3(threads, "threads")
            if group_size is None:
                group = [min(grid[0], self.max_threads_per_threadgroup) or 1, 1, 1]
            else:
                group, gdims = as3(group_size, "group_size")
                if not isinstance(threads, int) and not isinstance(group_size, int) and gdims != dims:
                    raise ValueError(
                        f"kernel '{self.name}': threads and group_size must have the same "
                        f"length ({dims} vs {gdims})"
                    )
            ng = [(g + s - 1) // s if s else 0 for g, s in zip(grid, group)]
        if 0 in group and 0 not in grid:
            raise ValueError(f"kernel '{self.name}': group_size must be positive: {group}")
        total = group[0] * group[1] * group[2]
        if total > self.max_threads_per_threadgroup:
            raise ValueError(
                f"kernel '{self.name}': a threadgroup of {group} has {total} threads; this kernel "
                f"allows at most {self.max_threads_per_threadgroup}"
            )
        if any(x >= 2**32 for x in grid):
            raise ValueError(f"kernel '{self.name}': grid {grid} exceeds 2^32 threads per dimension")
        return grid, group, ng

    def _launch(self, b: _Bound, grid, group, ngroups, threadgroup_memory, timeout_ms: int = 0):
        launch = self._launch_struct(b, grid, group, ngroups, threadgroup_memory)
        self._run(launch, b, timeout_ms)

    def _launch_struct(self, b: _Bound, grid, group, ngroups, threadgroup_memory) -> Launch:
        """The dispatch's Launch record (its arrays are kept on it)."""
        n = len(b.ptrs)
        ptrs = (ctypes.c_void_p * max(n, 1))(*b.ptrs)
        sizes = (ctypes.c_uint64 * max(n, 1))(*b.sizes)
        tg_sizes = []
        wanted = sorted({p.index for p in self._entry.params if p.kind == "threadgroup"})
        if wanted:
            tm = threadgroup_memory or {}
            if isinstance(tm, (list, tuple)):
                tm = dict(enumerate(tm))
            missing = [i for i in wanted if i not in tm]
            if missing:
                raise ValueError(
                    f"kernel '{self.name}' takes threadgroup buffer(s) {missing}: pass their sizes "
                    "in bytes with threadgroup_memory={index: nbytes}"
                )
            tg_sizes = [int(tm.get(i, 0)) for i in range(max(wanted) + 1)]
        tgs = (ctypes.c_uint32 * max(len(tg_sizes), 1))(*tg_sizes)
        launch = Launch(
            ctypes.cast(ptrs, ctypes.POINTER(ctypes.c_void_p)),
            ctypes.cast(sizes, ctypes.POINTER(ctypes.c_uint64)),
            n, U3(*grid), U3(*group), U3(*ngroups), len(tg_sizes),
            ctypes.cast(tgs, ctypes.POINTER(ctypes.c_uint32)),
        )
        launch._keep = (ptrs, sizes, tgs)
        return launch

    def _run(self, launch: Launch, b: _Bound, timeout_ms: int = 0, replay: bool = True):
        """Runs a dispatch; a failure raises KernelError (or KeyboardInterrupt).
        `replay`: after a fault in a loop that cannot name the thread, rerun
        the tracked entry to name it."""
        err = ErrorInfo()
        flags = self.dispatch_flags
        n, ntg = launch.nbuffers, launch.ntg_buffers
        if self._entry.mode == "direct":
            flags |= DISPATCH_NEVER_SYNCS
            if not ntg and self._static_tg == 0:
                flags |= DISPATCH_COALESCE  # no threadgroup memory: groups may share a call
        elif self._entry.mode == "workitem-loops" and n <= WORKITEM_MAX_BUFFERS and \
                ntg <= WORKITEM_MAX_TG_BUFFERS:
            flags |= DISPATCH_NO_FIBER  # the driver will not fall back to fibers: no fiber per group
        fn = self._fn
        if self._stream_fn is not None and _use_streaming_stores(sum(b.sizes)) and _disjoint(b):
            fn = self._stream_fn
        rc = runtime().mkrt_dispatch(fn, ctypes.byref(launch), ctypes.byref(err), flags, timeout_ms)
        if rc != 0:
            if err.kind == _ERR_INTERRUPTED:
                raise KeyboardInterrupt(f"kernel '{self.name}' interrupted")
            if replay and self._fiber_fn is not None and err.kind != _ERR_TIMEOUT:
                # Work-item loops and direct loops run without per-thread
                # bookkeeping and cannot tell which thread faulted: the
                # dispatch failed anyway (its outputs are undefined), so
                # replay it with the tracked entry, which names the thread
                # exactly; keep the first error if the replay does not fail.
                err2 = ErrorInfo()
                if runtime().mkrt_dispatch(self._fiber_fn, ctypes.byref(launch), ctypes.byref(err2),
                                           self.dispatch_flags,
                                           timeout_ms) != 0 and err2.kind not in (_ERR_TIMEOUT, _ERR_INTERRUPTED):
                    err = err2
            raise self._error(err, b)

    def _error(self, err: ErrorInfo, b: _Bound) -> KernelError:
        msg = err.message.decode(errors="replace")
        thread = list(err.thread) if err.thread[0] != _UNKNOWN else None
        group = list(err.group) if err.group[0] != _UNKNOWN else None
        if err.kind == _ERR_TIMEOUT:
            where = (f"; thread {thread} was running" if thread else
                     f"; threadgroup {group} was running" if group else "")
            return KernelTimeout(f"kernel '{self.name}': {msg}{where}", kernel=self.name, thread=thread,
                                 threadgroup=group)
        text = f"kernel '{self.name}': {msg} in thread {thread} (threadgroup {group})"
        if err.kind in (1,) and err.address is not None:
            text += f" at address {err.address:#x}"
            near = _describe_address(err.address, b, self._entry)
            if near:
                text += f" ({near})"
        return KernelError(text, kernel=self.name, thread=thread, threadgroup=group,
                           address=err.address if err.kind == 1 else None)


def _describe_address(addr: int, b: _Bound, entry: KernelEntry) -> str:
    names = {p.index: p.name for p in entry.params if p.kind == "buffer"}
    best = None
    for i, (ptr, size) in enumerate(zip(b.ptrs, b.sizes)):
        if not ptr:
            continue
        if ptr <= addr < ptr + size:
            return f"inside buffer {i} '{names.get(i, '?')}'"
        dist = addr - (ptr + size) if addr >= ptr + size else ptr - addr
        if dist < 1 << 20 and (best is None or dist < best[0]):
            where = "past the end of" if addr >= ptr + size else "before the start of"
            best = (dist, f"{dist} bytes {where} buffer {i} '{names.get(i, '?')}' ({size} bytes)")
    return best[1] if best else ""


def _disjoint(b: _Bound) -> bool:
    """Whether no two buffers of a call share memory. The streaming variant
    writes around the cache only buffers the kernel never reads, as the
    kernel names them; the same tensor passed twice (`saxpy(y, x, y)`) is
    read and written all the same."""
    spans = sorted((p, p + n) for p, n in zip(b.ptrs, b.sizes) if p and n)
    return all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:]))


def _use_streaming_stores(buffer_bytes: int) -> bool:
    """Whether a direct kernel's dispatch over `buffer_bytes` of buffers
    writes with non-temporal stores (runtime/streaming.py). Worth it when
    the data does not fit in the last-level cache anyway: the stores then
    skip reading each output line first. $METAL_KERNEL_STREAMING_STORES:
    "auto" (default), "1" always, "0" never."""
    setting = streaming_setting()
    if setting != "auto":
        return setting == "always"
    return buffer_bytes >= last_level_cache_bytes()


@functools.lru_cache(maxsize=1)
def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (Linux sysfs; 32 MiB when unknown)."""
    best = 0
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for name in os.listdir(root):
            try:
                with open(os.path.join(root, name, "size")) as f:
                    text = f.read().strip().upper()
            except OSError:
                continue
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            digits = text.rstrip("KMG")
            if digits.isdigit():
                best = max(best, int(digits) * scale)
    except OSError:
        pass
    return best or 32 << 20


def _is_tensor(a) -> bool:
    t = type(a)
    return any(c.__module__.startswith("torch") and c.__name__ == "Tensor" for c in t.__mro__)


def _is_ndarray(a) -> bool:
    return type(a).__module__ == "numpy" and type(a).__name__ == "ndarray"


class Library:
    """What compile_shader returns: kernels as attributes, listed by dir()."""

    kernel_class = Kernel

    def __init__(self, compiled: CompiledLibrary):
        self._compiled = compiled
        self._source: str | None = None  # set by load_library
        self._options: CompileOptions | None = None
        self._variants: dict = {}  # other builds of the same source (metal_kernel.check)
        self._lib = load_kernel_library(compiled.path)
        self._kernels: dict[str, Kernel] = {}
        for e in compiled.kernels:
            fn = ctypes.cast(getattr(self._lib, f"__mk_entry_{e.symbol}"), ctypes.c_void_p).value
            fiber_fn = None  # the tracked entry, replayed after a fault to name the thread
            stream_fn = None
            if e.mode == "workitem-loops":
                fiber_fn = fn
                fn = ctypes.cast(getattr(self._lib, f"__mk_wientry_{e.symbol}"), ctypes.c_void_p).value
            elif e.mode == "direct":
                fiber_fn = fn
                fn = ctypes.cast(getattr(self._lib, f"__mk_fast_{e.symbol}"), ctypes.c_void_p).value
                if e.streaming:
                    stream_fn = ctypes.cast(getattr(self._lib, f"__mk_stream_{e.symbol}"), ctypes.c_void_p).value
            npairs = ctypes.c_uint64.in_dll(self._lib, f"__mk_sizes_{e.symbol}").value
            arr = (ctypes.c_uint64 * (1 + 2 * npairs)).in_dll(self._lib, f"__mk_sizes_{e.symbol}")
            sizes = {int(arr[1 + 2 * k]): int(arr[2 + 2 * k]) for k in range(npairs)}
            try:
                tg = int(ctypes.c_uint64.in_dll(self._lib, f"__mk_tgmem_{e.symbol}").value)
            except ValueError:
                tg = None if not e.has_tg_size and not compiled.tg_sizes_known else 0
            self._kernels[e.host_name] = self.kernel_class(self, e, fn, sizes, tg, fiber_fn, stream_fn)

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(
            f"no kernel named '{name}' in this library; it has: {', '.join(sorted(kernels)) or 'none'}"
        )

    def __dir__(self):
        return sorted(self._kernels)

    def __repr__(self):
        return f"<metal_kernel.Library kernels={sorted(self._kernels)}>"


def compile_shader(source: str, *, include_dirs: Sequence[str] = (), defines: Mapping | None = None,
                   language_version: str = "3.2", function_constants: Mapping | None = None,
                   source_name: str = "source.metal", math: str | None = None) -> Library:
    """Compiles Metal Shading Language source for the CPU runtime.

    Like ``torch.mps.compile_shader(source)``; extra options: ``include_dirs``,
    ``defines`` (``{"NAME": value}``), ``language_version`` ("3.0"–"4.0", sets
    ``__METAL_VERSION__``), ``function_constants`` (``{name_or_index: value}``),
    ``source_name`` (the file name diagnostics use) and ``math`` ("exact", the
    default, or "bounds" / "bounds:<seed>": math results drawn within the MSL
    specification's ulp bounds, docs/math-bounds.md; default
    ``$METAL_KERNEL_MATH``).
    """
    if not isinstance(source, str):
        raise TypeError(f"compile_shader expects the Metal source as a str, got {type(source).__name__}")
    opts = CompileOptions(
        include_dirs=tuple(str(d) for d in include_dirs),
        defines=tuple(sorted((str(k), None if v is None else str(v)) for k, v in (defines or {}).items())),
        language_version=str(language_version),
        function_constants=tuple(sorted(((k, v) for k, v in (function_constants or {}).items()),
                                        key=lambda kv: str(kv[0]))),
        source_name=source_name,
        math=math_mode(math),
    )
    return load_library(source, opts)


def load_library(source: str, opts: CompileOptions, cls: type | None = None) -> Library:
    """The Library (or `cls`, a subclass) of `source` compiled with `opts`,
    from the cache when it can. The library remembers both, so that a
    variant of it (the checked build) can be made later."""
    cls = cls or Library
    try:
        lib = cls(compile_library(source, opts))
    except (OSError, ValueError, AttributeError):
        # A cached library that no longer loads (truncated, foreign): rebuild it.
        lib = cls(compile_library(source, opts, rebuild=True))
    lib._source, lib._options = source, opts
    return lib
