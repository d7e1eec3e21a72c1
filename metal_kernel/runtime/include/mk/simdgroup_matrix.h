// simdgroup_matrix<T, 8, 8>: an 8x8 matrix spread over the 32 lanes of a
// simdgroup, two consecutive elements of one row per lane, exactly as Apple
// GPUs lay it out (kernels from MLX, PyTorch and tinygrad write
// thread_elements() directly and depend on it):
//
//     row = 4 * (lane >= 16) + ((lane >> 1) & 3)
//     col = 4 * ((lane >> 3) & 1) + 2 * (lane & 1)
//
// Each lane's object lives on that lane's own stack, as on the GPU. Loads and
// stores touch only the calling lane's elements; multiplications gather the
// three operands of every lane through the simd protocol (mk/simd.h), and the
// elected lane computes the product in float and hands each lane its part.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "runtime.h"
#include "simd.h"

namespace mk {

inline uint32_t lane_index() { return __mk_thread_index() % MK_SIMD_WIDTH; }
inline uint32_t matrix_row(uint32_t lane) { return 4 * (lane >= 16) + ((lane >> 1) & 3); }
inline uint32_t matrix_col(uint32_t lane) { return 4 * ((lane >> 3) & 1) + 2 * (lane & 1); }

}  // namespace mk

namespace metal {

template <typename T, int Cols = 8, int Rows = 8>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "only 8x8 simdgroup matrices exist");
  vec<T, 2> elems;

  simdgroup_matrix() = default;
  // A diagonal matrix with `d` on the diagonal.
  explicit simdgroup_matrix(T d) {
    const uint32_t lane = ::mk::lane_index();
    const uint32_t r = ::mk::matrix_row(lane), c = ::mk::matrix_col(lane);
    elems = vec<T, 2>(r == c ? d : T(0), r == c + 1 ? d : T(0));
  }
  vec<T, 2>& thread_elements() { return elems; }
  const vec<T, 2>& thread_elements() const { return elems; }
};

typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

template <typename T, int Cols = 8, int Rows = 8>
inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(T value) {
  simdgroup_matrix<T, Cols, Rows> m;
  m.elems = vec<T, 2>(value, value);
  return m;
}

// Element (r, c) of the 8x8 block whose top-left corner sits at `origin`
// (x = column, y = row) of a row-major matrix with `elements_per_row`
// columns; with `transpose`, the block is read transposed.
template <typename T, typename S>
inline void simdgroup_load(simdgroup_matrix<T, 8, 8>& d, const S* src,
                           ulong elements_per_row = 8, ulong2 origin = ulong2(0, 0),
                           bool transpose = false) {
  const uint32_t lane = ::mk::lane_index();
  const ulong r = ::mk::matrix_row(lane), c = ::mk::matrix_col(lane);
  T v[2];
  for (int k = 0; k < 2; ++k) {
    const ulong row = transpose ? c + k : r;
    const ulong col = transpose ? r : c + k;
    v[k] = T(src[(origin.y + row) * elements_per_row + origin.x + col]);
  }
  d.elems = vec<T, 2>(v[0], v[1]);
}

template <typename T, typename S>
inline void simdgroup_store(const simdgroup_matrix<T, 8, 8>& a, S* dst,
                            ulong elements_per_row = 8, ulong2 origin = ulong2(0, 0),
                            bool transpose = false) {
  const uint32_t lane = ::mk::lane_index();
  const ulong r = ::mk::matrix_row(lane), c = ::mk::matrix_col(lane);
  for (int k = 0; k < 2; ++k) {
    const ulong row = transpose ? c + k : r;
    const ulong col = transpose ? r : c + k;
    dst[(origin.y + row) * elements_per_row + origin.x + col] = S(a.elems[k]);
  }
}

}  // namespace metal

namespace mk {

// One lane's share of a multiply(-accumulate): its elements of A, B and C.
struct MatrixOperands {
  float a[2], b[2], c[2];
};
struct MatrixResult {
  float d[2];
};

template <class L>
__attribute__((always_inline)) inline bool all_lanes_active(const L& l) {
  for (uint32_t lane = 0; lane < MK_SIMD_WIDTH; ++lane)
    if (!lane_active(l, lane)) return false;
  return true;
}

// Gathers every lane's two elements of A, B and C into 8x8 arrays. With
// Full, every lane is active and the loop unrolls into constant positions;
// otherwise an inactive lane's elements read as 0.
template <bool Full, class L>
__attribute__((always_inline)) inline void gather_operands(const L& l, float (&A)[8][8], float (&B)[8][8],
                                                           float (&C)[8][8]) {
#pragma clang loop unroll(full)
  for (uint32_t lane = 0; lane < MK_SIMD_WIDTH; ++lane) {
    if (!Full && !lane_active(l, lane)) continue;
    const auto& op = lane_in<MatrixOperands>(l, lane);
    const uint32_t r = matrix_row(lane), c = matrix_col(lane);
    for (int k = 0; k < 2; ++k) {
      A[r][c + k] = op.a[k];
      B[r][c + k] = op.b[k];
      C[r][c + k] = op.c[k];
    }
  }
}

template <bool Full, class L>
__attribute__((always_inline)) inline void scatter_result(const L& l, const float (&D)[8][8]) {
#pragma clang loop unroll(full)
  for (uint32_t lane = 0; lane < MK_SIMD_WIDTH; ++lane) {
    if (!Full && !lane_active(l, lane)) continue;
    const uint32_t r = matrix_row(lane), c = matrix_col(lane);
    MatrixResult& out = lane_out<MatrixResult>(l, lane);
    out.d[0] = D[r][c];
    out.d[1] = D[r][c + 1];
  }
}

template <class L>
inline void matrix_multiply_lanes(const L& l, bool accumulate) {
  float A[8][8] = {}, B[8][8] = {}, C[8][8] = {};
  const bool full = all_lanes_active(l);
  if (full) gather_operands<true>(l, A, B, C);
  else gather_operands<false>(l, A, B, C);
  // D = A * B (+ C), each element accumulated in the order i = 0..7; the
  // innermost loop runs along a row of B and D, so it is one vector op.
  float D[8][8];
  for (int r = 0; r < 8; ++r) {
    for (int j = 0; j < 8; ++j) D[r][j] = accumulate ? C[r][j] : 0.0f;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) D[r][j] = __builtin_fmaf(A[r][i], B[i][j], D[r][j]);
  }
  if (full) scatter_result<true>(l, D);
  else scatter_result<false>(l, D);
}

// Work-item loops, every lane active: straight from the operand arrays
// (lane i's MatrixOperands at in + i * in_stride, its MatrixResult at
// out + i * out_stride), no 8x8 copies. A row of B, C or D is 4 lanes' pairs;
// each A element is broadcast from its lane's slot. Same arithmetic as
// matrix_multiply_lanes: D[r][j] = fma(A[r][i], B[i][j], D[r][j]) for
// i = 0..7 from C (or 0), one 8-wide vector per row. IS / OS: the strides,
// compile-time constants so that every address is a constant displacement.
typedef float MatrixRow __attribute__((ext_vector_type(8)));

// The lane holding elements (r, c) and (r, c + 1), c even (see the layout above).
constexpr uint32_t matrix_lane(uint32_t r, uint32_t c) {
  return 16 * (r >> 2) + 2 * (r & 3) + 8 * (c >> 2) + ((c >> 1) & 1);
}

template <uint32_t IS, uint32_t OS>
__attribute__((always_inline)) inline void multiply_full_group(const char* in, char* out, bool accumulate) {
  const auto at = [&](uint32_t lane, uint32_t byte) -> const float* {
    return reinterpret_cast<const float*>(in + uint64_t(lane) * IS + byte);
  };
  const auto row = [&](uint32_t r, uint32_t field) {
    MatrixRow v;
#pragma clang loop unroll(full)
    for (uint32_t q = 0; q < 4; ++q) {
      const float* p = at(matrix_lane(r, 2 * q), field);
      v[2 * q] = p[0];
      v[2 * q + 1] = p[1];
    }
    return v;
  };
  MatrixRow B[8];
#pragma clang loop unroll(full)
  for (uint32_t i = 0; i < 8; ++i) B[i] = row(i, offsetof(MatrixOperands, b));
#pragma clang loop unroll(full)
  for (uint32_t r = 0; r < 8; ++r) {
    MatrixRow d = accumulate ? row(r, offsetof(MatrixOperands, c)) : MatrixRow(0.0f);
#pragma clang loop unroll(full)
    for (uint32_t i = 0; i < 8; ++i) {
      const float a = *at(matrix_lane(r, i & ~1u), offsetof(MatrixOperands, a) + 4 * (i & 1));
      d = __builtin_elementwise_fma(MatrixRow(a), B[i], d);
    }
#pragma clang loop unroll(full)
    for (uint32_t q = 0; q < 4; ++q) {
      float* p = reinterpret_cast<float*>(out + uint64_t(matrix_lane(r, 2 * q)) * OS);
      p[0] = d[2 * q];
      p[1] = d[2 * q + 1];
    }
  }
}

// The simd computation of a multiply(-accumulate) over lanes `l`.
inline void matrix_compute(const SimdLanes& l) {
  matrix_multiply_lanes(l, lane_arg(l, lowest_active(l, 0, MK_SIMD_WIDTH)) != 0);
}

// Work-item loops: `l.groups` simdgroups (more than one only with every lane
// active, see mk/workitem.h), each with its own lane arguments.
inline void matrix_compute(const DenseLanes& l) {
  if (l.active_mask != 0xffffffffu) {
    matrix_multiply_lanes(l, lane_arg(l, lowest_active(l, 0, MK_SIMD_WIDTH)) != 0);
    return;
  }
  const uint64_t in_group = uint64_t(MK_SIMD_WIDTH) * l.in_stride;
  const uint64_t out_group = uint64_t(MK_SIMD_WIDTH) * l.out_stride;
  // The rows of a kernel whose simd operands are no wider than a product's
  // (the common case): compile-time strides. Otherwise the gathering form
  // (one instantiation less to compile).
  const bool common = l.in_stride == 32 && l.out_stride == 8;
  for (uint32_t gi = 0; gi < (l.groups ? l.groups : 1); ++gi) {
    const bool acc = l.args[gi * MK_SIMD_WIDTH] != 0;
    if (common) {
      multiply_full_group<32, 8>(l.in + gi * in_group, l.out + gi * out_group, acc);
      continue;
    }
    DenseLanes one = l;
    one.in = l.in + gi * in_group;
    one.out = l.out + gi * out_group;
    one.args = l.args + gi * MK_SIMD_WIDTH;
    one.groups = 1;
    matrix_multiply_lanes(one, acc);
  }
}

template <typename TD, typename TA, typename TB, typename TC>
__attribute__((always_inline)) inline void matrix_mma(
    metal::simdgroup_matrix<TD, 8, 8>& d, const metal::simdgroup_matrix<TA, 8, 8>& a,
    const metal::simdgroup_matrix<TB, 8, 8>& b, const metal::simdgroup_matrix<TC, 8, 8>* c) {
  MatrixOperands in;
  for (int k = 0; k < 2; ++k) {
    in.a[k] = float(a.elems[k]);
    in.b[k] = float(b.elems[k]);
    in.c[k] = c ? float(c->elems[k]) : 0.0f;
  }
  const bool accumulate = c != nullptr;
  MatrixResult r = simd_collective<MatrixOperands, MatrixResult>(
      in, accumulate ? 1u : 0u, SIMD_MATRIX, [](const auto& l) { matrix_compute(l); });
  d.elems = metal::vec<TD, 2>(TD(r.d[0]), TD(r.d[1]));
}

}  // namespace mk

namespace metal {

template <typename TD, typename TA, typename TB, typename TC>
__attribute__((always_inline)) inline void simdgroup_multiply_accumulate(
    simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
    const simdgroup_matrix<TB, 8, 8>& b, const simdgroup_matrix<TC, 8, 8>& c) {
  ::mk::matrix_mma(d, a, b, &c);
}

template <typename TD, typename TA, typename TB>
__attribute__((always_inline)) inline void simdgroup_multiply(
    simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
    const simdgroup_matrix<TB, 8, 8>& b) {
  ::mk::matrix_mma(d, a, b, static_cast<const simdgroup_matrix<TD, 8, 8>*>(nullptr));
}

// `a * b`: simdgroup_multiply into a new matrix (MLX's Winograd conv).
template <typename T>
__attribute__((always_inline)) inline simdgroup_matrix<T, 8, 8> operator*(const simdgroup_matrix<T, 8, 8>& a,
                                                                        const simdgroup_matrix<T, 8, 8>& b) {
  simdgroup_matrix<T, 8, 8> d;
  simdgroup_multiply(d, a, b);
  return d;
}

}  // namespace metal
