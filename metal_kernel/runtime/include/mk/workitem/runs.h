// Running a region for runs of threads (mk/workitem.h): the group's
// driver state, the region calls' summaries, one call per run in the
// default order, the spans of the checker's other orders, and runs of the
// threads at one point picked out by mask.
#pragma once
#include "stage.h"

#ifdef MK_WORKITEM
namespace mk {
namespace wi {

struct GroupState {
  const Kernel* k;
  Run* r;
  const WiGroup* g;
  char* slots;
  char* stage;
  char* frames;
  uint32_t* st;
  uint8_t* released;
  uint32_t n;
  // The last run_span that staged its point's values for the whole span
  // (resume point, threads), or last_resume ~0: see stage_uniforms' `again`.
  uint32_t last_resume, last_b, last_e;
  // The point every live thread of the last region call [left_b, left_e)
  // left it at, if nothing ran since (else left_at ~0): a run there within
  // those threads skips the check of run-invariant values (stage_uniforms'
  // `one_call`).
  uint32_t left_at, left_b, left_e;
};

inline Summary combine(Summary a, Summary b) {
  const uint32_t mn = uint32_t(a.states) < uint32_t(b.states) ? uint32_t(a.states) : uint32_t(b.states);
  const uint32_t la = uint32_t(a.states >> 32), lb = uint32_t(b.states >> 32);
  return {(uint64_t(la > lb ? la : lb) << 32) | mn, a.ndone + b.ndone,
          a.live_lo < b.live_lo ? a.live_lo : b.live_lo, a.live_hi > b.live_hi ? a.live_hi : b.live_hi};
}

constexpr Summary kEmpty = {0xffffffffu, 0, 0xffff, 0};

inline Summary summarize(const uint32_t* st, uint32_t n) {
  uint32_t mn = 0xffffffffu, mx = 0, done = 0, lo = 0xffff, hi = 0;
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t p = st[t];
    mn = p < mn ? p : mn;
    const uint32_t live = p == DONE ? 0 : p;
    mx = live > mx ? live : mx;
    done += p == DONE;
    const uint32_t l = p == DONE ? 0xffff : t, h = p == DONE ? 0 : t + 1;
    lo = l < lo ? l : lo;
    hi = h > hi ? h : hi;
  }
  return {(uint64_t(mx) << 32) | mn, done, uint16_t(lo), uint16_t(hi)};
}

// Runs threads [b, e), all resuming at `resume`, in order.
inline Summary run_span(GroupState& G, uint32_t resume, uint32_t b, uint32_t e) {
  const Sync& s = G.k->syncs[resume];
  G.r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(b));
  const bool again = s.kind == SYNC_POINT && resume == G.last_resume && b >= G.last_b && e <= G.last_e;
  G.last_resume = ~0u;
#ifdef MK_CHECK
  const bool one_call = false;  // checked builds compare every thread's bits
#else
  const bool one_call = resume == G.left_at && b >= G.left_b && e <= G.left_e;
#endif
  G.left_at = ~0u;
  if (s.num_uniform == 0 ||
      stage_uniforms(G.k, s, G.slots, G.stage, b, e, G.g->group_size.x, G.g->group_size.y, again, one_call)) {
    G.last_resume = resume;
    G.last_b = b;
    G.last_e = e;
    const Summary m = G.k->loop(G.g, G.slots, G.stage, G.frames, G.st, b, e, resume, nullptr, 0);
    if (uint32_t(m.states) == uint32_t(m.states >> 32)) {  // every live thread at one point
      G.left_at = uint32_t(m.states);
      G.left_b = b;
      G.left_e = e;
    }
    return m;
  }
  // The threads disagree on a value the region code reads once per run:
  // one thread at a time.
  Summary mm = kEmpty;
  for (uint32_t t = b; t < e; ++t) {
    stage_uniforms(G.k, s, G.slots, G.stage, t, t + 1, G.g->group_size.x, G.g->group_size.y);
    G.r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(t));
    mm = combine(mm, G.k->loop(G.g, G.slots, G.stage, G.frames, G.st, t, t + 1, resume, nullptr, 0));
  }
  return mm;
}

// A permutation of [0, count): the k-th item is (mul * k + add) mod count
// (mul coprime with count, both below it), walked by adding mul.
struct Affine {
  uint32_t mul, add, count;
  uint32_t next(uint32_t i) const { return i + mul >= count ? i + mul - count : i + mul; }
};

// Greatest common divisor without dividing (Stein's algorithm): order_of
// runs once per region, where a division costs as much as a small region.
inline uint32_t binary_gcd(uint32_t x, uint32_t y) {
  if (!x || !y) return x | y;
  const int shift = __builtin_ctz(x | y);
  x >>= __builtin_ctz(x);
  do {
    y >>= __builtin_ctz(y);
    if (x > y) {
      const uint32_t t = x;
      x = y;
      y = t;
    }
    y -= x;
  } while (y);
  return x << shift;
}

// What makes a group's shuffles differ from another group's.
inline uint32_t group_salt(const GroupState& G) {
  const u3 tg = G.g->threadgroup_position;
  return tg.x * 0x2C1B3C6Du ^ tg.y * 0x297A2D39u ^ tg.z;
}

// Launch::order's permutation of `count` items (count >= 1): last first
// (MK_ORDER_REVERSE), or one drawn from the seed and `salt` (so that each
// group, region and run of threads is shuffled its own way).
inline Affine order_of(const Launch* l, uint32_t count, uint32_t salt) {
  if (l->order == MK_ORDER_REVERSE || count < 2) return {count - 1, count - 1, count};
  uint32_t h = l->seed * 0x9E3779B9u + salt * 0x85EBCA6Bu;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  // h scaled to [0, count) by a multiply (no division)
  const auto below = [count](uint32_t v) { return uint32_t((uint64_t(v) * count) >> 32); };
  uint32_t mul = below(h);
  if ((count & (count - 1)) == 0) {
    mul |= 1;  // the usual power of two: any odd multiplier
  } else {
    mul = mul ? mul : 1;
    while (binary_gcd(mul, count) != 1) mul = mul + 1 < count ? mul + 1 : 1;
  }
  return {mul, below(h * 0x01000193u + 0x7F4A7C15u), count};
}

// At most one span per simdgroup, or per thread in groups of two
// simdgroups or less.
constexpr uint32_t kMaxSpans = MK_MAX_THREADS_PER_GROUP / MK_SIMD_WIDTH > 2 * MK_SIMD_WIDTH
                                   ? MK_MAX_THREADS_PER_GROUP / MK_SIMD_WIDTH
                                   : 2 * MK_SIMD_WIDTH;

// Launch::order other than the default: the threads of a region run in
// another legal order. Metal orders nothing between two synchronisation
// points, so any order of whole per-thread regions is one the GPU may
// produce: simdgroups last first (MK_ORDER_REVERSE) or shuffled
// (MK_ORDER_SHUFFLE); within a simdgroup, threads in order, except in groups of at most two
// simdgroups, where they run last first too.
// Writes threads [b, e) as spans (LoopFn) in that order and returns how
// many; 0 when they are one simdgroup's threads in order (the loop's own).
__attribute__((always_inline)) inline uint32_t permuted_spans(const GroupState& G, uint32_t resume, uint32_t b,
                                                              uint32_t e, uint32_t* spans) {
  const uint32_t first = b / MK_SIMD_WIDTH, count = (e - 1) / MK_SIMD_WIDTH - first + 1;
  const bool each_thread = G.n <= 2 * MK_SIMD_WIDTH;
  if (count == 1 && !each_thread) return 0;
  const Affine order = order_of(G.r->launch, count, group_salt(G) + resume * 0x10001u + b);
  uint32_t n = 0;
  for (uint32_t k = 0, i = order.add; k < count; ++k, i = order.next(i)) {
    const uint32_t sg = first + i;
    const uint32_t lo = sg * MK_SIMD_WIDTH > b ? sg * MK_SIMD_WIDTH : b;
    const uint32_t hi = (sg + 1) * MK_SIMD_WIDTH < e ? (sg + 1) * MK_SIMD_WIDTH : e;
    if (!each_thread) {
      spans[n++] = lo | hi << 16;
      continue;
    }
    for (uint32_t t = hi; t > lo; --t) spans[n++] = (t - 1) | t << 16;
  }
  return n;
}

// The summary of threads [b, e) (b < e) that all ended at `p`.
inline Summary same_state(uint32_t p, uint32_t b, uint32_t e) {
  if (p == DONE) return {DONE, e - b, 0xffff, 0};
  return {uint64_t(p) << 32 | p, 0, uint16_t(b), uint16_t(e)};
}

// The threads of [b, e) that are idle in the region from point `s` (its
// guard, runtime/workitem/prefix_guard.py: they only return guard_state; a
// guard on x bounds the thread index when the group is one row) have no
// order anyone could observe: they get their state here, all at once, and
// `idle` their summary. Returns where they start (e if none).
inline uint32_t settle_idle(GroupState& G, const Sync& s, uint32_t b, uint32_t e, Summary* idle) {
  const u3 gs = G.g->group_size;
  if (s.guard == GUARD_NONE || (s.guard == GUARD_X && gs.y * gs.z != 1) || s.guard_below >= e) return e;
  const uint32_t from = s.guard_below > b ? s.guard_below : b;
  const uint32_t p = s.guard_state;  // a local: the stores below cannot change it
  uint32_t* const st = G.st;
  for (uint32_t t = from; t < e; ++t) st[t] = p;
  *idle = same_state(p, from, e);
  return from;
}

// Threads [b, e) in Launch::order: one call of the region loop over the
// spans, the region's uniform values staged once, as for the default order.
__attribute__((noinline)) inline Summary run_permuted(GroupState& G, uint32_t resume, uint32_t b, uint32_t e) {
  const Sync& s = G.k->syncs[resume];
  Summary mm = kEmpty;
  e = settle_idle(G, s, b, e, &mm);
  uint32_t spans[kMaxSpans];
  const uint32_t nspans = e > b ? permuted_spans(G, resume, b, e, spans) : 0;
  G.last_resume = ~0u;  // the stage is about to change
  G.left_at = ~0u;
  if (nspans <= 1) return e > b ? combine(mm, run_span(G, resume, b, e)) : mm;
  if (s.num_uniform == 0 || stage_uniforms(G.k, s, G.slots, G.stage, b, e, G.g->group_size.x, G.g->group_size.y)) {
    G.r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(b));
    return combine(mm, G.k->loop(G.g, G.slots, G.stage, G.frames, G.st, b, e, resume, spans, nspans));
  }
  // The threads disagree on a value the region code reads once per call:
  // span by span (run_span goes on to one thread at a time where needed).
  for (uint32_t i = 0; i < nspans; ++i) mm = combine(mm, run_span(G, resume, spans[i] & 0xffff, spans[i] >> 16));
  return mm;
}

// Runs threads [b, e), all resuming at `resume`.
inline Summary run_range(GroupState& G, uint32_t resume, uint32_t b, uint32_t e);

// The released threads of a round, runs of consecutive threads at the same
// point, the runs in reverse or shuffled order (Launch::order).
__attribute__((noinline)) inline void run_released_permuted(GroupState& G) {
  uint16_t starts[MK_MAX_THREADS_PER_GROUP], ends[MK_MAX_THREADS_PER_GROUP];
  uint32_t runs = 0;
  for (uint32_t t = 0; t < G.n;) {
    if (!G.released[t]) {
      ++t;
      continue;
    }
    uint32_t e = t + 1;
    while (e < G.n && G.released[e] && G.st[e] == G.st[t]) ++e;
    starts[runs] = uint16_t(t);
    ends[runs] = uint16_t(e - 1);
    ++runs;
    t = e;
  }
  if (!runs) return;
  const Affine order = order_of(G.r->launch, runs, group_salt(G) ^ (0xFFFFFFFFu - runs));
  for (uint32_t k = 0, i = order.add; k < runs; ++k, i = order.next(i))
    run_range(G, G.st[starts[i]], starts[i], uint32_t(ends[i]) + 1);
}

inline Summary run_range(GroupState& G, uint32_t resume, uint32_t b, uint32_t e) {
  if (__builtin_expect(G.r->launch->order != MK_ORDER_DEFAULT, 0) && e > b + 1) return run_permuted(G, resume, b, e);
  return run_span(G, resume, b, e);
}

static_assert(MK_SIMD_WIDTH == 32, "state_masks packs a simdgroup into 32 bits");
typedef uint32_t StateRow __attribute__((ext_vector_type(32)));
typedef bool StateBits __attribute__((ext_vector_type(32)));
static_assert(sizeof(StateBits) == 4, "32 lanes, one bit each");

// Bit t % 32 of masks[t / 32]: thread t is at point `p`.
inline void state_masks(const GroupState& G, uint32_t p, uint32_t* masks) {
  uint32_t lo = 0;
  for (; lo + MK_SIMD_WIDTH <= G.n; lo += MK_SIMD_WIDTH) {
    // A whole simdgroup: one vector compare, its lanes' bits as an integer.
    StateRow row;
    memcpy(&row, G.st + lo, sizeof(row));
    const StateBits eq = __builtin_convertvector(row == p, StateBits);
    uint32_t mask;
    memcpy(&mask, &eq, sizeof(mask));
    masks[lo / MK_SIMD_WIDTH] = mask;
  }
  if (lo < G.n) {
    uint32_t mask = 0;
    for (uint32_t t = lo; t < G.n; ++t) mask |= uint32_t(G.st[t] == p) << (t - lo);
    masks[lo / MK_SIMD_WIDTH] = mask;
  }
}

// The first thread from `t` on whose bit is `set` (G.n if none).
inline uint32_t next_bit(const GroupState& G, const uint32_t* masks, uint32_t t, bool set) {
  const uint32_t words = (G.n + MK_SIMD_WIDTH - 1) / MK_SIMD_WIDTH;
  for (uint32_t w = t / MK_SIMD_WIDTH; w < words; ++w) {
    uint32_t v = set ? masks[w] : ~masks[w];
    if (w == t / MK_SIMD_WIDTH) v &= ~0u << (t % MK_SIMD_WIDTH);
    if (v) {
      const uint32_t r = w * MK_SIMD_WIDTH + uint32_t(__builtin_ctz(v));
      return r < G.n ? r : G.n;
    }
  }
  return G.n;
}

// Runs the `live` threads whose state is `p` (`masks`, from state_masks),
// in runs of consecutive ones; every other thread has finished.
inline Summary run_state(GroupState& G, uint32_t p, uint32_t live, const uint32_t* masks) {
  Summary mm = {DONE, G.n - live, 0xffff, 0};
  for (uint32_t t = next_bit(G, masks, 0, true); t < G.n;) {
    const uint32_t e = next_bit(G, masks, t, false);
    mm = combine(mm, run_range(G, p, t, e));
    t = e < G.n ? next_bit(G, masks, e, true) : G.n;
  }
  return mm;
}

}  // namespace wi
}  // namespace mk
#endif  // MK_WORKITEM
