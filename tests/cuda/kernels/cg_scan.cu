// Rule: cg::inclusive_scan / exclusive_scan over tiles.
#include <cooperative_groups.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;
__global__ void cg_scan(const int* x, int* out) {
  auto block = cg::this_thread_block();
  auto t16 = cg::tiled_partition<16>(block);
  int v = x[block.thread_rank()];
  int r = block.thread_rank();
  out[r * 2] = cg::inclusive_scan(t16, v);
  out[r * 2 + 1] = cg::exclusive_scan(t16, v);
}
