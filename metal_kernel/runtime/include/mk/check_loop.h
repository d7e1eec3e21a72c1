// Summarised loops: the kernel side of check/summarise.py.
//
// A counted loop without barriers whose accesses are affine in its
// induction variable gets, in its preheader, one range check per access
// (__mk_chk_*_range: would any iteration's check find something, or need
// the per-access shadow?). When every range is clean the loop runs with its
// checks skipped (__mk_chk_*_in); otherwise it runs checked access by
// access, exactly as without summaries, so that a finding names the
// iteration, thread and address it always did.
//
// A clean range must leave the shadow as its accesses would have:
//   buffers and constants: bounds only (a buffer with a race shadow is never
//       clean: its accesses run checked);
//   threadgroup reads: clean when no threadgroup write happened in this
//       epoch of this group so far (no read can race with a writer) and no
//       access of the range reads only unwritten bytes (cached per range
//       and generation: written bits only grow). Their reader stamps are
//       logged (__mk_chk_tg_range_log) and put into the shadow before
//       anything else looks at it: the next threadgroup access that is not
//       a summarised read (tg_access), a simdgroup clock tick (the driver,
//       mk/workitem.h). A threadgroup barrier starts a new epoch, where the
//       stamps of the last one mean nothing: the log is dropped then.
//       A loop whose threadgroup accesses are not all summarised reads is
//       not summarised for threadgroup memory (check/summarise.py), so the
//       log replays reads in the order they ran: loop instance by loop
//       instance, iteration by iteration, the loop's reads in order.
#pragma once

namespace mk {
namespace chk {

// Iterations of a rotated counted loop (check/loops.py) entered with
// `start`: 0 when it cannot be counted here (the counter would wrap, or
// more than 2^24 iterations). `code`: bits 0..7 the counter's width, bit 8
// signed, bit 9 a `!=` loop, bit 10 `<=` (the bound is included). `start`
// and `bound` come extended to 64 bits by the signedness.
inline uint64_t loop_trips(int64_t start, int64_t bound, int64_t step, uint32_t code) {
  const uint32_t bits = code & 0xff;
  const bool is_signed = code & 0x100, ne = code & 0x200, incl = code & 0x400;
  if (bits == 0 || bits > 64 || step <= 0) return 0;
  constexpr uint64_t kMax = uint64_t(1) << 24;
  if (ne) {
    const uint64_t mask = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
    const uint64_t t = (uint64_t(bound) - uint64_t(start)) & mask;
    return (step == 1 && t != 0 && t <= kMax) ? t : 0;
  }
  // In 64 bits: a 64-bit counter only within +-2^61 (beyond, not counted).
  if (step > (int64_t(1) << 32)) return 0;
  const int64_t lim = int64_t(1) << 61;
  int64_t lo, hi;
  if (is_signed) {
    lo = bits == 64 ? -lim : -(int64_t(1) << (bits - 1));
    hi = bits == 64 ? lim : (int64_t(1) << (bits - 1)) - 1;
  } else {
    lo = 0;
    hi = bits == 64 ? lim : bits == 63 ? INT64_MAX / 2 : (int64_t(1) << bits) - 1;
  }
  if (!is_signed && (uint64_t(start) > uint64_t(hi) || uint64_t(bound) > uint64_t(hi))) return 0;
  const int64_t s = start;
  const int64_t b = bound + (incl ? 1 : 0);
  if (s < lo || s > hi || b < lo || b > hi + 1) return 0;
  const int64_t t = s >= b ? 1 : (b - s + step - 1) / step;
  if (t > int64_t(kMax)) return 0;
  if (s + t * step > hi) return 0;  // the last `next` wraps: the loop would go on
  return uint64_t(t);
}

// The range [a0, a0 + (count - 1) * stride] of `count` accesses, given the
// first, second and last iterations' addresses: false when the three are
// not on one line (the address is not affine after all).
struct Range {
  uint64_t a0, lo_addr, hi_addr;  // first; lowest and highest access start
  int64_t stride;
  bool ok;
};

__attribute__((always_inline)) inline Range range_of(const void* p0, const void* p1, const void* pl, uint64_t count) {
  Range r;
  r.a0 = reinterpret_cast<uint64_t>(p0);
  r.stride = count > 1 ? int64_t(reinterpret_cast<uint64_t>(p1) - r.a0) : 0;
  const uint64_t last = r.a0 + uint64_t(r.stride) * (count - 1);
  r.ok = count > 0 && last == reinterpret_cast<uint64_t>(pl);
  r.lo_addr = r.stride < 0 ? last : r.a0;
  r.hi_addr = r.stride < 0 ? r.a0 : last;
  return r;
}

// Every access of the range inside [lo, lo + objsize) and aligned.
__attribute__((always_inline)) inline bool range_fits(const Range& r, uint64_t size, uint32_t info, uint64_t lo,
                                                      uint64_t objsize) {
  if (!r.ok || out_of(r.lo_addr, size, lo, objsize) || out_of(r.hi_addr, size, lo, objsize)) return false;
  return !misaligned(r.a0, info) && !misaligned(uint64_t(r.stride), info);
}

// Whether no access of the range reads only never-written bytes (the
// initcheck half of tg_access), from the cache or the shadow.
inline bool tg_range_initialised(Group* G, const Range& r, uint64_t count, uint64_t size, uint32_t info) {
  // One multiply: this runs for every summarised read range.
  const uint64_t h = ((r.a0 ^ (uint64_t(r.stride) << 16) ^ (count << 32)) * 0x9E3779B97F4A7C15ull) >> 58;
  static_assert(kInitRanges == 64, "the hash keeps 6 bits");
  InitRange& c = G->init_ok[h];
  if (c.gen == G->gen && c.a0 == r.a0 && c.stride == r.stride && c.count == count && c.size == size &&
      c.info == info)
    return true;
  const uint32_t gs = (info >> A_GRANULE_SHIFT) & 15;
  const uint32_t unit = gs >= 2 ? 2 : gs;
  const TgEntry* table = G->tg_shadow + (unit == 2 ? 0 : unit == 1 ? kTgArena / 4 : kTgArena / 4 + kTgArena / 2);
  const uint64_t gen = uint64_t(G->gen) << 32;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t off = r.a0 + uint64_t(r.stride) * i - G->tg_lo;
    if (off >= kTgArena) continue;
    uint64_t last = (off + size - 1) >> unit;
    if (last >= (kTgArena >> unit)) last = (kTgArena >> unit) - 1;
    bool written = false;
    for (uint64_t k = off >> unit; k <= last && !written; ++k) written = (table[k].w & ~uint64_t(0xffffffff)) == gen;
    if (!written) return false;
  }
  c = {r.a0, r.stride, uint32_t(count), uint32_t(size), info, G->gen};
  return true;
}

// The logged reads into the shadow, in the order they ran (see above).
__attribute__((noinline)) inline void flush_loop_reads(Group* G) {
  const uint32_t n = G->nlog;
  G->nlog = 0;
  for (uint32_t s = 0; s < n;) {
    uint32_t e = s + 1;
    while (e < n && G->log[e].batch == G->log[s].batch) ++e;
    for (uint32_t i = 0; i < G->log[s].count; ++i)
      for (uint32_t j = s; j < e; ++j) {
        const LoopRead& L = G->log[j];
        tg_access_now(G, L.a0 + uint64_t(L.stride) * i, L.size, L.lin, L.info, L.site, L.lo, L.object, nullptr);
      }
    s = e;
  }
}

// A threadgroup barrier ordering threadgroup memory, or a new group.
inline void drop_loop_reads(Group* G) { G->nlog = 0; }

}  // namespace chk
}  // namespace mk

#define MK_CHK_FN extern "C" __attribute__((always_inline, used, visibility("hidden"))) inline

MK_CHK_FN uint64_t __mk_chk_trips(int64_t start, int64_t bound, int64_t step, uint32_t code) {
  return mk::chk::loop_trips(start, bound, step, code);
}

// Range checks, one per summarised access, in the loop's preheader: p0, p1,
// pl the addresses of the first, second and last iterations; `count` the
// iterations (0: not counted, not clean). The other arguments are the
// access's own check's.
MK_CHK_FN bool __mk_chk_buf_range(const void* g, uint32_t lin, void* p0, void* p1, void* pl, uint64_t count,
                                  uint64_t size, uint32_t info, uint32_t site, uint32_t b) {
  using namespace mk::chk;
  const Buffer& B = group_of(g)->d->buffers[b];
  return range_fits(range_of(p0, p1, pl, count), size, info, B.lo, B.size) && !B.shadow;
}

MK_CHK_FN bool __mk_chk_glob_range(const void* g, uint32_t lin, void* p0, void* p1, void* pl, uint64_t count,
                                   uint64_t size, uint32_t info, uint32_t site, void* base, uint64_t objsize,
                                   uint32_t index) {
  using namespace mk::chk;
  return range_fits(range_of(p0, p1, pl, count), size, info, reinterpret_cast<uint64_t>(base), objsize);
}

// Threadgroup reads (see above); `base` null: [[threadgroup(slot)]].
MK_CHK_FN bool __mk_chk_tg_range(const void* g, uint32_t lin, void* p0, void* p1, void* pl, uint64_t count,
                                 uint64_t size, uint32_t info, uint32_t site, void* base, uint64_t objsize,
                                 uint32_t slot) {
  using namespace mk::chk;
  Group* G = group_of(g);
  if (G->tg_off) return true;
  const TgObject o = tg_object(G, base, objsize, slot);
  const Range r = range_of(p0, p1, pl, count);
  if (!range_fits(r, size, info, o.lo, o.size)) return false;
  const uint32_t tools = G->d->tools;
  if ((tools & TOOL_RACE) && G->tg_written == tg_now(G)) return false;
  if (tools & TOOL_INIT) return tg_range_initialised(G, r, count, size, info);
  return true;
}

// After the loop's range checks (`clean`: all of them passed): the reads
// of range `j` of the loop's `n` wait in the log (racecheck only).
MK_CHK_FN void __mk_chk_tg_range_log(const void* g, uint32_t lin, bool clean, void* p0, void* p1, uint64_t count,
                                     uint64_t size, uint32_t info, uint32_t site, void* base, uint32_t slot,
                                     uint32_t j, uint32_t n) {
  using namespace mk::chk;
  Group* G = group_of(g);
  if (!clean || !(G->d->tools & TOOL_RACE) || G->tg_off) return;
  if (j == 0) {
    if (G->nlog + n > kLoopLog) flush_loop_reads(G);
    ++G->batch;
  }
  LoopRead& L = G->log[G->nlog++];
  L.a0 = reinterpret_cast<uint64_t>(p0);
  L.stride = count > 1 ? int64_t(reinterpret_cast<uint64_t>(p1) - L.a0) : 0;
  const TgObject o = tg_object(G, base, 0, slot);
  L.lo = o.lo;
  L.count = uint32_t(count);
  L.size = uint32_t(size);
  L.lin = lin;
  L.info = info;
  L.site = site;
  L.object = o.object;
  L.batch = G->batch;
}

// A summarised access in the loop: its check, unless the ranges were clean.
MK_CHK_FN void* __mk_chk_buf_in(bool clean, const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info,
                                uint32_t site, uint32_t b) {
  if (__builtin_expect(clean, 1)) return p;
  return __mk_chk_buf(g, lin, p, size, info, site, b);
}

MK_CHK_FN void* __mk_chk_tg_in(bool clean, const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info,
                               uint32_t site, void* base, uint64_t objsize, uint32_t slot) {
  if (__builtin_expect(clean, 1)) return p;
  return __mk_chk_tg(g, lin, p, size, info, site, base, objsize, slot);
}

MK_CHK_FN void* __mk_chk_glob_in(bool clean, const void* g, uint32_t lin, void* p, uint64_t size, uint32_t info,
                                 uint32_t site, void* base, uint64_t objsize, uint32_t index) {
  if (__builtin_expect(clean, 1)) return p;
  return __mk_chk_glob(g, lin, p, size, info, site, base, objsize, index);
}
#undef MK_CHK_FN
