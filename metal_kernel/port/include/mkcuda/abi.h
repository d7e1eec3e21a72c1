// What the host (port/library.py) learns about a kernel's parameters and the
// library's __constant__ / __device__ variables: one 64-bit code per type.
//   bits  0-31  size in bytes
//   bits 32-35  kind (below)
//   bits 36-39  kind of the pointee or array element
//   bits 40-63  size of the pointee or array element
#pragma once
#include <stdint.h>
#include <type_traits>

namespace mk {
namespace cuda {

enum TypeKind : uint64_t { POINTER = 1, SIGNED = 2, UNSIGNED = 3, FLOAT = 4, HALF = 5, BFLOAT16 = 6, BOOL = 7, OTHER = 8, ARRAY = 9 };

template <class T>
constexpr uint64_t scalar_kind() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_pointer_v<U>) return POINTER;
  else if constexpr (std::is_same_v<U, bool>) return BOOL;
  else if constexpr (std::is_enum_v<U>) return scalar_kind<std::underlying_type_t<U>>();
  else if constexpr (std::is_integral_v<U>) return std::is_signed_v<U> ? SIGNED : UNSIGNED;
  else if constexpr (std::is_floating_point_v<U>) return FLOAT;
  else if constexpr (std::is_same_v<U, __half>) return HALF;
  else if constexpr (std::is_same_v<U, __nv_bfloat16>) return BFLOAT16;
  else if constexpr (std::is_array_v<U>) return ARRAY;
  else return OTHER;
}

template <class T>
constexpr uint64_t size_of() {
  if constexpr (std::is_void_v<T> || std::is_function_v<T>) return 0;
  else return sizeof(T);
}

template <class T>
constexpr uint64_t type_code() {
  using U = std::remove_cv_t<std::remove_reference_t<T>>;
  uint64_t code = size_of<U>() | (scalar_kind<U>() << 32);
  if constexpr (std::is_pointer_v<U>) {
    using E = std::remove_cv_t<std::remove_pointer_t<U>>;
    if constexpr (!std::is_void_v<E> && !std::is_function_v<E>)
      code |= (scalar_kind<E>() << 36) | (size_of<E>() << 40);
  } else if constexpr (std::is_array_v<U>) {
    using E = std::remove_cv_t<std::remove_all_extents_t<U>>;
    code |= (scalar_kind<E>() << 36) | (size_of<E>() << 40);
  }
  return code;
}

}  // namespace cuda
}  // namespace mk
