"""The Metal standard library as Apple ships it: exactly its names in metal::
(so libraries that complete it compile), its bfloat conversion rules, the
compiler builtins headers call, and the smaller pieces real kernels use.

Each kernel here reproduces a pattern of MLX, ggml, candle or PyTorch in a
few lines written for this test."""

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel import MetalCompileError

# A library that completes metal:: the way MLX's bf16_math.h, ggml and
# PyTorch's FusedOptimizerOps.metal do: with overloads Apple's library lacks.
USER_EXTENSIONS = r"""
#include <metal_stdlib>
using namespace metal;

namespace metal {
METAL_FUNC bfloat abs(bfloat x) { return static_cast<bfloat>(__metal_fabs(static_cast<float>(x), __METAL_MAYBE_FAST_MATH__)); }
METAL_FUNC bfloat exp(bfloat x) { return static_cast<bfloat>(__metal_exp(static_cast<float>(x), __METAL_MAYBE_FAST_MATH__)); }
METAL_FUNC bfloat max(bfloat a, bfloat b) { return static_cast<bfloat>(__metal_fmax(static_cast<float>(a), static_cast<float>(b), __METAL_MAYBE_FAST_MATH__)); }
namespace fast {
METAL_FUNC bfloat exp(bfloat x) { return static_cast<bfloat>(__metal_exp(static_cast<float>(x), __METAL_FAST_MATH__)); }
}
namespace precise {
METAL_FUNC bfloat exp(bfloat x) { return static_cast<bfloat>(__metal_exp(static_cast<float>(x), __METAL_PRECISE_MATH__)); }
}
METAL_FUNC bfloat simd_sum(bfloat x) { return static_cast<bfloat>(__metal_simd_sum(static_cast<float>(x))); }
template <typename T> struct is_empty : metal::bool_constant<__is_empty(T)> {};
template <typename... Ts> struct make_void { typedef void type; };
template <typename... Ts> using void_t = typename make_void<Ts...>::type;
}
inline float dot(float a, float b) { return a * b; }   // ggml's scalar dot

struct Empty {};
static_assert(metal::is_empty<Empty>::value && !metal::is_empty<float>::value, "user trait");

kernel void extended(device bfloat* out [[buffer(0)]], device const bfloat* in [[buffer(1)]],
                     device float* f [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  bfloat x = in[i];
  static_assert(is_same_v<decltype(abs(x)), bfloat>, "the user's overload answers");
  out[3 * i + 0] = abs(x);
  out[3 * i + 1] = fast::exp(x);
  out[3 * i + 2] = simd_sum(max(x, bfloat(0)));
  f[i] = dot(float(x), 2.0f);
}
"""


def test_user_extensions_of_namespace_metal_do_not_collide():
    lib = metal_kernel.compile_shader(USER_EXTENSIONS)
    x = torch.tensor([-1.5, 0.25, 2.0, -0.125] * 8, dtype=torch.bfloat16)
    out = torch.full((96,), float("nan"), dtype=torch.bfloat16)
    f = torch.full((32,), float("nan"))
    lib.extended(out, x, f, threads=32, group_size=32)
    out = out.view(32, 3).float()
    torch.testing.assert_close(out[:, 0], x.float().abs(), rtol=0, atol=0)
    torch.testing.assert_close(out[:, 1], x.float().exp().bfloat16().float(), rtol=0, atol=0)
    assert torch.all(out[:, 2] == x.float().clamp(min=0).sum().bfloat16().float())
    torch.testing.assert_close(f, x.float() * 2, rtol=0, atol=0)


APPLE_SURFACE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void surface(device float* out [[buffer(0)]], device const bfloat* in [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  bfloat x = in[i];
  // No bfloat overloads in Apple's library: bfloat converts to float, the
  // float function answers with a float.
  static_assert(is_same_v<decltype(exp(x)), float>, "exp(bfloat) is float");
  static_assert(is_same_v<decltype(fast::sin(x)), float>, "fast::sin(bfloat) is float");
  static_assert(is_same_v<decltype(exp(half(1))), half>, "half keeps its overloads");
  // precise:: and fast:: hold float functions only (PyTorch's abs_functor relies on it)
  static_assert(is_same_v<decltype(precise::abs(x)), float>, "precise::abs(bfloat) is float");
  static_assert(is_same_v<decltype(::precise::exp(half(1))), float>, "precise::exp(half) is float");
  static_assert(is_same_v<decltype(fast::max(half(1), 2)), float>, "fast::max(half, int) is float");
  static_assert(is_same_v<decltype(precise::sqrt(float4(1))), float4>, "float vectors");
  out[2 * i] = exp(x);
  out[2 * i + 1] = fmax(x, 1.0f);
}
"""


def test_bfloat_arguments_use_the_float_overloads():
    lib = metal_kernel.compile_shader(APPLE_SURFACE)
    x = torch.tensor([-1.5, 0.25, 2.0, 3.0], dtype=torch.bfloat16)
    out = torch.full((8,), float("nan"))
    lib.surface(out, x, threads=4)
    torch.testing.assert_close(out[0::2], x.float().exp())
    torch.testing.assert_close(out[1::2], x.float().clamp(min=1))


@pytest.mark.parametrize("name, code", [
    ("scalar dot", "float r = metal::dot(1.0f, 2.0f);"),
    ("is_empty", "bool r = metal::is_empty<int>::value;"),
    ("void_t", "metal::void_t<int>* r = nullptr;"),
    ("conjunction", "bool r = metal::conjunction<metal::true_type>::value;"),
])
def test_names_apple_does_not_declare_are_absent(name, code):
    src = f"""#include <metal_stdlib>
kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {{ {code} (void)r; }}"""
    with pytest.raises(MetalCompileError):
        metal_kernel.compile_shader(src)


BFLOAT_CONVERSIONS = r"""
#include <metal_stdlib>
using namespace metal;
kernel void bf_conditional(device bfloat* out [[buffer(0)]], device float* f [[buffer(1)]],
                           device const bfloat* in [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  bfloat x = in[i];
  bool c = x > 0;
  // One reading each, as in Metal: int converts to bfloat, bfloat to float.
  static_assert(is_same_v<decltype(c ? x : 0), bfloat>, "c ? bfloat : int is bfloat");
  static_assert(is_same_v<decltype(c ? x : 1.0f), float>, "c ? bfloat : float is float");
  static_assert(is_convertible_v<bfloat, float> && !is_convertible_v<bfloat, half> &&
                !is_convertible_v<float, bfloat> && !is_convertible_v<half, bfloat> &&
                is_convertible_v<int, bfloat>, "implicit conversions");
  out[i] = c ? x : 0;
  uint u = x; bool nz = x;               // as in Metal (MLX sorts and reductions)
  struct Mask { bool on; constexpr operator bool() const { return on; } } m{true};
  bfloat scale = bfloat(m);              // a class converting to bool (MLX masks)
  scale = m;
  float acc = 1.0f;
  acc += x;                              // built-in compound assignment, one reading
  acc *= scale;
  f[i] = c ? x : 0.5f;
  if (x) f[i] += 100.0f;                 // a bfloat as a condition
  int n = int(x); half h = half(x);      // explicit conversions
  f[i] += float(n) * 0.0f + float(h) * 0.0f + float(u) * 0.0f + float(nz) * 0.0f + (acc - 1.0f - x) * 0.0f;
}
"""


def test_bfloat_converts_implicitly_only_to_float():
    lib = metal_kernel.compile_shader(BFLOAT_CONVERSIONS)
    x = torch.tensor([-1.5, 0.0, 2.0, 0.25], dtype=torch.bfloat16)
    out = torch.full((4,), float("nan"), dtype=torch.bfloat16)
    f = torch.full((4,), float("nan"))
    lib.bf_conditional(out, f, x, threads=4)
    assert out.float().tolist() == [0.0, 0.0, 2.0, 0.25]
    assert f.tolist() == [100.5, 0.5, 102.0, 100.25]


@pytest.mark.parametrize("code", ["bfloat b = 1.0f;", "bfloat b = half(1);", "half h = bfloat(1);",
                                  "float4 v = float4(1, 2, 3);"])
def test_conversions_metal_rejects_are_rejected(code):
    src = f"""#include <metal_stdlib>
using namespace metal;
kernel void k(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {{ {code} }}"""
    with pytest.raises(MetalCompileError):
        metal_kernel.compile_shader(src)


BUILTINS = r"""
#include <metal_stdlib>
using namespace metal;
kernel void builtins(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  float x = in[i];
  int e;
  out[8 * i + 0] = __metal_exp(x, __METAL_MAYBE_FAST_MATH__);
  out[8 * i + 1] = __metal_fmax3(x, 0.5f, -x, __METAL_FAST_MATH__);
  out[8 * i + 2] = __metal_atan2(x, 2.0f, __METAL_PRECISE_MATH__);
  out[8 * i + 3] = __metal_frexp(x, &e) + float(e);
  out[8 * i + 4] = __metal_ldexp(x, 3, __METAL_MAYBE_FAST_MATH__);
  out[8 * i + 5] = __metal_simd_sum(x);
  out[8 * i + 6] = __metal_simd_shuffle_and_fill_down(x, -x, ushort(1), __metal_get_simdgroup_size(ushort()));
  out[8 * i + 7] = float(as_type<ushort>(__metal_simd_shuffle(as_type<ushort>(half(x)), ushort(0))));
}
kernel void builtin_bits(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  out[i] = __metal_simd_xor(in[i]);     // the bitwise reductions take floats' bits
  simdgroup_matrix<float, 8, 8> a(2.0f), b(3.0f);
  simdgroup_matrix<float, 8, 8> c = a * b;   // simdgroup_multiply
  out[32 + i] = c.thread_elements()[0] + c.thread_elements()[1];
}
"""


def test_compiler_builtins_behave_as_their_library_functions():
    lib = metal_kernel.compile_shader(BUILTINS)
    x = torch.linspace(-2, 2, 32)
    out = torch.full((32 * 8,), float("nan"))
    lib.builtins(out, x, threads=32, group_size=32)
    out = out.view(32, 8)
    torch.testing.assert_close(out[:, 0], x.exp())
    torch.testing.assert_close(out[:, 1], torch.maximum(torch.maximum(x, torch.tensor(0.5)), -x))
    torch.testing.assert_close(out[:, 2], torch.atan2(x, torch.tensor(2.0)))
    m, e = np.frexp(x.numpy())
    torch.testing.assert_close(out[:, 3], torch.from_numpy(m + e).float())
    torch.testing.assert_close(out[:, 4], x * 8)
    torch.testing.assert_close(out[:, 5], torch.full((32,), float(x.sum())), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[:, 6], torch.cat([x[1:], -x[:1]]))
    assert torch.all(out[:, 7] == float(x[:1].half().view(torch.int16).item() & 0xFFFF))
    bits = torch.full((64,), float("nan"))
    lib.builtin_bits(bits, x, threads=32, group_size=32)
    want = np.bitwise_xor.reduce(x.numpy().view(np.uint32)).view(np.float32)
    assert bits[:32].numpy().view(np.uint32).tolist() == [int(want.view(np.uint32))] * 32
    lane = np.arange(32)  # Apple's layout: lane holds M[r][c], M[r][c + 1]
    r, c = 4 * (lane >= 16) + ((lane >> 1) & 3), 4 * ((lane >> 3) & 1) + 2 * (lane & 1)
    assert bits[32:].tolist() == (6.0 * (r == c) + 6.0 * (r == c + 1)).tolist()  # diag(2) * diag(3)


LIBRARY_PIECES = r"""
#include <metal_stdlib>
using namespace metal;

template <typename T> struct indexed { uint i; T val; };
namespace metal {
template <typename T> struct _numeric_limits_impl<indexed<T>> {
  static constexpr indexed<T> lowest() { return indexed<T>{0, numeric_limits<T>::lowest()}; }
};
}
static_assert(__is_valid_simdgroup_type<float>::value && __is_valid_simdgroup_type<int4>::value &&
              !__is_valid_simdgroup_type<indexed<float>>::value, "simd operand types");

constant metal::os_log logger("metal-kernel", "test");

kernel void pieces(volatile coherent(system) device uint* flag [[buffer(0)]],
                   device float* out [[buffer(1)]], constant uint& n [[buffer(2)]],
                   uint i [[thread_position_in_grid]]) {
  const uniform<uint> un = make_uniform(n);
  const uniform<uint> half_n = un / make_uniform(2u);
  uint4 v = {i, uint(half_n), uint(un)};                // fewer components: the rest are 0
  float4 w = {2.5f};
  out[8 * i + 0] = float(v.x + v.y * 10 + v.z * 100 + v.w * 1000);
  out[8 * i + 1] = w.x + w.y + w.z + w.w;
  out[8 * i + 2] = numeric_limits<indexed<half>>::lowest().val;
  float2x2 m = float2x2(float2(2, 4), float2(6, 8)) / 2.0f;
  out[8 * i + 3] = m[1][1];
  if (i == 0) {
    flag[0] = 7u;
    logger.log_debug("kernel says %d and %.2f", int(un), half(1.5));
    metal::os_log_default.log("default log");
  }
}
"""


def test_uniform_logging_coherent_limits_and_short_vector_braces(capfd):
    lib = metal_kernel.compile_shader(LIBRARY_PIECES)
    flag = torch.zeros(1, dtype=torch.int32)
    out = torch.full((16,), float("nan"))
    lib.pieces(flag, out, 6, threads=2, group_size=2)
    out = out.view(2, 8)
    assert out[:, 0].tolist() == [0 + 30 + 600, 1 + 30 + 600]
    assert out[:, 1].tolist() == [2.5, 2.5]
    assert out[:, 2].tolist() == [-65504.0, -65504.0]
    assert out[:, 3].tolist() == [4.0, 4.0]
    assert flag.item() == 7
    err = capfd.readouterr().err
    assert "[metal-kernel:test] kernel says 6 and 1.50\n" in err
    assert "default log\n" in err
