// Between regions (mk/workitem.h): simdgroup functions computed over the
// lanes that called them, and CUDA's named participants resolved.
#pragma once
#include "check_hooks.h"

#ifdef MK_WORKITEM
namespace mk {
namespace wi {

// The simd computation of point `id` over the lanes `mask` of simdgroup
// [lo, hi), or, with `groups` > 1, over `groups` full simdgroups from `lo`.
inline void simd_compute(GroupState& G, uint32_t id, uint32_t lo, uint32_t hi, uint32_t mask,
                         uint32_t groups = 1) {
  const Sync& s = G.k->syncs[id];
  DenseLanes l;
  l.in = G.slots + G.k->simd_in_offset + uint64_t(lo) * G.k->simd_in_stride;
  l.out = G.slots + G.k->simd_out_offset + uint64_t(lo) * G.k->simd_out_stride;
  l.args = reinterpret_cast<const uint32_t*>(G.slots + G.k->simd_arg_offset) + lo;
  l.in_stride = uint32_t(G.k->simd_in_stride);
  l.out_stride = uint32_t(G.k->simd_out_stride);
  l.active_mask = mask;
  l.count = hi - lo;
  l.groups = groups;
#ifdef MK_CHECK
  chk_simd(G, s, lo, groups);
  l.check = G.g->chk;
#endif
  s.dense(l);
}

// Reductions (mk/simd.h) and simdgroup matrix products
// (mk/simdgroup_matrix.h) take several full simdgroups in one call.
inline bool simd_multi(uint32_t op) {
  return (op >= SIMD_SUM && op <= SIMD_XOR) || op == SIMD_ANY || op == SIMD_ALL || op == SIMD_MATRIX;
}

// Lanes [a, b) of simdgroup [lo, hi) (a, b inside it).
inline uint32_t lane_span(uint32_t lo, uint32_t a, uint32_t b) {
  const uint32_t w = b - a;
  return (w >= MK_SIMD_WIDTH ? 0xffffffffu : (1u << w) - 1u) << (a - lo);
}

// Threads [b, e) wait at simd point `id`, every other thread has finished:
// each simdgroup's lanes in [b, e) are its active lanes.
inline void simd_range(GroupState& G, uint32_t id, uint32_t b, uint32_t e) {
  const Sync& s = G.k->syncs[id];
  uint32_t lo = b & ~uint32_t(MK_SIMD_WIDTH - 1);
  if (lo < b) {  // a simdgroup entered part of the way
    const uint32_t hi = lo + MK_SIMD_WIDTH < G.n ? lo + MK_SIMD_WIDTH : G.n;
    simd_compute(G, id, lo, hi, lane_span(lo, b, e < hi ? e : hi));
    lo += MK_SIMD_WIDTH;
  }
  const uint32_t full = lo < e ? (e - lo) / MK_SIMD_WIDTH : 0;
  if (full > 1 && simd_multi(s.op & 0xff)) {
    simd_compute(G, id, lo, lo + MK_SIMD_WIDTH, 0xffffffffu, full);
    lo += full * MK_SIMD_WIDTH;
  }
  for (; lo < e; lo += MK_SIMD_WIDTH) {
    const uint32_t hi = lo + MK_SIMD_WIDTH < G.n ? lo + MK_SIMD_WIDTH : G.n;
    simd_compute(G, id, lo, hi, lane_span(lo, lo, e < hi ? e : hi));
  }
}

// Lanes of each simdgroup waiting at point `p` (`masks`) run its computation.
inline void simd_at(GroupState& G, uint32_t p, const uint32_t* masks) {
  for (uint32_t lo = 0; lo < G.n; lo += MK_SIMD_WIDTH) {
    const uint32_t hi = lo + MK_SIMD_WIDTH < G.n ? lo + MK_SIMD_WIDTH : G.n;
    const uint32_t mask = masks[lo / MK_SIMD_WIDTH];
    if (mask) simd_compute(G, p, lo, hi, mask);
  }
}

// Simd point `p` is an operation whose participants are named by a mask
// (CUDA warp functions, mk/named_sync.h).
inline bool named_point(const Kernel* k, uint32_t p) {
  return k->syncs[p].kind == SYNC_SIMD && named::is_named(k->syncs[p].op);
}

inline named::Lanes named_lanes(const GroupState& G, uint32_t lo, uint32_t hi) {
  const uint32_t* args = reinterpret_cast<const uint32_t*>(G.slots + G.k->simd_arg_offset);
  named::Lanes nl;
  nl.waiting = nl.gone = 0;
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i) {
    const uint32_t t = lo + i;
    if (t >= hi || G.st[t] == DONE) {
      nl.gone |= 1u << i;
      continue;
    }
    if (named_point(G.k, G.st[t])) {
      nl.waiting |= 1u << i;
      nl.ops[i] = G.k->syncs[G.st[t]].op;
      nl.masks[i] = args[t];
    }
  }
  return nl;
}

// The lanes of simdgroup [lo, hi) at named operations whose masks are
// complete compute together (maybe from different call sites: their
// operand rows have one stride) and are released.
inline bool named_resolve(GroupState& G, uint32_t lo, uint32_t hi) {
  const named::Lanes nl = named_lanes(G, lo, hi);
  uint32_t leader = 0;
  const uint32_t p = nl.waiting ? named::complete_group(nl, &leader) : 0;
  if (!p) return false;
  simd_compute(G, G.st[lo + uint32_t(__builtin_ctz(p))], lo, hi, p);
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i)
    if ((p >> i) & 1u) G.released[lo + i] = 1;
  return true;
}

// Nothing can go on while a lane waits at a named operation: a GPU would hang.
[[noreturn]] inline void named_deadlock(GroupState& G, uint32_t lo, uint32_t hi) {
  const named::Lanes nl = named_lanes(G, lo, hi);
  char msg[400];
  const uint32_t lane = named::stuck_message(nl, lo, msg, sizeof msg, [&](uint32_t j) {
    return G.k->syncs[G.st[lo + j]].kind == SYNC_BARRIER ? "waits at a block-wide barrier (__syncthreads)"
                                                         : "waits at another simdgroup operation";
  });
  G.r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(lo + lane));
  __mk_rt->fail(msg);
  __builtin_unreachable();
}

}  // namespace wi
}  // namespace mk
#endif  // MK_WORKITEM
