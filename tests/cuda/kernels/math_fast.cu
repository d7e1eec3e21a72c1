// Rule: the fast intrinsics (__expf, __logf, __fdividef, __sinf, __powf)
// within their documented error.
__global__ void math_fast(const float* x, const float* y, float* out) {
  int i = threadIdx.x;
  float a = x[i], b = y[i];
  out[i * 5 + 0] = __expf(a);
  out[i * 5 + 1] = __logf(fabsf(a) + 0.5f);
  out[i * 5 + 2] = __fdividef(a, b + 2.0f);
  out[i * 5 + 3] = __sinf(a);
  out[i * 5 + 4] = __powf(fabsf(a) + 0.5f, b);
}
