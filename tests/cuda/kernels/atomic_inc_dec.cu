// Rule: atomicInc / atomicDec wrap at their limit.
__global__ void atomic_inc_dec(unsigned* counters) {
  atomicInc(&counters[0], 9u);
  atomicDec(&counters[1], 6u);
  atomicInc(&counters[2], 1000u);
}
