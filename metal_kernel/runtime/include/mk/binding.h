// What each kernel parameter is, for the host's binding checks
// (runtime/binding.py): the generated entry code exports, per kernel,
// `__mk_params_<n>[] = { count, param_code<P0>(), ... }`. clang computes the
// codes from the kernel's real parameter types, so template kernels,
// typedefs and `decltype` instantiations are described exactly.
//
// Included after the prelude (compiler.py passes it with -include), so it
// sees the Metal types and must include nothing itself.
#pragma once

namespace mk {

// Layout of a code (mirrored in runtime/binding.py):
//   bits 0-1   form: 0 value, 1 pointer, 2 reference
//   bit  2     read-only (const pointee / referent, or a value)
//   bits 4-7   element kind (below)
//   bits 8-15  element size in bytes (a vector's scalar; 0 for void)
//   bits 16-23 lanes (vector width, 1 for a scalar)
enum : unsigned { PARAM_VALUE = 0, PARAM_POINTER = 1, PARAM_REFERENCE = 2 };
enum : unsigned {
  ELEM_OTHER = 0,  // structs, matrices, arrays: no check on them
  ELEM_FLOAT = 1,
  ELEM_HALF = 2,
  ELEM_BFLOAT = 3,
  ELEM_SINT = 4,
  ELEM_UINT = 5,
  ELEM_BOOL = 6,
  ELEM_VOID = 7,
};

template <class T>
struct param_elem {
  using type = T;
  static constexpr unsigned lanes = 1;
};
template <class T, int N>
struct param_elem<metal::vec<T, N>> {
  using type = T;
  static constexpr unsigned lanes = N;
};
template <class T, int N>
struct param_elem<metal::packed_vec<T, N>> {
  using type = T;
  static constexpr unsigned lanes = N;
};

template <class S>
constexpr unsigned scalar_kind() {
  if constexpr (std::is_void_v<S>) return ELEM_VOID;
  else if constexpr (std::is_same_v<S, bool>) return ELEM_BOOL;
  else if constexpr (std::is_same_v<S, float>) return ELEM_FLOAT;
  else if constexpr (std::is_same_v<S, half>) return ELEM_HALF;
  else if constexpr (std::is_same_v<S, bfloat>) return ELEM_BFLOAT;
  else if constexpr (std::is_integral_v<S>) return std::is_signed_v<S> ? ELEM_SINT : ELEM_UINT;
  else return ELEM_OTHER;
}

template <class T>
constexpr unsigned long long element_code() {
  using E = param_elem<std::remove_cv_t<T>>;
  using S = std::remove_cv_t<typename E::type>;
  constexpr unsigned kind = scalar_kind<S>();
  unsigned long long size = 0;
  if constexpr (!std::is_void_v<S>) size = sizeof(S) < 256 ? sizeof(S) : 0;
  return (unsigned long long)kind << 4 | size << 8 | (unsigned long long)E::lanes << 16;
}

template <class P>
constexpr unsigned long long param_code() {
  if constexpr (std::is_pointer_v<P>) {
    using E = std::remove_pointer_t<P>;
    return PARAM_POINTER | (std::is_const_v<E> ? 4u : 0u) | element_code<E>();
  } else if constexpr (std::is_reference_v<P>) {
    using E = std::remove_reference_t<P>;
    return PARAM_REFERENCE | (std::is_const_v<E> ? 4u : 0u) | element_code<E>();
  } else {
    return PARAM_VALUE | 4u | element_code<P>();
  }
}

}  // namespace mk
