// metal-kernel: metal::uniform<T> and make_uniform (<metal_uniform>): a value
// the programmer promises is the same in every thread. The promise only
// helps Apple's compiler; here a uniform<T> is a T that converts both ways,
// so arithmetic on uniforms is arithmetic on their values
// (`const uniform<int> n = make_uniform(size) / make_uniform(4);`).
#pragma once

namespace metal {
template <class T> struct uniform {
  T value;
  uniform() = default;
  __attribute__((always_inline)) constexpr uniform(const T& v) : value(v) {}
  __attribute__((always_inline)) constexpr operator T() const { return value; }
};
template <class T> __attribute__((always_inline)) constexpr uniform<T> make_uniform(const T& v) { return uniform<T>(v); }
} // namespace metal
