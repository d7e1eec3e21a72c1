// The block- and warp-level parts of CUB: BlockReduce, BlockScan and
// WarpReduce, with CUB's interfaces (results valid where CUB says: the
// reductions' in thread / lane 0). Implemented on shared memory and the
// warp functions; the order of float additions differs from CUB's.
#pragma once

namespace cub {

struct Sum { template <class T> T operator()(const T& a, const T& b) const { return a + b; } };
struct Max { template <class T> T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
struct Min { template <class T> T operator()(const T& a, const T& b) const { return b < a ? b : a; } };

enum BlockReduceAlgorithm { BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY, BLOCK_REDUCE_RAKING, BLOCK_REDUCE_WARP_REDUCTIONS };
enum BlockScanAlgorithm { BLOCK_SCAN_RAKING, BLOCK_SCAN_RAKING_MEMOIZE, BLOCK_SCAN_WARP_SCANS };

template <class T, int BLOCK_DIM_X, int ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockReduce {
  static constexpr int THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;

 public:
  struct TempStorage {
    T items[THREADS];
  };
  explicit BlockReduce(TempStorage& storage) : s_(storage) {}
  template <class Op>
  T Reduce(T input, Op op, int num_valid = THREADS) {
    const unsigned int t = ::mk::cuda::linear_thread();
    s_.items[t] = input;
    __syncthreads();
    if (t != 0) return input;
    T acc = s_.items[0];
    for (int i = 1; i < num_valid; ++i) acc = op(acc, s_.items[i]);
    return acc;
  }
  T Sum(T input) { return Reduce(input, cub::Sum()); }
  T Sum(T input, int num_valid) { return Reduce(input, cub::Sum(), num_valid); }

 private:
  TempStorage& s_;
};

template <class T, int BLOCK_DIM_X, int ALGORITHM = BLOCK_SCAN_RAKING, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1,
          int LEGACY_PTX_ARCH = 0>
class BlockScan {
  static constexpr int THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;

 public:
  struct TempStorage {
    T items[THREADS];
    T aggregate;
  };
  explicit BlockScan(TempStorage& storage) : s_(storage) {}
  template <class Op>
  void InclusiveScan(T input, T& output, Op op, T& aggregate) {
    scan(input, output, op, aggregate, false, T());
  }
  template <class Op>
  void InclusiveScan(T input, T& output, Op op) {
    T aggregate;
    scan(input, output, op, aggregate, false, T());
  }
  template <class Op>
  void ExclusiveScan(T input, T& output, T initial, Op op, T& aggregate) {
    scan(input, output, op, aggregate, true, initial);
  }
  template <class Op>
  void ExclusiveScan(T input, T& output, T initial, Op op) {
    T aggregate;
    scan(input, output, op, aggregate, true, initial);
  }
  void InclusiveSum(T input, T& output) { InclusiveScan(input, output, cub::Sum()); }
  void InclusiveSum(T input, T& output, T& aggregate) { InclusiveScan(input, output, cub::Sum(), aggregate); }
  void ExclusiveSum(T input, T& output) { ExclusiveScan(input, output, T(0), cub::Sum()); }
  void ExclusiveSum(T input, T& output, T& aggregate) { ExclusiveScan(input, output, T(0), cub::Sum(), aggregate); }

 private:
  template <class Op>
  void scan(T input, T& output, Op op, T& aggregate, bool exclusive, T initial) {
    const unsigned int t = ::mk::cuda::linear_thread();
    s_.items[t] = input;
    __syncthreads();
    if (t == 0) {
      T acc = initial, total = s_.items[0];
      for (int i = 0; i < THREADS; ++i) {
        const T v = s_.items[i];
        if (i > 0) total = op(total, v);
        if (exclusive) {
          s_.items[i] = acc;
          acc = op(acc, v);
        } else {
          s_.items[i] = total;
        }
      }
      s_.aggregate = total;  // of the inputs alone, as CUB's block_aggregate
    }
    __syncthreads();
    output = s_.items[t];
    aggregate = s_.aggregate;
  }
  TempStorage& s_;
};

template <class T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpReduce {
 public:
  struct TempStorage {};
  explicit WarpReduce(TempStorage&) {}
  template <class Op>
  T Reduce(T input, Op op, MKCUDA_LINE) {
    const cooperative_groups::thread_block_tile<LOGICAL_WARP_THREADS> tile;
    return cooperative_groups::reduce(tile, input, op, __mk_line);
  }
  T Sum(T input, MKCUDA_LINE) { return Reduce(input, cub::Sum(), __mk_line); }
};

}  // namespace cub
