// cooperative_groups: the block and its tiles of 1 to 32 threads, on the warp
// functions of warp.h (a tile's mask names its lanes, its width is its size).
// Grid-wide groups (this_grid, grid.sync()) are rejected by the front end.
#pragma once

namespace cooperative_groups {

class thread_block {
 public:
  static void sync() { __syncthreads(); }
  static unsigned int thread_rank() { return ::mk::cuda::linear_thread(); }
  static unsigned int size() { return ::mk::cuda::block_threads(); }
  static unsigned int num_threads() { return ::mk::cuda::block_threads(); }
  static dim3 group_index() { return dim3(blockIdx); }
  static dim3 thread_index() { return dim3(threadIdx); }
  static dim3 group_dim() { return blockDim; }
  static dim3 dim_threads() { return blockDim; }
};
inline thread_block this_thread_block() { return thread_block(); }
inline void sync(const thread_block&) { __syncthreads(); }

template <unsigned int N>
class thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tiles of 1, 2, 4, 8, 16 or 32 threads");

 public:
  static unsigned int lane() { return ::mk::cuda::linear_thread() % 32u; }
  // The lanes of this tile, as a warp mask.
  static unsigned int mask() { return N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (lane() & ~(N - 1u)); }
  static void sync(MKCUDA_LINE) { __syncwarp(mask(), __mk_line); }
  static unsigned int thread_rank() { return ::mk::cuda::linear_thread() % N; }
  static constexpr unsigned int size() { return N; }
  static constexpr unsigned int num_threads() { return N; }
  static unsigned int meta_group_rank() { return ::mk::cuda::linear_thread() / N; }
  static unsigned int meta_group_size() { return (::mk::cuda::block_threads() + N - 1) / N; }
  template <class T> static T shfl(T v, int src, MKCUDA_LINE) { return __shfl_sync(mask(), v, src, N, __mk_line); }
  template <class T> static T shfl_up(T v, unsigned int d, MKCUDA_LINE) {
    return __shfl_up_sync(mask(), v, d, N, __mk_line);
  }
  template <class T> static T shfl_down(T v, unsigned int d, MKCUDA_LINE) {
    return __shfl_down_sync(mask(), v, d, N, __mk_line);
  }
  template <class T> static T shfl_xor(T v, unsigned int m, MKCUDA_LINE) {
    return __shfl_xor_sync(mask(), v, int(m), N, __mk_line);
  }
  static int any(int p, MKCUDA_LINE) { return __any_sync(mask(), p, __mk_line); }
  static int all(int p, MKCUDA_LINE) { return __all_sync(mask(), p, __mk_line); }
  // Ballots and matches in tile ranks (bit i = the tile's thread i).
  static unsigned int ballot(int p, MKCUDA_LINE) {
    return __ballot_sync(mask(), p, __mk_line) >> (lane() & ~(N - 1u));
  }
  template <class T> static unsigned int match_any(T v, MKCUDA_LINE) {
    return __match_any_sync(mask(), v, __mk_line) >> (lane() & ~(N - 1u));
  }
};
template <unsigned int N, class Parent>
inline thread_block_tile<N> tiled_partition(const Parent&) {
  return thread_block_tile<N>();
}

template <class T> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <class T> struct less { T operator()(const T& a, const T& b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <class T> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

// Butterfly reduction over the tile: every thread gets the result.
template <unsigned int N, class T, class Op>
inline T reduce(const thread_block_tile<N>& tile, T value, Op op, MKCUDA_LINE) {
  for (unsigned int i = N / 2; i > 0; i /= 2) value = op(value, tile.shfl_xor(value, i, __mk_line));
  return value;
}
template <unsigned int N, class T, class Op = plus<T>>
inline T inclusive_scan(const thread_block_tile<N>& tile, T value, Op op = Op(), MKCUDA_LINE) {
  for (unsigned int d = 1; d < N; d *= 2) {
    const T y = tile.shfl_up(value, d, __mk_line);
    if (tile.thread_rank() >= d) value = op(value, y);
  }
  return value;
}
template <unsigned int N, class T, class Op = plus<T>>
inline T exclusive_scan(const thread_block_tile<N>& tile, T value, Op op = Op(), MKCUDA_LINE) {
  const T inc = inclusive_scan(tile, value, op, __mk_line);
  const T prev = tile.shfl_up(inc, 1, __mk_line);
  return tile.thread_rank() == 0 ? T() : prev;
}

}  // namespace cooperative_groups
