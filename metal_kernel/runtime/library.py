"""The user-facing library and kernel objects: torch.mps.compile_shader's
calling convention on CPU tensors and numpy arrays."""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence

from .binding import BindingWarning, Bound, ParamType, array_extent, bind, is_ndarray, is_tensor, parse_casts  # noqa: F401
from .dispatch_plan import Plans, fingerprint
from .compiler import CompiledLibrary, CompileOptions, compile_library, math_mode, streaming_setting
from . import store_guard
from .errors import KernelError, KernelTimeout
from .native import (DISPATCH_COALESCE, DISPATCH_NEVER_SYNCS, DISPATCH_NO_FIBER, WORKITEM_MAX_BUFFERS,
                     WORKITEM_MAX_TG_BUFFERS, ErrorInfo, Launch, U3, load_kernel_library, runtime)
from .rewriter import KernelEntry

MAX_THREADS_PER_THREADGROUP = 1024
THREAD_EXECUTION_WIDTH = 32
THREADGROUP_MEMORY_BYTES = 32 << 10  # Apple GPUs: 32 KiB per threadgroup


# A dispatch interceptor (metal_kernel.check installs one while checking):
# it receives every dispatch and runs it in its own way. Per thread, with a
# process-wide fallback ($METAL_KERNEL_CHECK=1).
_interceptors = threading.local()
_global_interceptor = None


def _tensor_type():
    """torch.Tensor when torch is imported (tensors can only exist then)."""
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None)


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

    def __init__(self, library: "Library", entry: KernelEntry, fn, sizes, param_types, fiber_fn=None,
                 stream_fn=None, cdll: ctypes.CDLL | None = None):
        self._library = library
        self._cdll = cdll  # the loaded library holding this kernel's entry points
        self._entry = entry
        self._fn = fn
        self._stream_fn = stream_fn  # direct kernels: the variant with non-temporal stores
        self._fiber_fn = fiber_fn  # work-item kernels: the fiber entry, to name a faulting thread
        self._needed = sizes  # buffer index -> bytes a `constant T&` reads
        # buffer index -> (parameter name, its type from the compiled code)
        self._buffers = {p.index: (p.name, t) for p, t in zip(entry.params, param_types) if p.kind == "buffer"}
        self.name = entry.host_name
        self.max_threads_per_threadgroup = min(entry.max_threads, MAX_THREADS_PER_THREADGROUP)
        self.thread_execution_width = THREAD_EXECUTION_WIDTH
        self._static_tg = entry.tg_bytes
        self._store_facts: dict | None = None  # runtime/store_guard.py: loaded on first need
        self._fenced_bytes = 0  # bytes runtime/store_guard.py copied for this kernel without them
        self._store_proofs: dict = {}  # runtime/store_guard.py: proofs by dispatch shape
        self._plans = Plans()  # runtime/dispatch_plan.py: bindings of recent calls

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

    def prove_stores(self) -> bool:
        """Compiles the facts that prove this kernel's stores in bounds now
        (once per kernel: about a second, then cached on disk) instead of
        after its dispatches have copied enough bytes to pay for them
        (runtime/store_guard.py). From then on a dispatch whose stores are
        proven writes the buffers directly instead of fenced copies of them;
        worth it before timing a kernel, or a loop of small dispatches.
        Returns whether the kernel has such facts (False: every dispatch
        that writes stays fenced, e.g. a kernel with indirect stores)."""
        facts = self._load_store_facts()
        return not facts.get("writes_unknown")

    @property
    def static_thread_group_memory_length(self) -> int:
        return self._static_tg if self._static_tg is not None else 0

    def __repr__(self):
        return f"<metal_kernel.Kernel {self.name}>"

    # ------------------------------------------------------------ binding --
    def _bind(self, args, arg_casts) -> Bound:
        b = bind(self.name, args, parse_casts(arg_casts, len(args)), self._buffers)
        if self._buffers and len(args) > max(self._buffers) + 1:
            b.warned = True
            warnings.warn(f"kernel '{self.name}' reads buffers up to index {max(self._buffers)} but was called "
                          f"with {len(args)} arguments; the last {len(args) - max(self._buffers) - 1} are ignored",
                          BindingWarning, stacklevel=3)
        return b

    def _check_buffers(self, b: Bound):
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
        interceptor = dispatch_interceptor()
        key = None
        if interceptor is None and threadgroup_memory is None:
            # A call repeating an earlier one's arguments reuses its binding
            # (runtime/dispatch_plan.py).
            key = fingerprint(args, threads, group_size, threadgroups, arg_casts, timeout, _tensor_type())
            plan = self._plans.get(key) if key is not None else None
            if plan is not None:
                self._launch(plan.bound, plan.grid, plan.group, plan.ngroups, None, self._timeout_ms(timeout),
                             plan.launch, plan.settled)
                return None
        b = self._bind(args, arg_casts)
        self._check_buffers(b)
        grid, group, ngroups = self._geometry(args, b, threads, group_size, threadgroups)
        timeout_ms = self._timeout_ms(timeout)
        if 0 in grid:
            return None
        if interceptor is not None:
            return interceptor(self, args, b, grid, group, ngroups, threadgroup_memory, timeout_ms)
        plan = None
        if key is not None and not b.warned and self._plans.wanted(key):
            launch = self._launch_struct(b, grid, group, ngroups, None)
            plan = self._plans.add(key, b, grid, group, ngroups, launch)
        self._launch(b, grid, group, ngroups, threadgroup_memory, timeout_ms, plan and plan.launch)
        if plan is not None and store_guard.enabled():
            plan.settled = store_guard.settled(self, b, grid, group, ngroups)
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

    def _geometry(self, args, b: Bound, threads, group_size, threadgroups):
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
                first = next((a for a in args if is_tensor(a) or is_ndarray(a)), None)
                if first is None:
                    raise ValueError(
                        f"kernel '{self.name}': threads= is required when no tensor is passed"
                    )
                threads = int(first.numel() if is_tensor(first) else first.size)
                index = next(i for i, a in enumerate(args) if a is first)
                item = first.element_size() if is_tensor(first) else first.itemsize
                if threads * item > b.sizes[index]:
                    raise ValueError(
                        f"kernel '{self.name}': threads= defaults to the {threads} elements of argument {index}, "
                        f"but its memory holds only {b.sizes[index] // max(item, 1)} (an expanded or broadcast "
                        "view): pass threads= explicitly, or a contiguous tensor"
                    )
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

    def _launch(self, b: Bound, grid, group, ngroups, threadgroup_memory, timeout_ms: int = 0, launch=None,
                settled: bool = False):
        """Runs a dispatch with bounds-checked stores (runtime/store_guard.py):
        as it is when its stores are proven in bounds, else on fenced copies
        of the buffers it writes. `launch`: b's Launch record, when made
        already; `settled`: a repeated dispatch that needs no guard
        (store_guard.settled)."""
        if not settled and store_guard.enabled():
            fence = store_guard.guard_needed(self, b, grid, group, ngroups)
            if fence:
                store_guard.run_fenced(self, b, fence, lambda fb: self._launch_unguarded(
                    fb, grid, group, ngroups, threadgroup_memory, timeout_ms))
                return
        self._launch_unguarded(b, grid, group, ngroups, threadgroup_memory, timeout_ms, launch)

    def _launch_unguarded(self, b: Bound, grid, group, ngroups, threadgroup_memory, timeout_ms: int = 0,
                          launch=None):
        if launch is None:
            launch = self._launch_struct(b, grid, group, ngroups, threadgroup_memory)
        self._run(launch, b, timeout_ms)

    def _store_facts_cached(self) -> bool:
        """Whether the store facts are on disk already (loading them is cheap)."""
        return self._library._compiled.has_store_facts(self._entry.symbol)

    def _load_store_facts(self) -> dict:
        """The facts that prove this kernel's stores in bounds (compiled
        once, cached on disk); never raises: a kernel without them is
        fenced whenever it writes."""
        if self._store_facts is None:
            try:
                self._store_facts = self._library._compiled.store_facts(self._entry.symbol)
            except Exception as e:  # noqa: BLE001 - a bug of the analysis: fence, never fail the dispatch
                self._store_facts = {"writes_unknown": True, "why": f"{type(e).__name__}: {e}"}
        return self._store_facts

    def _launch_struct(self, b: Bound, grid, group, ngroups, threadgroup_memory) -> Launch:
        """The dispatch's Launch record (its arrays are kept on it)."""
        n = len(b.ptrs)
        ptrs = (ctypes.c_void_p * max(n, 1))(*b.ptrs)
        sizes = (ctypes.c_uint64 * max(n, 1))(*b.sizes)
        tg_sizes = []
        wanted = sorted({p.index for p in self._entry.params if p.kind == "threadgroup"})
        if (self._static_tg or 0) > THREADGROUP_MEMORY_BYTES:
            # Metal refuses to make a pipeline of such a kernel.
            raise KernelError(f"kernel '{self.name}' ({self._entry.file}:{self._entry.line}) declares "
                              f"{self._static_tg} bytes of threadgroup memory; Apple GPUs have "
                              f"{THREADGROUP_MEMORY_BYTES} bytes (32 KiB) per threadgroup", kernel=self.name)
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
            if any(x < 0 for x in tg_sizes):
                raise ValueError(f"kernel '{self.name}': threadgroup_memory sizes must not be negative: {tg_sizes}")
            total = sum(tg_sizes) + (self._static_tg or 0)
            if total > THREADGROUP_MEMORY_BYTES:
                declared = f"{self._static_tg} bytes declared in the kernel + " if self._static_tg else ""
                raise ValueError(
                    f"kernel '{self.name}' would use {total} bytes of threadgroup memory ({declared}"
                    f"{sum(tg_sizes)} bytes from threadgroup_memory=); Apple GPUs have "
                    f"{THREADGROUP_MEMORY_BYTES} bytes (32 KiB) per threadgroup"
                )
        tgs = (ctypes.c_uint32 * max(len(tg_sizes), 1))(*tg_sizes)
        launch = Launch(
            ctypes.cast(ptrs, ctypes.POINTER(ctypes.c_void_p)),
            ctypes.cast(sizes, ctypes.POINTER(ctypes.c_uint64)),
            n, U3(*grid), U3(*group), U3(*ngroups), len(tg_sizes),
            ctypes.cast(tgs, ctypes.POINTER(ctypes.c_uint32)),
        )
        launch._keep = (ptrs, sizes, tgs)
        return launch

    def _run(self, launch: Launch, b: Bound, timeout_ms: int = 0, replay: bool = True):
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
                                           self.dispatch_flags, timeout_ms) != 0 and err2.kind not in (_ERR_TIMEOUT, _ERR_INTERRUPTED):
                    err = err2
            raise self._error(err, b)

    def _error(self, err: ErrorInfo, b: Bound) -> KernelError:
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


def _describe_address(addr: int, b: Bound, entry: KernelEntry) -> str:
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


def _disjoint(b: Bound) -> bool:
    """Whether no two buffers of a call share memory. The streaming variant
    writes around the cache only buffers the kernel never reads, as the
    kernel names them; the same tensor passed twice (`saxpy(y, x, y)`) is
    read and written all the same."""
    spans = sorted((p, p + n) for p, n in zip(b.ptrs, b.sizes) if p and n)
    return all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(spans))


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


class Library:
    """What compile_shader returns: kernels as attributes, listed by dir().

    A large file's kernels are compiled on first use (runtime/compiler.py):
    getting the attribute builds and loads that kernel."""

    kernel_class = Kernel

    def __init__(self, compiled: CompiledLibrary):
        self._compiled = compiled
        self._source: str | None = None  # set by load_library
        self._options: CompileOptions | None = None
        self._variants: dict = {}  # other builds of the same source (metal_kernel.check)
        self._entries = {e.host_name: e for e in compiled.kernels}
        self._loaded: dict[str, ctypes.CDLL] = {}  # object file -> library
        self._kernels: dict[str, Kernel] = {}
        if not compiled.lazy:
            for e in compiled.kernels:
                self._kernels[e.host_name] = self._load(e)

    def _load(self, e: KernelEntry) -> Kernel:
        if not e.object:
            e = self._built(e)
        path = self._compiled.path(e)
        lib = self._loaded.get(path)
        if lib is None:
            lib = self._loaded[path] = load_kernel_library(path)

        def address(prefix: str) -> int:
            return ctypes.cast(getattr(lib, f"{prefix}_{e.symbol}"), ctypes.c_void_p).value

        fn = address("__mk_entry")
        fiber_fn = None  # the tracked entry, replayed after a fault to name the thread
        stream_fn = None
        if e.mode == "workitem-loops":
            fiber_fn, fn = fn, address("__mk_wientry")
        elif e.mode == "direct":
            fiber_fn, fn = fn, address("__mk_fast")
            if e.streaming:
                stream_fn = address("__mk_stream")
        sizes = _table(lib, f"__mk_sizes_{e.symbol}", 2)
        try:
            codes = _table(lib, f"__mk_params_{e.symbol}", 1)
        except ValueError:  # a front end that does not describe parameters (CUDA's binds its own way)
            codes = []
        return self.kernel_class(self, e, fn, {int(k): int(v) for k, v in sizes},
                                 [ParamType.decode(int(c)) for (c,) in codes], fiber_fn, stream_fn, lib)

    @property
    def _lib(self) -> ctypes.CDLL:
        """The library file of a library built as one (CUDA's: its program-scope
        variables live there)."""
        path = self._compiled.path_of(self._compiled.main_object)
        if path not in self._loaded:
            self._loaded[path] = load_kernel_library(path)
        return self._loaded[path]

    def _built(self, e: KernelEntry) -> KernelEntry:
        return self._compiled.built(e.symbol)

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        entries = self.__dict__.get("_entries", {})
        if name in entries:
            try:
                kernel = self._load(entries[name])
            except OSError:
                # A cached kernel library that no longer loads: rebuild it.
                entries[name] = self._compiled.built(entries[name].symbol, rebuild=True)
                kernel = self._load(entries[name])
            kernels[name] = kernel
            return kernel
        raise AttributeError(
            f"no kernel named '{name}' in this library; it has: {', '.join(sorted(entries)) or 'none'}"
        )

    def __dir__(self):
        return sorted(self._entries)

    def __repr__(self):
        return f"<metal_kernel.Library kernels={sorted(self._entries)}>"


def _table(lib: ctypes.CDLL, name: str, width: int) -> list[tuple[int, ...]]:
    """A generated `{count, rows...}` table of unsigned 64-bit values."""
    count = ctypes.c_uint64.in_dll(lib, name).value
    arr = (ctypes.c_uint64 * (1 + width * count)).in_dll(lib, name)
    return [tuple(arr[1 + width * k + j] for j in range(width)) for k in range(count)]


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
