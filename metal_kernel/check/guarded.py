"""Copies of a dispatch's buffers fenced by inaccessible pages, for the
schedule runs: those run the ordinary (uninstrumented, fast) kernel, and an
access past either end of a buffer then faults (a KernelError) instead of
touching the user's memory."""

from __future__ import annotations

import ctypes
import mmap

_PROT_NONE, _PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
# Address space only: the fences are never backed by memory.
_MAP_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
_MAP_FAILED = ctypes.c_void_p(-1).value
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mmap.restype = ctypes.c_void_p
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class GuardedCopy:
    """`size` bytes copied from `src` into a mapping of their own, ending
    within 64 bytes of `reach` bytes of inaccessible memory (the copy keeps
    `src`'s address modulo 64, so vector alignment is as in the original),
    as much inaccessible memory before it. A page either side is enough for
    the checker, whose instrumentation sees every access; the runtime's
    bounds-checked dispatches (runtime/store_guard.py) fence wide enough that
    any 32-bit index lands in the fence."""

    def __init__(self, src: int, size: int, reach: int = 0):
        page = mmap.PAGESIZE
        reach = max(page, (reach + page - 1) // page * page)
        span = (size + 128 + page - 1) // page * page
        self.total = reach + span + reach
        base = _libc.mmap(None, self.total, _PROT_NONE, _MAP_FLAGS, -1, 0)
        if base in (None, _MAP_FAILED):
            raise MemoryError(f"cannot reserve {self.total} bytes of address space for a guarded copy")
        self.base = base
        if _libc.mprotect(base + reach, span, _PROT_RW) != 0:
            err = ctypes.get_errno()
            _libc.munmap(base, self.total)
            raise OSError(err, "mprotect failed for a guarded copy")
        end = base + reach + span
        start = ((end - size) & ~63) + (src & 63)
        if start + size > end:
            start -= 64
        self.address, self.size = start, size
        ctypes.memmove(start, src, size)

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
            _libc.munmap(self.base, self.total)
            self.base = 0


class GuardedBuffers:
    """Guarded copies of every bound buffer's addressable span (a view's whole
    storage); `ptrs` and `sizes` stand in for the bound pointers and sizes."""

    def __init__(self, ptrs: list[int], spans: list[tuple[int, int]]):
        self.copies = [GuardedCopy(lo, n) if p and n else None for p, (lo, n) in zip(ptrs, spans)]
        self.ptrs = [c.address + (p - lo) if c else p for c, p, (lo, _) in zip(self.copies, ptrs, spans)]
        self.sizes = [(lo + n - p) if p else 0 for p, (lo, n) in zip(ptrs, spans)]

    def close(self):
        for c in self.copies:
            if c is not None:
                c.close()
        self.copies = []
