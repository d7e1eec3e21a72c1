// Rule: structs passed by value.
struct Params {
  float scale;
  int shift;
  double bias;
  short tag;
};
__global__ void struct_arg(const float* x, float* y, Params p) {
  int i = threadIdx.x;
  y[i] = x[i] * p.scale + (float)(p.shift + p.tag) + (float)p.bias;
}
