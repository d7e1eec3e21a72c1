"""ctypes view of the kernel-side checker's records (mirrors mk/check.h)."""

from __future__ import annotations

import ctypes
import itertools
import mmap

# Tools (chk::Tool)
TOOL_MEM, TOOL_RACE, TOOL_SYNC, TOOL_INIT = 1, 2, 4, 8
TOOLS = {"memcheck": TOOL_MEM, "racecheck": TOOL_RACE, "synccheck": TOOL_SYNC, "initcheck": TOOL_INIT}

# Finding kinds (chk::Kind)
K_OOB, K_MISALIGNED, K_RACE, K_DIVERGENCE, K_UNINIT, K_INACTIVE, K_RETURNED = range(1, 8)

# Access bits
A_READ, A_WRITE, A_ATOMIC, A_SILENT = 1, 2, 4, 8

# Objects
O_BUFFER, O_TG, O_TGPARAM, O_PRIVATE, O_GLOBAL, O_UNKNOWN = (0x10000, 0x20000, 0x30000, 0x40000, 0x50000,
                                                            0x60000)

DEV_ENTRY_SIZE = 24  # sizeof(chk::DevEntry)
MAX_BUFFERS = 64  # chk::Dispatch::buffers
DEDUP_SLOTS = 4096
NONE = 0xFFFFFFFF


class Buffer(ctypes.Structure):
    _fields_ = [("lo", ctypes.c_uint64), ("size", ctypes.c_uint64), ("shadow", ctypes.c_void_p),
                ("gshift", ctypes.c_uint32), ("flags", ctypes.c_uint32)]


BUF_COHERENT = 1  # chk::BUF_COHERENT: fences and atomics order its accesses across groups
# chk::A_HINT_*: in a race record's access, what was missing for a fence and an atomic to order it
A_HINT_NOT_COHERENT, A_HINT_NO_ACQUIRE, A_HINT_NOT_SHARED = 1 << 16, 2 << 16, 4 << 16


class Record(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("site", ctypes.c_uint32), ("group", ctypes.c_uint32),
                ("lin", ctypes.c_uint32), ("other_site", ctypes.c_uint32), ("other_group", ctypes.c_uint32),
                ("other_lin", ctypes.c_uint32), ("access", ctypes.c_uint32), ("addr", ctypes.c_uint64),
                ("offset", ctypes.c_int64), ("size", ctypes.c_uint64), ("object_size", ctypes.c_uint64),
                ("object", ctypes.c_uint32), ("count", ctypes.c_uint32)]


assert ctypes.sizeof(Record) == 72


class LoopRead(ctypes.Structure):
    """chk::LoopRead: a summarised loop's threadgroup reads, logged."""
    _fields_ = [("a0", ctypes.c_uint64), ("stride", ctypes.c_int64), ("lo", ctypes.c_uint64),
                ("count", ctypes.c_uint32), ("size", ctypes.c_uint32), ("lin", ctypes.c_uint32),
                ("info", ctypes.c_uint32), ("site", ctypes.c_uint32), ("object", ctypes.c_uint32),
                ("batch", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class InitRange(ctypes.Structure):
    """chk::InitRange: a read range with no uninitialised access."""
    _fields_ = [("a0", ctypes.c_uint64), ("stride", ctypes.c_int64), ("count", ctypes.c_uint32),
                ("size", ctypes.c_uint32), ("info", ctypes.c_uint32), ("gen", ctypes.c_uint32)]


assert ctypes.sizeof(LoopRead) == 56 and ctypes.sizeof(InitRange) == 32
LOOP_LOG, INIT_RANGES = 1024, 64  # chk::kLoopLog, chk::kInitRanges
MAX_REPS = 8  # chk::kMaxReps
THREAD_WORDS = 1024 // 32  # chk::kThreadWords
MAX_ACQUIRED = 16  # chk::kMaxAcquired
SYNC_OBJECTS = 8  # chk::kSyncObjects
CARRIED = 16  # chk::kCarried
SYNC_METAL, SYNC_CUDA = 0, 1  # chk::Dispatch::sync_mode


class Acquired(ctypes.Structure):
    _fields_ = [("object", ctypes.c_uint32), ("lin", ctypes.c_uint32), ("when", ctypes.c_uint64),
                ("fenced", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class Carried(ctypes.Structure):
    _fields_ = [("object", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("upto", ctypes.c_uint64),
                ("at", ctypes.c_uint64)]


class SyncLog(ctypes.Structure):
    """chk::SyncLog: releases published to atomics' addresses (mk/check_sync.h)."""
    _fields_ = [("lock", ctypes.c_uint32), ("nobj", ctypes.c_uint32), ("ngroups", ctypes.c_uint32),
                ("overflow", ctypes.c_uint32), ("clock", ctypes.c_uint64), ("addr", ctypes.c_uint64 * SYNC_OBJECTS),
                ("bound", ctypes.c_void_p), ("extra", ctypes.c_void_p), ("when", ctypes.c_void_p),
                ("ncarried", ctypes.c_uint32 * SYNC_OBJECTS), ("carried", (Carried * CARRIED) * SYNC_OBJECTS)]


# chk::Dispatch::phase
PHASE_ALL, PHASE_REPS, PHASE_OTHERS_FAST, PHASE_OTHERS = 0, 1, 2, 3


class GroupState(ctypes.Structure):
    """chk::Group: one worker's state (the kernel side fills it)."""
    _fields_ = [("d", ctypes.c_void_p), ("group", ctypes.c_uint32), ("gen", ctypes.c_uint32),
                ("tg_epoch", ctypes.c_uint16), ("dev_epoch", ctypes.c_uint16), ("sgc", ctypes.c_uint16 * 32),
                ("tg_lo", ctypes.c_uint64), ("tg_shadow", ctypes.c_void_p), ("tgp_lo", ctypes.c_uint64 * 64),
                ("tgp_size", ctypes.c_uint64 * 64), ("ntgp", ctypes.c_uint32), ("simd_site", ctypes.c_uint32),
                ("simd_lo", ctypes.c_uint32), ("scratch_lo", ctypes.c_uint64), ("scratch_size", ctypes.c_uint64),
                ("tg_written", ctypes.c_uint64), ("nlog", ctypes.c_uint32), ("batch", ctypes.c_uint32),
                ("log", LoopRead * LOOP_LOG), ("init_ok", InitRange * INIT_RANGES), ("tg_off", ctypes.c_uint32),
                ("skip", ctypes.c_uint32), ("wr_epoch", ctypes.c_uint16), ("fence_epoch", ctypes.c_uint16),
                ("released", ctypes.c_uint32), ("wr_bits", ctypes.c_uint32 * THREAD_WORDS),
                ("fence_bits", ctypes.c_uint32 * THREAD_WORDS), ("nacq", ctypes.c_uint32), ("npend", ctypes.c_uint32),
                ("acq", Acquired * MAX_ACQUIRED), ("pend", Acquired * MAX_ACQUIRED)]


class Dispatch(ctypes.Structure):
    _fields_ = [("tools", ctypes.c_uint32), ("nbuffers", ctypes.c_uint32), ("buffers", Buffer * 64),
                ("records", ctypes.POINTER(Record)), ("capacity", ctypes.c_uint32),
                ("nrecords", ctypes.c_uint32), ("total", ctypes.c_uint64), ("dropped", ctypes.c_uint64),
                ("keys", ctypes.c_uint64 * DEDUP_SLOTS), ("slots", ctypes.c_uint32 * DEDUP_SLOTS),
                ("states", ctypes.POINTER(GroupState)), ("nstates", ctypes.c_uint32),
                ("next_state", ctypes.c_uint32), ("serial", ctypes.c_uint64), ("phase", ctypes.c_uint32),
                ("nreps", ctypes.c_uint32), ("reps", ctypes.c_uint32 * MAX_REPS), ("tg_events", ctypes.c_uint32),
                ("sync", ctypes.POINTER(SyncLog)), ("sync_mode", ctypes.c_uint32)]


TG_ARENA = 232448  # MK_MAX_CUDA_SHARED_MEMORY: the worker's threadgroup arena
TG_ENTRY_SIZE = 32  # sizeof(chk::TgEntry)
TG_SHADOW_ENTRIES = TG_ARENA // 4 + TG_ARENA // 2 + TG_ARENA  # chk::kTgShadowEntries
_serial = itertools.count(1)


class WorkerStates:
    """One chk::Group per worker and its threadgroup shadow (~1.3 MiB,
    committed as touched),
    made once per check() session and shared by its dispatches."""

    def __init__(self, workers: int):
        self.array = (GroupState * workers)()
        self.shadows = []
        for st in self.array:
            m = mmap.mmap(-1, TG_SHADOW_ENTRIES * TG_ENTRY_SIZE)
            anchor = ctypes.c_char.from_buffer(m)
            self.shadows.append((m, anchor))
            st.tg_shadow = ctypes.addressof(anchor)

    def attach(self, d: "Dispatch"):
        d.states = ctypes.cast(self.array, ctypes.POINTER(GroupState))
        d.nstates = len(self.array)
        d.next_state = 0
        d.serial = next(_serial)


class DeviceShadow:
    """Zeroed shadow entries for one buffer, one per granule, in an
    anonymous mapping (pages cost nothing until touched)."""

    def __init__(self, nbytes: int, gshift: int):
        count = (max(nbytes, 1) + (1 << gshift) - 1) >> gshift
        self.size = count * DEV_ENTRY_SIZE
        self.map = mmap.mmap(-1, self.size)
        try:
            self.map.madvise(mmap.MADV_HUGEPAGE)
        except (AttributeError, OSError, ValueError):
            pass
        self._anchor = ctypes.c_char.from_buffer(self.map)
        self.address = ctypes.addressof(self._anchor)

    def close(self):
        del self._anchor
        self.map.close()


class DispatchState:
    """One checked dispatch's records, as the kernel side fills them."""

    def __init__(self, tools: int, capacity: int, workers: WorkerStates):
        self.records = (Record * capacity)()
        self.d = Dispatch()
        workers.attach(self.d)
        self.d.tools = tools
        self.d.records = ctypes.cast(self.records, ctypes.POINTER(Record))
        self.d.capacity = capacity
        self.shadows: list[DeviceShadow] = []
        self.sync: SyncLog | None = None
        self.sync_maps: list = []

    @property
    def address(self) -> int:
        return ctypes.addressof(self.d)

    def set_buffers(self, spans: list[tuple[int, int]], shadows: dict[int, int], coherent: set[int] = frozenset()):
        """`spans`: each buffer's addressable (start, size); `shadows`:
        buffer index -> log2 granule, for the buffers to track; `coherent`:
        those whose accesses fences and atomics order across groups."""
        self.d.nbuffers = len(spans)
        for i, (p, n) in enumerate(spans):
            b = self.d.buffers[i]
            b.lo, b.size = p, n
            b.shadow = None
            b.flags = BUF_COHERENT if i in coherent else 0
            if i in shadows and p and n:
                sh = DeviceShadow(n, shadows[i])
                self.shadows.append(sh)
                b.shadow = sh.address
                b.gshift = shadows[i]

    def track_fences(self, ngroups: int, mode: int):
        """A kernel with a device-scope fence: the log its releases go to
        (zeroed, in anonymous mappings that cost nothing until touched)."""
        self.sync = SyncLog()
        self.sync.ngroups = ngroups
        for name, width in (("bound", 4), ("extra", 4), ("when", 8)):
            m = mmap.mmap(-1, max(1, SYNC_OBJECTS * ngroups * width))
            anchor = ctypes.c_char.from_buffer(m)
            self.sync_maps.append((m, anchor))
            setattr(self.sync, name, ctypes.addressof(anchor))
        self.d.sync = ctypes.pointer(self.sync)
        self.d.sync_mode = mode

    def set_phase(self, phase: int, reps: list[int] = ()):
        """Which groups the next launch runs, and how (PHASE_*)."""
        self.d.phase = phase
        if reps:
            self.d.nreps = len(reps)
            for i, g in enumerate(reps):
                self.d.reps[i] = g

    def set_tools(self, tools: int):
        self.d.tools = tools

    def drop_shadows(self):
        for i in range(self.d.nbuffers):
            self.d.buffers[i].shadow = None
        for sh in self.shadows:
            sh.close()
        self.shadows = []
        if self.sync_maps:
            self.d.sync = None
            maps = [m for m, _ in self.sync_maps]
            self.sync_maps = []  # the anchors go first: a mapping with one cannot close
            for m in maps:
                m.close()

    def results(self) -> list[Record]:
        n = min(self.d.nrecords, self.d.capacity)
        return [self.records[i] for i in range(n)]

    def reset_records(self):
        ctypes.memset(ctypes.addressof(self.d.keys), 0, ctypes.sizeof(self.d.keys))
        ctypes.memset(ctypes.addressof(self.d.slots), 0, ctypes.sizeof(self.d.slots))
        self.d.nrecords = 0
        self.d.total = 0
        self.d.dropped = 0
