"""Running dispatches checked: the instrumented run, the schedule runs, and
what their records mean.

A dispatch inside ``check()`` runs

1. once in the checked build (check/build.py) with every tool on, in the
   default order: memcheck, racecheck, initcheck and synccheck record what
   they see (mk/check.h, mk/workitem.h);
2. ``schedules - 1`` more times in the checked build with memcheck only (an
   access outside its object can never touch memory, whatever the order),
   each under another legal schedule: threadgroups reversed or shuffled,
   the threads between two synchronisation points reversed or shuffled by
   simdgroup, one worker or all of them. Every buffer the kernel may write
   is restored before each run and compared after it with the first run's
   result: a difference is a ``schedule-dependent`` finding (or, in a buffer
   the kernel adds floats to atomically, a note: the order of float
   additions is free);
3. leaves the buffers as the first run wrote them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..runtime.compiler import CompileOptions
from ..runtime.errors import KernelError
from ..runtime.library import Kernel, Library, load_library
from ..runtime.native import ORDER_DEFAULT, ORDER_REVERSE, ORDER_SHUFFLE
from . import native as N
from .decode import Decoder, Geometry
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
        clib = load_library(lib._source, opts)
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

    # ------------------------------------------------------------ dispatch --
    def dispatch(self, kernel: Kernel, args, b, grid, group, ngroups, threadgroup_memory, timeout_ms):
        self.report.dispatches += 1
        clib = checked_library(kernel._library)
        ck = clib._kernels.get(kernel.name)
        facts = (clib._compiled.check or {}).get("kernels", {}).get(str(ck._entry.symbol) if ck else "", {})
        if ck is None or ck._entry.mode != "workitem-loops" or "not_checked" in facts:
            why = facts.get("not_checked", "it has no checked build")
            self._note(f"kernel '{kernel.name}' ran unchecked: {why}")
            kernel._launch(b, grid, group, ngroups, threadgroup_memory, timeout_ms)
            return None
        for call in facts.get("unchecked_calls", []):
            self._note(f"kernel '{kernel.name}': accesses in {call}() are not checked (it was not inlined)")
        geom = Geometry(grid, group, ngroups)
        decoder = Decoder(kernel, clib._compiled.check, geom, b, args)
        written = set(facts.get("written", []))
        if facts.get("writes_unknown"):
            written = set(range(len(b.ptrs)))
        written = {i for i in written if i < len(b.ptrs) and b.ptrs[i] and b.sizes[i]}
        granules = {int(k): v for k, v in facts.get("buffer_granule", {}).items()}
        state = N.DispatchState(self.mask, RECORD_CAPACITY)
        tracked = {i: granules.get(i, 0) for i in written} if self.mask & N.TOOL_RACE else {}
        state.set_buffers(b.ptrs, b.sizes, tracked)
        launch = ck._launch_struct(b, grid, group, ngroups, threadgroup_memory)
        launch.check = state.address
        multi = len(self.schedules) > 1
        before = {i: _read(b.ptrs[i], b.sizes[i]) for i in written} if multi else {}
        failure = None
        try:
            ck._run(launch, b, timeout_ms, replay=False)
        except KernelError as e:
            failure = e
        finally:
            state.drop_shadows()
        found = decoder.findings(state.results())
        seen = state.d.nrecords
        if multi and failure is None:
            found += self._schedule_runs(ck, launch, b, state, decoder, before, written, facts, timeout_ms, seen)
        self._add(found)
        if self.on_dispatch is not None:
            self.on_dispatch(kernel, found)
        if failure is not None:
            raise failure
        return None

    def _schedule_runs(self, ck, launch, b, state, decoder, before, written, facts, timeout_ms, seen) -> list[Finding]:
        found: list[Finding] = []
        first = {i: _read(b.ptrs[i], b.sizes[i]) for i in written}
        state.set_tools(self.mask & N.TOOL_MEM)
        float_atomic = set(facts.get("float_atomics", []))
        reported: set[int] = set()
        try:
            for sched in self.schedules[1:]:
                for i, data in before.items():
                    _write(b.ptrs[i], data)
                launch.order, launch.seed, launch.max_workers = sched.order, sched.seed, sched.workers
                try:
                    ck._run(launch, b, timeout_ms, replay=False)
                except KernelError as e:
                    self._note(f"kernel '{ck.name}' failed under schedule {sched.name}: {e}")
                    break
                records = state.results()
                found += decoder.findings(records[seen:])
                seen = len(records)
                for i in sorted(written):
                    if i in reported:
                        continue
                    diff = decoder.first_difference(i, first[i], _read(b.ptrs[i], b.sizes[i]))
                    if diff is None:
                        continue
                    reported.add(i)
                    if i in float_atomic:
                        self._note(decoder.float_atomic_note(i, diff, sched.name))
                    else:
                        found.append(decoder.schedule_finding(i, diff, self.schedules[0].name, sched.name))
        finally:
            launch.order, launch.seed, launch.max_workers = ORDER_DEFAULT, 0, 0
            for i, data in first.items():
                _write(b.ptrs[i], data)
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


def _read(ptr: int, size: int) -> bytes:
    return ctypes.string_at(ptr, size)


def _write(ptr: int, data: bytes):
    ctypes.memmove(ptr, data, len(data))
