// Rule: tiled_partition<32>: shuffles, ranks and cg::reduce.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void cg_tile32(const int* x, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int v = x[block.thread_rank()];
  int s = cg::reduce(warp, v, cg::plus<int>());
  int m = cg::reduce(warp, v, cg::greater<int>());
  int d = warp.shfl_down(v, 1);
  int t = block.thread_rank();
  out[t * 5 + 0] = s;
  out[t * 5 + 1] = m;
  out[t * 5 + 2] = d;
  out[t * 5 + 3] = warp.thread_rank() + 100 * warp.meta_group_rank();
  out[t * 5 + 4] = warp.meta_group_size() * 1000 + warp.size();
}
