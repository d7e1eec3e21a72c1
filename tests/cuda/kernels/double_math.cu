// Rule: double precision runs (daxpy, exp, sqrt, fma).
__global__ void double_math(const double* x, double* y, double a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    double v = x[i];
    y[i * 3 + 0] = a * v + y[i * 3 + 0];
    y[i * 3 + 1] = exp(v) + sqrt(fabs(v));
    y[i * 3 + 2] = fma(v, v, 1.0 / 3.0);
  }
}
