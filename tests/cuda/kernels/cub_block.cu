// Rule: cub::BlockReduce, cub::BlockScan and cub::WarpReduce.
#include <cub/cub.cuh>
__global__ void cub_block(const int* x, int* sums, int* scan, int* warp_sums) {
  using BlockReduce = cub::BlockReduce<int, 128>;
  using BlockScan = cub::BlockScan<int, 128>;
  using WarpReduce = cub::WarpReduce<int>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ typename WarpReduce::TempStorage warp_storage[4];
  int t = threadIdx.x;
  int v = x[blockIdx.x * 128 + t];
  int total = BlockReduce(reduce_storage).Sum(v);
  if (t == 0) sums[blockIdx.x] = total;
  int ex, agg;
  BlockScan(scan_storage).ExclusiveSum(v, ex, agg);
  scan[blockIdx.x * 128 + t] = ex + (t == 127 ? 0 : 0);
  int ws = WarpReduce(warp_storage[t / 32]).Sum(v);
  if (t % 32 == 0) warp_sums[blockIdx.x * 4 + t / 32] = ws + 0 * agg;
}
