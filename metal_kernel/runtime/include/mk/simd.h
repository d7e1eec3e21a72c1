// simd_* and quad_* functions with Metal's meaning: they operate over the
// lanes that are *active* at the call (divergent code, partial simdgroups).
//
// Protocol: every lane publishes a SimdCall (pointer to its operand, pointer
// to its result) and blocks in the runtime. When the runtime knows which
// lanes reached the same call site, it wakes the lowest of them first with
// the lane table; that lane computes every lane's result. The others wake
// with their result already written.
#pragma once
#include <stdint.h>
#include <string.h>

#include "abi.h"
#include "runtime.h"
#ifdef MK_CHECK
#include "check.h"
#endif

namespace mk {

// The computations of SIMD_BARRIER .. SIMD_PREFIX_EXCLUSIVE_PRODUCT and of
// SIMD_BROADCAST_FIRST .. SIMD_ACTIVE_MASK never read lane_arg: work-item
// loops store no argument for them (ARGLESS_SIMD_OPS in runtime/workitem.py).
enum SimdOp : uint32_t {
  SIMD_BARRIER = 1,
  SIMD_SUM,
  SIMD_PRODUCT,
  SIMD_MIN,
  SIMD_MAX,
  SIMD_AND,
  SIMD_OR,
  SIMD_XOR,
  SIMD_PREFIX_INCLUSIVE_SUM,
  SIMD_PREFIX_EXCLUSIVE_SUM,
  SIMD_PREFIX_INCLUSIVE_PRODUCT,
  SIMD_PREFIX_EXCLUSIVE_PRODUCT,
  SIMD_SHUFFLE,
  SIMD_SHUFFLE_UP,
  SIMD_SHUFFLE_DOWN,
  SIMD_SHUFFLE_XOR,
  SIMD_SHUFFLE_ROTATE_UP,
  SIMD_SHUFFLE_ROTATE_DOWN,
  SIMD_SHUFFLE_AND_FILL_UP,
  SIMD_SHUFFLE_AND_FILL_DOWN,
  SIMD_BROADCAST,
  SIMD_BROADCAST_FIRST,
  SIMD_BALLOT,
  SIMD_ANY,
  SIMD_ALL,
  SIMD_IS_FIRST,
  SIMD_ACTIVE_MASK,
  SIMD_MATRIX,  // simdgroup_matrix operations (runtime completeness issue)
};

// The lanes a simdgroup computation sees. Fiber mode hands the elected lane
// a SimdLanes (mk/abi.h: a pointer to each active lane's call); work-item
// loops (mk/workitem.h) keep every lane's operand and result in arrays at a
// fixed stride, a DenseLanes. The computations below are written once for
// both through lane_active / lane_in / lane_out / lane_arg.
struct DenseLanes {
  const char* in;
  char* out;
  const uint32_t* args;
  uint32_t in_stride, out_stride;
  uint32_t active_mask;
  uint32_t count;
  // `groups` consecutive simdgroups with every lane active, described from
  // the first one's arrays (the driver asks for more than 1 only for the
  // reductions, which handle it: reduce_segments). Otherwise 1.
  uint32_t groups;
  const void* check = nullptr;  // checked builds: the group's chk::Group (mk/check.h)
};

__attribute__((always_inline)) inline bool lane_active(const SimdLanes& l, uint32_t i) {
  return l.lane[i] != nullptr;
}
__attribute__((always_inline)) inline bool lane_active(const DenseLanes& l, uint32_t i) {
  return i < MK_SIMD_WIDTH && ((l.active_mask >> i) & 1u);
}
template <class T>
__attribute__((always_inline)) inline const T& lane_in(const SimdLanes& l, uint32_t i) {
  return *static_cast<const T*>(l.lane[i]->in);
}
template <class T>
__attribute__((always_inline)) inline const T& lane_in(const DenseLanes& l, uint32_t i) {
  return *reinterpret_cast<const T*>(l.in + uint64_t(i) * l.in_stride);
}
template <class R>
__attribute__((always_inline)) inline R& lane_out(const SimdLanes& l, uint32_t i) {
  return *static_cast<R*>(l.lane[i]->out);
}
template <class R>
__attribute__((always_inline)) inline R& lane_out(const DenseLanes& l, uint32_t i) {
  return *reinterpret_cast<R*>(l.out + uint64_t(i) * l.out_stride);
}
__attribute__((always_inline)) inline uint32_t lane_arg(const SimdLanes& l, uint32_t i) {
  return l.lane[i]->arg;
}
__attribute__((always_inline)) inline uint32_t lane_arg(const DenseLanes& l, uint32_t i) {
  return l.args[i];
}

// Publishes this lane's call, waits, and lets the elected lane compute
// (through __mk_sync_simd, see mk/runtime.h and mk/workitem.h). `compute`
// is a lambda without captures taking `const auto&` lanes.
template <class T, class R, class Compute>
__attribute__((always_inline)) inline R simd_collective(const T& in, uint32_t arg,
                                                        uint32_t op, Compute compute) {
  R out;
  void (*fn)(const SimdLanes&) = compute;
  void (*dense)(const DenseLanes&) = compute;
  __mk_sync_simd(&in, &out, arg, op, sizeof(T), sizeof(R), fn, dense);
  return out;
}

__attribute__((always_inline)) inline bool segment_full(const SimdLanes& l, uint32_t s, uint32_t width) {
  for (uint32_t i = s; i < s + width; ++i)
    if (!l.lane[i]) return false;
  return true;
}
__attribute__((always_inline)) inline bool segment_full(const DenseLanes& l, uint32_t s, uint32_t width) {
  const uint32_t want = width >= 32 ? 0xffffffffu : ((1u << width) - 1u) << s;
  return (l.active_mask & want) == want;
}

// Reduction over the active lanes of each segment (32 lanes for simd_*,
// 4 for quad_*), every active lane of a segment gets the result. A full
// segment is reduced pairwise (as GPUs do; the order is unspecified in
// Metal), a partial one lane by lane.
template <class T, class L, class Op>
inline void reduce_segments_one(const L& l, uint32_t width, Op op) {
  for (uint32_t s = 0; s < MK_SIMD_WIDTH; s += width) {
    if (segment_full(l, s, width)) {
      T v[MK_SIMD_WIDTH];
      for (uint32_t i = 0; i < width; ++i) v[i] = lane_in<T>(l, s + i);
      for (uint32_t h = width / 2; h > 0; h >>= 1)
        for (uint32_t i = 0; i < h; ++i) v[i] = T(op(v[i], v[i + h]));
      for (uint32_t i = s; i < s + width; ++i) lane_out<T>(l, i) = v[0];
      continue;
    }
    bool have = false;
    T acc{};
    for (uint32_t i = s; i < s + width; ++i) {
      if (!lane_active(l, i)) continue;
      acc = have ? T(op(acc, lane_in<T>(l, i))) : lane_in<T>(l, i);
      have = true;
    }
    for (uint32_t i = s; i < s + width; ++i)
      if (lane_active(l, i)) lane_out<T>(l, i) = acc;
  }
}

template <class T, class Op>
inline void reduce_segments(const SimdLanes& l, uint32_t width, Op op) {
  reduce_segments_one<T>(l, width, op);
}

// Packed segments of a constant width W: each segment's tree fully
// unrolled into a few vector operations and shuffles, one segment after the
// other. Why not the generic loop below: built for AVX2, clang kept
// reduce_segments out of line, so the width was a run-time value and the
// tree went level by level through the stack (the simd_sum reduction of
// 512K floats: 0.94 -> 0.75 ms, one worker); inlined with the width known,
// it vectorised the loop over segments instead, with gathers (stride W),
// which doubled the AVX-512 time. Hence the loop over segments is kept
// scalar.
template <class T, uint32_t W, class Op>
__attribute__((always_inline)) inline void reduce_packed(const T* in, T* out, uint32_t total, Op op) {
#pragma clang loop vectorize(disable) interleave(disable)
  for (uint32_t s = 0; s < total; s += W) {
    T v[W];
#pragma unroll
    for (uint32_t i = 0; i < W; ++i) v[i] = in[s + i];
#pragma unroll
    for (uint32_t h = W / 2; h > 0; h >>= 1)
#pragma unroll
      for (uint32_t i = 0; i < h; ++i) v[i] = T(op(v[i], v[i + h]));
#pragma unroll
    for (uint32_t i = 0; i < W; ++i) out[s + i] = v[0];
  }
}

// Work-item loops: `l.groups` full simdgroups in one call. With operands and
// results packed (stride sizeof(T), the common case) the segments are
// reduced straight from the arrays (reduce_packed for simd_* and quad_*), in the same
// pairwise order as above: bit for bit the results of one call per group.
template <class T, class Op>
inline void reduce_segments(const DenseLanes& l, uint32_t width, Op op) {
  const bool packed = l.in_stride == sizeof(T) && l.out_stride == sizeof(T);
  if (l.groups <= 1 && !(packed && l.active_mask == 0xffffffffu)) {
    reduce_segments_one<T>(l, width, op);
    return;
  }
  if (packed) {
    const T* in = reinterpret_cast<const T*>(l.in);
    T* out = reinterpret_cast<T*>(l.out);
    const uint32_t total = l.groups * MK_SIMD_WIDTH;
    if (width == MK_SIMD_WIDTH) return reduce_packed<T, MK_SIMD_WIDTH>(in, out, total, op);
    if (width == 4) return reduce_packed<T, 4>(in, out, total, op);
    for (uint32_t s = 0; s < total; s += width) {
      T v[MK_SIMD_WIDTH];
      for (uint32_t i = 0; i < width; ++i) v[i] = in[s + i];
      for (uint32_t h = width / 2; h > 0; h >>= 1)
        for (uint32_t i = 0; i < h; ++i) v[i] = T(op(v[i], v[i + h]));
      for (uint32_t i = 0; i < width; ++i) out[s + i] = v[0];
    }
    return;
  }
  for (uint32_t gi = 0; gi < l.groups; ++gi) {
    DenseLanes one = l;
    one.in = l.in + uint64_t(gi) * MK_SIMD_WIDTH * l.in_stride;
    one.out = l.out + uint64_t(gi) * MK_SIMD_WIDTH * l.out_stride;
    one.args = l.args + gi * MK_SIMD_WIDTH;
    one.groups = 1;
    reduce_segments_one<T>(one, width, op);
  }
}

template <class T, class L, class Op>
inline void scan_segments(const L& l, uint32_t width, bool inclusive, T identity, Op op) {
  for (uint32_t s = 0; s < MK_SIMD_WIDTH; s += width) {
    T acc = identity;
    for (uint32_t i = s; i < s + width; ++i) {
      if (!lane_active(l, i)) continue;
      T next = T(op(acc, lane_in<T>(l, i)));
      lane_out<T>(l, i) = inclusive ? next : acc;
      acc = next;
    }
  }
}

// Lane `reader` read lane `source`, which is not active: the value is
// undefined on a GPU. Checked builds report it (work-item loops only: the
// driver has just named the simd point, mk/workitem.h).
template <class L>
__attribute__((always_inline)) inline void inactive_read(const L& l, uint32_t reader, uint32_t source) {
#ifdef MK_CHECK
  if constexpr (std::is_same_v<L, DenseLanes>) {
    chk::Group* G = static_cast<chk::Group*>(const_cast<void*>(l.check));
    if (!G || !G->d || !(G->d->tools & chk::TOOL_SYNC)) return;
    chk::Record r = chk::make_record(G, chk::K_INACTIVE, G->simd_site, G->simd_lo + reader);
    r.other_lin = G->simd_lo + source;
    chk::report(G, r);
  }
#else
  (void)l;
  (void)reader;
  (void)source;
#endif
}

// Lane `i` receives lane `src(i)`'s operand. A source outside the segment
// leaves the lane's own value (Metal: "unchanged"); an inactive source reads
// as zero (undefined on the GPU; the checking mode reports it).
template <class T, class L, class Src>
inline void permute_segments(const L& l, uint32_t width, Src src) {
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i) {
    if (!lane_active(l, i)) continue;
    const uint32_t base = i - i % width;
    const int64_t j = src(i - base, lane_arg(l, i));
    if (j < 0 || j >= int64_t(width)) {
      lane_out<T>(l, i) = lane_in<T>(l, i);
    } else if (lane_active(l, base + uint32_t(j))) {
      lane_out<T>(l, i) = lane_in<T>(l, base + uint32_t(j));
    } else {
      inactive_read(l, i, base + uint32_t(j));
      T zero;
      memset(static_cast<void*>(&zero), 0, sizeof(T));
      lane_out<T>(l, i) = zero;
    }
  }
}

template <class T>
struct DataAndFill {
  T data;
  T fill;
};

// simd_shuffle_and_fill_up/down: lanes whose source falls outside the
// `modulo`-wide window take the *fill* operand of the wrapped-around lane.
template <class T, class L>
inline void fill_segments(const L& l, uint32_t width, bool up) {
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i) {
    if (!lane_active(l, i)) continue;
    const uint32_t delta = lane_arg(l, i) & 0xffff;
    uint32_t modulo = lane_arg(l, i) >> 16;
    if (modulo == 0 || modulo > width) modulo = width;
    const uint32_t base = i - i % modulo;
    const uint32_t pos = i - base;
    int64_t j = up ? int64_t(pos) - delta : int64_t(pos) + delta;
    bool use_fill = false;
    if (j < 0) { j += modulo; use_fill = true; }
    if (j >= int64_t(modulo)) { j -= modulo; use_fill = true; }
    const uint32_t from = base + uint32_t(j);
    if (from < MK_SIMD_WIDTH && lane_active(l, from)) {
      const auto& src = lane_in<DataAndFill<T>>(l, from);
      lane_out<T>(l, i) = use_fill ? src.fill : src.data;
    } else {
      inactive_read(l, i, from);
      T zero;
      memset(static_cast<void*>(&zero), 0, sizeof(T));
      lane_out<T>(l, i) = zero;
    }
  }
}

#ifdef MK_FRONTEND_CUDA
// The CUDA front end reduces scalars only, with the metal::min / max its
// prelude declares.
template <class T> __attribute__((always_inline)) inline T lane_min(const T& a, const T& b) { return ::metal::min(a, b); }
template <class T> __attribute__((always_inline)) inline T lane_max(const T& a, const T& b) { return ::metal::max(a, b); }
#else
// min / max of two operands of simd_min / simd_max, for every type those
// accept (bfloat and its vectors too, which metal::min does not take).
template <class T, class F>
__attribute__((always_inline)) inline T lanewise(const T& a, const T& b, F f) {
  if constexpr (metal::_mk::is_vec_v<T>) {
    T r;
    for (int i = 0; i < metal::_mk::vinfo<T>::n; ++i) r[i] = f(a[i], b[i]);
    return r;
  } else {
    return f(a, b);
  }
}
template <class T>
__attribute__((always_inline)) inline T lane_min(const T& a, const T& b) {
  return lanewise(a, b, [](auto x, auto y) { return metal::_mk::t_min(x, y); });
}
template <class T>
__attribute__((always_inline)) inline T lane_max(const T& a, const T& b) {
  return lanewise(a, b, [](auto x, auto y) { return metal::_mk::t_max(x, y); });
}
#endif

template <class L>
inline uint32_t lowest_active(const L& l, uint32_t s, uint32_t width) {
  for (uint32_t i = s; i < s + width; ++i)
    if (lane_active(l, i)) return i;
  return s;
}

}  // namespace mk

namespace metal {

#ifndef MK_FRONTEND_CUDA
// The operand types of Apple's simd_* / quad_* functions (scalars and vectors
// of the integer types, half and float), which libraries test themselves
// (candle: `__is_valid_simdgroup_type<T>::value`). The functions here take
// any trivially copyable type; this trait answers as Apple's does.
template <class T>
struct __is_valid_simdgroup_type
    : std::integral_constant<bool, (std::is_integral<_mk::elem_t<T>>::value &&
                                    !std::is_same<_mk::elem_t<T>, bool>::value) ||
                                       std::is_same<_mk::elem_t<T>, float>::value ||
                                       std::is_same<_mk::elem_t<T>, half>::value> {};
#endif

// simd_vote: the ballot result (bit i = lane i).
struct simd_vote {
  using vote_t = uint64_t;
  vote_t bits = 0;
  constexpr simd_vote() = default;
  constexpr explicit simd_vote(vote_t v) : bits(v) {}
  constexpr explicit operator vote_t() const { return bits; }
  constexpr bool all() const { return bits == 0xffffffffull; }
  constexpr bool any() const { return bits != 0; }
};
using quad_vote = simd_vote;

#define MK_SIMD_SEGMENTED(PREFIX, WIDTH)                                                  \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_sum(T x) {                             \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_SUM, [](const auto& l) { \
      ::mk::reduce_segments<T>(l, WIDTH, [](const T& a, const T& b) { return a + b; });   \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_product(T x) {                         \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_PRODUCT, [](const auto& l) { \
      ::mk::reduce_segments<T>(l, WIDTH, [](const T& a, const T& b) { return a * b; });   \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_min(T x) {                             \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_MIN, [](const auto& l) { \
      ::mk::reduce_segments<T>(l, WIDTH, [](const T& a, const T& b) { return ::mk::lane_min(a, b); }); \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_max(T x) {                             \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_MAX, [](const auto& l) { \
      ::mk::reduce_segments<T>(l, WIDTH, [](const T& a, const T& b) { return ::mk::lane_max(a, b); }); \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_and(T x) {                             \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_AND, [](const auto& l) { \
      ::mk::reduce_segments<T>(l, WIDTH, [](const T& a, const T& b) { return a & b; });   \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_or(T x) {                              \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_OR, [](const auto& l) { \
      ::mk::reduce_segments<T>(l, WIDTH, [](const T& a, const T& b) { return a | b; });   \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_xor(T x) {                             \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_XOR, [](const auto& l) { \
      ::mk::reduce_segments<T>(l, WIDTH, [](const T& a, const T& b) { return a ^ b; });   \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_prefix_inclusive_sum(T x) {            \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_PREFIX_INCLUSIVE_SUM, [](const auto& l) { \
      ::mk::scan_segments<T>(l, WIDTH, true, T(0), [](const T& a, const T& b) { return a + b; }); \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_prefix_exclusive_sum(T x) {            \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_PREFIX_EXCLUSIVE_SUM, [](const auto& l) { \
      ::mk::scan_segments<T>(l, WIDTH, false, T(0), [](const T& a, const T& b) { return a + b; }); \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_prefix_inclusive_product(T x) {        \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_PREFIX_INCLUSIVE_PRODUCT, [](const auto& l) { \
      ::mk::scan_segments<T>(l, WIDTH, true, T(1), [](const T& a, const T& b) { return a * b; }); \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_prefix_exclusive_product(T x) {        \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_PREFIX_EXCLUSIVE_PRODUCT, [](const auto& l) { \
      ::mk::scan_segments<T>(l, WIDTH, false, T(1), [](const T& a, const T& b) { return a * b; }); \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_shuffle(T x, I lane) {                 \
    return ::mk::simd_collective<T, T>(x, uint32_t(lane), ::mk::SIMD_SHUFFLE, [](const auto& l) { \
      ::mk::permute_segments<T>(l, WIDTH, [](uint32_t, uint32_t a) { return int64_t(a % WIDTH); }); \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_broadcast(T x, I lane) {               \
    return ::mk::simd_collective<T, T>(x, uint32_t(lane), ::mk::SIMD_BROADCAST, [](const auto& l) { \
      ::mk::permute_segments<T>(l, WIDTH, [](uint32_t, uint32_t a) { return int64_t(a % WIDTH); }); \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_shuffle_up(T x, I delta) {             \
    return ::mk::simd_collective<T, T>(x, uint32_t(delta), ::mk::SIMD_SHUFFLE_UP, [](const auto& l) { \
      ::mk::permute_segments<T>(l, WIDTH, [](uint32_t i, uint32_t d) { return int64_t(i) - d; }); \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_shuffle_down(T x, I delta) {           \
    return ::mk::simd_collective<T, T>(x, uint32_t(delta), ::mk::SIMD_SHUFFLE_DOWN, [](const auto& l) { \
      ::mk::permute_segments<T>(l, WIDTH, [](uint32_t i, uint32_t d) { return int64_t(i) + d; }); \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_shuffle_xor(T x, I mask) {             \
    return ::mk::simd_collective<T, T>(x, uint32_t(mask), ::mk::SIMD_SHUFFLE_XOR, [](const auto& l) { \
      ::mk::permute_segments<T>(l, WIDTH, [](uint32_t i, uint32_t m) { return int64_t((i ^ m) % WIDTH); }); \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_shuffle_rotate_up(T x, I delta) {      \
    return ::mk::simd_collective<T, T>(x, uint32_t(delta), ::mk::SIMD_SHUFFLE_ROTATE_UP, [](const auto& l) { \
      ::mk::permute_segments<T>(l, WIDTH, [](uint32_t i, uint32_t d) { return int64_t((i + WIDTH - d % WIDTH) % WIDTH); }); \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_shuffle_rotate_down(T x, I delta) {    \
    return ::mk::simd_collective<T, T>(x, uint32_t(delta), ::mk::SIMD_SHUFFLE_ROTATE_DOWN, [](const auto& l) { \
      ::mk::permute_segments<T>(l, WIDTH, [](uint32_t i, uint32_t d) { return int64_t((i + d) % WIDTH); }); \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_shuffle_and_fill_up(T x, T fill, I delta, uint32_t modulo = WIDTH) { \
    ::mk::DataAndFill<T> in{x, fill};                                                     \
    return ::mk::simd_collective<::mk::DataAndFill<T>, T>(in, uint32_t(delta) | (modulo << 16), ::mk::SIMD_SHUFFLE_AND_FILL_UP, [](const auto& l) { \
      ::mk::fill_segments<T>(l, WIDTH, true);                                             \
    });                                                                                   \
  }                                                                                       \
  template <class T, class I>                                                             \
  __attribute__((always_inline)) inline T PREFIX##_shuffle_and_fill_down(T x, T fill, I delta, uint32_t modulo = WIDTH) { \
    ::mk::DataAndFill<T> in{x, fill};                                                     \
    return ::mk::simd_collective<::mk::DataAndFill<T>, T>(in, uint32_t(delta) | (modulo << 16), ::mk::SIMD_SHUFFLE_AND_FILL_DOWN, [](const auto& l) { \
      ::mk::fill_segments<T>(l, WIDTH, false);                                            \
    });                                                                                   \
  }                                                                                       \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T PREFIX##_broadcast_first(T x) {                 \
    return ::mk::simd_collective<T, T>(x, 0, ::mk::SIMD_BROADCAST_FIRST, [](const auto& l) { \
      for (uint32_t s = 0; s < MK_SIMD_WIDTH; s += WIDTH) {                               \
        const uint32_t first = ::mk::lowest_active(l, s, WIDTH);                          \
        for (uint32_t i = s; i < s + WIDTH; ++i)                                          \
          if (::mk::lane_active(l, i)) ::mk::lane_out<T>(l, i) = ::mk::lane_in<T>(l, first);            \
      }                                                                                   \
    });                                                                                   \
  }                                                                                       \
  __attribute__((always_inline)) inline simd_vote PREFIX##_ballot(bool b) {               \
    return ::mk::simd_collective<bool, simd_vote>(b, 0, ::mk::SIMD_BALLOT, [](const auto& l) { \
      for (uint32_t s = 0; s < MK_SIMD_WIDTH; s += WIDTH) {                               \
        uint64_t bits = 0;                                                                \
        for (uint32_t i = s; i < s + WIDTH; ++i)                                          \
          if (::mk::lane_active(l, i) && ::mk::lane_in<bool>(l, i)) bits |= uint64_t(1) << (i - (WIDTH == MK_SIMD_WIDTH ? 0 : s)); \
        for (uint32_t i = s; i < s + WIDTH; ++i)                                          \
          if (::mk::lane_active(l, i)) ::mk::lane_out<simd_vote>(l, i) = simd_vote(bits);               \
      }                                                                                   \
    });                                                                                   \
  }                                                                                       \
  __attribute__((always_inline)) inline simd_vote PREFIX##_active_threads_mask() {        \
    return PREFIX##_ballot(true);                                                         \
  }                                                                                       \
  __attribute__((always_inline)) inline bool PREFIX##_any(bool b) {                       \
    return ::mk::simd_collective<bool, bool>(b, 0, ::mk::SIMD_ANY, [](const auto& l) { \
      ::mk::reduce_segments<bool>(l, WIDTH, [](bool a, bool c) { return a || c; });       \
    });                                                                                   \
  }                                                                                       \
  __attribute__((always_inline)) inline bool PREFIX##_all(bool b) {                       \
    return ::mk::simd_collective<bool, bool>(b, 0, ::mk::SIMD_ALL, [](const auto& l) { \
      ::mk::reduce_segments<bool>(l, WIDTH, [](bool a, bool c) { return a && c; });       \
    });                                                                                   \
  }                                                                                       \
  __attribute__((always_inline)) inline bool PREFIX##_is_first() {                        \
    const bool unused = false;                                                            \
    return ::mk::simd_collective<bool, bool>(unused, 0, ::mk::SIMD_IS_FIRST, [](const auto& l) { \
      for (uint32_t s = 0; s < MK_SIMD_WIDTH; s += WIDTH) {                               \
        const uint32_t first = ::mk::lowest_active(l, s, WIDTH);                          \
        for (uint32_t i = s; i < s + WIDTH; ++i)                                          \
          if (::mk::lane_active(l, i)) ::mk::lane_out<bool>(l, i) = (i == first);                       \
      }                                                                                   \
    });                                                                                   \
  }

MK_SIMD_SEGMENTED(simd, 32)
MK_SIMD_SEGMENTED(quad, 4)
#undef MK_SIMD_SEGMENTED

// The flags travel as the lane argument (work-item loops store none for this
// op; the checking mode reads them from the call, check/instrument.py).
__attribute__((always_inline)) inline void simdgroup_barrier(mem_flags flags) {
  const bool unused = false;
  (void)::mk::simd_collective<bool, bool>(unused, uint32_t(flags), ::mk::SIMD_BARRIER,
                                          [](const auto&) {});
}

}  // namespace metal
