// Rule: by-value scalars of every width keep their declared types.
__global__ void scalar_params(long long* out, signed char c, unsigned short us, unsigned long long ull,
                              bool flag, float f, double d, int i) {
  out[0] = c; out[1] = us; out[2] = (long long)(ull >> 1); out[3] = flag ? 1 : 0;
  out[4] = (long long)(f * 1000.0f); out[5] = (long long)(d * 1e9); out[6] = i;
}
