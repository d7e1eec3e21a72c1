"""MSL language rules: types, vectors, conversions, math, templates."""

import math

import numpy as np
import pytest
import torch

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

kernel void swizzles(device float4* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float4 v = float4(1, 2, 3, 4);
  out[0] = v.wzyx;
  float4 w = 0;
  w.xy = v.zw;          // lvalue swizzle
  w.zw = float2(7, 8);
  w.x += 10;            // compound assignment through a component
  out[1] = w;
  out[2] = float4(v.xy, 5, 6);           // mixed constructor
  out[3] = float4(float3(v.rgb), v[3] * 2);  // rgba names and subscript
  float4 s = v;
  s[1] = -1;
  out[4] = s;
  out[5] = float4(v.xxyy);
}
kernel void vec_ops(device int4* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int4 a = int4(7, -8, 9, 10), b = int4(2, 3, -4, 5);
  out[0] = a / b;
  out[1] = a % b;
  out[2] = (a & 6) | (b << 1);
  out[3] = int4(a > b) ;
  out[4] = select(a, b, a > b);
  out[5] = int4(all(a != b), any(a == 9), 0, -a.x);
}
kernel void conversions(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  float x = in[i];
  out[4 * i + 0] = float(half(x));       // round to nearest even, binary16
  out[4 * i + 1] = float(bfloat(x));     // round to nearest even, top 16 bits
  out[4 * i + 2] = float(int(x));        // truncation
  out[4 * i + 3] = as_type<float>(as_type<uint>(x) ^ 0x80000000u);
}
kernel void half_arith(device half* out [[buffer(0)]], device const half* a [[buffer(1)]],
                       device const half* b [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = a[i] * b[i] + a[i];  // rounded to half after every operation
}
kernel void math_precise(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  float x = in[i];
  out[10 * i + 0] = precise::exp(x);
  out[10 * i + 1] = precise::log(fabs(x) + 1);
  out[10 * i + 2] = precise::sin(x);
  out[10 * i + 3] = precise::tanh(x);
  out[10 * i + 4] = precise::pow(fabs(x), 1.5f);
  out[10 * i + 5] = rsqrt(fabs(x) + 1);
  out[10 * i + 6] = fma(x, x, 1.0f);
  out[10 * i + 7] = clamp(x, -0.5f, 0.5f);
  out[10 * i + 8] = mix(0.0f, 10.0f, fract(fabs(x)));
  out[10 * i + 9] = atan2(x, 2.0f);
}
kernel void math_fast(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  float x = in[i];
  out[3 * i + 0] = fast::exp(x);
  out[3 * i + 1] = fast::sin(x);
  out[3 * i + 2] = exp2(x);
}
kernel void vec_math(device float4* out [[buffer(0)]], device const float4* in [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  float4 v = in[i];
  out[3 * i + 0] = exp(v);
  out[3 * i + 1] = float4(dot(v, v), length(v), 0, 0);
  out[3 * i + 2] = normalize(v);
}
kernel void integer_fns(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[0] = popcount(0xF0F0u);
  out[1] = clz(1u);
  out[2] = ctz(8u);
  out[3] = min(3u, 9u);
  out[4] = max(uint(abs(-12)), 5u);
  out[5] = mulhi(0x80000000u, 4u);
}
struct Q4 { half d; uint8_t qs[16]; };
kernel void packed_and_structs(device float* out [[buffer(0)]], device const packed_float3* p [[buffer(1)]],
                               uint i [[thread_position_in_grid]]) {
  packed_float3 v = p[i];
  float3 f = float3(v);
  out[4 * i + 0] = f.x + f.y + f.z;
  out[4 * i + 1] = sizeof(packed_float3);
  out[4 * i + 2] = sizeof(float3);
  out[4 * i + 3] = sizeof(Q4);
}
// Templates: constexpr, static_assert, if constexpr, type traits, metal::array, numeric_limits
template <typename T, int N>
METAL_FUNC T sum_n(const metal::array<T, N> a) {
  T s = 0;
#pragma unroll
  for (int k = 0; k < N; ++k) s += a[k];
  return s;
}
template <typename T>
kernel void generic(device T* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  static_assert(sizeof(T) <= 4, "small types only");
  constexpr int n = 3;
  metal::array<T, n> a = {T(1), T(2), T(3)};
  if constexpr (is_floating_point_v<T>) {
    out[i] = sum_n<T, n>(a) + numeric_limits<T>::epsilon();
  } else {
    out[i] = sum_n<T, n>(a) + T(is_same_v<T, int>);
  }
}
template [[host_name("generic_float")]] kernel void generic<float>(device float*, uint);
template [[host_name("generic_int")]] kernel void generic<int>(device int*, uint);
// ggml's instantiation through a typedef of the kernel's type
template <typename T>
kernel void kernel_scale(device char* x [[buffer(0)]], constant float& s [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  device T* p = (device T*)x;
  p[i] = T(float(p[i]) * s);
}
typedef decltype(kernel_scale<float>) kernel_scale_t;
template [[host_name("kernel_scale_f32")]] kernel kernel_scale_t kernel_scale<float>;
template [[host_name("kernel_scale_f16")]] kernel kernel_scale_t kernel_scale<half>;
// Address-space casts between pointee types
kernel void reinterpret(device const char* raw [[buffer(0)]], device float* out [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  device const float4* v = (device const float4*)raw;
  out[i] = v[i].y + ((device const float*)(raw + 4))[4 * i + 2];
}
kernel void literals(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[0] = 0.1 * 3;        // float arithmetic, not double
  out[1] = 1e-3 + .5;
  out[2] = 2.5h;           // half literal
  out[3] = M_PI_F;
  out[4] = INFINITY;
  out[5] = FLT_MAX;
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def test_swizzles_as_rvalues_and_lvalues_and_mixed_constructors(lib):
    out = torch.full((6, 4), float("nan"))
    lib.swizzles(out, threads=1)
    assert out.tolist() == [
        [4, 3, 2, 1],
        [13, 4, 7, 8],
        [1, 2, 5, 6],
        [1, 2, 3, 8],
        [1, -1, 3, 4],
        [1, 1, 2, 2],
    ]


def test_integer_vector_operators_select_all_any(lib):
    out = torch.zeros(6, 4, dtype=torch.int32)
    lib.vec_ops(out, threads=1)
    a = np.array([7, -8, 9, 10])
    b = np.array([2, 3, -4, 5])
    assert out[0].tolist() == [3, -2, -2, 2]  # C truncation, as Metal
    assert out[1].tolist() == [1, -2, 1, 0]
    assert out[2].tolist() == list((a & 6) | (b << 1))
    # boolean vectors convert to 1 / 0 like scalars
    assert out[3].tolist() == [1, 0, 1, 1]
    assert out[4].tolist() == list(np.where(a > b, b, a))
    assert out[5].tolist() == [1, 1, 0, -7]


def test_half_and_bfloat_conversions_round_to_nearest_even(lib):
    x = torch.tensor([1.0009765625 + 2**-12, 1 + 2**-8 + 2**-9, 65520.0, 1e-8, -3.3, 3.0e38, float("nan"), 2.7])
    out = torch.full((x.numel(), 4), float("nan"))
    lib.conversions(out, x, threads=x.numel())
    torch.testing.assert_close(out[:, 0], x.half().float(), equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(out[:, 1], x.bfloat16().float(), equal_nan=True, rtol=0, atol=0)
    assert out[4, 2] == -3 and out[7, 2] == 2
    assert out[4, 3].item() == np.float32(3.3)  # as_type flips the sign bit


def test_half_arithmetic_rounds_every_operation(lib):
    a = torch.randn(200).half()
    b = torch.randn(200).half()
    out = torch.zeros(200, dtype=torch.float16)
    lib.half_arith(out, a, b)
    expected = ((a.float() * b.float()).half().float() + a.float()).half()
    assert torch.equal(out, expected)


def test_precise_math_matches_numpy(lib):
    x = torch.linspace(-3, 3, 101)
    out = torch.full((101, 10), float("nan"))
    lib.math_precise(out, x, threads=101)
    xs = x.numpy().astype(np.float64)
    ref = np.stack([np.exp(xs), np.log(np.abs(xs) + 1), np.sin(xs), np.tanh(xs), np.abs(xs) ** 1.5,
                    1 / np.sqrt(np.abs(xs) + 1), xs * xs + 1, np.clip(xs, -0.5, 0.5),
                    10 * (np.abs(xs) - np.floor(np.abs(xs))), np.arctan2(xs, 2)], 1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=2e-6, atol=2e-6)


def test_fast_math_is_within_metal_fast_accuracy(lib):
    x = torch.linspace(-3, 3, 64)
    out = torch.full((64, 3), float("nan"))
    lib.math_fast(out, x, threads=64)
    xs = x.double().numpy()
    np.testing.assert_allclose(out[:, 0].numpy(), np.exp(xs), rtol=1e-5)
    np.testing.assert_allclose(out[:, 1].numpy(), np.sin(xs), atol=1e-5)
    np.testing.assert_allclose(out[:, 2].numpy(), np.exp2(xs), rtol=1e-5)


def test_math_on_vectors_and_geometric_functions(lib):
    v = torch.rand(5, 4) + 0.1
    out = torch.full((5 * 3, 4), float("nan"))
    lib.vec_math(out, v, threads=5)
    r = out.reshape(5, 3, 4)
    torch.testing.assert_close(r[:, 0], torch.exp(v))
    torch.testing.assert_close(r[:, 1, 0], (v * v).sum(1))
    torch.testing.assert_close(r[:, 1, 1], v.norm(dim=1))
    torch.testing.assert_close(r[:, 2], v / v.norm(dim=1, keepdim=True))


def test_integer_functions(lib):
    out = torch.zeros(6, dtype=torch.int32)
    lib.integer_fns(out, threads=1)
    assert out.tolist() == [8, 31, 3, 3, 12, 2]


def test_packed_types_and_struct_layout(lib):
    p = torch.arange(9, dtype=torch.float32)  # three packed_float3
    out = torch.full((3, 4), float("nan"))
    lib.packed_and_structs(out, p, threads=3)
    assert out[:, 0].tolist() == [3.0, 12.0, 21.0]
    assert out[0, 1:].tolist() == [12.0, 16.0, 18.0]


def test_templates_constexpr_if_constexpr_array_numeric_limits(lib):
    f = torch.zeros(2)
    lib.generic_float(f)
    assert f.tolist() == [6 + np.finfo(np.float32).eps] * 2
    i = torch.zeros(2, dtype=torch.int32)
    lib.generic_int(i)
    assert i.tolist() == [7, 7]


def test_typedef_decltype_instantiation_like_ggml(lib):
    x = torch.tensor([1.0, 2.0])
    lib.kernel_scale_f32(x, 3.0)
    assert x.tolist() == [3.0, 6.0]
    h = torch.tensor([1.0, 2.0], dtype=torch.float16)
    lib.kernel_scale_f16(h, 0.5)
    assert h.tolist() == [0.5, 1.0]


def test_pointer_casts_between_pointee_types(lib):
    raw = torch.arange(16, dtype=torch.float32)
    out = torch.full((3,), float("nan"))
    lib.reinterpret(raw.view(torch.uint8), out, threads=3)
    assert out.tolist() == [1 + 3, 5 + 7, 9 + 11]


def test_float_literals_are_float_and_half_suffix(lib):
    out = torch.zeros(6)
    lib.literals(out, threads=1)
    assert out[0].item() == np.float32(np.float32(0.1) * np.float32(3))
    assert out[1].item() == np.float32(np.float32(1e-3) + np.float32(0.5))
    assert out[2].item() == 2.5
    assert out[3].item() == np.float32(np.pi)
    assert math.isinf(out[4].item())
    assert out[5].item() == np.finfo(np.float32).max
