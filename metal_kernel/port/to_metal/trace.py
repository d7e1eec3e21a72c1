"""Which thread wrote an element: one run of a kernel in its checked build
with racecheck's device-memory shadow on the buffer of interest, read back
after the run (each shadow entry holds the last writer of its granule).
For verify's report of the first differing element."""

from __future__ import annotations

import ctypes

from ...check import native as N
from ...check.session import _addressable, checked_library
from ...runtime import library as _library

MAX_TRACED_BYTES = 64 << 20


class _Entry(ctypes.Structure):
    _fields_ = [("wg", ctypes.c_uint32), ("wv", ctypes.c_uint32), ("rg", ctypes.c_uint32), ("wl", ctypes.c_uint16),
                ("we", ctypes.c_uint16), ("ws", ctypes.c_uint16), ("rl", ctypes.c_uint16),
                ("re", ctypes.c_uint16), ("rs", ctypes.c_uint16)]


assert ctypes.sizeof(_Entry) == N.DEV_ENTRY_SIZE


def writer_of(call, buffer_index: int, byte_offset: int, elem_bytes: int):
    """Runs `call()` (one kernel launch) with the interceptor below; returns
    (thread, threadgroup) of the last write to `byte_offset` of buffer
    `buffer_index`, or None when it cannot tell (no checked build, not
    written, buffer too large)."""
    found = {}

    def intercept(kernel, args, b, grid, group, ngroups, tg_mem, timeout_ms):
        clib = checked_library(kernel._library)
        ck = clib._kernels.get(kernel.name)
        size = b.sizes[buffer_index] if buffer_index < len(b.sizes) else 0
        if ck is None or ck._entry.mode != "workitem-loops" or not size or size > MAX_TRACED_BYTES or \
                len(b.ptrs) > N.MAX_BUFFERS:
            kernel._launch(b, grid, group, ngroups, tg_mem, timeout_ms)
            return None
        from ...runtime.native import runtime

        workers = N.WorkerStates(max(1, runtime().mkrt_worker_states()))
        state = N.DispatchState(N.TOOL_RACE, 64, workers)
        spans = [_addressable(a, p, n) for a, p, n in zip(list(args) + [None] * len(b.ptrs), b.ptrs, b.sizes)]
        gshift = max(0, elem_bytes.bit_length() - 1)
        state.set_buffers(spans, {buffer_index: gshift})
        launch = ck._launch_struct(b, grid, group, ngroups, tg_mem)
        launch.check = state.address
        try:
            ck._run(launch, b, timeout_ms, replay=False)
            lo = spans[buffer_index][0]
            k = (b.ptrs[buffer_index] - lo + byte_offset) >> gshift
            sh = state.shadows[0]
            e = _Entry.from_address(sh.address + k * N.DEV_ENTRY_SIZE)
            if e.wg:
                g = e.wg - 1
                nx, ny = ngroups[0], ngroups[1]
                gx, gy, gz = g % nx, (g // nx) % ny, g // (nx * ny)
                lin = e.wl
                bx, by = group[0], group[1]
                found["at"] = ((lin % bx, (lin // bx) % by, lin // (bx * by)), (gx, gy, gz))
        finally:
            state.drop_shadows()
        return None

    prev = _library.set_dispatch_interceptor(intercept)
    try:
        call()
    except Exception:  # noqa: BLE001 - the report says "thread unknown"
        return None
    finally:
        _library.set_dispatch_interceptor(prev)
    return found.get("at")
