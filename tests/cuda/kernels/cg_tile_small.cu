// Rule: tiles of 16, 8 and 4 threads (width-limited shuffles over the tile's lanes).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void cg_tile_small(const int* x, int* out) {
  cg::thread_block block = cg::this_thread_block();
  auto t16 = cg::tiled_partition<16>(block);
  auto t8 = cg::tiled_partition<8>(block);
  auto t4 = cg::tiled_partition<4>(block);
  int v = x[block.thread_rank()];
  int r = block.thread_rank();
  out[r * 6 + 0] = cg::reduce(t16, v, cg::plus<int>());
  out[r * 6 + 1] = cg::reduce(t8, v, cg::less<int>());
  out[r * 6 + 2] = cg::reduce(t4, v, cg::bit_xor<int>());
  out[r * 6 + 3] = t8.shfl(v, 2);
  out[r * 6 + 4] = t4.shfl_xor(v, 1) + t16.shfl_up(v, 1) * 1000;
  out[r * 6 + 5] = t8.thread_rank() + 10 * t8.meta_group_rank();
}
