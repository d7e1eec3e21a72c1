"""Copies of a dispatch's buffers fenced by inaccessible pages, for the
schedule runs: those run the ordinary (uninstrumented, fast) kernel, and an
access past either end of a buffer then faults (a KernelError) instead of
touching the user's memory."""

from __future__ import annotations

import ctypes
import mmap

_PROT_NONE = 0
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


class GuardedCopy:
    """`size` bytes copied from `src` into a mapping of their own, ending
    within 64 bytes of a guard page (the copy keeps `src`'s address modulo
    64, so vector alignment is as in the original), a guard page before."""

    def __init__(self, src: int, size: int):
        page = mmap.PAGESIZE
        span = (size + 128 + page - 1) // page * page
        self.map = mmap.mmap(-1, span + 2 * page)
        self._anchor = ctypes.c_char.from_buffer(self.map)
        base = ctypes.addressof(self._anchor)
        for at in (base, base + page + span):
            if _libc.mprotect(at, page, _PROT_NONE) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed for a guard page")
        end = base + page + span
        start = ((end - size) & ~63) + (src & 63)
        if start + size > end:
            start -= 64
        self.address, self.size = start, size
        ctypes.memmove(start, src, size)

    def load(self, data: bytes):
        ctypes.memmove(self.address, data, len(data))

    def read(self) -> bytes:
        return ctypes.string_at(self.address, self.size)

    def close(self):
        del self._anchor
        self.map.close()


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
