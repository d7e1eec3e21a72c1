// Simdgroup operations whose participants are *named* by a mask (CUDA's
// __shfl_sync, __ballot_sync, __syncwarp, ... with Volta's independent thread
// scheduling), as opposed to Metal's, whose participants are the lanes that
// happen to be active at the call.
//
// Such an operation goes through the same marker as Metal's (__mk_sync_simd,
// mk/simd.h) with `op` = kind | source line << 8 (kind >= MK_NAMED_FIRST) and
// the lane argument = its mask. A lane waits until every lane of its mask has
// exited or waits at an operation of the same kind with the same mask (maybe
// at another call site: Volta converges them); those lanes then compute
// together. A mask lane that can never arrive (it waits at a barrier, or at
// an operation that cannot match) is a deadlock on a GPU and is reported.
//
// Shared by the fiber scheduler (src/mkrt_group.h) and the work-item driver
// (mk/workitem.h): plain functions over 32-lane bit masks.
#pragma once
#include <stdint.h>

namespace mk {
namespace named {

constexpr uint32_t FIRST = 64;

// Kinds (the CUDA front end's warp functions, metal_kernel/port/include).
enum Kind : uint32_t {
  SYNCWARP = FIRST,
  SHFL_IDX,
  SHFL_UP,
  SHFL_DOWN,
  SHFL_XOR,
  BALLOT,
  ANY,
  ALL,
  MATCH_ANY,
  MATCH_ALL,
  REDUCE_ADD,
  REDUCE_MIN,
  REDUCE_MAX,
  REDUCE_AND,
  REDUCE_OR,
  REDUCE_XOR,
  LAST_KIND,
};

inline const char* kind_name(uint32_t kind) {
  static const char* const names[] = {
      "__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
      "__ballot_sync", "__any_sync", "__all_sync", "__match_any_sync", "__match_all_sync",
      "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync",
      "__reduce_or_sync", "__reduce_xor_sync"};
  return kind >= FIRST && kind < LAST_KIND ? names[kind - FIRST] : "warp operation";
}

inline bool is_named(uint32_t op) { return (op & 0xffu) >= FIRST; }
inline uint32_t kind_of(uint32_t op) { return op & 0xffu; }
inline uint32_t line_of(uint32_t op) { return op >> 8; }

// One simdgroup as a scheduler sees it. Bit i of `waiting`: lane i waits at
// a named operation (ops[i], masks[i]); of `gone`: lane i has exited or does
// not exist (a partial last simdgroup).
struct Lanes {
  uint32_t waiting;
  uint32_t gone;
  uint32_t ops[32];
  uint32_t masks[32];
};

// Lanes of `l` that wait at the same kind of operation with mask `m`.
inline uint32_t matching(const Lanes& l, uint32_t kind, uint32_t m) {
  uint32_t same = 0;
  for (uint32_t j = 0; j < 32; ++j)
    if (((l.waiting >> j) & 1u) && kind_of(l.ops[j]) == kind && l.masks[j] == m) same |= 1u << j;
  return same;
}

// The participants of the lowest group that can complete (every lane of its
// mask is there or gone), and the lane whose call site leads it; 0 if none.
inline uint32_t complete_group(const Lanes& l, uint32_t* leader) {
  for (uint32_t i = 0; i < 32; ++i) {
    if (!((l.waiting >> i) & 1u)) continue;
    const uint32_t m = l.masks[i];
    if (!((m >> i) & 1u)) continue;  // reported by stuck_message
    const uint32_t same = matching(l, kind_of(l.ops[i]), m);
    if ((m & ~l.gone & ~same) == 0) {
      *leader = i;
      return same & m;
    }
  }
  return 0;
}

// Why the lowest waiting lane cannot go on. `where(j)` describes what lane j
// (not waiting at a named operation, not gone) is doing instead. `lo` is the
// simdgroup's first thread index in its group. Returns the lane described.
template <class Where>
inline uint32_t stuck_message(const Lanes& l, uint32_t lo, char* buf, unsigned long size, Where where) {
  for (uint32_t i = 0; i < 32; ++i) {
    if (!((l.waiting >> i) & 1u)) continue;
    const uint32_t m = l.masks[i], kind = kind_of(l.ops[i]);
    if (!((m >> i) & 1u)) {
      __builtin_snprintf(buf, size, "%s (line %u) called with mask 0x%08x, which does not name the calling lane %u",
               kind_name(kind), line_of(l.ops[i]), m, i);
      return i;
    }
    const uint32_t missing = m & ~l.gone & ~matching(l, kind, m);
    if (!missing) continue;
    const uint32_t j = uint32_t(__builtin_ctz(missing));
    char other[160];
    if ((l.waiting >> j) & 1u) {
      __builtin_snprintf(other, sizeof other, "waits at %s (line %u) with mask 0x%08x", kind_name(kind_of(l.ops[j])),
               line_of(l.ops[j]), l.masks[j]);
    } else {
      __builtin_snprintf(other, sizeof other, "%s", where(j));
    }
    __builtin_snprintf(buf, size,
             "deadlock: %s (line %u) in lane %u waits for lane %u (thread %u of the block) named in its "
             "mask 0x%08x, which %s",
             kind_name(kind), line_of(l.ops[i]), i, j, lo + j, m, other);
    return i;
  }
  __builtin_snprintf(buf, size, "deadlock between warp operations");
  return 0;
}

}  // namespace named
}  // namespace mk
