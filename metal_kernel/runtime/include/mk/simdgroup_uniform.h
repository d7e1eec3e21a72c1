// simdgroup_matrix<T, 8, 8> for the whole-simdgroup build (MK_SGU, see
// runtime/simdgroup_uniform.py): the translation unit is compiled a second
// time with this header instead of the per-lane one, and a kernel whose
// lanes cannot tell each other apart (no lane ids, no simd functions, no
// thread_elements(), no read-modify-write atomics) runs its per-thread
// function once per simdgroup. A matrix is then one value holding all 64
// elements as eight row vectors, in registers: loads and stores are row
// loads and stores, and a product is 64 broadcast-FMAs on rows, with no
// exchange between lanes. Float products that share their left operand are
// computed two at a time (runtime/simdgroup_fuse.py; see below).
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

typedef metal::simdgroup_matrix<float, 8, 8> FloatMatrix;

}  // namespace mk

// Float products go through a call to __mk_sgu_mma_f32, declared and never
// defined: runtime/simdgroup_fuse.py, reading the optimised IR, replaces
// two such calls in a row that share their left operand (a GEMM's a[i]
// times b[0] and b[1]) by one call to __mk_sgu_mma_f32_pair, which
// broadcasts each element of `a` once for both, and every other call by
// __mk_sgu_mma_f32_one; both are then inlined. Each element's FMAs keep
// their order, so the bits are those of two separate products.
extern "C" {
void __mk_sgu_mma_f32(mk::FloatMatrix* d, const mk::FloatMatrix* a, const mk::FloatMatrix* b,
                      const mk::FloatMatrix* c);

__attribute__((always_inline)) void __mk_sgu_mma_f32_one(mk::FloatMatrix* d, const mk::FloatMatrix* a,
                                                         const mk::FloatMatrix* b, const mk::FloatMatrix* c) {
  mk::matrix_mma<float, float, float, float>(*d, *a, *b, c);
}

// d1 = a * b1 + c1 and d2 = a * b2 + c2 (a null c is zero). The pass pairs
// two products only when each result is disjoint from a, b1, b2 and the
// other product's c, and equal to or disjoint from its own c: so a row of
// d1 or d2 may be written as soon as it is computed.
__attribute__((always_inline)) void __mk_sgu_mma_f32_pair(mk::FloatMatrix* d1, mk::FloatMatrix* d2,
                                                          const mk::FloatMatrix* a, const mk::FloatMatrix* b1,
                                                          const mk::FloatMatrix* b2, const mk::FloatMatrix* c1,
                                                          const mk::FloatMatrix* c2) {
  typedef mk::MatrixRow Row;
  mk::in_memory(*d1);
  mk::in_memory(*d2);
#ifndef __AVX512F__
  // 16 registers: four rows of both results (8 accumulators) at a time; for
  // each i, row i of b1 and of b2 read again (an empty asm hides that they
  // were read before, or clang keeps all 16 rows and spills them) and each
  // broadcast of a feeds two FMAs. The eight accumulators are independent
  // chains, so an FMA need not wait for the one before it.
#pragma clang loop unroll(full)
  for (int r0 = 0; r0 < 8; r0 += 4) {
    Row x[4], y[4];
#pragma clang loop unroll(full)
    for (int q = 0; q < 4; ++q) {
      x[q] = c1 ? c1->rows[r0 + q] : Row(0.0f);
      y[q] = c2 ? c2->rows[r0 + q] : Row(0.0f);
    }
#pragma clang loop unroll(full)
    for (int i = 0; i < 8; ++i) {
      const Row* p1 = &b1->rows[i];
      const Row* p2 = &b2->rows[i];
      __asm__("" : "+r"(p1), "+r"(p2));
      const Row u = *p1, v = *p2;
#pragma clang loop unroll(full)
      for (int q = 0; q < 4; ++q) {
        const Row t = Row(a->rows[r0 + q][i]);
        x[q] = __builtin_elementwise_fma(t, u, x[q]);
        y[q] = __builtin_elementwise_fma(t, v, y[q]);
      }
    }
#pragma clang loop unroll(full)
    for (int q = 0; q < 4; ++q) {
      d1->rows[r0 + q] = x[q];
      d2->rows[r0 + q] = y[q];
    }
  }
#else
  // 32 registers: b1's rows stay in registers, a row of both results at a time.
  Row B[8];
#pragma clang loop unroll(full)
  for (int i = 0; i < 8; ++i) B[i] = b1->rows[i];
#pragma clang loop unroll(full)
  for (int r = 0; r < 8; ++r) {
    Row x = c1 ? c1->rows[r] : Row(0.0f), y = c2 ? c2->rows[r] : Row(0.0f);
#pragma clang loop unroll(full)
    for (int i = 0; i < 8; ++i) {
      const Row t = Row(a->rows[r][i]);
      x = __builtin_elementwise_fma(t, B[i], x);
      y = __builtin_elementwise_fma(t, b2->rows[i], y);
    }
    d1->rows[r] = x;
    d2->rows[r] = y;
  }
#endif
}
}  // extern "C"

namespace mk {
// Chosen over the template for float matrices (an exact match).
__attribute__((always_inline)) inline void matrix_mma(FloatMatrix& d, const FloatMatrix& a, const FloatMatrix& b,
                                                      const FloatMatrix* c) {
  __mk_sgu_mma_f32(&d, &a, &b, c);
}
}  // namespace mk
