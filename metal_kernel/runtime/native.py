"""ctypes view of the runtime library (mirrors include/mk/abi.h)."""

from __future__ import annotations

import ctypes
import functools
import os
import threading

from .compiler import build_runtime_library

ABI_VERSION = 5
DISPATCH_NEVER_SYNCS = 1  # MK_DISPATCH_NEVER_SYNCS in abi.h
DISPATCH_COALESCE = 2  # MK_DISPATCH_COALESCE
DISPATCH_NO_FIBER = 4  # MK_DISPATCH_NO_FIBER
DISPATCH_CUDA = 8  # MK_DISPATCH_CUDA
CUDA_MAX_SHARED_MEMORY = 232448  # MK_MAX_CUDA_SHARED_MEMORY
# The work-item driver's limits (mk/workitem.h): launches within them never
# fall back to fibers.
WORKITEM_MAX_BUFFERS = 64  # MK_WI_MAX_BUFFERS
WORKITEM_MAX_TG_BUFFERS = 64


class U3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint32), ("y", ctypes.c_uint32), ("z", ctypes.c_uint32)]


class Launch(ctypes.Structure):
    _fields_ = [
        ("buffers", ctypes.POINTER(ctypes.c_void_p)),
        ("buffer_sizes", ctypes.POINTER(ctypes.c_uint64)),
        ("nbuffers", ctypes.c_uint32),
        ("threads_per_grid", U3),
        ("threads_per_threadgroup", U3),
        ("threadgroups_per_grid", U3),
        ("ntg_buffers", ctypes.c_uint32),
        ("tg_buffer_sizes", ctypes.POINTER(ctypes.c_uint32)),
        ("order", ctypes.c_uint32),
        ("seed", ctypes.c_uint32),
        ("max_workers", ctypes.c_uint32),
        ("check", ctypes.c_void_p),
        ("skip", ctypes.POINTER(ctypes.c_uint32)),
        ("nskip", ctypes.c_uint32),
    ]


ORDER_DEFAULT = 0  # MK_ORDER_DEFAULT in abi.h
ORDER_REVERSE = 1  # MK_ORDER_REVERSE
ORDER_SHUFFLE = 2  # MK_ORDER_SHUFFLE


class ErrorInfo(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int32),
        ("signal", ctypes.c_int32),
        ("address", ctypes.c_uint64),
        ("thread", ctypes.c_uint32 * 3),
        ("group", ctypes.c_uint32 * 3),
        ("message", ctypes.c_char * 512),
    ]


_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def runtime() -> ctypes.CDLL:
    with _lock:
        lib = ctypes.CDLL(build_runtime_library(), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        lib.mkrt_abi_version.restype = ctypes.c_int
        if lib.mkrt_abi_version() != ABI_VERSION:
            raise RuntimeError("metal-kernel runtime library ABI mismatch; clear the cache")
        lib.mkrt_api.restype = ctypes.c_void_p
        lib.mkrt_init.argtypes = [ctypes.c_int]
        lib.mkrt_init.restype = ctypes.c_int
        lib.mkrt_worker_states.restype = ctypes.c_int  # the caller's and each pool thread's
        lib.mkrt_dispatch_counts.argtypes = [ctypes.POINTER(ctypes.c_uint64 * 5)]
        lib.mkrt_dispatch_counts.restype = None
        lib.mkrt_dispatch.argtypes = [ctypes.c_void_p, ctypes.POINTER(Launch), ctypes.POINTER(ErrorInfo),
                                      ctypes.c_uint32, ctypes.c_uint64]
        lib.mkrt_dispatch.restype = ctypes.c_int
        nthreads = int(os.environ.get("METAL_KERNEL_NUM_THREADS", "0") or 0)
        lib.mkrt_init(nthreads)
        return lib


def load_kernel_library(path: str) -> ctypes.CDLL:
    rt = runtime()
    lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    ctypes.c_void_p.in_dll(lib, "__mk_rt").value = rt.mkrt_api()
    return lib


def dispatch_counts() -> dict[str, int]:
    """How this process's dispatches ran so far: on the calling thread alone
    (one threadgroup, or a kernel whose earlier dispatches predict little
    work), handed over to the pool by the caller (the prediction was wrong),
    or on the pool from the start; and the pool dispatches seen with two of
    their threads starting on one CPU, and whether the pool's threads are
    pinned to CPUs of their own since (METAL_KERNEL_PIN_THREADS)."""
    out = (ctypes.c_uint64 * 5)()
    runtime().mkrt_dispatch_counts(ctypes.byref(out))
    return {"caller": out[0], "handed_over": out[1], "pool": out[2], "shared_cpu": out[3], "pinned": out[4]}

