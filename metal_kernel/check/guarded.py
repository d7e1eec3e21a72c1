"""Copies of a dispatch's buffers fenced by inaccessible pages, for the
schedule runs: those run the ordinary (uninstrumented, fast) kernel, and an
access past either end of a buffer then faults (a KernelError) instead of
touching the user's memory."""

from __future__ import annotations

import ctypes
import mmap
import threading

_PROT_NONE, _PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
# Address space only: the fences are never backed by memory.
_MAP_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
_MAP_FAILED = ctypes.c_void_p(-1).value
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mmap.restype = ctypes.c_void_p
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
# Large copies go on huge pages where the system has them on request, as
# numpy asks for its large arrays: a schedule run that visits the groups out
# of order would otherwise miss the TLB on most of them.
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)
_HUGE_PAGE = 2 << 20


# Mappings are reused (the runtime fences small dispatches all the time, and
# mapping 128 GiB of address space costs system calls): free ones by
# (reach, span), up to this many readable bytes in all.
_POOL_BYTES = 64 << 20
_pool: dict[tuple[int, int], list[int]] = {}
_pooled = 0
_pool_lock = threading.Lock()
# What the bytes before a copy hold, to see a store there afterwards.
_SLACK_BYTE = b"\xa5"


def _acquire(reach: int, span: int) -> int:
    global _pooled
    with _pool_lock:
        free = _pool.get((reach, span))
        if free:
            _pooled -= span
            return free.pop()
    total = reach + span + reach
    base = _libc.mmap(None, total, _PROT_NONE, _MAP_FLAGS, -1, 0)
    if base in (None, _MAP_FAILED):
        raise MemoryError(f"cannot reserve {total} bytes of address space for a guarded copy")
    if _libc.mprotect(base + reach, span, _PROT_RW) != 0:
        err = ctypes.get_errno()
        _libc.munmap(base, total)
        raise OSError(err, "mprotect failed for a guarded copy")
    if _MADV_HUGEPAGE is not None and span >= _HUGE_PAGE:
        _libc.madvise(base + reach, span, _MADV_HUGEPAGE)  # a hint: if refused, small pages
    return base


def _release(base: int, reach: int, span: int):
    global _pooled
    with _pool_lock:
        if _pooled + span <= _POOL_BYTES:
            _pool.setdefault((reach, span), []).append(base)
            _pooled += span
            return
    _libc.munmap(base, reach + span + reach)


class GuardedCopy:
    """`size` bytes copied from `src` into a mapping of their own, with
    `reach` bytes of inaccessible memory on each side (a page at least). The
    copy ends within 64 bytes of the fence and keeps `src`'s address modulo
    64, so vector alignment is as in the original; or, `exact_end`, ends at
    the fence, so one byte past it faults. A page either side is enough for
    the checker, whose instrumentation sees every access; the runtime's
    bounds-checked dispatches (runtime/store_guard.py) fence wide enough that
    any 32-bit index lands in the fence."""

    def __init__(self, src: int, size: int, reach: int = 0, exact_end: bool = False):
        page = mmap.PAGESIZE
        reach = max(page, (reach + page - 1) // page * page)
        span = page
        while span < size + 128 and span < _POOL_BYTES // 4:  # size classes: mappings are reused
            span *= 2
        span = max(span, (size + 128 + page - 1) // page * page)  # large copies: their own mapping
        self.reach, self.span = reach, span
        self.total = reach + span + reach
        self.base = base = _acquire(reach, span)
        end = base + reach + span
        if exact_end:
            # The last byte touches the fence: one byte past the end faults.
            # (Alignment: the end is page-aligned, so the start is as aligned
            # as the size is: a whole number of elements.)
            start = end - size
        else:
            start = ((end - size) & ~63) + (src & 63)
            if start + size > end:
                start -= 64
        self.address, self.size = start, size
        # The accessible bytes before the copy hold a pattern, so that a store
        # there is seen afterwards (`slack_written`).
        self.slack = (base + reach, start - (base + reach))
        ctypes.memset(self.slack[0], _SLACK_BYTE[0], self.slack[1])
        ctypes.memmove(start, src, size)

    def slack_written(self) -> int | None:
        """The offset (negative, from the copy's start) of the lowest byte
        before the copy that something wrote, or None."""
        at, n = self.slack
        data = ctypes.string_at(at, n)
        # One comparison (memcmp) on every dispatch: the slack is up to the
        # copy's size, and removing the pattern byte by byte (bytes.replace)
        # took 12 ms for a 1 MiB copy, 4x the GEMM it guarded.
        if data == _SLACK_BYTE * n:
            return None
        first = len(data) - len(data.lstrip(_SLACK_BYTE))
        return -(n - first)

    def offset_of(self, address: int) -> int | None:
        """`address` relative to the copy's start, when it lies in this
        mapping (fences included)."""
        if self.base <= address < self.base + self.total:
            return address - self.address
        return None

    def load(self, data: bytes):
        ctypes.memmove(self.address, data, len(data))

    def read(self) -> bytes:
        return ctypes.string_at(self.address, self.size)

    def close(self):
        if self.base:
            _release(self.base, self.reach, self.span)
            self.base = 0


class GuardedBuffers:
    """Guarded copies of every bound buffer's addressable span (a view's whole
    storage); `ptrs` and `sizes` stand in for the bound pointers and sizes.
    The buffers in `in_place` (ones the kernel only reads, every access
    proven in bounds) are used where they are: nothing can fault there."""

    def __init__(self, ptrs: list[int], spans: list[tuple[int, int]], in_place: set[int] = frozenset()):
        self.copies = [GuardedCopy(lo, n) if p and n and i not in in_place else None
                       for i, (p, (lo, n)) in enumerate(zip(ptrs, spans))]
        self.ptrs = [c.address + (p - lo) if c else p for c, p, (lo, _) in zip(self.copies, ptrs, spans)]
        self.sizes = [(lo + n - p) if p else 0 for p, (lo, n) in zip(ptrs, spans)]

    def close(self):
        for c in self.copies:
            if c is not None:
                c.close()
        self.copies = []
