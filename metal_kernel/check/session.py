"""Running dispatches checked: the instrumented run, the schedule runs, and
what their records mean.

A dispatch inside ``check()`` runs

1. once in the checked build (check/build.py) with every tool on, in the
   default order: memcheck, racecheck, initcheck and synccheck record what
   they see (mk/check.h, mk/workitem.h). A kernel whose threadgroup memory
   behaves alike in every group of one kind (one shape, the same outcome of
   each edge condition: check/invariant.py, prove.py group_kinds) checks it
   in one group of each kind, and the others too only if those found
   something (``_instrumented_run``);
2. ``schedules - 1`` more times in the ordinary build, each under another
   legal schedule: threadgroups reversed or shuffled, the simdgroups between
   two synchronisation points reversed or shuffled, one worker or all of
   them. These runs work on copies of the buffers fenced by inaccessible
   pages (check/guarded.py): an access past a buffer faults instead of
   touching memory. The copies of the buffers the kernel may write start
   from the contents before the first run, and end compared with the first
   run's result: a difference is a ``schedule-dependent`` finding (or, in a
   buffer the kernel updates with float or compare-and-swap atomics, a
   note: the order of those is free);
3. leaves the buffers as the first run wrote them.
"""

from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass

from ..runtime.binding import allocation_bounds
from ..runtime.compiler import CompileOptions
from ..runtime.errors import KernelError
from ..runtime.library import Kernel, Library, load_library
from ..runtime.native import ORDER_DEFAULT, ORDER_REVERSE, ORDER_SHUFFLE
from . import native as N
from .decode import Decoder, Geometry
from .guarded import GuardedBuffers
from .prove import group_kinds, prove
from .report import Finding, Report

ALL_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
RECORD_CAPACITY = 1024


@dataclass(frozen=True)
class Schedule:
    name: str
    order: int
    seed: int
    workers: int  # 0: all


def schedules_for(count: int, seed: int) -> list[Schedule]:
    """The first `count` schedules of a checked dispatch."""
    out = [Schedule("in order", ORDER_DEFAULT, 0, 0), Schedule("reversed", ORDER_REVERSE, 0, 0)]
    k = 0
    while len(out) < count:
        workers = 1 if k % 2 == 0 else 0
        out.append(Schedule(f"shuffled (seed {seed + k}{', 1 worker' if workers else ''})", ORDER_SHUFFLE,
                            seed + k, workers))
        k += 1
    return out[:max(count, 1)]


def checked_library(lib: Library) -> Library:
    """The checked build of `lib`'s source (made once per library)."""
    clib = lib._variants.get("checked")
    if clib is None:
        if lib._source is None or lib._options is None:
            raise RuntimeError("this library was not made by compile_shader, so it cannot be rebuilt checked")
        opts = CompileOptions(**{**lib._options.key(), "checked": True})
        clib = load_library(lib._source, opts, type(lib))
        lib._variants["checked"] = clib
    return clib


class Session:
    """One check() block: runs every dispatch checked and fills the report."""

    def __init__(self, tools=ALL_TOOLS, schedules: int = 4, seed: int = 0, max_findings: int = 100,
                 on_dispatch=None):
        if isinstance(tools, str):
            tools = (tools,)
        unknown = [t for t in tools if t not in N.TOOLS]
        if unknown:
            raise ValueError(f"unknown check tool(s) {unknown}; choose from {', '.join(N.TOOLS)}")
        if int(schedules) < 1:
            raise ValueError(f"schedules must be at least 1, got {schedules}")
        self.tools = tuple(tools)
        self.mask = 0
        for t in self.tools:
            self.mask |= N.TOOLS[t]
        self.schedules = schedules_for(int(schedules), int(seed))
        self.max_findings = int(max_findings)
        self.report = Report(tools=self.tools, schedules=len(self.schedules))
        self.hidden = 0
        self.on_dispatch = on_dispatch  # called with the findings of each dispatch
        self._workers: N.WorkerStates | None = None

    def workers(self) -> N.WorkerStates:
        if self._workers is None:
            from ..runtime.native import runtime

            self._workers = N.WorkerStates(max(1, runtime().mkrt_worker_states()))
        return self._workers

    # ------------------------------------------------------------ dispatch --
    def dispatch(self, kernel: Kernel, args, b, grid, group, ngroups, threadgroup_memory, timeout_ms):
        self.report.dispatches += 1
        clib = checked_library(kernel._library)
        ck = getattr(clib, kernel.name, None)  # a large file's: built checked now
        check = clib._compiled.check_of(ck._entry) if ck is not None else {}
        facts = check.get("kernels", {}).get(str(ck._entry.symbol) if ck else "", {})
        if ck is None or ck._entry.mode != "workitem-loops" or "not_checked" in facts:
            why = facts.get("not_checked", "it has no checked build")
            self._note(f"kernel '{kernel.name}' ran unchecked: {why}")
            self.report.unchecked += 1
            kernel._launch(b, grid, group, ngroups, threadgroup_memory, timeout_ms)
            return None
        if len(b.ptrs) > N.MAX_BUFFERS:
            self._note(f"kernel '{kernel.name}' ran unchecked: {len(b.ptrs)} buffers (the checker follows at most "
                       f"{N.MAX_BUFFERS})")
            self.report.unchecked += 1
            kernel._launch(b, grid, group, ngroups, threadgroup_memory, timeout_ms)
            return None
        for call in facts.get("unchecked_calls", []):
            self._note(f"kernel '{kernel.name}': accesses in {call}() are not checked (it was not inlined)")
        spans = [_addressable(a, p, n) for a, p, n in zip(list(args) + [None] * len(b.ptrs), b.ptrs, b.sizes)]
        proof = prove(facts, grid, group, ngroups, b.ptrs, b.sizes, spans)
        if proof.whole:
            # Every access provably in bounds, no thread touches another's
            # bytes, nothing else that could go wrong: the ordinary build.
            self.report.proven += 1
            kernel._launch(b, grid, group, ngroups, threadgroup_memory, timeout_ms)
            if self.on_dispatch is not None:
                self.on_dispatch(kernel, [])
            return None
        geom = Geometry(grid, group, ngroups)
        decoder = Decoder(kernel, check, geom, b, args)
        written = set(facts.get("written", []))
        if facts.get("writes_unknown"):
            written = set(range(len(b.ptrs)))
        written = {i for i in written if i < len(b.ptrs) and b.ptrs[i] and b.sizes[i]}
        granules = {int(k): v for k, v in facts.get("buffer_granule", {}).items()}
        state = N.DispatchState(self.mask, RECORD_CAPACITY, self.workers())
        # Buffers whose every thread touches bytes of its own cannot race.
        tracked = {i: granules.get(i, 0) for i in written - proof.exclusive} if self.mask & N.TOOL_RACE else {}
        cuda = ck._entry.memory_model == "cuda"
        # Buffers whose accesses a fence and an atomic can order across
        # groups: every CUDA global pointer; in Metal, coherent(device) ones.
        coherent = {p.index for p in ck._entry.params if p.kind == "buffer" and (cuda or p.coherent)}
        state.set_buffers(spans, tracked, coherent)
        if "fence" in facts.get("uses", ()):
            state.track_fences(math.prod(ngroups), N.SYNC_CUDA if cuda else N.SYNC_METAL)
        launch = ck._launch_struct(b, grid, group, ngroups, threadgroup_memory)
        launch.check = state.address
        # The schedule runs work on guarded copies made before the first run
        # (the originals then hold the first run's results).
        # Buffers the kernel only reads but that share memory with one it
        # writes: the first run changes them.
        aliased = {i for i in range(len(spans)) if i not in written
                   and any(_overlap(spans[i], spans[w]) for w in written)}
        # Read-only buffers proven in bounds need no fenced copy.
        in_place = proof.inside - written - aliased
        guarded = GuardedBuffers(b.ptrs, spans, in_place) if len(self.schedules) > 1 else None
        pristine = {i: guarded.copies[i].read() for i in written} if guarded else {}
        # The analysis takes a buffer the kernel never writes as the same for
        # every group: not so when it is aliased.
        reps = group_kinds(facts, grid, group, ngroups, b.ptrs, b.sizes, N.MAX_REPS) \
            if facts.get("tg_invariant") and not aliased and use_representatives() else None
        failure = None
        try:
            self._instrumented_run(kernel, ck, launch, b, state, reps, proof, grid, group, ngroups,
                                   threadgroup_memory, timeout_ms)
        except KernelError as e:
            failure = e
        finally:
            if state.sync is not None and state.sync.overflow:
                self._note(f"kernel '{kernel.name}': its fences were released to atomics on more than "
                           f"{N.SYNC_OBJECTS} addresses (or chained through one more than {N.CARRIED} times); "
                           "orders through the others are not followed, so a race reported on data handed over "
                           "through them may not be real")
            state.drop_shadows()
        found = decoder.findings(state.results())
        if guarded is not None and any(f.kind == "oob" for f in found):
            # The ordinary build would make the same bad accesses again (past
            # the guard pages, into the process's memory).
            self._note(f"kernel '{kernel.name}': no schedule runs for a dispatch that accesses memory out of bounds")
            guarded.close()
            guarded = None
        try:
            if guarded is not None and failure is None:
                found += self._schedule_runs(kernel, b, guarded, pristine, decoder, written, facts, grid, group,
                                             ngroups, threadgroup_memory, timeout_ms)
        finally:
            if guarded is not None:
                guarded.close()
        self._add(found)
        if self.on_dispatch is not None:
            self.on_dispatch(kernel, found)
        if failure is not None:
            raise failure
        return None

    def _instrumented_run(self, kernel, ck, launch, b, state, reps, proof, grid, group, ngroups, threadgroup_memory,
                          timeout_ms):
        """The checked build's run. A kernel whose threadgroup memory behaves
        alike in every group of one kind (check/invariant.py) runs `reps`, one
        group of each kind (prove.py group_kinds), first. When they found
        nothing and none of their silent threadgroup stores could hide a race
        (`tg_events`, mk/check.h), the other groups' threadgroup checks would
        find nothing either: those groups run with them off, or, when nothing
        else in them can go wrong either (`proof.device`), in the ordinary
        build. Otherwise they run checked whole: the findings are the same
        either way."""
        if not reps or len(reps) >= math.prod(ngroups):
            ck._run(launch, b, timeout_ms, replay=False)
            return
        state.set_phase(N.PHASE_REPS, reps)
        ck._run(launch, b, timeout_ms, replay=False)
        if state.d.tg_events or state.d.total:
            state.set_phase(N.PHASE_OTHERS)
            ck._run(launch, b, timeout_ms, replay=False)
            return
        self.report.by_representatives += 1
        if proof.device:
            plain = kernel._launch_struct(b, grid, group, ngroups, threadgroup_memory)
            skip = (ctypes.c_uint32 * len(reps))(*reps)
            plain.skip, plain.nskip = ctypes.cast(skip, ctypes.POINTER(ctypes.c_uint32)), len(reps)
            kernel._run(plain, b, timeout_ms)
            return
        state.set_phase(N.PHASE_OTHERS_FAST)
        ck._run(launch, b, timeout_ms, replay=False)

    def _schedule_runs(self, kernel, b, guarded, pristine, decoder, written, facts, grid, group, ngroups,
                       threadgroup_memory, timeout_ms) -> list[Finding]:
        """The other schedules, in the ordinary build on the guarded copies;
        each result is compared with the first run's."""
        found: list[Finding] = []
        copy_b = _Copies(guarded, b)
        launch = kernel._launch_struct(copy_b, grid, group, ngroups, threadgroup_memory)
        first = {i: _read(b.ptrs[i], b.sizes[i]) for i in written}
        float_atomic = set(facts.get("float_atomics", []))
        reported: set[int] = set()
        for sched in self.schedules[1:]:
            for i, data in pristine.items():
                guarded.copies[i].load(data)
            launch.order, launch.seed, launch.max_workers = sched.order, sched.seed, sched.workers
            try:
                kernel._run(launch, copy_b, timeout_ms)
            except KernelError as e:
                found.append(decoder.schedule_failure(e, sched.name))
                break
            for i in sorted(written):
                if i in reported:
                    continue
                diff = decoder.first_difference(i, first[i], _read(guarded.ptrs[i], guarded.sizes[i]))
                if diff is None:
                    continue
                reported.add(i)
                if i in float_atomic:
                    self._note(decoder.float_atomic_note(i, diff, sched.name))
                else:
                    found.append(decoder.schedule_finding(i, diff, self.schedules[0].name, sched.name))
        return found

    # -------------------------------------------------------------- report --
    def _add(self, found: list[Finding]):
        for f in found:
            if len(self.report.findings) >= self.max_findings:
                self.hidden += 1
                continue
            self.report.findings.append(f)

    def _note(self, text: str):
        if text not in self.report.notes:
            self.report.notes.append(text)

    def finish(self) -> Report:
        if self.hidden:
            self._note(f"{self.hidden} more error(s) not listed (max_findings={self.max_findings})")
        return self.report


class _Copies:
    """A bound-arguments record whose buffers are the guarded copies."""

    def __init__(self, guarded: GuardedBuffers, b):
        self.ptrs, self.sizes, self.names, self.keep = guarded.ptrs, guarded.sizes, b.names, [guarded]


def use_representatives() -> bool:
    """On unless METAL_KERNEL_CHECK_REPRESENTATIVES=0 (every group's
    threadgroup accesses checked, to compare)."""
    return os.environ.get("METAL_KERNEL_CHECK_REPRESENTATIVES", "1") != "0"


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def _addressable(arg, ptr: int, size: int) -> tuple[int, int]:
    """(start, size) of the memory a buffer argument lets the kernel address:
    a tensor's whole storage and an array's whole base (a view is bound at its
    offset, and Metal lets the kernel reach the rest of the MTLBuffer), else
    the bound bytes."""
    if not ptr:
        return 0, 0
    if arg is not None and type(arg).__module__.startswith("torch") and hasattr(arg, "untyped_storage"):
        st = arg.untyped_storage()
        return st.data_ptr(), st.nbytes()
    if type(arg).__module__ == "numpy" and type(arg).__name__ == "ndarray":
        lo, hi = allocation_bounds(arg)
        return lo, hi - lo
    return ptr, size


def _read(ptr: int, size: int) -> bytes:
    return ctypes.string_at(ptr, size)


def _write(ptr: int, data: bytes):
    ctypes.memmove(ptr, data, len(data))
