// Rule: fminf/fmaxf and CUDA's min/max overloads, NaN handling, rounding functions.
__global__ void math_minmax(const float* x, const float* y, const int* k, float* out, int* iout) {
  int i = threadIdx.x;
  float a = x[i], b = (i % 5 == 0) ? __int_as_float(0x7fc00000) : y[i];
  out[i * 6 + 0] = fminf(a, b);
  out[i * 6 + 1] = fmaxf(a, b);
  out[i * 6 + 2] = floorf(a * 10.0f);
  out[i * 6 + 3] = roundf(a * 10.0f);
  out[i * 6 + 4] = rintf(a * 10.0f);
  out[i * 6 + 5] = truncf(a * 10.0f) + copysignf(1.0f, a);
  iout[i * 3 + 0] = min(k[i], 10);
  iout[i * 3 + 1] = max(k[i], -3);
  iout[i * 3 + 2] = (int)min((unsigned)k[i], 7u) + abs(k[i]);
}
