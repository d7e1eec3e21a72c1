// Rule: the CUDA math library, single precision, within its documented ulp bounds.
__global__ void math_precise(const float* x, const float* y, float* out) {
  int i = threadIdx.x;
  float a = x[i], b = y[i];
  float* o = out + i * 16;
  o[0] = expf(a);          // 2 ulp
  o[1] = logf(fabsf(a) + 0.5f);  // 1 ulp
  o[2] = sinf(a * 3.0f);   // 2 ulp
  o[3] = cosf(a * 3.0f);   // 2 ulp
  o[4] = tanf(a);          // 4 ulp
  o[5] = powf(fabsf(a) + 0.1f, b);  // 4 ulp
  o[6] = erff(a);          // 2 ulp
  o[7] = erfcf(a);         // 4 ulp
  o[8] = tanhf(a);         // 2 ulp
  o[9] = sqrtf(fabsf(a));  // 0 ulp
  o[10] = rsqrtf(fabsf(a) + 0.01f);  // 2 ulp
  o[11] = cbrtf(a);        // 1 ulp
  o[12] = atan2f(a, b);    // 3 ulp
  o[13] = log1pf(fabsf(a));  // 1 ulp
  o[14] = exp2f(a * 4.0f); // 2 ulp
  o[15] = a / (b + 2.0f);  // 0 ulp (IEEE division)
}
