// Rule: cooperative_groups::this_thread_block.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void cg_block(const int* x, int* out) {
  cg::thread_block block = cg::this_thread_block();
  __shared__ int s[128];
  int r = block.thread_rank();
  s[r] = x[blockIdx.x * block.size() + r];
  block.sync();
  out[blockIdx.x * block.size() + r] = s[block.size() - 1 - r] + (int)block.group_index().x * 1000 +
                                       (int)block.thread_index().y * 100000;
}
