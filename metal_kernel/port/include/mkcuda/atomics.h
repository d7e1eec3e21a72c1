// CUDA atomics on the CPU: relaxed read-modify-write operations (blocks run
// on several cores at once). The _block and _system variants have the same
// effect here: all memory is coherent.
#pragma once
#include <stdint.h>
#include <string.h>

namespace mk {
namespace cuda {

// Any read-modify-write as a compare-and-swap loop on the value's bits.
template <class T, class F>
__attribute__((always_inline)) inline T atomic_update(T* address, F f) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "atomic size");
  using Bits = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  Bits* p = reinterpret_cast<Bits*>(address);
  Bits old = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    T value;
    memcpy(&value, &old, sizeof(T));
    const T next = f(value);
    Bits want;
    memcpy(&want, &next, sizeof(T));
    if (__atomic_compare_exchange_n(p, &old, want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return value;
  }
}

}  // namespace cuda
}  // namespace mk

#define MKCUDA_ATOMIC3(R, NAME, PARAMS, BODY) \
  inline R NAME PARAMS BODY inline R NAME##_block PARAMS BODY inline R NAME##_system PARAMS BODY

#define MKCUDA_FETCH(NAME, BUILTIN, T) \
  MKCUDA_ATOMIC3(T, NAME, (T * address, T val), { return BUILTIN(address, val, __ATOMIC_RELAXED); })

MKCUDA_FETCH(atomicAdd, __atomic_fetch_add, int)
MKCUDA_FETCH(atomicAdd, __atomic_fetch_add, unsigned int)
MKCUDA_FETCH(atomicAdd, __atomic_fetch_add, unsigned long long)
MKCUDA_FETCH(atomicAdd, __atomic_fetch_add, float)
MKCUDA_FETCH(atomicAdd, __atomic_fetch_add, double)
MKCUDA_FETCH(atomicSub, __atomic_fetch_sub, int)
MKCUDA_FETCH(atomicSub, __atomic_fetch_sub, unsigned int)
MKCUDA_FETCH(atomicAnd, __atomic_fetch_and, int)
MKCUDA_FETCH(atomicAnd, __atomic_fetch_and, unsigned int)
MKCUDA_FETCH(atomicAnd, __atomic_fetch_and, unsigned long long)
MKCUDA_FETCH(atomicOr, __atomic_fetch_or, int)
MKCUDA_FETCH(atomicOr, __atomic_fetch_or, unsigned int)
MKCUDA_FETCH(atomicOr, __atomic_fetch_or, unsigned long long)
MKCUDA_FETCH(atomicXor, __atomic_fetch_xor, int)
MKCUDA_FETCH(atomicXor, __atomic_fetch_xor, unsigned int)
MKCUDA_FETCH(atomicXor, __atomic_fetch_xor, unsigned long long)
MKCUDA_FETCH(atomicMin, __atomic_fetch_min, int)
MKCUDA_FETCH(atomicMin, __atomic_fetch_min, unsigned int)
MKCUDA_FETCH(atomicMin, __atomic_fetch_min, long long)
MKCUDA_FETCH(atomicMin, __atomic_fetch_min, unsigned long long)
MKCUDA_FETCH(atomicMax, __atomic_fetch_max, int)
MKCUDA_FETCH(atomicMax, __atomic_fetch_max, unsigned int)
MKCUDA_FETCH(atomicMax, __atomic_fetch_max, long long)
MKCUDA_FETCH(atomicMax, __atomic_fetch_max, unsigned long long)
MKCUDA_FETCH(atomicExch, __atomic_exchange_n, int)
MKCUDA_FETCH(atomicExch, __atomic_exchange_n, unsigned int)
MKCUDA_FETCH(atomicExch, __atomic_exchange_n, unsigned long long)
#undef MKCUDA_FETCH

MKCUDA_ATOMIC3(float, atomicExch, (float* address, float val), {
  return ::mk::cuda::atomic_update(address, [&](float) { return val; });
})
// ((old >= val) ? 0 : (old + 1)) and (((old == 0) || (old > val)) ? val : (old - 1))
MKCUDA_ATOMIC3(unsigned int, atomicInc, (unsigned int* address, unsigned int val), {
  return ::mk::cuda::atomic_update(address, [&](unsigned int old) { return old >= val ? 0u : old + 1u; });
})
MKCUDA_ATOMIC3(unsigned int, atomicDec, (unsigned int* address, unsigned int val), {
  return ::mk::cuda::atomic_update(address,
                                   [&](unsigned int old) { return (old == 0u || old > val) ? val : old - 1u; });
})

#define MKCUDA_CAS(T)                                                                               \
  MKCUDA_ATOMIC3(T, atomicCAS, (T * address, T compare, T val), {                                  \
    T expected = compare;                                                                           \
    __atomic_compare_exchange_n(address, &expected, val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return expected;                                                                                \
  })
MKCUDA_CAS(int)
MKCUDA_CAS(unsigned int)
MKCUDA_CAS(unsigned long long)
MKCUDA_CAS(unsigned short)
#undef MKCUDA_CAS

// Half-precision adds: each element rounds once, as on the GPU (the pair is
// updated as one 32-bit word here, which is stronger than CUDA's promise).
#define MKCUDA_ADD_CAS(T)                                                                           \
  MKCUDA_ATOMIC3(T, atomicAdd, (T * address, T val), {                                             \
    return ::mk::cuda::atomic_update(address, [&](T old) { return __hadd(old, val); });            \
  })
#define MKCUDA_ADD2_CAS(T)                                                                          \
  MKCUDA_ATOMIC3(T, atomicAdd, (T * address, T val), {                                             \
    return ::mk::cuda::atomic_update(address, [&](T old) { return __hadd2(old, val); });           \
  })
MKCUDA_ADD_CAS(__half)
MKCUDA_ADD_CAS(__nv_bfloat16)
MKCUDA_ADD2_CAS(__half2)
MKCUDA_ADD2_CAS(__nv_bfloat162)
#undef MKCUDA_ADD_CAS
#undef MKCUDA_ADD2_CAS
#undef MKCUDA_ATOMIC3
