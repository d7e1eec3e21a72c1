// The checker's hooks in the group driver (checked builds, MK_CHECK; see
// mk/check.h): barrier epochs and their reports, simd participation, and a
// group's checker state.
#pragma once
#include "runs.h"

#ifdef MK_WORKITEM
namespace mk {
namespace wi {

#ifdef MK_CHECK
// ------------------------------------------------------ checking hooks --
// (checked builds: see mk/check.h). Sync::op carries, from the
// instrumentation, the barrier's mem_flags (bits 0..7; simd points: the op,
// and a simdgroup barrier's flags in bits 8..15) and its site (bits 16..31).
inline chk::Group* chk_of(const GroupState& G) { return static_cast<chk::Group*>(G.g->chk); }

inline uint32_t first_thread_at(const GroupState& G, uint32_t p, uint32_t from = 0) {
  for (uint32_t t = from; t < G.n; ++t)
    if (G.st[t] == p) return t;
  return G.n;
}

inline void chk_apply_barrier(chk::Group* C, uint32_t flags) {
  if (flags & uint32_t(metal::mem_flags::mem_threadgroup)) {
    ++C->tg_epoch;
    chk::drop_loop_reads(C);  // their stamps are of the last epoch
  }
  if (flags & uint32_t(metal::mem_flags::mem_device)) {
    if (C->d->sync) chk::sync_barrier(C);
    ++C->dev_epoch;
  }
}

// Every live thread waits at barrier `p`; `ndone` threads returned instead.
inline void chk_barrier(GroupState& G, uint32_t p, uint32_t ndone) {
  chk::Group* C = chk_of(G);
  const uint32_t op = G.k->syncs[p].op;
  if (ndone && (C->d->tools & chk::TOOL_SYNC)) {
    chk::Record rec = chk::make_record(C, chk::K_RETURNED, op >> 16, first_thread_at(G, DONE));
    rec.other_lin = first_thread_at(G, p);
    rec.offset = ndone;
    chk::report(C, rec);
  }
  chk_apply_barrier(C, op & 0xff);
}

// Every live thread waits at a barrier, not all at the same one.
inline void chk_barriers(GroupState& G) {
  chk::Group* C = chk_of(G);
  uint32_t first = DONE, flags = 0, ndone = 0;
  for (uint32_t t = 0; t < G.n; ++t) {
    const uint32_t p = G.st[t];
    if (p == DONE) { ++ndone; continue; }
    flags |= G.k->syncs[p].op & 0xff;
    if (first == DONE) first = p;
  }
  if (C->d->tools & chk::TOOL_SYNC) {
    // The optimiser may copy one barrier of the source into two branches:
    // points at the same source line are the same barrier.
    const uint32_t first_site = G.k->syncs[first].op >> 16;
    for (uint32_t t = 0; t < G.n; ++t) {
      const uint32_t p = G.st[t];
      if (p == DONE || p == first) continue;
      const uint32_t site = G.k->syncs[p].op >> 16;
      if (site == first_site && site != 0xffff) continue;
      chk::Record rec = chk::make_record(C, chk::K_DIVERGENCE, G.k->syncs[first].op >> 16, first_thread_at(G, first));
      rec.other_site = G.k->syncs[p].op >> 16;
      rec.other_lin = t;
      chk::report(C, rec);
      break;
    }
    if (ndone) {
      chk::Record rec = chk::make_record(C, chk::K_RETURNED, G.k->syncs[first].op >> 16, first_thread_at(G, DONE));
      rec.other_lin = first_thread_at(G, first);
      rec.offset = ndone;
      chk::report(C, rec);
    }
  }
  chk_apply_barrier(C, flags);
}

// A simd computation over simdgroups [lo / 32, lo / 32 + groups).
inline void chk_simd(GroupState& G, const Sync& s, uint32_t lo, uint32_t groups) {
  chk::Group* C = chk_of(G);
  C->simd_site = s.op >> 16;
  C->simd_lo = lo;
  if ((s.op & 0xff) == SIMD_BARRIER && (((s.op >> 8) & 0xff) & uint32_t(metal::mem_flags::mem_threadgroup))) {
    if (C->nlog) chk::flush_loop_reads(C);  // logged reads carry the clocks they ran at
    for (uint32_t i = 0; i < groups; ++i) ++C->sgc[lo / MK_SIMD_WIDTH + i];
  }
}
#endif

}  // namespace wi
}  // namespace mk

#ifdef MK_CHECK
namespace mk {
namespace chk {

// A group starts: its checker state, and `g->chk` pointing at it.
inline Group* begin_group(const Run* r, WiGroup* g, const wi::Kernel* k) {
  const Launch* l = r->launch;
  Group* G = group_state(r->worker, static_cast<Dispatch*>(l->check));
  if (!G) return nullptr;
  G->d = static_cast<Dispatch*>(l->check);
  const u3 tg = r->threadgroup_position, ng = l->threadgroups_per_grid;
  G->group = tg.x + ng.x * (tg.y + ng.y * tg.z);
  const Dispatch* d = G->d;
  bool rep = false;
  for (uint32_t i = 0; i < d->nreps; ++i) rep |= d->reps[i] == G->group;
  G->skip = d->phase == PHASE_REPS ? !rep : d->phase != PHASE_ALL && rep;
  G->tg_off = d->phase == PHASE_OTHERS_FAST;
  if (G->skip) return G;
  if (++G->gen == 0) G->gen = 1;  // entries of generation 0 are empty
  G->tg_epoch = 0;
  G->dev_epoch = 0;
  sync_begin(G);
  drop_loop_reads(G);
  memset(G->sgc, 0, sizeof G->sgc);
  uint64_t lo = ~uint64_t(0);
  for (uint64_t i = 0; i < k->ntg_allocs; ++i) {
    if (uint32_t(k->tg_allocs[i].slot) == MK_TG_GROUP_INFO) continue;  // the group record, not the arena
    const uint64_t a = reinterpret_cast<uint64_t>(g->tg_allocs[i]);
    lo = a < lo ? a : lo;
  }
  G->ntgp = l->ntg_buffers < 64 ? l->ntg_buffers : 64;
  for (uint32_t i = 0; i < G->ntgp; ++i) {
    const uint64_t a = reinterpret_cast<uint64_t>(g->tg_buffers[i]);
    G->tgp_lo[i] = a;
    G->tgp_size[i] = l->tg_buffer_sizes[i];
    lo = a < lo ? a : lo;
  }
  G->tg_lo = lo == ~uint64_t(0) ? 0 : lo;
  G->scratch_lo = reinterpret_cast<uint64_t>(r->worker[MK_SLOT_SCRATCH]);
  G->scratch_size = reinterpret_cast<uint64_t>(r->worker[MK_SLOT_SCRATCH_SIZE]);
  g->chk = G;
  return G;
}

// See the declaration in mk/check.h.
__attribute__((noinline)) inline void* classify(Group* G, uint32_t lin, void* p, uint64_t size, uint32_t info,
                                                uint32_t site) {
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  Dispatch* d = G->d;
  for (uint32_t b = 0; b < d->nbuffers; ++b) {
    const Buffer& B = d->buffers[b];
    if (!B.size || a < B.lo || a >= B.lo + B.size) continue;
    if (out_of(a, size, B.lo, B.size) || misaligned(a, info)) {
      void* q = bad_access(G, lin, p, size, info, site, O_BUFFER | b, B.lo, B.size, !out_of(a, size, B.lo, B.size));
      if (q != p) return q;
    }
    if (B.shadow && size && !(info & A_ATOMIC))
      dev_access(G, B, a - B.lo, size, lin, info, site, b);
    else if (d->sync && (info & A_ATOMIC) && (info & A_WRITE))
      sync_release(G, lin, a);
    return p;
  }
  if (G->tg_lo && a >= G->tg_lo && a < G->tg_lo + kTgArena) {
    if (size && (d->tools & (TOOL_RACE | TOOL_INIT))) {
      uint8_t uninit = 0;
      tg_access(G, a, size, lin, info, site, G->tg_lo, O_UNKNOWN, &uninit);
      if (uninit) uninit_read(G, lin, p, size, site, G->tg_lo, kTgArena, O_UNKNOWN);
    }
    return p;
  }
  // Private memory: this worker's stack, or the group's work-item context
  // (the per-thread frames of private arrays live there).
  const uint64_t sp = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  if ((a + (uint64_t(8) << 20) >= sp && a < sp + (uint64_t(8) << 20)) ||
      (a >= G->scratch_lo && a < G->scratch_lo + G->scratch_size))
    return p;
  return bad_access(G, lin, p, size, info, site, O_UNKNOWN, 0, 0, false);
}

}  // namespace chk
}  // namespace mk
#endif

namespace mk {
namespace wi {

}  // namespace wi
}  // namespace mk
#endif  // MK_WORKITEM
