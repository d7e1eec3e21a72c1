"""A kernel called again on the same arrays skips its binding.

Binding a call (runtime/binding.py: each argument's address and extent, its
checks against the parameter, the geometry, the native Launch record) costs
a few hundred microseconds when the interpreter's caches are cold, as they
are after a kernel that streams through memory: several percent of a
16M-float saxpy. Everything it produces is a function of what `fingerprint`
reads: each array's or tensor's address, the allocation it lies in, its
element type, shape, strides and writability, each scalar's bits, the
launch sizes, the casts and the timeout. So a kernel keeps its last few
bindings under their fingerprints (`Plans`), and a call with the same
fingerprint reuses one (from the third call on: a plan is made when a
fingerprint comes back): its addresses are the caller's arrays of this call,
alive for the call like any other. A plan holds no reference to an array.

What may differ between such calls is still done on every call: the
dispatch interceptor (check(), which also bypasses plans), the timeout, the
choice of entry, and the store guard unless the first call settled it
(nothing written, or a proof that read nothing from the buffers' contents:
runtime/store_guard.py `settled`).

Only arrays, tensors and Python numbers have fingerprints; a call with any
other argument (a list, bytes, a ctypes structure, None), threadgroup
memory sizes, or a binding that warned is bound every time.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .binding import Described

PLANS_PER_KERNEL = 8


@dataclass
class Plan:
    bound: object  # binding.Bound, without references to the arrays
    grid: list
    group: list
    ngroups: list
    launch: object  # native.Launch
    settled: bool = False  # needs no store guard, ever (store_guard.settled)


def _sizes(v):
    if v is None or type(v) is int:
        return v
    if type(v) in (tuple, list) and all(type(x) is int for x in v):
        return tuple(v)
    raise TypeError


def fingerprint(args, threads, group_size, threadgroups, arg_casts, timeout, tensor_type) -> tuple | None:
    """What a call's binding depends on, or None when it cannot be reused."""
    try:
        parts = [_sizes(threads), _sizes(group_size), _sizes(threadgroups), timeout]
        if arg_casts is not None:
            parts.append(tuple(sorted(arg_casts.items())) if type(arg_casts) is dict else arg_casts)
        hash(parts[-1])
    except TypeError:
        return None
    for a in args:
        t = type(a)
        if t is np.ndarray:
            root = a
            while type(root.base) is np.ndarray:
                root = root.base
            parts.append((_layout(a), _layout(root) if root is not a else None, a.flags.writeable))
        elif t is float:
            parts.append((float, a.hex()))  # -0.0 and 0.0 bind different bits
        elif t is int or t is bool:
            parts.append((t, a))
        elif tensor_type is not None and t is tensor_type:
            if a.device.type != "cpu" or a.is_sparse or a.is_quantized:
                return None  # bound (and refused) the usual way
            try:
                storage = a.untyped_storage()
                parts.append((a.data_ptr(), storage.data_ptr(), storage.nbytes(), a.dtype, a.shape, a.stride(),
                              a.storage_offset(), a.layout))
            except Exception:  # noqa: BLE001 - a tensor without plain storage: binding says what is wrong
                return None
        else:
            return None
    return tuple(parts)


def _layout(a) -> tuple:
    """A numpy array's address, element type, shape and strides: with its
    root's, what binding.array_extent computes from."""
    return a.__array_interface__["data"][0], a.dtype, a.shape, a.strides


@dataclass(frozen=True)
class _Shape:
    """What binding.Described formats of an array, without the array."""
    shape: tuple
    dtype: object


class Plans:
    """A kernel's last few bindings by fingerprint. A binding is kept the
    second time its fingerprint is seen: a caller passing new tensors on
    every call (PyTorch's way with outputs) pays for a fingerprint, not for
    plans it never uses."""

    def __init__(self):
        self._plans: dict[tuple, Plan] = {}
        self._seen: dict[tuple, None] = {}  # fingerprints seen once, oldest first

    def get(self, key) -> Plan | None:
        return self._plans.get(key)

    def wanted(self, key) -> bool:
        """Whether a call with this fingerprint should leave a plan: it was
        seen before (and is remembered as seen otherwise)."""
        if self._seen.pop(key, _ABSENT) is not _ABSENT:
            return True
        _evict(self._seen, 2 * PLANS_PER_KERNEL)
        self._seen[key] = None
        return False

    def add(self, key, bound, grid, group, ngroups, launch) -> Plan:
        kept = type(bound)()
        # Scalars' bytes stay (the launch points into them); arrays are the
        # caller's: their names keep shape and type, not the array.
        for obj, ptr, size, name in zip(bound.keep, bound.ptrs, bound.sizes, bound.names):
            if isinstance(name, Described):
                name = Described(name.kind, _Shape(tuple(name.a.shape), name.a.dtype))
            kept.add(obj if isinstance(obj, ctypes.Array) else None, ptr, size, name)
        _evict(self._plans, PLANS_PER_KERNEL)
        plan = self._plans[key] = Plan(kept, grid, group, ngroups, launch)
        return plan

    def __len__(self):
        return len(self._plans)


_ABSENT = object()


def _evict(entries: dict, limit: int):
    """Drops the oldest entries beyond `limit - 1`. Kernels may be called
    from several threads: another may change the dict meanwhile, and losing
    a plan only costs a binding."""
    while len(entries) >= limit:
        try:
            entries.pop(next(iter(entries)), None)
        except (RuntimeError, StopIteration):
            break
