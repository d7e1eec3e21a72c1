// Staging a point's uniform values before a region runs (mk/workitem.h):
// the driver checks that the threads of a run agree on each (or, for the
// ones runtime/workitem/run_invariance.py proves alike, trusts one) and
// copies it to the stage block the region code reads.
#pragma once
#include "descriptor.h"

#ifdef MK_WORKITEM
namespace mk {
namespace wi {

// Whether threads [b, e) (of a group `gx` x `gy` threads) hold a[t] = d +
// x(t) (AFFINE_X), d + t (AFFINE_LIN) or d + y(t) (AFFINE_Y) for one d;
// sets *d. (Where they do not, the caller runs them one at a time: slower,
// never wrong.)
template <typename T>
inline bool affine_run(const T* a, uint64_t kind, uint32_t gx, uint32_t gy, uint32_t b, uint32_t e, T* d) {
  if (kind == AFFINE_Y) {
    uint32_t x = b % gx, y = (b / gx) % gy;
    const T first = a[b] - T(y);
    T diff = 0;
    for (uint32_t t = b; t < e; ++t) {
      diff |= (a[t] - T(y)) ^ first;
      if (++x == gx) {
        x = 0;
        y = y + 1 == gy ? 0 : y + 1;
      }
    }
    *d = first;
    return diff == 0;
  }
  T x = kind == AFFINE_X ? b % gx : b;
  const T first = a[b] - x;
  T diff = 0;
  if (kind == AFFINE_LIN || x + (e - b) <= gx) {
    // one row (or lin): consecutive ids, a loop that vectorises
    for (uint32_t t = b; t < e; ++t) diff |= (a[t] - (t - b + x)) ^ first;
  } else {
    for (uint32_t t = b; t < e; ++t) {
      diff |= (a[t] - x) ^ first;
      x = x + 1 == gx ? 0 : x + 1;
    }
  }
  *d = first;
  return diff == 0;
}

// Checks that threads [b, e) agree on the point's uniform values and copies
// them to the stage block.
// `again`: threads [b, e) are (some of) those that ran last, from this
// point, with its values staged: the invariant ones are in place.
__attribute__((always_inline)) inline bool stage_uniforms(const Kernel* k, const Sync& s, const char* slots,
                                                          char* stage, uint32_t b, uint32_t e, uint32_t gx,
                                                          uint32_t gy,
                                                          bool again = false, bool one_call = false) {
  for (uint32_t i = 0; i < s.num_uniform; ++i) {
    const Uniform& u = k->uniforms[s.first_uniform + i];
    if (again && (u.affine & UNIFORM_INVARIANT)) continue;
    const char* arr = slots + u.slot_offset;
    const uint64_t sz = u.size;
    if (one_call && (u.affine & UNIFORM_RUN_INVARIANT)) {
      memcpy(stage + u.stage_offset, arr + b * sz, sz);
      continue;
    }
    if ((u.affine & AFFINE_KIND) != AFFINE_NONE) {
      if (sz == 8) {  // a zext / sext of x or lin plus a uniform (uniformity.affine_values)
        uint64_t d;
        if (!affine_run(reinterpret_cast<const uint64_t*>(arr), u.affine & AFFINE_KIND, gx, gy, b, e, &d)) return false;
        memcpy(stage + u.stage_offset, &d, 8);
      } else {
        uint32_t d;
        if (!affine_run(reinterpret_cast<const uint32_t*>(arr), u.affine & AFFINE_KIND, gx, gy, b, e, &d)) return false;
        memcpy(stage + u.stage_offset, &d, 4);
      }
      continue;
    }
    bool same = true;
    // From b itself (a[b] ^ a[b] is 0): a group of 256 threads is then 8
    // whole vector iterations, where from b + 1 the 31 left over ran
    // through the vectoriser's narrow and scalar remainder loops, which
    // cost more than the rest (the tiled matmul: ~1/8 of its time).
    if (sz == 4) {
      const uint32_t* a = reinterpret_cast<const uint32_t*>(arr);
      const uint32_t first = a[b];
      uint32_t diff = 0;
      for (uint32_t t = b; t < e; ++t) diff |= a[t] ^ first;
      same = diff == 0;
    } else if (sz == 8) {
      const uint64_t* a = reinterpret_cast<const uint64_t*>(arr);
      const uint64_t first = a[b];
      uint64_t diff = 0;
      for (uint32_t t = b; t < e; ++t) diff |= a[t] ^ first;
      same = diff == 0;
    } else {
      for (uint32_t t = b + 1; t < e && same; ++t) same = memcmp(arr + t * sz, arr + b * sz, sz) == 0;
    }
    if (!same) return false;
    memcpy(stage + u.stage_offset, arr + b * sz, sz);
  }
  return true;
}

}  // namespace wi
}  // namespace mk
#endif  // MK_WORKITEM
