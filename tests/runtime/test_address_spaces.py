"""Overloads on address space. Metal makes a library repeat a member function
once per address space of `this` (MLX's complex.h: constructors, conversion
operators, members qualified thread/threadgroup/device/constant), and helpers
once per pointer address space; such copies are one function here (one
address space). Copies whose bodies differ cannot be told apart without
address-space types: a clear error, never a silent pick."""

import pytest
import torch

import metal_kernel
from metal_kernel import MetalCompileError

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

template <typename T> struct cx {
  T re, im;
  constexpr cx() thread : re(0), im(0) {}
  constexpr cx() threadgroup : re(0), im(0) {}
  constexpr cx(T r, T i) thread : re(r), im(i) {}
  template <typename U> constexpr cx(U x) thread : re(static_cast<T>(x)), im(0) {}
  template <typename U> constexpr cx(U x) threadgroup : re(static_cast<T>(x)), im(0) {}
  template <typename U> constexpr cx(U x) device : re(static_cast<T>(x)), im(0) {}
  template <typename U> constexpr cx(U x) constant : re(static_cast<T>(x)), im(0) {}
  constexpr cx(vec<T, 2> v) constant : re(v.x), im(v.y) {}
  constexpr operator vec<T, 2>() const thread { return vec<T, 2>(re, im); }
  constexpr operator vec<T, 2>() const device { return vec<T, 2>(re, im); }
  constexpr operator vec<T, 2>() const constant { return vec<T, 2>(re, im); }
  T norm() const thread { return re * re + im * im; }
  T norm() const device { return re * re + im * im; }
  T norm() const threadgroup { return re * re + im * im; }
};

template <typename T> struct md {     // candle: the first copy has no address space
  T m;
  constexpr md() = default;
  constexpr md() threadgroup = default;
};

template <typename T> struct pointer_element {};
template <typename T> struct pointer_element<thread T*> { using type = remove_cv_t<T>; };
template <typename T> struct pointer_element<device T*> { using type = remove_cv_t<T>; };
template <typename T> struct pointer_element<threadgroup T*> { using type = remove_cv_t<T>; };
template <typename T> struct pointer_element<constant T*> { using type = remove_cv_t<T>; };

template <typename T> METAL_FUNC T first(device const T* p) { return p[0]; }
template <typename T> METAL_FUNC T first(constant T* p) { return p[0]; }
template <typename T> METAL_FUNC T first(threadgroup const T* p) { return p[0]; }

kernel void overloads(device float2* out [[buffer(0)]], constant float* c [[buffer(1)]],
                      device const cx<float>* z [[buffer(2)]], uint i [[thread_position_in_grid]],
                      uint l [[thread_position_in_threadgroup]]) {
  threadgroup cx<float> tile[32];
  threadgroup float scratch[32];
  tile[l] = cx<float>(float(i));
  scratch[l] = z[i].norm();
  threadgroup_barrier(mem_flags::mem_threadgroup);
  static_assert(is_same_v<pointer_element<device const float*>::type, float>, "pointer_element");
  static_assert(is_same_v<remove_addrspace_t<device float>, float>, "remove_addrspace_t");
  threadgroup md<float> partial[2];
  partial[0].m = 0.0f;
  typename pointer_element<device const cx<float>*>::type w(2.0f, 3.0f);
  float e = first(c) + first(z + i).re + first(scratch + l);
  out[i] = float2(tile[l]) + float2(w) * e + float2(cx<float>(half(1)));
}
"""


def test_overloads_that_differ_only_in_address_space_are_one_function():
    lib = metal_kernel.compile_shader(SOURCE)
    n = 32
    c = torch.tensor([0.5])
    z = torch.randn(n, 2)
    out = torch.full((n, 2), float("nan"))
    lib.overloads(out, c, z, threads=n, group_size=32)
    i = torch.arange(n, dtype=torch.float32)
    e = 0.5 + z[:, 0] + (z ** 2).sum(1)
    want = torch.stack([i + 2 * e + 1, 3 * e], 1)
    torch.testing.assert_close(out, want)


def test_address_space_overloads_with_different_bodies_are_an_error():
    src = r"""#include <metal_stdlib>
using namespace metal;
METAL_FUNC float load(device const float* p) { return p[0]; }
METAL_FUNC float load(threadgroup const float* p) { return p[1]; }
kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) { o[i] = load(o); }
"""
    with pytest.raises(MetalCompileError) as err:
        metal_kernel.compile_shader(src)
    msg = str(err.value)
    assert "differ only in address space" in msg and "'load'" in msg
    assert err.value.lineno == 4 and "source.metal:3" in msg
