// racecheck across threadgroups: the order a device-scope fence and an
// atomic give (included by mk/check.h, after its structures).
//
// Two threadgroups of a dispatch are ordered only through memory: a group
// that wrote data, fenced (release) and then did an atomic on some address
// X; another group whose atomic on X came later and that fenced after it
// (acquire) may read the data. This is the "last block" reduction (CUDA's
// threadFenceReduction, llm.c's layernorm_backward_kernel5) and the flag
// hand-off of decoupled look-back scans.
//
// * Release. Within a group, device epochs (barriers that order device
//   memory) order the threads. A thread's fence releases the writes of
//   earlier epochs (a barrier carried them to it) and its own writes of this
//   epoch before the fence. At a barrier, an epoch in which some thread
//   fenced is released whole when every thread that wrote in it fenced
//   after its last write, else up to its start (`Group::released`). An
//   atomic that writes (read-modify-write or store) publishes what its
//   thread has released to X: per group, the bound (writes of an earlier
//   epoch), the thread whose writes of the bound's epoch also count, and
//   when (`SyncLog::clock`).
// * Acquire. An atomic (any) on X acquires every release published to X
//   before it. With Metal's memory model the atomic orders nothing by
//   itself (its atomics are relaxed): the acquisition takes effect at the
//   thread's next device fence. With CUDA's (the CUDA Programming Guide's
//   __threadfence example) it takes effect at once (`Dispatch::sync_mode`).
//   Either way it is the thread's until a barrier that orders device memory
//   hands it to the whole group.
//   The release is published before the atomic runs and the acquisition
//   made after it, so a group whose atomic follows another's never misses
//   its release; one whose atomic ran just before may see it too (a race
//   missed, never one invented).
// * Metal orders device memory across threadgroups only for coherent(device)
//   buffers (MSL 3.2): other buffers are never ordered across groups, and a
//   race on one that would have been ordered says so (A_HINT_*).
//
// * Chains. A release carries on what its thread had acquired and fenced
//   since (A releases to X, B acquires X, fences and releases to Y, C
//   acquires Y: A's writes are ordered before C's reads).
//
// Not followed: a group's older release to X once it released to X again
// after the acquirer's atomic, and releases or chains past the log's size
// (the host notes the overflow). They only report races that are not there.
#pragma once

namespace mk {
namespace chk {

__attribute__((always_inline)) inline bool bit_of(const uint32_t* bits, uint32_t lin) {
  return (bits[lin >> 5] >> (lin & 31)) & 1;
}

inline void sync_lock(SyncLog* s) {
  while (__atomic_exchange_n(&s->lock, 1u, __ATOMIC_ACQUIRE)) {
    while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED)) __builtin_ia32_pause();
  }
}
inline void sync_unlock(SyncLog* s) { __atomic_store_n(&s->lock, 0u, __ATOMIC_RELEASE); }

// The sync object of address `a` (under the lock); kSyncObjects: none (a
// new address past the table's size: its atomics order nothing).
inline uint32_t sync_object(SyncLog* s, uint64_t a, bool insert) {
  for (uint32_t i = 0; i < s->nobj; ++i)
    if (s->addr[i] == a) return i;
  if (!insert) return kSyncObjects;
  if (s->nobj == kSyncObjects) {
    s->overflow = 1;
    return kSyncObjects;
  }
  s->addr[s->nobj] = a;
  return s->nobj++;
}

// A group starts: nothing fenced, written, released or acquired.
inline void sync_begin(Group* G) {
  G->wr_epoch = G->fence_epoch = 0xffff;
  G->released = 0;
  G->nacq = G->npend = 0;
}

// A plain device write by `lin` (tracked buffers, dispatches with a sync log).
__attribute__((always_inline)) inline void sync_wrote(Group* G, uint32_t lin) {
  const uint16_t e = G->dev_epoch;
  if (G->wr_epoch != e) {
    memset(G->wr_bits, 0, sizeof G->wr_bits);
    G->wr_epoch = e;
  }
  G->wr_bits[lin >> 5] |= 1u << (lin & 31);
  if (G->fence_epoch == e) G->fence_bits[lin >> 5] &= ~(1u << (lin & 31));  // a write after its fence
}

// A barrier that orders device memory is about to end epoch `dev_epoch`.
inline void sync_share_acquired(Group* G);
inline void sync_barrier(Group* G) {
  sync_share_acquired(G);
  const uint16_t e = G->dev_epoch;
  if (G->fence_epoch != e) return;
  bool all = true;
  if (G->wr_epoch == e)
    for (uint32_t i = 0; i < kThreadWords; ++i) all &= !(G->wr_bits[i] & ~G->fence_bits[i]);
  const uint32_t bound = all ? uint32_t(e) + 1 : uint32_t(e);
  if (bound > G->released) G->released = bound;
}

// Whether a release by `lin` carries acquisition `q` on: the group's (shared
// at a barrier before this epoch) when `lin` fenced in this epoch, its own
// when it fenced since it made it.
__attribute__((always_inline)) inline bool carries(const Acquired& q, uint32_t lin, bool fenced_now) {
  return q.lin == kAllThreads ? fenced_now : (q.lin == lin && q.fenced);
}

// An atomic that writes, before it runs: what `lin` has released goes to
// the address's sync object.
inline void sync_release(Group* G, uint32_t lin, uint64_t a) {
  SyncLog* s = G->d->sync;
  const uint16_t e = G->dev_epoch;
  const bool fenced_now = G->fence_epoch == e && bit_of(G->fence_bits, lin);
  uint32_t bound = G->released, extra = 0;
  if (fenced_now) {
    bound = e;        // earlier epochs: a barrier carried their writes to this thread's fence
    extra = lin + 1;  // and this thread's writes of this epoch, before its fence
  }
  bool carry = false;
  for (uint32_t i = 0; i < G->nacq; ++i) carry |= carries(G->acq[i], lin, fenced_now);
  if (!bound && !extra && !carry) return;
  sync_lock(s);
  const uint32_t o = sync_object(s, a, true);
  if (o < kSyncObjects) {
    const uint64_t k = uint64_t(o) * s->ngroups + G->group;
    if (bound > s->bound[k] || (bound == s->bound[k] && extra)) {
      s->bound[k] = bound;
      s->extra[k] = extra;
    }
    const uint64_t now = ++s->clock;
    if (bound || extra) s->when[k] = now;
    for (uint32_t i = 0; carry && i < G->nacq; ++i) {
      const Acquired& q = G->acq[i];
      if (q.object == o || !carries(q, lin, fenced_now)) continue;
      if (s->ncarried[o] == kCarried) {
        s->overflow = 1;
        break;
      }
      s->carried[o][s->ncarried[o]++] = Carried{q.object, 0, q.when, now};
    }
  }
  sync_unlock(s);
}

inline void add_acquired(Acquired* list, uint32_t& n, Acquired a) {
  for (uint32_t i = 0; i < n; ++i)
    if (list[i].object == a.object && list[i].lin == a.lin) {
      if (a.when > list[i].when) list[i] = a;
      return;
    }
  if (n < kMaxAcquired) list[n++] = a;
}

// Object `o` up to clock `when`, and what its releases until then carried
// (under the log's lock; the clocks fall along a chain, so it ends).
inline void acquire_chain(const SyncLog* s, Acquired* list, uint32_t& n, uint32_t o, uint32_t lin, uint64_t when) {
  add_acquired(list, n, Acquired{o, lin, when, 0, 0});
  for (uint32_t i = 0; i < s->ncarried[o]; ++i) {
    const Carried& c = s->carried[o][i];
    if (c.at <= when && c.upto < when) acquire_chain(s, list, n, c.object, lin, c.upto);
  }
}

// An atomic, after it ran: it acquires what was published to its address.
inline void sync_acquire(Group* G, uint32_t lin, uint64_t a) {
  SyncLog* s = G->d->sync;
  sync_lock(s);
  const uint32_t o = sync_object(s, a, false);
  if (o != kSyncObjects) {
    if (G->d->sync_mode == SYNC_CUDA)
      acquire_chain(s, G->acq, G->nacq, o, lin, s->clock);
    else
      acquire_chain(s, G->pend, G->npend, o, lin, s->clock);
  }
  sync_unlock(s);
}

// A barrier that orders device memory: every thread's acquisitions become
// the group's.
inline void sync_share_acquired(Group* G) {
  const uint32_t n = G->nacq;
  G->nacq = 0;
  for (uint32_t i = 0; i < n; ++i)
    add_acquired(G->acq, G->nacq, Acquired{G->acq[i].object, kAllThreads, G->acq[i].when, 0, 0});
}

enum : uint32_t { FENCE_RELEASE = 1, FENCE_ACQUIRE = 2 };

// A device-scope fence by `lin` (memory_order_release: FENCE_RELEASE only;
// _acquire: FENCE_ACQUIRE only; acq_rel and seq_cst, and CUDA's: both).
inline void sync_fence(Group* G, uint32_t lin, uint32_t kind) {
  const uint16_t e = G->dev_epoch;
  if (kind & FENCE_ACQUIRE) {
    // Its acquisitions take effect (Metal), for this thread.
    uint32_t kept = 0;
    for (uint32_t i = 0; i < G->npend; ++i) {
      if (G->pend[i].lin == lin)
        add_acquired(G->acq, G->nacq, G->pend[i]);
      else
        G->pend[kept++] = G->pend[i];
    }
    G->npend = kept;
  }
  if (kind & FENCE_RELEASE) {
    if (G->fence_epoch != e) {
      memset(G->fence_bits, 0, sizeof G->fence_bits);
      G->fence_epoch = e;
    }
    G->fence_bits[lin >> 5] |= 1u << (lin & 31);
    for (uint32_t i = 0; i < G->nacq; ++i)  // after its acquisitions: its releases carry them on
      if (G->acq[i].lin == lin) G->acq[i].fenced = 1;
  }
}

// Whether one of `list`'s acquisitions (those of thread `me` or the
// group's; any thread's with `me` = kAllThreads) orders the access of group
// `other` (0-based), thread `lin` (or a reader tag), device epoch `epoch`.
inline bool acquired_in(const SyncLog* s, const Acquired* list, uint32_t n, uint32_t me, uint32_t other,
                        uint32_t epoch, uint32_t lin) {
  for (uint32_t i = 0; i < n; ++i) {
    if (me != kAllThreads && list[i].lin != kAllThreads && list[i].lin != me) continue;
    const uint64_t k = uint64_t(list[i].object) * s->ngroups + other;
    if (!s->when[k] || s->when[k] > list[i].when) continue;
    if (epoch < s->bound[k] || (epoch == s->bound[k] && s->extra[k] == lin + 1)) return true;
  }
  return false;
}

enum : uint32_t { SYNC_UNORDERED = 0, SYNC_ORDERED = 1 };

// Whether an earlier access of group `other` (0-based) is ordered before
// this one of G's thread `me` by fences and atomics; else SYNC_UNORDERED or
// the hint (A_HINT_*) saying what was missing for it to be.
__attribute__((noinline, cold)) inline uint32_t sync_ordered(Group* G, const Buffer& B, uint32_t me,
                                                             uint32_t other, uint32_t epoch, uint32_t lin) {
  SyncLog* s = G->d->sync;
  if (!s || other == G->group || (!G->nacq && !G->npend)) return SYNC_UNORDERED;
  sync_lock(s);
  const bool done = acquired_in(s, G->acq, G->nacq, me, other, epoch, lin);
  const bool other_thread = !done && acquired_in(s, G->acq, G->nacq, kAllThreads, other, epoch, lin);
  const bool pending = !done && !other_thread && acquired_in(s, G->pend, G->npend, kAllThreads, other, epoch, lin);
  sync_unlock(s);
  if (done) return (B.flags & BUF_COHERENT) ? SYNC_ORDERED : A_HINT_NOT_COHERENT;
  if (other_thread) return A_HINT_NOT_SHARED;
  return pending ? A_HINT_NO_ACQUIRE : SYNC_UNORDERED;
}

}  // namespace chk
}  // namespace mk
