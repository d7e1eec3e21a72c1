// Rule: template kernels, one callable per instantiation the host code
// launches or the file explicitly instantiates, named as CUDA spells them.
template <typename T, int K>
__global__ void axpy(const T* x, T* y, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] + T(K);
}
template __global__ void axpy<double, 2>(const double*, double*, double, int);
void launch_all(const float* xf, float* yf, const int* xi, int* yi, int n) {
  axpy<float, 1><<<(n + 63) / 64, 64>>>(xf, yf, 2.0f, n);
  axpy<int,3><<<(n + 63) / 64, 64>>>(xi, yi, 5, n);
}
