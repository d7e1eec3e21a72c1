// Warp functions with CUDA's meaning on Volta and later: the mask names the
// participating lanes; a lane waits until each of them has exited or reached
// an operation of the same kind with the same mask (mk/named_sync.h), then
// they exchange values. The source line travels with the operation for the
// deadlock report.
#pragma once
#include <stdint.h>
#include <string.h>

#include "mk/named_sync.h"
#include "mk/simd.h"

namespace mk {
namespace cuda {

template <class T, class R, class Compute>
__attribute__((always_inline)) inline R warp_op(unsigned int mask, uint32_t kind, unsigned int line, const T& in,
                                                Compute compute) {
  return ::mk::simd_collective<T, R>(in, mask, kind | (line << 8), compute);
}

// shfl.sync's operands (PTX ISA): b = source lane, delta or lane mask; c =
// segment mask << 8 | clamp, from `width`.
template <class T>
struct ShflIn {
  T value;
  uint32_t b, c;
};

// The lane `lane` reads from, as shfl.sync computes it; its own lane when
// the source falls outside its segment.
inline uint32_t shfl_source(uint32_t kind, uint32_t lane, uint32_t b, uint32_t c) {
  const int bval = int(b & 31u), cval = int(c & 31u), seg = int((c >> 8) & 31u);
  const int minLane = int(lane) & seg, maxLane = minLane | (cval & ~seg);
  int j;
  bool ok;
  switch (kind) {
    case named::SHFL_UP: j = int(lane) - bval; ok = j >= maxLane; break;
    case named::SHFL_DOWN: j = int(lane) + bval; ok = j <= maxLane; break;
    case named::SHFL_XOR: j = int(lane) ^ bval; ok = j <= maxLane; break;
    default: j = minLane | (bval & ~seg); ok = j <= maxLane; break;
  }
  return ok ? uint32_t(j) : lane;
}

template <uint32_t Kind, class T>
__attribute__((always_inline)) inline T shfl(unsigned int mask, T value, unsigned int b, int width,
                                             unsigned int line) {
  const uint32_t seg = uint32_t(32 - width) & 31u;
  const ShflIn<T> in{value, b, (seg << 8) | (Kind == named::SHFL_UP ? 0u : 31u)};
  return warp_op<ShflIn<T>, T>(mask, Kind, line, in, [](const auto& l) {
    for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i) {
      if (!::mk::lane_active(l, i)) continue;
      const ShflIn<T>& me = ::mk::lane_in<ShflIn<T>>(l, i);
      const uint32_t j = shfl_source(Kind, i, me.b, me.c);
      // A source that does not take part (exited, or not in the mask) is
      // undefined in CUDA; an H200 gives 0 for an exited lane, and llm.c's
      // matmul_backward_bias_kernel8 relies on it: 0 here too, and checked
      // builds report the read, as they do a Metal simd function's.
      if (::mk::lane_active(l, j)) {
        ::mk::lane_out<T>(l, i) = ::mk::lane_in<ShflIn<T>>(l, j).value;
      } else {
        ::mk::inactive_read(l, i, j);
        T zero;
        memset(static_cast<void*>(&zero), 0, sizeof(T));
        ::mk::lane_out<T>(l, i) = zero;
      }
    }
  });
}

template <class L, class F>
__attribute__((always_inline)) inline void for_active(const L& l, F f) {
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i)
    if (::mk::lane_active(l, i)) f(i);
}

template <uint32_t Kind, class T, class Op>
__attribute__((always_inline)) inline T warp_reduce(unsigned int mask, T value, unsigned int line, Op) {
  return warp_op<T, T>(mask, Kind, line, value, [](const auto& l) {
    bool have = false;
    T acc{};
    for_active(l, [&](uint32_t i) {
      acc = have ? Op()(acc, ::mk::lane_in<T>(l, i)) : ::mk::lane_in<T>(l, i);
      have = true;
    });
    for_active(l, [&](uint32_t i) { ::mk::lane_out<T>(l, i) = acc; });
  });
}

template <class T>
struct Bits {
  uint64_t bits;
  static Bits of(const T& v) {
    Bits b{0};
    memcpy(&b.bits, &v, sizeof(T) < 8 ? sizeof(T) : 8);
    return b;
  }
};

struct Add { template <class T> T operator()(T a, T b) const { return a + b; } };
struct Min { template <class T> T operator()(T a, T b) const { return b < a ? b : a; } };
struct Max { template <class T> T operator()(T a, T b) const { return a < b ? b : a; } };
struct And { template <class T> T operator()(T a, T b) const { return a & b; } };
struct Or { template <class T> T operator()(T a, T b) const { return a | b; } };
struct Xor { template <class T> T operator()(T a, T b) const { return a ^ b; } };

}  // namespace cuda
}  // namespace mk

#define MKCUDA_LINE unsigned int __mk_line = __builtin_LINE()

template <class T>
__attribute__((always_inline)) inline T __shfl_sync(unsigned int mask, T var, int srcLane, int width = warpSize,
                                                    MKCUDA_LINE) {
  return ::mk::cuda::shfl<::mk::named::SHFL_IDX>(mask, var, unsigned(srcLane), width, __mk_line);
}
template <class T>
__attribute__((always_inline)) inline T __shfl_up_sync(unsigned int mask, T var, unsigned int delta,
                                                       int width = warpSize, MKCUDA_LINE) {
  return ::mk::cuda::shfl<::mk::named::SHFL_UP>(mask, var, delta, width, __mk_line);
}
template <class T>
__attribute__((always_inline)) inline T __shfl_down_sync(unsigned int mask, T var, unsigned int delta,
                                                         int width = warpSize, MKCUDA_LINE) {
  return ::mk::cuda::shfl<::mk::named::SHFL_DOWN>(mask, var, delta, width, __mk_line);
}
template <class T>
__attribute__((always_inline)) inline T __shfl_xor_sync(unsigned int mask, T var, int laneMask,
                                                        int width = warpSize, MKCUDA_LINE) {
  return ::mk::cuda::shfl<::mk::named::SHFL_XOR>(mask, var, unsigned(laneMask), width, __mk_line);
}

__attribute__((always_inline)) inline void __syncwarp(unsigned int mask = 0xffffffffu, MKCUDA_LINE) {
  (void)::mk::cuda::warp_op<int, int>(mask, ::mk::named::SYNCWARP, __mk_line, 0, [](const auto&) {});
}

__attribute__((always_inline)) inline unsigned int __ballot_sync(unsigned int mask, int predicate, MKCUDA_LINE) {
  return ::mk::cuda::warp_op<int, unsigned int>(mask, ::mk::named::BALLOT, __mk_line, predicate != 0,
                                                [](const auto& l) {
    unsigned int bits = 0;
    ::mk::cuda::for_active(l, [&](uint32_t i) { bits |= unsigned(::mk::lane_in<int>(l, i) != 0) << i; });
    ::mk::cuda::for_active(l, [&](uint32_t i) { ::mk::lane_out<unsigned int>(l, i) = bits; });
  });
}
__attribute__((always_inline)) inline int __any_sync(unsigned int mask, int predicate, MKCUDA_LINE) {
  return ::mk::cuda::warp_reduce<::mk::named::ANY>(mask, int(predicate != 0), __mk_line, ::mk::cuda::Or());
}
__attribute__((always_inline)) inline int __all_sync(unsigned int mask, int predicate, MKCUDA_LINE) {
  return ::mk::cuda::warp_reduce<::mk::named::ALL>(mask, int(predicate != 0), __mk_line, ::mk::cuda::And());
}

template <class T>
__attribute__((always_inline)) inline unsigned int __match_any_sync(unsigned int mask, T value, MKCUDA_LINE) {
  using B = ::mk::cuda::Bits<T>;
  return ::mk::cuda::warp_op<B, unsigned int>(mask, ::mk::named::MATCH_ANY, __mk_line, B::of(value),
                                              [](const auto& l) {
    ::mk::cuda::for_active(l, [&](uint32_t i) {
      unsigned int same = 0;
      ::mk::cuda::for_active(l, [&](uint32_t j) {
        same |= unsigned(::mk::lane_in<B>(l, j).bits == ::mk::lane_in<B>(l, i).bits) << j;
      });
      ::mk::lane_out<unsigned int>(l, i) = same;
    });
  });
}
template <class T>
__attribute__((always_inline)) inline unsigned int __match_all_sync(unsigned int mask, T value, int* pred,
                                                                    MKCUDA_LINE) {
  using B = ::mk::cuda::Bits<T>;
  const unsigned int r = ::mk::cuda::warp_op<B, unsigned int>(
      mask, ::mk::named::MATCH_ALL, __mk_line, B::of(value), [](const auto& l) {
        unsigned int lanes = 0;
        bool same = true;
        uint64_t first = 0;
        bool have = false;
        ::mk::cuda::for_active(l, [&](uint32_t i) {
          lanes |= 1u << i;
          const uint64_t v = ::mk::lane_in<B>(l, i).bits;
          if (have && v != first) same = false;
          first = v;
          have = true;
        });
        ::mk::cuda::for_active(l, [&](uint32_t i) { ::mk::lane_out<unsigned int>(l, i) = same ? lanes : 0u; });
      });
  *pred = r != 0;
  return r;
}

#define MKCUDA_REDUCE(NAME, KIND, OP, T)                                                          \
  __attribute__((always_inline)) inline T NAME(unsigned int mask, T value, MKCUDA_LINE) {         \
    return ::mk::cuda::warp_reduce<::mk::named::KIND>(mask, value, __mk_line, ::mk::cuda::OP()); \
  }
MKCUDA_REDUCE(__reduce_add_sync, REDUCE_ADD, Add, unsigned int)
MKCUDA_REDUCE(__reduce_add_sync, REDUCE_ADD, Add, int)
MKCUDA_REDUCE(__reduce_min_sync, REDUCE_MIN, Min, unsigned int)
MKCUDA_REDUCE(__reduce_min_sync, REDUCE_MIN, Min, int)
MKCUDA_REDUCE(__reduce_max_sync, REDUCE_MAX, Max, unsigned int)
MKCUDA_REDUCE(__reduce_max_sync, REDUCE_MAX, Max, int)
MKCUDA_REDUCE(__reduce_and_sync, REDUCE_AND, And, unsigned int)
MKCUDA_REDUCE(__reduce_or_sync, REDUCE_OR, Or, unsigned int)
MKCUDA_REDUCE(__reduce_xor_sync, REDUCE_XOR, Xor, unsigned int)
#undef MKCUDA_REDUCE

// The lanes executing together right now: those of the warp at this call
// (Metal's active lanes, which is what a converged warp gives).
__attribute__((always_inline)) inline unsigned int __activemask() {
  return unsigned(uint64_t(::metal::simd_active_threads_mask()));
}
