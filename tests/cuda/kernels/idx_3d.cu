// Rule: three-dimensional blocks and grids, and dim3.
__global__ void idx_3d(unsigned* out) {
  dim3 t = threadIdx;
  unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned lin = t.x + blockDim.x * (t.y + blockDim.y * t.z);
  unsigned i = block * (blockDim.x * blockDim.y * blockDim.z) + lin;
  out[i * 4 + 0] = t.x | (t.y << 8) | (t.z << 16);
  out[i * 4 + 1] = blockIdx.x | (blockIdx.y << 8) | (blockIdx.z << 16);
  out[i * 4 + 2] = blockDim.x | (blockDim.y << 8) | (blockDim.z << 16);
  out[i * 4 + 3] = gridDim.x | (gridDim.y << 8) | (gridDim.z << 16);
}
