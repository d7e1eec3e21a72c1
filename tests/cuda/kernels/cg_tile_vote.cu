// Rule: tile ballot / any / all / match_any (tile-relative lane bits).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void cg_tile_vote(const int* x, unsigned* out) {
  auto block = cg::this_thread_block();
  auto t8 = cg::tiled_partition<8>(block);
  int v = x[block.thread_rank()];
  int r = block.thread_rank();
  out[r * 4 + 0] = t8.ballot(v > 50);
  out[r * 4 + 1] = t8.any(v > 90);
  out[r * 4 + 2] = t8.all(v > 5);
  out[r * 4 + 3] = t8.match_any(v % 4);
}
