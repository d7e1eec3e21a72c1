"""From the kernel side's records to findings a person can act on: threads
as (x, y, z), objects by their names in the source, lines in the user's
file, and the sentences of the text report."""

from __future__ import annotations

import re

import numpy as np

from . import native as N
from .report import Finding, OtherAccess

_SPACES = {N.O_BUFFER: "device", N.O_TG: "threadgroup", N.O_TGPARAM: "threadgroup", N.O_PRIVATE: "thread",
           N.O_GLOBAL: "constant"}
_ACCESS = {N.A_READ: "read", N.A_WRITE: "write"}


class Geometry:
    """Where group `G` (linear) and its thread `lin` are in the grid."""

    def __init__(self, grid, group, ngroups):
        self.grid, self.group, self.ngroups = list(grid), list(group), list(ngroups)

    def group_pos(self, g: int) -> tuple[int, int, int]:
        nx, ny = self.ngroups[0], self.ngroups[1]
        return g % nx, (g // nx) % ny, g // (nx * ny)

    def thread(self, g: int, lin: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(thread position in the grid, threadgroup position)."""
        pos = self.group_pos(g)
        ext = [min(self.group[d], self.grid[d] - pos[d] * self.group[d]) for d in range(3)]
        local = (lin % ext[0], (lin // ext[0]) % ext[1], lin // (ext[0] * ext[1]))
        return tuple(pos[d] * self.group[d] + local[d] for d in range(3)), pos

    def group_threads(self, g: int) -> int:
        pos = self.group_pos(g)
        n = 1
        for d in range(3):
            n *= min(self.group[d], self.grid[d] - pos[d] * self.group[d])
        return n


def _t(v) -> str:
    return "(" + ",".join(str(x) for x in v) + ")"


def demangle(name: str) -> str:
    """Program-scope variables: '_ZL5table' / '_ZN2ns5tableE' -> 'table' / 'ns::table'."""
    m = re.fullmatch(r"_ZL?(\d+)(\w+)", name)
    if m and len(m.group(2)) >= int(m.group(1)):
        return m.group(2)[:int(m.group(1))]
    m = re.fullmatch(r"_ZN((?:\d+\w+?)+)E", name)
    if m:
        parts, s = [], m.group(1)
        while s:
            n = re.match(r"\d+", s)
            if not n:
                break
            k = int(n.group(0))
            parts.append(s[n.end():n.end() + k])
            s = s[n.end() + k:]
        return "::".join(parts)
    return name


class Decoder:
    def __init__(self, kernel, meta: dict, geom: Geometry, bound, args):
        self.kernel = kernel
        self.name = kernel.name
        self.sites = meta.get("sites", [])
        self.tg_names = {int(k): v for k, v in meta.get("tg_names", {}).items()}
        self.globals = meta.get("globals", [])
        self.geom = geom
        self.bound = bound
        self.args = args
        params = kernel._entry.params
        self.buffer_names = {p.index: p.name for p in params if p.kind == "buffer"}
        self.tgparam_names = {p.index: p.name for p in params if p.kind == "threadgroup"}

    # -------------------------------------------------------------- parts --
    def site(self, s: int) -> tuple[str | None, str, str]:
        """(file:line, function, the 'at fn() in file:line' phrase)."""
        if s >= len(self.sites):
            return None, self.name, f"at {self.name}() (line unknown)"
        file, line, _col, fn, _what = self.sites[s]
        if not fn or fn.startswith("__mk_"):
            fn = self.name
        fn = re.sub(r"<.*", "", fn) if fn.startswith("__") else fn
        where = f"{file}:{line}"
        return where, fn, f"at {fn}() in {where}"

    def object(self, code: int, size: int) -> tuple[str | None, tuple[int, str] | None, str]:
        """(address space, buffer, a phrase naming the object)."""
        kind, idx = code & 0xFFFF0000, code & 0xFFFF
        space = _SPACES.get(kind)
        if kind == N.O_BUFFER:
            nm = self.buffer_names.get(idx, "?")
            return space, (idx, nm), f"buffer {idx} '{nm}' ({size} bytes)"
        if kind == N.O_TG:
            nm = self.tg_names.get(idx)
            what = f"threadgroup variable '{nm}'" if nm else "a threadgroup variable"
            return space, None, f"{what} ({size} bytes)"
        if kind == N.O_TGPARAM:
            return space, None, f"threadgroup buffer {idx} '{self.tgparam_names.get(idx, '?')}' ({size} bytes)"
        if kind == N.O_PRIVATE:
            return space, None, f"a private array ({size} bytes)"
        if kind == N.O_GLOBAL:
            nm = demangle(self.globals[idx]) if idx < len(self.globals) else "?"
            return space, None, f"program-scope constant '{nm}' ({size} bytes)"
        return None, None, "memory"

    def thread_phrase(self, g: int, lin: int) -> tuple[tuple, tuple, str]:
        t, pos = self.geom.thread(g, lin)
        return t, pos, f"thread {_t(t)} in threadgroup {_t(pos)}"

    # ------------------------------------------------------------ findings --
    def findings(self, records) -> list[Finding]:
        out = []
        for r in sorted(records, key=lambda r: (r.group, r.lin, r.kind, r.site)):
            f = self.finding(r)
            if f is not None:
                out.append(f)
        return out

    def finding(self, r) -> Finding | None:
        where, fn, at = self.site(r.site)
        t, pos, by = self.thread_phrase(r.group, r.lin)
        common = dict(kernel=self.name, thread=t, threadgroup=pos, simdgroup=r.lin // 32, lane=r.lin % 32,
                      line=where, function=fn, count=r.count)
        if r.kind in (N.K_OOB, N.K_MISALIGNED):
            space, buf, obj = self.object(r.object, r.object_size)
            access = "atomic" if r.access & N.A_ATOMIC else ("write" if r.access & N.A_WRITE else "read")
            head = f"Invalid {space or 'memory'} {access} of size {r.size} bytes"
            if r.kind == N.K_MISALIGNED:
                detail = f"Address {r.addr:#x} is misaligned: offset {r.offset} of {obj}"
            elif (r.object & 0xFFFF0000) == N.O_UNKNOWN:
                detail = f"Address {r.addr:#x} is outside every buffer and threadgroup variable of the dispatch"
            elif r.offset < 0:
                detail = f"Address is {-r.offset} bytes before the start of {obj}"
            elif r.offset >= r.object_size:
                # From the end to the access's first byte, as compute-sanitizer
                # measures ("0 bytes after the allocation": the next element).
                detail = f"Address is {r.offset - r.object_size} bytes past the end of {obj}"
            else:
                detail = (f"Address is {r.object_size - r.offset} bytes before the end of {obj}, and the access "
                          f"runs {r.offset + r.size - r.object_size} bytes past it")
            msg_tail = "the store was not performed" if access != "read" else "the load read 0"
            return Finding(kind="oob", message=head, address_space=space, buffer=buf, offset=r.offset,
                           size=r.size, access=access, details=[at, f"by {by}", detail, f"({msg_tail})"], **common)
        if r.kind == N.K_RACE:
            return self._race(r, common, at, by)
        if r.kind == N.K_DIVERGENCE:
            ot, opos, oby = self.thread_phrase(r.group, r.other_lin)
            owhere, ofn, oat = self.site(r.other_site)
            return Finding(kind="divergence",
                           message=f"Barrier divergence: threads of threadgroup {_t(pos)} wait at different barriers",
                           other=OtherAccess(ot, opos, owhere, "barrier", ofn),
                           details=[f"{by} waits {at}", f"{oby} waits {oat}",
                                    "(every thread of a threadgroup must reach the same barrier; on a GPU this hangs "
                                    "or misbehaves)"], **common)
        if r.kind == N.K_RETURNED:
            ot, opos, oby = self.thread_phrase(r.group, r.other_lin)
            n = r.offset
            return Finding(kind="divergence",
                           message=(f"Barrier divergence: {n} thread(s) of threadgroup {_t(pos)} finished without "
                                    "reaching a barrier the others wait at"),
                           other=OtherAccess(ot, opos, where, "barrier", fn),
                           details=[f"{at} ({oby} waits there)", f"by {by} (finished)",
                                    "(every thread of the threadgroup must reach a barrier: a thread that returns "
                                    "early or skips it in a branch or loop leaves the behaviour undefined)"], **common)
        if r.kind == N.K_UNINIT:
            space, buf, obj = self.object(r.object, r.object_size)
            scope = "this thread" if space == "thread" else "any thread of this threadgroup"
            return Finding(kind="uninit", message=f"Uninitialized {space or 'threadgroup'} read of size {r.size} bytes",
                           address_space=space, offset=r.offset, size=r.size, access="read",
                           details=[at, f"by {by}",
                                    f"Offset {r.offset} of {obj if space != 'thread' else 'a private array'} "
                                    f"was never written by {scope}"], **common)
        if r.kind == N.K_INACTIVE:
            src = r.other_lin
            n = self.geom.group_threads(r.group)
            sg, lane = r.lin // 32, r.lin % 32
            if src < n:
                st, _, _ = self.thread_phrase(r.group, src)
                which = f"lane {src % 32} (thread {_t(st)}), which is not active at this call"
            else:
                which = f"lane {src % 32}, which does not exist in this partial simdgroup"
            return Finding(kind="inactive-lane",
                           message="A simd function read an inactive lane (the value is undefined on a GPU)",
                           details=[at, f"by {by} (lane {lane} of simdgroup {sg})", f"It reads {which}",
                                    "(simd_shuffle, simd_broadcast and the quad functions read only active lanes "
                                    "reliably; this runtime gives 0)"], **common)
        return None

    def _race(self, r, common, at, by) -> Finding:
        this = "write" if r.access & N.A_WRITE else "read"
        other = "write" if (r.access >> 8) & N.A_WRITE else "read"
        space, buf, obj = self.object(r.object, 0)
        obj = re.sub(r" \(0 bytes\)$", "", obj)
        owhere, ofn, oat = self.site(r.other_site)
        if r.other_lin == N.NONE:
            oby, ot, opos = "several threads", None, None
        else:
            ot, opos, oby = self.thread_phrase(r.other_group, r.other_lin)
        hazard = {("read", "write"): "read-after-write", ("write", "read"): "write-after-read",
                  ("write", "write"): "write-after-write"}.get((this, other), "race")
        if space == "device" and r.access & N.A_HINT_NOT_COHERENT:
            why = (f"a fence and an atomic order them, but {obj} is not declared coherent(device): Metal makes a "
                   "buffer's writes visible to other threadgroups of the dispatch only then (MSL 3.2)")
        elif space == "device" and r.access & N.A_HINT_NO_ACQUIRE:
            why = ("the atomic that saw the other threadgroup's release has no device-scope fence after it in its "
                   "thread: Metal's atomics are relaxed, so add atomic_thread_fence(mem_flags::mem_device, "
                   "memory_order_seq_cst, thread_scope_device) after it")
        elif space == "device" and r.access & N.A_HINT_NOT_SHARED:
            why = ("another thread of this threadgroup acquired the other threadgroup's release, but no barrier "
                   "that orders device memory (mem_flags::mem_device) came between it and this access")
        elif space == "device" and r.other_group != r.group and r.other_lin != N.NONE:
            why = ("threads of different threadgroups are ordered only when the first's group fenced its writes "
                   "(a device-scope fence) before an atomic that the second's group observed with an atomic of "
                   "its own on the same address")
        elif space == "device":
            why = "no threadgroup_barrier(mem_flags::mem_device) orders them"
        else:
            why = ("no threadgroup_barrier(mem_flags::mem_threadgroup) (or, within one simdgroup, "
                   "simdgroup_barrier(mem_flags::mem_threadgroup)) orders them")
        return Finding(kind="race", message=f"Race ({hazard} hazard) on {space or 'shared'} memory",
                       address_space=space, buffer=buf, offset=r.offset, access=this,
                       other=OtherAccess(ot, opos, owhere, other, ofn),
                       details=[f"{other.capitalize()} by {oby} {oat}", f"{this.capitalize()} by {by} {at}",
                                f"Address: offset {r.offset} of {obj}", f"({why})"], **common)

    # ------------------------------------------------------------ schedules --
    def _dtype(self, i: int):
        a = self.args[i] if i < len(self.args) else None
        if a is not None and type(a).__module__.startswith("torch"):
            import torch

            dt = a.dtype
            name = str(dt).replace("torch.", "")
            try:
                return np.dtype(torch.empty(0, dtype=dt).numpy().dtype), name
            except TypeError:  # bfloat16 has no numpy twin: show its raw bits
                return np.dtype(f"u{a.element_size()}"), name
        if isinstance(a, np.ndarray):
            return a.dtype, str(a.dtype)
        return np.dtype("u1"), "bytes"

    def first_difference(self, i: int, ref: bytes, now: bytes):
        """(element index, reference value, other value, dtype name), or None."""
        if ref == now:
            return None
        dt, name = self._dtype(i)
        a = np.frombuffer(ref, np.uint8)
        b = np.frombuffer(now, np.uint8)
        k = int(np.flatnonzero(a != b)[0]) // dt.itemsize
        lo = k * dt.itemsize
        va = np.frombuffer(ref[lo:lo + dt.itemsize], dt)[0] if lo + dt.itemsize <= len(ref) else None
        vb = np.frombuffer(now[lo:lo + dt.itemsize], dt)[0] if lo + dt.itemsize <= len(now) else None
        ndiff = int(np.count_nonzero((a != b).reshape(-1, dt.itemsize).any(axis=1))) \
            if len(a) % dt.itemsize == 0 else None
        return k, va, vb, name, ndiff

    def schedule_finding(self, i: int, diff, first: str, other: str) -> Finding:
        k, va, vb, name, ndiff = diff
        nm = self.buffer_names.get(i, "?")
        many = f" ({ndiff} elements differ)" if ndiff and ndiff > 1 else ""
        return Finding(kind="schedule-dependent", kernel=self.name,
                       message=f"The result depends on the schedule: buffer {i} '{nm}' differs at element {k}{many}",
                       address_space="device", buffer=(i, nm), offset=k,
                       details=[f"{first}: {va} ({name}); {other}: {vb}",
                                f"Kernel {self.name}() with threads {_t(self.geom.grid)} and threadgroups of "
                                f"{_t(self.geom.group)}",
                                "(the threads or threadgroups of a dispatch may run in any order on a GPU: look for "
                                "a race or an order-dependent reduction)"],
                       other=OtherAccess(None, None, None, other))

    def schedule_failure(self, err, sched: str) -> Finding:
        """The kernel faulted under another schedule (on the guarded copies)."""
        return Finding(kind="oob", kernel=self.name, thread=tuple(err.thread) if err.thread else None,
                       threadgroup=tuple(err.threadgroup) if err.threadgroup else None,
                       message=f"Invalid memory access under schedule {sched}",
                       details=[str(err), "(the first run, in order, stayed in bounds: the access depends on the "
                                "schedule)"])

    def float_atomic_note(self, i: int, diff, sched: str) -> str:
        k, va, vb, name, ndiff = diff
        nm = self.buffer_names.get(i, "?")
        return (f"kernel '{self.name}': buffer {i} '{nm}' changes with the schedule ({sched}: element {k} is "
                f"{vb} instead of {va}); the kernel adds floats to it atomically, whose order is free, so this "
                "is not an error")
