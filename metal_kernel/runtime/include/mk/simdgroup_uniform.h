// simdgroup_matrix<T, 8, 8> for the whole-simdgroup build (MK_SGU, see
// runtime/simdgroup_uniform.py): the translation unit is compiled a second
// time with this header instead of the per-lane one, and a kernel whose
// lanes cannot tell each other apart (no lane ids, no simd functions, no
// thread_elements(), no read-modify-write atomics) runs its per-thread
// function once per simdgroup. A matrix is then one value holding all 64
// elements as eight row vectors, in registers: loads and stores are row
// loads and stores, and a product is 64 broadcast-FMAs on rows, with no
// exchange between lanes.
//
// The arithmetic is the per-lane implementation's, element for element:
// operands converted to float, D[r][j] = fma(A[r][i], B[i][j], D[r][j]) for
// i = 0..7 starting from C (or 0), converted to the destination type; so
// both builds give the same bits.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Marks a use that depends on which lane runs (thread_elements()): a
// kernel calling it keeps the per-lane build. Never defined: such kernels'
// whole-simdgroup copies are dropped before linking.
extern "C" void __mk_sgu_lane_dependent(void);

namespace mk {
// With 16 vector registers (AVX2), keeps a matrix in memory: an address
// that escapes stops clang from promoting the matrix's rows to registers
// across loops, where a GEMM's accumulators (32 rows) and operands cannot
// fit and their spills fall where they fall; in memory, a product keeps
// B's rows in eight registers and streams each row of C through one
// (measured on the benchmark's GEMM: 30% less time). With AVX-512's 32
// registers clang's own allocation is faster.
template <typename M>
__attribute__((always_inline)) inline void in_memory(M& m) {
#ifndef __AVX512F__
  __asm__ volatile("" : : "r"(&m));
#else
  (void)m;
#endif
}

// A row of a matrix: a vector register for the arithmetic types clang has
// vectors of; eight elements otherwise (bfloat is a class).
template <class T> struct MatrixRowOf {
  struct type {
    T e[8];
    T& operator[](int i) { return e[i]; }
    const T& operator[](int i) const { return e[i]; }
  };
};
template <> struct MatrixRowOf<float> { typedef float type __attribute__((ext_vector_type(8))); };
template <> struct MatrixRowOf<half> { typedef half type __attribute__((ext_vector_type(8))); };
}  // namespace mk

namespace metal {

template <typename T, int Cols = 8, int Rows = 8>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "only 8x8 simdgroup matrices exist");
  typedef typename ::mk::MatrixRowOf<T>::type Row;
  Row rows[8];

  simdgroup_matrix() = default;
  // A diagonal matrix with `d` on the diagonal.
  explicit simdgroup_matrix(T d) {
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) rows[r][c] = r == c ? d : T(0);
  }
  vec<T, 2>& thread_elements() {
    __mk_sgu_lane_dependent();
    return *reinterpret_cast<vec<T, 2>*>(&rows[0]);
  }
  const vec<T, 2>& thread_elements() const {
    __mk_sgu_lane_dependent();
    return *reinterpret_cast<const vec<T, 2>*>(&rows[0]);
  }
};

template <typename T, int Cols = 8, int Rows = 8>
inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(T value) {
  simdgroup_matrix<T, Cols, Rows> m;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) m.rows[r][c] = value;
  return m;
}

// Element (r, c) of the 8x8 block at `origin` (x = column, y = row) of a
// row-major matrix with `elements_per_row` columns; with `transpose`, the
// block is read transposed (element (r, c) from row c, column r).
template <typename T, typename S>
__attribute__((always_inline)) inline void simdgroup_load(simdgroup_matrix<T, 8, 8>& d, const S* src,
                                                          ulong elements_per_row = 8,
                                                          ulong2 origin = ulong2(0, 0),
                                                          bool transpose = false) {
  ::mk::in_memory(d);
  const S* base = src + origin.y * elements_per_row + origin.x;
  if (!transpose) {
#pragma clang loop unroll(full)
    for (int r = 0; r < 8; ++r) {
      const S* p = base + r * elements_per_row;
#pragma clang loop unroll(full)
      for (int c = 0; c < 8; ++c) d.rows[r][c] = T(p[c]);
    }
    return;
  }
#pragma clang loop unroll(full)
  for (int c = 0; c < 8; ++c) {
    const S* p = base + c * elements_per_row;
#pragma clang loop unroll(full)
    for (int r = 0; r < 8; ++r) d.rows[r][c] = T(p[r]);
  }
}

template <typename T, typename S>
__attribute__((always_inline)) inline void simdgroup_store(const simdgroup_matrix<T, 8, 8>& a, S* dst,
                                                           ulong elements_per_row = 8,
                                                           ulong2 origin = ulong2(0, 0),
                                                           bool transpose = false) {
  S* base = dst + origin.y * elements_per_row + origin.x;
  if (!transpose) {
#pragma clang loop unroll(full)
    for (int r = 0; r < 8; ++r) {
      S* p = base + r * elements_per_row;
#pragma clang loop unroll(full)
      for (int c = 0; c < 8; ++c) p[c] = S(a.rows[r][c]);
    }
    return;
  }
#pragma clang loop unroll(full)
  for (int c = 0; c < 8; ++c) {
    S* p = base + c * elements_per_row;
#pragma clang loop unroll(full)
    for (int r = 0; r < 8; ++r) p[r] = S(a.rows[r][c]);
  }
}

}  // namespace metal

namespace mk {

typedef float MatrixRow __attribute__((ext_vector_type(8)));

template <typename T>
__attribute__((always_inline)) inline MatrixRow float_row(const metal::simdgroup_matrix<T, 8, 8>& m, int r) {
  MatrixRow v;
#pragma clang loop unroll(full)
  for (int c = 0; c < 8; ++c) v[c] = float(m.rows[r][c]);
  return v;
}

template <typename TD, typename TA, typename TB, typename TC>
__attribute__((always_inline)) inline void matrix_mma(
    metal::simdgroup_matrix<TD, 8, 8>& d, const metal::simdgroup_matrix<TA, 8, 8>& a,
    const metal::simdgroup_matrix<TB, 8, 8>& b, const metal::simdgroup_matrix<TC, 8, 8>* c) {
  in_memory(d);
  MatrixRow B[8], D[8];
#pragma clang loop unroll(full)
  for (int i = 0; i < 8; ++i) B[i] = float_row(b, i);
  // Two rows at a time: their chains of eight dependent FMAs interleave, so
  // the core has a second chain to issue while one waits on its last FMA
  // (measured on the benchmark's GEMM built for Zen 3: 2-6% less time;
  // four rows at a time spills). Each element's FMAs keep their order.
#pragma clang loop unroll(full)
  for (int r = 0; r < 8; r += 2) {
    MatrixRow acc0 = c ? float_row(*c, r) : MatrixRow(0.0f);
    MatrixRow acc1 = c ? float_row(*c, r + 1) : MatrixRow(0.0f);
#pragma clang loop unroll(full)
    for (int i = 0; i < 8; ++i) {
      acc0 = __builtin_elementwise_fma(MatrixRow(float(a.rows[r][i])), B[i], acc0);
      acc1 = __builtin_elementwise_fma(MatrixRow(float(a.rows[r + 1][i])), B[i], acc1);
    }
    D[r] = acc0;
    D[r + 1] = acc1;
  }
#pragma clang loop unroll(full)
  for (int r = 0; r < 8; ++r)
#pragma clang loop unroll(full)
    for (int c = 0; c < 8; ++c) d.rows[r][c] = TD(D[r][c]);
}

}  // namespace mk
