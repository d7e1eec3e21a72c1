// metal-kernel: Metal atomics (<metal_atomic>): metal::atomic<T>, the
// atomic_int/uint/float/bool/long/ulong typedefs, memory_order, thread_scope
// and the *_explicit free functions.
//
// Correct when several OS threads run kernel threads at once: every operation
// is a real hardware atomic (__atomic builtins); float add/sub/min/max and
// all 64-bit min/max use the builtins or a compare-exchange loop.
// Layout: atomic<T> holds exactly one T (sizeof(atomic<T>) == sizeof(T)),
// except atomic<bool>, which is 4 bytes as on Metal (c10/metal/atomic.h
// relies on that), holding 0 or 1 in a uint.
// atomic<T> is trivially default-constructible (threadgroup storage can be
// placed in an arena) and not copyable, like Metal's.
//
// Beyond Metal 3.2 (harmless extras): every fetch_* operation exists for
// 32- and 64-bit integers and float; atomic_max_explicit/atomic_min_explicit
// (the void-returning 64-bit forms of Metal 3.1) exist for every type.
#ifndef MK_ATOMIC_H
#define MK_ATOMIC_H

#include "types.h"

#ifdef MK_CHECK
// A device-scope fence, for the checker's instrumentation (check/instrument.py
// replaces each call by __mk_chk_fence(g, lin)); weak and empty where a
// function is left uninstrumented. mkcuda/builtins.h declares it too.
#ifndef MK_CHK_FENCE_MARKER
#define MK_CHK_FENCE_MARKER
extern "C" __attribute__((weak, noinline)) void __mk_chk_fence_marker(uint32_t) {}
#endif
#endif

namespace metal {

enum memory_order {
  memory_order_relaxed = 0,
  memory_order_acquire = 2,
  memory_order_release = 3,
  memory_order_acq_rel = 4,
  memory_order_seq_cst = 5,
};

enum thread_scope {
  thread_scope_thread = 0,
  thread_scope_simdgroup = 1,
  thread_scope_threadgroup = 2,
  thread_scope_device = 3,
};

namespace _mk {
MK_INLINE constexpr int mo(memory_order o) {
  switch (o) {
  case memory_order_relaxed:
    return __ATOMIC_RELAXED;
  case memory_order_acquire:
    return __ATOMIC_ACQUIRE;
  case memory_order_release:
    return __ATOMIC_RELEASE;
  case memory_order_acq_rel:
    return __ATOMIC_ACQ_REL;
  default:
    return __ATOMIC_SEQ_CST;
  }
}
// order usable for a load / for the failure side of a compare-exchange
MK_INLINE constexpr int mo_load(memory_order o) {
  int m = mo(o);
  return m == __ATOMIC_RELEASE ? __ATOMIC_RELAXED : (m == __ATOMIC_ACQ_REL ? __ATOMIC_ACQUIRE : m);
}
MK_INLINE constexpr int mo_store(memory_order o) {
  int m = mo(o);
  return (m == __ATOMIC_ACQUIRE) ? __ATOMIC_RELAXED : (m == __ATOMIC_ACQ_REL ? __ATOMIC_RELEASE : m);
}
template <class T> struct atomic_ok : std::false_type {};
template <> struct atomic_ok<int> : std::true_type {};
template <> struct atomic_ok<uint> : std::true_type {};
template <> struct atomic_ok<float> : std::true_type {};
template <> struct atomic_ok<bool> : std::true_type {};
template <> struct atomic_ok<long> : std::true_type {};
template <> struct atomic_ok<ulong> : std::true_type {};
template <class T> struct id { typedef T type; };
} // namespace _mk

// alignas: explicit alignment, which -fmax-type-align=4 (compiler.py) keeps,
// so an 8-byte atomic stays a lock-free instruction (not a libatomic call).
template <class T> struct alignas(sizeof(T)) atomic {
  static_assert(_mk::atomic_ok<T>::value, "Metal atomics exist for int, uint, float, bool, long and ulong");
  typedef T value_type;
  typedef T _storage;
  T _v;
  atomic() = default;
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;
};
template <> struct alignas(4) atomic<bool> {
  typedef bool value_type;
  typedef uint _storage;
  uint _v;
  atomic() = default;
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;
};

typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;
typedef atomic<bool> atomic_bool;
typedef atomic<long> atomic_long;
typedef atomic<ulong> atomic_ulong;

namespace _mk {
template <class T> MK_INLINE auto* bits_ptr(volatile atomic<T>* p) {
  typedef std::conditional_t<sizeof(p->_v) == 8, unsigned long, unsigned int> U;
  typedef U B __attribute__((aligned(sizeof(U))));  // explicit, as atomic<T> is
  return reinterpret_cast<volatile B*>(&p->_v);
}
template <class T> MK_INLINE auto to_storage(T v) {
  if constexpr (std::is_same<T, bool>::value)
    return uint(v ? 1u : 0u);
  else
    return v;
}
template <class T, class S> MK_INLINE T from_storage(S s) {
  if constexpr (std::is_same<T, bool>::value)
    return s != 0;
  else
    return s;
}
// Generic read-modify-write through a compare-exchange loop on the bits.
template <class T, class F> MK_INLINE T rmw_cas(volatile atomic<T>* p, F f, memory_order order) {
  auto* bp = bits_ptr(p);
  typedef std::remove_volatile_t<std::remove_pointer_t<decltype(bp)>> B;
  B old = __atomic_load_n(bp, __ATOMIC_RELAXED);
  for (;;) {
    T oldv = __builtin_bit_cast(T, old);
    T newv = f(oldv);
    B nb = __builtin_bit_cast(B, newv);
    if (__atomic_compare_exchange_n(bp, &old, nb, true, mo(order), __ATOMIC_RELAXED))
      return oldv;
  }
}
template <class T> MK_INLINE T fmaxT(T a, T b) { return a != a ? b : (b != b ? a : (a < b ? b : a)); }
template <class T> MK_INLINE T fminT(T a, T b) { return a != a ? b : (b != b ? a : (b < a ? b : a)); }
} // namespace _mk

// ---- load / store / exchange / compare-exchange (all atomic types) --------
template <class T>
MK_INLINE T atomic_load_explicit(const volatile atomic<T>* object, memory_order order) {
  if constexpr (std::is_same<T, float>::value)
    return __builtin_bit_cast(float, __atomic_load_n(reinterpret_cast<const volatile unsigned int*>(&object->_v),
                                                     _mk::mo_load(order)));
  else
    return _mk::from_storage<T>(__atomic_load_n(&object->_v, _mk::mo_load(order)));
}
template <class T>
MK_INLINE void atomic_store_explicit(volatile atomic<T>* object, typename _mk::id<T>::type desired,
                                     memory_order order) {
  if constexpr (std::is_same<T, float>::value)
    __atomic_store_n(_mk::bits_ptr(object), __builtin_bit_cast(unsigned int, desired), _mk::mo_store(order));
  else
    __atomic_store_n(&object->_v, _mk::to_storage(desired), _mk::mo_store(order));
}
template <class T>
MK_INLINE T atomic_exchange_explicit(volatile atomic<T>* object, typename _mk::id<T>::type desired,
                                     memory_order order) {
  if constexpr (std::is_same<T, float>::value)
    return __builtin_bit_cast(
        float, __atomic_exchange_n(_mk::bits_ptr(object), __builtin_bit_cast(unsigned int, desired), _mk::mo(order)));
  else
    return _mk::from_storage<T>(__atomic_exchange_n(&object->_v, _mk::to_storage(desired), _mk::mo(order)));
}
namespace _mk {
template <class T>
MK_INLINE bool cas(volatile atomic<T>* object, T* expected, T desired, bool weak, memory_order succ,
                   memory_order fail) {
  typedef typename atomic<T>::_storage S;
  S exp = to_storage(*expected);
  S des = to_storage(desired);
  bool ok;
  if constexpr (std::is_same<T, float>::value) {
    // compare the bit patterns (what the hardware does)
    unsigned int e = __builtin_bit_cast(unsigned int, exp), d = __builtin_bit_cast(unsigned int, des);
    ok = __atomic_compare_exchange_n(bits_ptr(object), &e, d, weak, mo(succ), mo_load(fail));
    exp = __builtin_bit_cast(float, e);
  } else {
    ok = __atomic_compare_exchange_n(&object->_v, &exp, des, weak, mo(succ), mo_load(fail));
  }
  if (!ok)
    *expected = from_storage<T>(exp);
  return ok;
}
} // namespace _mk
template <class T>
MK_INLINE bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* object, typename _mk::id<T>::type* expected,
                                                     typename _mk::id<T>::type desired, memory_order succ,
                                                     memory_order fail) {
  return _mk::cas<T>(object, expected, desired, true, succ, fail);
}
template <class T>
MK_INLINE bool atomic_compare_exchange_strong_explicit(volatile atomic<T>* object, typename _mk::id<T>::type* expected,
                                                       typename _mk::id<T>::type desired, memory_order succ,
                                                       memory_order fail) {
  return _mk::cas<T>(object, expected, desired, false, succ, fail);
}

// ---- fetch_<op> (int, uint, long, ulong, float) ----------------------------
namespace _mk {
template <class T> constexpr bool arith_atomic = !std::is_same<T, bool>::value;
}
template <class T, std::enable_if_t<_mk::arith_atomic<T>, int> = 0>
MK_INLINE T atomic_fetch_add_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                      memory_order order) {
  if constexpr (std::is_same<T, float>::value)
    return _mk::rmw_cas(object, [operand](float v) { return v + operand; }, order);
  else
    return __atomic_fetch_add(&object->_v, operand, _mk::mo(order));
}
template <class T, std::enable_if_t<_mk::arith_atomic<T>, int> = 0>
MK_INLINE T atomic_fetch_sub_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                      memory_order order) {
  if constexpr (std::is_same<T, float>::value)
    return _mk::rmw_cas(object, [operand](float v) { return v - operand; }, order);
  else
    return __atomic_fetch_sub(&object->_v, operand, _mk::mo(order));
}
template <class T, std::enable_if_t<_mk::arith_atomic<T>, int> = 0>
MK_INLINE T atomic_fetch_max_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                      memory_order order) {
  if constexpr (std::is_same<T, float>::value)
    return _mk::rmw_cas(object, [operand](float v) { return _mk::fmaxT(v, operand); }, order);
  else
    return __atomic_fetch_max(&object->_v, operand, _mk::mo(order));
}
template <class T, std::enable_if_t<_mk::arith_atomic<T>, int> = 0>
MK_INLINE T atomic_fetch_min_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                      memory_order order) {
  if constexpr (std::is_same<T, float>::value)
    return _mk::rmw_cas(object, [operand](float v) { return _mk::fminT(v, operand); }, order);
  else
    return __atomic_fetch_min(&object->_v, operand, _mk::mo(order));
}
template <class T, std::enable_if_t<_mk::arith_atomic<T> && !std::is_same<T, float>::value, int> = 0>
MK_INLINE T atomic_fetch_and_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                      memory_order order) {
  return __atomic_fetch_and(&object->_v, operand, _mk::mo(order));
}
template <class T, std::enable_if_t<_mk::arith_atomic<T> && !std::is_same<T, float>::value, int> = 0>
MK_INLINE T atomic_fetch_or_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                     memory_order order) {
  return __atomic_fetch_or(&object->_v, operand, _mk::mo(order));
}
template <class T, std::enable_if_t<_mk::arith_atomic<T> && !std::is_same<T, float>::value, int> = 0>
MK_INLINE T atomic_fetch_xor_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                      memory_order order) {
  return __atomic_fetch_xor(&object->_v, operand, _mk::mo(order));
}
// Metal 3.1 64-bit forms (no return value)
template <class T, std::enable_if_t<_mk::arith_atomic<T>, int> = 0>
MK_INLINE void atomic_max_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                   memory_order order) {
  (void)atomic_fetch_max_explicit(object, operand, order);
}
template <class T, std::enable_if_t<_mk::arith_atomic<T>, int> = 0>
MK_INLINE void atomic_min_explicit(volatile atomic<T>* object, typename _mk::id<T>::type operand,
                                   memory_order order) {
  (void)atomic_fetch_min_explicit(object, operand, order);
}

// atomic_thread_fence(mem_flags, memory_order[, thread_scope]): the flags
// type belongs to the runtime's barrier header, hence the template.
// Checked builds: a device-scope fence of device memory is what orders two
// threadgroups (with an atomic): the checker sees it (mk/check_sync.h).
template <class Flags>
MK_INLINE void atomic_thread_fence(Flags flags, memory_order order, thread_scope scope = thread_scope_device) {
  if (order != memory_order_relaxed)
    __atomic_thread_fence(_mk::mo(order));
#ifdef MK_CHECK
  // Bit 0: it releases, bit 1: it acquires (mk/check_sync.h FENCE_*).
  if (order != memory_order_relaxed && scope == thread_scope_device && (uint32_t(flags) & 1u /* mem_device */))
    __mk_chk_fence_marker((order == memory_order_acquire ? 0u : 1u) | (order == memory_order_release ? 0u : 2u));
#else
  (void)flags;
  (void)scope;
#endif
}

} // namespace metal

#endif // MK_ATOMIC_H
