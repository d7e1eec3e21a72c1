// Rule: integer intrinsics (exact).
__global__ void int_intrinsics(const unsigned* x, const unsigned* y, unsigned* out) {
  int i = threadIdx.x;
  unsigned a = x[i], b = y[i];
  unsigned* o = out + i * 12;
  o[0] = __popc(a);
  o[1] = __clz((int)a);
  o[2] = __ffs((int)a);
  o[3] = __brev(a);
  o[4] = __byte_perm(a, b, 0x5140u);
  o[5] = __funnelshift_l(a, b, b % 40);
  o[6] = __funnelshift_r(a, b, a % 40);
  o[7] = (unsigned)__mulhi((int)a, (int)b);
  o[8] = __umulhi(a, b);
  o[9] = __sad((int)a, (int)b, 7u);
  o[10] = (unsigned)__dp4a((int)a, (int)b, 3);
  o[11] = (unsigned)(__umul64hi((unsigned long long)a << 20 | b, (unsigned long long)b << 33 | a) & 0xffffffffu);
}
