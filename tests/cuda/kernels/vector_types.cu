// Rule: CUDA vector types: float4 loads and stores, make_*, float3 is 12 bytes.
__global__ void vector_types(const float4* in, float4* out, int* sizes) {
  int i = threadIdx.x;
  float4 v = in[i];
  float3 w = make_float3(v.x, v.y, v.z);
  out[i] = make_float4(w.z, w.y, w.x, v.w * 2.0f);
  if (i == 0) {
    sizes[0] = sizeof(float3); sizes[1] = alignof(float4); sizes[2] = sizeof(int2); sizes[3] = alignof(int2);
    sizes[4] = sizeof(char3); sizes[5] = sizeof(double2); sizes[6] = sizeof(short4); sizes[7] = sizeof(uint3);
  }
}
