// The kernel-side half of the checking mode (metal_kernel.check).
//
// A checked library is the same kernel library built with MK_CHECK: the
// instrumentation pass (metal_kernel/check/instrument.py) puts a call to one
// of the __mk_chk_* functions below in front of every load, store, atomic
// and memory copy of each per-thread function, naming the object the pointer
// was derived from (its "root": a buffer, a threadgroup variable, a private
// array, a constant global) and the access's source line ("site"). Each call
// returns the pointer the access then uses: the original one, or, for an
// access outside its object, a zero block (loads read 0) or a sink (stores
// go nowhere), so the run goes on and nothing outside the kernel's objects
// is ever touched. The group driver (mk/workitem.h) calls the chk::on_*
// hooks at group start, at barriers and at simdgroup operations.
//
// What each tool keeps:
//   memcheck   bounds of the root object, element alignment;
//   racecheck  a shadow entry per granule (the smallest access the kernel
//              makes to the object) with the last writer and the readers
//              since, each with the clocks that order accesses:
//                threadgroup memory: the group's epoch (threadgroup barriers
//                that order threadgroup memory) and the reader's simdgroup
//                clock (simdgroup barriers that do), so lanes of one
//                simdgroup that talk after simdgroup_barrier are ordered;
//                device memory: the group and its device epoch (barriers
//                with mem_device); two groups are never ordered;
//              atomic accesses are exempt;
//   initcheck  an "ever written" bit per granule of threadgroup memory (per
//              group) and of private arrays (per thread);
//   synccheck  barrier divergence, in the driver; simd_shuffle & co reading
//              an inactive lane, in the simd computations (mk/simd.h).
// Findings go to the dispatch's record table, one record per distinct
// (kind, site, other site, object), with a count.
//
// Everything here is mirrored in metal_kernel/check/native.py.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "abi.h"

namespace mk {
struct WiGroup;

namespace chk {

enum Tool : uint32_t { TOOL_MEM = 1, TOOL_RACE = 2, TOOL_SYNC = 4, TOOL_INIT = 8 };

enum Kind : uint32_t {
  K_OOB = 1,        // outside the root object
  K_MISALIGNED = 2,  // not aligned to its element size
  K_RACE = 3,
  K_DIVERGENCE = 4,  // a barrier not every thread of the group reached
  K_UNINIT = 5,
  K_INACTIVE = 6,    // a simd function read an inactive lane
  K_RETURNED = 7,    // threads returned before a barrier others wait at
};

// Access bits (the `info` argument of the __mk_chk_* functions, constant at
// every call site): what the access does, the log2 of its element size
// (alignment) and of the root's shadow granule.
enum : uint32_t {
  A_READ = 1,
  A_WRITE = 2,
  A_ATOMIC = 4,
  A_SILENT = 8,         // set by the *_st entry points: a store that leaves every byte as it was
  A_ALIGN_SHIFT = 4,    // bits 4..7: log2(element size)
  A_GRANULE_SHIFT = 8,  // bits 8..11: log2(granule) of the root's shadow
};

// Hints in a race record's `access` (bits 16..): what was missing for a
// fence and an atomic to order the two accesses (mk/check_sync.h).
enum : uint32_t {
  A_HINT_NOT_COHERENT = 1u << 16,  // ordered, but the buffer is not coherent(device)
  A_HINT_NO_ACQUIRE = 2u << 16,    // the atomic that saw the release had no device fence after it
  A_HINT_NOT_SHARED = 4u << 16,    // another thread acquired it, with no device barrier since
};

// Object codes in records: the root of the faulting pointer.
enum : uint32_t {
  O_BUFFER = 0x10000,    // | buffer index
  O_TG = 0x20000,        // | slot
  O_TGPARAM = 0x30000,   // | [[threadgroup(n)]] index
  O_PRIVATE = 0x40000,
  O_GLOBAL = 0x50000,
  O_UNKNOWN = 0x60000,
};

// Reader tags in shadow entries (instead of a thread).
constexpr uint16_t R_MULTI_EPOCH = 0xffff;  // threadgroup: readers in >= 2 simdgroups, this epoch
constexpr uint16_t R_MULTI_SG = 0x8000;     // threadgroup: | sg: >= 2 readers of one simdgroup and clock
constexpr uint16_t R_MULTI = 0xfffe;        // device: >= 2 readers of one group and epoch
constexpr uint16_t R_MULTI_GROUPS = 0xffff; // device: readers in >= 2 groups

// Device memory: one entry per granule of a buffer the kernel may write.
// wg/rg: group + 1 (0: none); wl/rl: thread in the group (or a tag);
// we/re: the group's device epoch then; ws/rs: the access's site; wv: a
// fingerprint of the bytes the last write stored there (0: not known).
// Groups run at once on several workers: the last writer's group and value
// are one 8-byte word, read and written whole, so that another group never
// sees a writer with the previous writer's value.
struct alignas(8) DevEntry {
  uint64_t w;  // wg | wv << 32
  uint32_t rg;
  uint16_t wl, we, ws, rl, re, rs;
};
static_assert(sizeof(DevEntry) == 24, "mirrored in check/native.py");

// Threadgroup memory: one entry per granule of the worker's threadgroup arena
// (three tables by granule size, see tg_access). The writer and the readers
// are stamps: the group's generation (an entry of an older group reads as
// empty, so nothing is cleared between groups), the threadgroup epoch, and
// the thread + 1 (0: none) or a reader tag, packed so that "written or read
// in this epoch of this group" is one compare. wc/rc: the simdgroup clock of
// that thread's simdgroup; ws/rs: sites.
struct TgEntry {
  uint64_t w, r;  // gen << 32 | epoch << 16 | thread + 1 (or a reader tag)
  uint16_t wc, rc, ws, rs;
  uint64_t sw;    // the last silent store (same stamp), representatives only (Dispatch::phase)
};
static_assert(sizeof(TgEntry) == 32, "mirrored in check/native.py");

enum : uint32_t { BUF_COHERENT = 1 };  // fences and atomics order its accesses across groups

struct Buffer {
  uint64_t lo, size;
  DevEntry* shadow;  // null: not tracked (the kernel never writes it)
  uint32_t gshift, flags;  // flags: BUF_*
};

// Releases published to the addresses of atomics (mk/check_sync.h): one
// per checked dispatch of a kernel with a device-scope fence, filled by the
// host (check/native.py) with zeroed arrays of kSyncObjects * ngroups.
constexpr uint32_t kSyncObjects = 8;
constexpr uint32_t kCarried = 16;
struct Carried {
  uint32_t object, pad;
  uint64_t upto;  // what of `object` (its clock then) ...
  uint64_t at;    // ... a release to this object carried, at this clock
};
struct SyncLog {
  uint32_t lock, nobj, ngroups, overflow;  // overflow: atomics on more addresses than kSyncObjects
  uint64_t clock;
  uint64_t addr[kSyncObjects];
  uint32_t* bound;  // [object * ngroups + group]: writes of an earlier device epoch are released
  uint32_t* extra;  // thread + 1 whose writes of the bound's epoch are released too (0: none)
  uint64_t* when;   // the clock at the release (0: none)
  // Per object, acquisitions of other objects its releases carried on (a
  // group that acquired X, fenced and released to Y hands X on to Y's readers).
  uint32_t ncarried[kSyncObjects];
  Carried carried[kSyncObjects][kCarried];
};
enum : uint32_t { SYNC_METAL = 0, SYNC_CUDA = 1 };  // Dispatch::sync_mode: when an acquisition takes effect

// An acquisition of a sync object: when (the log's clock), and by which
// thread (kAllThreads: the group's, after a barrier ordering device memory);
// fenced: the thread fenced (release) since, so its releases carry it on.
constexpr uint32_t kAllThreads = 0xffffffffu;
struct Acquired {
  uint32_t object, lin;
  uint64_t when;
  uint32_t fenced, pad;
};
constexpr uint32_t kMaxAcquired = 16;
constexpr uint32_t kThreadWords = MK_MAX_THREADS_PER_GROUP / 32;

// One finding, as the kernel side records it.
struct Record {
  uint32_t kind, site, group, lin;
  uint32_t other_site, other_group, other_lin, access;  // access: this | other << 8 (A_* bits)
  uint64_t addr;
  int64_t offset;  // from the object's start
  uint64_t size;   // of the access
  uint64_t object_size;
  uint32_t object, count;
};
static_assert(sizeof(Record) == 72, "mirrored in check/native.py");

constexpr uint32_t kDedupSlots = 4096;
constexpr uint32_t kMaxReps = 8;  // representatives: one group of each kind (check/prove.py group_kinds)

struct Group;

// Summarised loops (check/summarise.py, mk/check_loop.h): the threadgroup
// reads of a loop checked as ranges in its preheader wait in the group's log
// until something could observe the shadow they would have updated.
struct LoopRead {
  uint64_t a0;     // the first iteration's address
  int64_t stride;  // bytes between iterations
  uint64_t lo;     // the object's start
  uint32_t count, size, lin, info, site, object;
  uint32_t batch;  // the reads of one loop instance share it: applied iteration by iteration
  uint32_t pad;
};
static_assert(sizeof(LoopRead) == 56, "mirrored in check/native.py");
constexpr uint32_t kLoopLog = 1024;

// A read range known to hold no uninitialised access in a generation (the
// ever-written bits only grow within a group).
struct InitRange {
  uint64_t a0;
  int64_t stride;
  uint32_t count, size, info, gen;
};
static_assert(sizeof(InitRange) == 32, "mirrored in check/native.py");
constexpr uint32_t kInitRanges = 64;

// One checked dispatch; filled by the host (check/native.py). alignas:
// explicit alignment survives -fmax-type-align=4 (compiler.py), so the 8-byte
// atomics on `total`, `keys` stay lock-free instructions (no libatomic call).
struct alignas(8) Dispatch {
  uint32_t tools;
  uint32_t nbuffers;
  Buffer buffers[64];
  Record* records;
  uint32_t capacity;
  uint32_t nrecords;   // atomic
  uint64_t total;      // every occurrence (atomic)
  uint64_t dropped;    // distinct findings past `capacity` (atomic)
  uint64_t keys[kDedupSlots];  // open addressing: key + 1, 0 empty
  uint32_t slots[kDedupSlots]; // record index + 1
  // The per-worker states (one per worker; the host owns them and their
  // threadgroup shadows, so nothing is allocated while kernels run).
  Group* states;
  uint32_t nstates;
  uint32_t next_state;  // atomic: the next free state
  uint64_t serial;      // unique per dispatch in the process
  // Kernels whose threadgroup behaviour is the same in every group of one
  // kind (check/invariant.py) run in two launches: the representatives (one
  // group of each kind, `reps`) checked whole, then the others, with their
  // threadgroup checks off when the representatives found nothing and
  // none of their silent threadgroup stores could hide a race (`tg_events`).
  uint32_t phase;       // PHASE_*
  uint32_t nreps;
  uint32_t reps[kMaxReps];
  uint32_t tg_events;   // atomic: the representatives' silent stores that could hide a race
  SyncLog* sync;        // null: the kernel has no device-scope fence (nothing orders two groups)
  uint32_t sync_mode;   // SYNC_*
};

enum : uint32_t {
  PHASE_ALL = 0,          // every group checked whole
  PHASE_REPS = 1,         // only the representatives, checked whole
  PHASE_OTHERS_FAST = 2,  // the others, threadgroup checks off
  PHASE_OTHERS = 3,       // the others, checked whole
};

constexpr uint32_t kTgArena = MK_MAX_CUDA_SHARED_MEMORY;  // the worker's arena (CUDA blocks get more than Metal's 32 KiB)
// The threadgroup shadow holds one table per granule class, so that the
// entries of an array are contiguous: 4-byte granules (and larger, several
// entries each) at off / 4, 2-byte ones at off / 2, bytes at off.
constexpr uint32_t kTgShadowEntries = kTgArena / 4 + kTgArena / 2 + kTgArena;

// The group being run on this worker.
struct Group {
  Dispatch* d;
  uint32_t group;     // linear index in the grid
  uint32_t gen;       // this group's generation (threadgroup shadow)
  uint16_t tg_epoch, dev_epoch;
  uint16_t sgc[MK_MAX_THREADS_PER_GROUP / MK_SIMD_WIDTH];
  uint64_t tg_lo;     // start of the worker's threadgroup arena
  TgEntry* tg_shadow; // kTgShadowEntries entries: three tables, see tg_entries()
  uint64_t tgp_lo[64], tgp_size[64];
  uint32_t ntgp;
  // The simd point being computed (for inactive-lane reports).
  uint32_t simd_site, simd_lo;
  uint64_t scratch_lo, scratch_size;  // the worker's work-item context (private frames live there)
  // Summarised loops (mk/check_loop.h).
  uint64_t tg_written;  // `now` (see tg_access) of the last threadgroup write
  uint32_t nlog, batch;
  LoopRead log[kLoopLog];
  InitRange init_ok[kInitRanges];
  uint32_t tg_off;  // this group's threadgroup accesses go unchecked (Dispatch::phase)
  uint32_t skip;    // this launch does not run this group (Dispatch::phase)
  // Fences and atomics (Dispatch::sync, mk/check_sync.h): the threads that
  // wrote device memory in epoch wr_epoch, those that fenced after their
  // last write in fence_epoch, the released bound, the acquisitions.
  uint16_t wr_epoch, fence_epoch;
  uint32_t released;
  uint32_t wr_bits[kThreadWords], fence_bits[kThreadWords];
  uint32_t nacq, npend;
  Acquired acq[kMaxAcquired], pend[kMaxAcquired];
};

}  // namespace chk
}  // namespace mk
#include "check_sync.h"
namespace mk {
namespace chk {

alignas(64) static const char k_zero[4096] = {};
alignas(64) static char k_sink[4096];

inline uint64_t fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

// Records a finding (first occurrence of its key) and counts it.
__attribute__((noinline, cold)) inline void report(Group* G, const Record& r) {
  Dispatch* d = G->d;
  __atomic_fetch_add(&d->total, 1, __ATOMIC_RELAXED);
  const uint64_t key = (uint64_t(r.kind) << 56) ^ (uint64_t(r.site) << 32) ^ (uint64_t(r.other_site) << 12) ^
                       uint64_t(r.object) ^ (uint64_t(r.access & 0xff) << 48);
  uint64_t h = fmix(key) % kDedupSlots;
  for (uint32_t probe = 0; probe < kDedupSlots; ++probe, h = (h + 1) % kDedupSlots) {
    uint64_t cur = __atomic_load_n(&d->keys[h], __ATOMIC_ACQUIRE);
    if (cur == 0) {
      uint64_t expected = 0;
      if (__atomic_compare_exchange_n(&d->keys[h], &expected, key + 1, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE)) {
        const uint32_t i = __atomic_fetch_add(&d->nrecords, 1, __ATOMIC_RELAXED);
        if (i >= d->capacity) {
          __atomic_fetch_add(&d->dropped, 1, __ATOMIC_RELAXED);
          __atomic_store_n(&d->slots[h], 0xffffffffu, __ATOMIC_RELEASE);
          return;
        }
        d->records[i] = r;
        d->records[i].count = 1;
        __atomic_store_n(&d->slots[h], i + 1, __ATOMIC_RELEASE);
        return;
      }
      cur = expected;
    }
    if (cur == key + 1) {
      uint32_t s;
      while ((s = __atomic_load_n(&d->slots[h], __ATOMIC_ACQUIRE)) == 0) {
      }
      if (s != 0xffffffffu) __atomic_fetch_add(&d->records[s - 1].count, 1, __ATOMIC_RELAXED);
      return;
    }
  }
  __atomic_fetch_add(&d->dropped, 1, __ATOMIC_RELAXED);
}

inline Record make_record(Group* G, uint32_t kind, uint32_t site, uint32_t lin) {
  Record r;
  memset(&r, 0, sizeof r);
  r.kind = kind;
  r.site = site;
  r.group = G->group;
  r.lin = lin;
  r.other_site = 0xffffffffu;
  r.other_group = 0xffffffffu;
  r.other_lin = 0xffffffffu;
  return r;
}

// An access outside its object (or misaligned): recorded; the access goes
// to the zero block or the sink, or (misaligned, inside) where it pointed.
__attribute__((noinline, cold)) inline void* bad_access(Group* G, uint32_t lin, void* p, uint64_t size,
                                                        uint32_t info, uint32_t site, uint32_t object,
                                                        uint64_t lo, uint64_t objsize, bool inside) {
  Record r = make_record(G, inside ? K_MISALIGNED : K_OOB, site, lin);
  r.access = info & 7;
  r.addr = reinterpret_cast<uint64_t>(p);
  r.offset = int64_t(r.addr - lo);
  r.size = size;
  r.object_size = objsize;
  r.object = object;
  if (G->d->tools & TOOL_MEM) report(G, r);
  if (inside) return p;
  if (size > sizeof k_zero) return nullptr;  // only memory copies are this large: they get length 0
  return (info & (A_WRITE | A_ATOMIC)) ? static_cast<void*>(k_sink) : const_cast<char*>(k_zero);
}

__attribute__((always_inline)) inline bool out_of(uint64_t a, uint64_t size, uint64_t lo, uint64_t objsize) {
  const uint64_t off = a - lo;
  return off > objsize || size > objsize - off;
}

__attribute__((always_inline)) inline bool misaligned(uint64_t a, uint32_t info) {
  return a & ((uint64_t(1) << ((info >> A_ALIGN_SHIFT) & 15)) - 1);
}

// ------------------------------------------------------------ races --

__attribute__((noinline, cold)) inline void race(Group* G, uint32_t lin, uint32_t site, uint32_t info,
                                                 uint32_t other_group, uint32_t other_lin, uint32_t other_site,
                                                 uint32_t other_access, uint64_t addr, uint64_t lo,
                                                 uint32_t object, uint32_t hint = 0) {
  if (!(G->d->tools & TOOL_RACE)) return;
  Record r = make_record(G, K_RACE, site, lin);
  r.access = (info & 7) | (other_access << 8) | hint;
  r.other_group = other_group;
  r.other_lin = other_lin;
  r.other_site = other_site;
  r.addr = addr;
  r.offset = int64_t(addr - lo);
  r.object = object;
  report(G, r);
}

// A nonzero fingerprint of the bytes a store of `size` bytes at buffer
// offset `off` (value at `val`) puts into granule `k`.
__attribute__((always_inline)) inline uint32_t granule_value(const uint8_t* val, uint64_t off, uint64_t size,
                                                              uint64_t k, uint32_t gs) {
  const uint64_t lo = (k << gs) > off ? (k << gs) : off;
  const uint64_t hi = ((k + 1) << gs) < off + size ? ((k + 1) << gs) : off + size;
  uint32_t h = 2166136261u ^ uint32_t(lo - (k << gs));
  for (uint64_t i = lo; i < hi; ++i) h = (h ^ val[i - off]) * 16777619u;
  return h | 1;
}

// Device memory: accesses of two groups are never ordered (but atomics);
// within a group, a barrier with mem_device between them orders them. Two
// writes of the same bytes do not race (see __mk_chk_buf_st): groups run at
// once on several workers, so a store cannot always see that an equal one
// already landed, and the writes compare the values they store instead.
__attribute__((always_inline)) inline void dev_access(Group* G, const Buffer& B, uint64_t off, uint64_t size,
                                                      uint32_t lin, uint32_t info, uint32_t site, uint32_t b,
                                                      const uint8_t* val = nullptr) {
  const uint32_t g = G->group + 1;
  const uint16_t e = G->dev_epoch, l = uint16_t(lin);
  const uint32_t gs = B.gshift;
  const uint64_t first = off >> gs, last = (off + size - 1) >> gs;
  for (uint64_t k = first; k <= last; ++k) {
    DevEntry& E = B.shadow[k];
    const uint64_t addr = B.lo + (k << gs);
    const uint32_t v = val ? granule_value(val, off, size, k, gs) : 0;
    const uint64_t W = __atomic_load_n(&E.w, __ATOMIC_RELAXED);
    const uint32_t wg = uint32_t(W), wv = uint32_t(W >> 32);
    if (wg && !(wg == g && (E.wl == l || E.we != e)) && !(v && wv == v)) {
      const uint32_t s = sync_ordered(G, B, lin, wg - 1, E.we, E.wl);
      if (s != SYNC_ORDERED) race(G, lin, site, info, wg - 1, E.wl, E.ws, A_WRITE, addr, B.lo, O_BUFFER | b, s);
    }
    if (info & A_WRITE) {
      if (G->d->sync) sync_wrote(G, lin);
      if (E.rg) {
        const bool conflict = E.rl == R_MULTI_GROUPS || E.rg != g ||
                              (E.re == e && (E.rl == R_MULTI || E.rl != l));
        const uint32_t s = conflict && E.rl != R_MULTI_GROUPS ? sync_ordered(G, B, lin, E.rg - 1, E.re, E.rl)
                                                              : SYNC_UNORDERED;
        if (conflict && s != SYNC_ORDERED)
          race(G, lin, site, info, E.rg - 1, E.rl == R_MULTI || E.rl == R_MULTI_GROUPS ? 0xffffffffu : E.rl,
               E.rs, A_READ, addr, B.lo, O_BUFFER | b, s);
        E.rg = 0;
      }
      E.wl = l;
      E.we = e;
      E.ws = uint16_t(site);
      __atomic_store_n(&E.w, uint64_t(g) | uint64_t(v) << 32, __ATOMIC_RELAXED);
    } else {
      if (!E.rg) {
        E.rg = g;
        E.rl = l;
        E.re = e;
        E.rs = uint16_t(site);
      } else if (E.rl == R_MULTI_GROUPS) {
      } else if (E.rg != g) {
        E.rl = R_MULTI_GROUPS;
      } else if (E.re != e) {
        E.rl = l;
        E.re = e;
        E.rs = uint16_t(site);
      } else if (E.rl != l && E.rl != R_MULTI) {
        E.rl = R_MULTI;
      }
    }
  }
}

inline uint64_t tg_now(const Group* G) { return (uint64_t(G->gen) << 32) | (uint64_t(G->tg_epoch) << 16); }

// Threadgroup memory: two accesses are ordered by a threadgroup barrier
// ordering threadgroup memory between them (a new epoch), or, within a
// simdgroup, by a simdgroup barrier that does (the simdgroup's clock).
__attribute__((always_inline)) inline void tg_access_now(Group* G, uint64_t a, uint64_t size, uint32_t lin,
                                                     uint32_t info, uint32_t site, uint64_t lo, uint32_t object,
                                                     uint8_t* uninit) {
  const uint64_t off = a - G->tg_lo;
  if (off >= kTgArena) return;  // not in the arena (a [[threadgroup(n)]] past its size: reported already)
  const uint32_t gs = (info >> A_GRANULE_SHIFT) & 15;
  const uint32_t unit = gs >= 2 ? 2 : gs;  // log2 of the table's bytes per entry
  TgEntry* table = G->tg_shadow + (unit == 2 ? 0 : unit == 1 ? kTgArena / 4 : kTgArena / 4 + kTgArena / 2);
  const uint64_t first = off >> unit;
  uint64_t last = (off + size - 1) >> unit;
  if (last >= (kTgArena >> unit)) last = (kTgArena >> unit) - 1;
  const uint16_t l = uint16_t(lin + 1), sg = uint16_t(lin >> 5), c = G->sgc[sg];
  const uint64_t gen = uint64_t(G->gen) << 32;
  const uint64_t now = gen | (uint64_t(G->tg_epoch) << 16);  // this epoch of this group
  bool all_uninit = true;
  // A representative group's silent stores (no access for racecheck: the
  // values made them so) must not hide from the other groups, whose values
  // differ, a race they would be part of: one that touches a silent store's
  // bytes, or that a silent store would make as a write, counts as a
  // threadgroup event (every group is then checked whole).
  const bool rep = G->d->phase == PHASE_REPS;
  for (uint64_t k = first; k <= last; ++k) {
    TgEntry& E = table[k];
    const uint64_t W = E.w;
    if (rep && (E.sw & ~uint64_t(0xffff)) == now && uint16_t(E.sw) != l)
      __atomic_fetch_add(&G->d->tg_events, 1, __ATOMIC_RELAXED);
    if ((W & ~uint64_t(0xffffffff)) == gen) all_uninit = false;  // written in this group
    if ((info & A_SILENT) && (W & ~uint64_t(0xffffffff)) == gen) {  // rewrites what this group wrote
      if (rep) {
        const uint64_t R = E.r;
        if (((W & ~uint64_t(0xffff)) == now && uint16_t(W) != l) ||
            ((R & ~uint64_t(0xffff)) == now && uint16_t(R) && uint16_t(R) != l))
          __atomic_fetch_add(&G->d->tg_events, 1, __ATOMIC_RELAXED);
        E.sw = now | l;
      }
      continue;
    }
    if (info & A_ATOMIC) {  // exempt from races; it initialises
      if ((W & ~uint64_t(0xffffffff)) != gen) E.w = gen | 0xffff0000u;  // no writer, an epoch none matches
      all_uninit = false;
      continue;
    }
    const uint16_t wl = uint16_t(W);
    if ((W & ~uint64_t(0xffff)) == now && wl && wl != l && !(((wl - 1) >> 5) == sg && E.wc != c))
      race(G, lin, site, info, G->group, wl - 1u, E.ws, A_WRITE, G->tg_lo + (k << unit), lo, object);
    const uint64_t R = E.r;
    const bool this_epoch = (R & ~uint64_t(0xffff)) == now;
    const uint16_t rl = uint16_t(R);
    if (info & A_WRITE) {
      if (this_epoch && rl) {
        bool conflict;
        if (rl == R_MULTI_EPOCH) conflict = true;
        else if (rl & R_MULTI_SG) conflict = (rl & 0x7fff) != sg || E.rc == c;
        else conflict = rl != l && !(((rl - 1) >> 5) == sg && E.rc != c);
        if (conflict)
          race(G, lin, site, info, G->group, (rl & R_MULTI_SG) ? 0xffffffffu : rl - 1u, E.rs, A_READ,
               G->tg_lo + (k << unit), lo, object);
      }
      E.r = 0;
      E.w = now | l;
      G->tg_written = now;
      E.wc = c;
      E.ws = uint16_t(site);
      all_uninit = false;
    } else if (!this_epoch || !rl) {
      E.r = now | l;
      E.rc = c;
      E.rs = uint16_t(site);
    } else if (rl == R_MULTI_EPOCH) {
    } else if (rl & R_MULTI_SG) {
      if ((rl & 0x7fff) != sg) E.r = now | R_MULTI_EPOCH;
      else if (E.rc != c) { E.r = now | l; E.rc = c; E.rs = uint16_t(site); }
    } else if (((rl - 1) >> 5) == sg) {
      if (rl == l || E.rc != c) { E.r = now | l; E.rc = c; E.rs = uint16_t(site); }
      else E.r = now | uint16_t(R_MULTI_SG | sg);
    } else {
      E.r = now | R_MULTI_EPOCH;
    }
  }
  if (uninit && (info & A_READ) && !(info & (A_WRITE | A_ATOMIC)) && all_uninit) *uninit = 1;
}

__attribute__((noinline)) inline void flush_loop_reads(Group* G);

// Every threadgroup access but a summarised loop's: the logged reads go
// into the shadow first, so that it reads as if they had run one by one.
__attribute__((always_inline)) inline void tg_access(Group* G, uint64_t a, uint64_t size, uint32_t lin,
                                                     uint32_t info, uint32_t site, uint64_t lo, uint32_t object,
                                                     uint8_t* uninit) {
  if (__builtin_expect(G->nlog != 0, 0)) flush_loop_reads(G);
  tg_access_now(G, a, size, lin, info, site, lo, object, uninit);
}

__attribute__((noinline, cold)) inline void uninit_read(Group* G, uint32_t lin, void* p, uint64_t size,
                                                        uint32_t site, uint64_t lo, uint64_t objsize, uint32_t object) {
  if (!(G->d->tools & TOOL_INIT)) return;
  Record r = make_record(G, K_UNINIT, site, lin);
  r.access = A_READ;
  r.addr = reinterpret_cast<uint64_t>(p);
  r.offset = int64_t(r.addr - lo);
  r.size = size;
  r.object_size = objsize;
  r.object = object;
  report(G, r);
}

// ------------------------------------------------------- driver hooks --

// This worker's state for dispatch `d`: claimed from the host's states at
// the worker's first group of the dispatch.
inline Group* group_state(void** worker, Dispatch* d) {
  Group*& mine = reinterpret_cast<Group*&>(worker[MK_SLOT_CHECK]);
  uint64_t& serial = reinterpret_cast<uint64_t&>(worker[MK_SLOT_CHECK_SERIAL]);
  if (serial != d->serial || !mine) {
    const uint32_t i = __atomic_fetch_add(&d->next_state, 1, __ATOMIC_RELAXED);
    if (i >= d->nstates) return nullptr;
    mine = &d->states[i];
    serial = d->serial;
  }
  return mine;
}

inline Group* group_of(const void* g) {
  return *reinterpret_cast<Group* const*>(static_cast<const char*>(g) + MK_WI_CHK_OFFSET);
}

// The object a threadgroup check names: a threadgroup variable of the kernel
// body (`base`, `objsize`) or, with `base` null, [[threadgroup(slot)]].
struct TgObject {
  uint64_t lo, size;
  uint32_t object;
};
__attribute__((always_inline)) inline TgObject tg_object(const Group* G, void* base, uint64_t objsize,
                                                         uint32_t slot) {
  if (base) return {reinterpret_cast<uint64_t>(base), objsize, O_TG | slot};
  return {G->tgp_lo[slot], G->tgp_size[slot], O_TGPARAM | slot};
}

// Where an access through a pointer of unknown origin lands: a buffer, a
// threadgroup object, or private memory (this worker's stack or work-item
// context); anything else is outside every object.
__attribute__((noinline)) inline void* classify(Group* G, uint32_t lin, void* p, uint64_t size, uint32_t info,
                                                uint32_t site);

}  // namespace chk
}  // namespace mk

// The instrumentation's entry points: one per kind of root. Each checks the
// access against its object and tracks it; it returns the pointer the access
// must use. `g` is the per-thread function's WiGroup, `lin` its thread.
#define MK_CHK_FN extern "C" __attribute__((always_inline, used, visibility("hidden"))) inline

namespace mk::chk {
__attribute__((always_inline)) inline void* buf_check(const void* g, uint32_t lin, void* p, uint64_t size,
                                                      uint32_t info, uint32_t site, uint32_t b, const void* val) {
  Group* G = group_of(g);
  const Buffer& B = G->d->buffers[b];
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  if (__builtin_expect(out_of(a, size, B.lo, B.size) || misaligned(a, info), 0)) {
    const bool inside = !out_of(a, size, B.lo, B.size);
    void* q = bad_access(G, lin, p, size, info, site, O_BUFFER | b, B.lo, B.size, inside);
    if (q != p) return q;
  }
  if (B.shadow && size && !(info & (A_ATOMIC | A_SILENT)))
    dev_access(G, B, a - B.lo, size, lin, info, site, b, static_cast<const uint8_t*>(val));
  else if (__builtin_expect(G->d->sync != nullptr, 0) && (info & A_ATOMIC) && (info & A_WRITE))
    sync_release(G, lin, a);  // before the atomic runs; __mk_chk_acquire follows it
  return p;
}
}  // namespace mk::chk

MK_CHK_FN void* __mk_chk_buf(const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info,
                             uint32_t site, uint32_t b) {
  return mk::chk::buf_check(g, lin, p, size, info, site, b, nullptr);
}

// Threadgroup variables of the kernel body (`base`: the variable, `objsize`
// its size) and [[threadgroup(n)]] parameters (base null, `slot` = n).
MK_CHK_FN void* __mk_chk_tg(const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info, uint32_t site,
                            void* base, uint64_t objsize, uint32_t slot) {
  using namespace mk::chk;
  Group* G = group_of(g);
  if (G->tg_off) return p;
  const TgObject o = tg_object(G, base, objsize, slot);
  const uint64_t lo = o.lo;
  const uint32_t object = o.object;
  objsize = o.size;
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  if (__builtin_expect(out_of(a, size, lo, objsize) || misaligned(a, info), 0)) {
    const bool inside = !out_of(a, size, lo, objsize);
    void* q = bad_access(G, lin, p, size, info, site, object, lo, objsize, inside);
    if (q != p) return q;
  }
  if (size && (G->d->tools & (TOOL_RACE | TOOL_INIT))) {
    uint8_t uninit = 0;
    tg_access(G, a, size, lin, info, site, lo, object, &uninit);
    if (__builtin_expect(uninit, 0)) uninit_read(G, lin, p, size, site, lo, objsize, object);
  }
  return p;
}

// Plain stores, with the `size` bytes they are about to write at `val`. A
// store that leaves every byte as it was cannot change what any thread reads,
// in any order, so it is no access for racecheck: compute-sanitizer's
// racecheck decides the same way (it reports a hazard only where the incoming
// value differs from the current one; benchmarks/sanitizer_probe). In
// threadgroup memory the bytes must also have been written by this group
// (an equal value in memory nobody wrote is still an uninitialised store).
MK_CHK_FN void* __mk_chk_buf_st(const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info,
                                uint32_t site, uint32_t b, const void* val) {
  using namespace mk::chk;
  const Buffer& B = group_of(g)->d->buffers[b];
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  if (B.shadow && !out_of(a, size, B.lo, B.size) && !misaligned(a, info) && !memcmp(p, val, size))
    info |= A_SILENT;
  return buf_check(g, lin, p, size, info, site, b, val);
}

MK_CHK_FN void* __mk_chk_tg_st(const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info, uint32_t site,
                               void* base, uint64_t objsize, uint32_t slot, const void* val) {
  using namespace mk::chk;
  if (group_of(g)->tg_off) return p;
  const TgObject o = tg_object(group_of(g), base, objsize, slot);
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  if (!out_of(a, size, o.lo, o.size) && !misaligned(a, info) && !memcmp(p, val, size)) info |= A_SILENT;
  return __mk_chk_tg(g, lin, p, size, info, site, base, objsize, slot);
}

// A private (thread) array: `init` has one byte per granule (log2 in
// `info`), set when written; null when the array escapes (not tracked).
MK_CHK_FN void* __mk_chk_priv(const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info,
                              uint32_t site, void* base, uint64_t objsize, uint8_t* init) {
  using namespace mk::chk;
  const uint64_t a = reinterpret_cast<uint64_t>(p), lo = reinterpret_cast<uint64_t>(base);
  if (__builtin_expect(out_of(a, size, lo, objsize) || misaligned(a, info), 0)) {
    const bool inside = !out_of(a, size, lo, objsize);
    void* q = bad_access(group_of(g), lin, p, size, info, site, O_PRIVATE, lo, objsize, inside);
    if (q != p) return q;
  }
  if (init && size) {
    const uint32_t gs = (info >> A_GRANULE_SHIFT) & 15;
    const uint64_t first = (a - lo) >> gs, last = (a - lo + size - 1) >> gs;
    if (info & (A_WRITE | A_ATOMIC)) {
      for (uint64_t k = first; k <= last; ++k) init[k] = 1;
    } else {
      uint8_t any = 0;
      for (uint64_t k = first; k <= last; ++k) any |= init[k];
      if (__builtin_expect(!any, 0)) uninit_read(group_of(g), lin, p, size, site, lo, objsize, O_PRIVATE);
    }
  }
  return p;
}

// A program-scope `constant` variable: bounds only.
MK_CHK_FN void* __mk_chk_glob(const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info,
                              uint32_t site, void* base, uint64_t objsize, uint32_t index) {
  using namespace mk::chk;
  const uint64_t a = reinterpret_cast<uint64_t>(p), lo = reinterpret_cast<uint64_t>(base);
  if (__builtin_expect(out_of(a, size, lo, objsize) || misaligned(a, info), 0)) {
    const bool inside = !out_of(a, size, lo, objsize);
    void* q = bad_access(group_of(g), lin, p, size, info, site, O_GLOBAL | index, lo, objsize, inside);
    if (q != p) return q;
  }
  return p;
}

// A device-scope fence (a marker the instrumentation replaces,
// mk/check_sync.h) by thread `lin`; `kind`: FENCE_RELEASE | FENCE_ACQUIRE.
MK_CHK_FN void __mk_chk_fence(const void* g, uint32_t lin, uint32_t kind) {
  mk::chk::Group* G = mk::chk::group_of(g);
  if (G->d->sync) mk::chk::sync_fence(G, lin, kind);
}

// After an atomic on a buffer, at `p`: it acquires the releases published there.
MK_CHK_FN void __mk_chk_acquire(const void* g, uint32_t lin, void* p) {
  mk::chk::Group* G = mk::chk::group_of(g);
  if (G->d->sync) mk::chk::sync_acquire(G, lin, reinterpret_cast<uint64_t>(p));
}

// A pointer whose origin the instrumentation could not name (loaded from
// memory, chosen between objects, made from an integer).
MK_CHK_FN void* __mk_chk_any(const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info, uint32_t site) {
  return mk::chk::classify(mk::chk::group_of(g), lin, p, size, info, site);
}
#undef MK_CHK_FN

#include "check_loop.h"
