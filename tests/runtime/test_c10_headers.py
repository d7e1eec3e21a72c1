"""PyTorch's own Metal headers (from the installed torch wheel), unmodified.

Kernels are instantiated with PyTorch's macros and called the way the MPS
host code calls them (ATen/native/mps/OperationUtils.mm: sizes and byte
strides innermost first), on non-contiguous inputs, against the CPU operator
with test_mps tolerances.
"""

import os
from pathlib import Path

import pytest
import torch

import metal_kernel
from metal_kernel.runtime.compiler import torch_include_dir

C10 = Path(torch_include_dir()) / "c10" / "metal"
HEADERS = sorted(p.name for p in C10.glob("*.h"))
TOL = {torch.float32: dict(rtol=1.3e-6, atol=1e-5), torch.float16: dict(rtol=1e-2, atol=2e-2),
       torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}
METAL_TYPE = {torch.float32: "float", torch.float16: "half", torch.bfloat16: "bfloat", torch.int32: "int",
              torch.int64: "long", torch.int16: "short", torch.uint8: "uchar", torch.int8: "char",
              torch.bool: "bool"}


@pytest.mark.parametrize("header", HEADERS)
def test_every_c10_metal_header_compiles_unmodified(header):
    lib = metal_kernel.compile_shader(
        f"#include <c10/metal/{header}>\n"
        "kernel void probe(device int* x, uint i [[thread_position_in_grid]]) { x[i] = 1; }"
    )
    x = torch.zeros(2, dtype=torch.int32)
    lib.probe(x)
    assert x.tolist() == [1, 1]


def test_all_headers_together():
    src = "".join(f"#include <c10/metal/{h}>\n" for h in HEADERS)
    lib = metal_kernel.compile_shader(src + "kernel void probe(device int* x) { x[0] = 7; }")
    x = torch.zeros(1, dtype=torch.int32)
    lib.probe(x, threads=1)
    assert x.item() == 7


def _strides_innermost_first(t):
    return [s * t.element_size() for s in reversed(t.stride())]


UNARY = r"""
#include <c10/metal/indexing.h>
#include <c10/metal/reduction_utils.h>
#include <c10/metal/special_math.h>
#include <c10/metal/utils.h>
using namespace metal;
using namespace c10::metal;

struct exp_functor {
  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
  inline T operator()(const T x) { return T(precise::exp(float(x))); }
};
struct erfinv_functor {
  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
  inline T operator()(const T x) { return T(c10::metal::erfinv(x)); }
};
struct i0_functor {
  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
  inline T operator()(const T x) { return T(c10::metal::i0(float(x))); }
};
struct digamma_functor {
  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
  inline T operator()(const T x) { return T(c10::metal::digamma(x)); }
};
struct bessel_j0_functor {
  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
  inline T operator()(const T x) { return T(c10::metal::bessel_j0_forward(x)); }
};
struct neg_functor {
  template <typename T> inline T operator()(const T x) { return T(-x); }
};
#define REG(NAME) REGISTER_UNARY_OP(NAME, float, float); REGISTER_UNARY_OP(NAME, half, half); \
  REGISTER_UNARY_OP(NAME, bfloat, bfloat)
REG(exp);
REG(erfinv);
REG(i0);
REG(digamma);
REG(bessel_j0);
REGISTER_UNARY_OP(neg, int, int);
REGISTER_UNARY_OP(neg, long, long);

struct fmax_functor {
  template <typename T> inline T operator()(const T a, const T b) { return c10::metal::max(a, b); }
};
struct hypot_functor {
  template <typename T> inline T operator()(const T a, const T b) { return T(c10::metal::hypot(float(a), float(b))); }
};
REGISTER_BINARY_OP(fmax, float, float);
REGISTER_BINARY_OP(fmax, half, half);
REGISTER_BINARY_OP(fmax, long, long);
REGISTER_BINARY_OP(hypot, float, float);
REGISTER_BINARY_OP(hypot, bfloat, bfloat);

kernel void tg_sum(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                   uint lid [[thread_position_in_threadgroup]], uint n [[threads_per_threadgroup]],
                   uint tg [[threadgroup_position_in_grid]], uint gid [[thread_position_in_grid]]) {
  threadgroup float scratch[32];
  float s = c10::metal::threadgroup_sum(scratch, a[gid], lid, n);
  if (lid == 0) out[tg] = s;
}
"""


@pytest.fixture(scope="module")
def ulib():
    return metal_kernel.compile_shader(UNARY)


def run_unary_strided(lib, name, x):
    out = torch.full(x.shape, float("nan"), dtype=x.dtype) if x.dtype.is_floating_point else torch.full(
        x.shape, -7, dtype=x.dtype)
    t = METAL_TYPE[x.dtype]
    kernel = getattr(lib, f"{name}_strided_{t}_{t}")
    inner = x.shape[-1]
    outer = x.numel() // inner
    kernel(out, x, list(reversed(x.shape)), _strides_innermost_first(x), _strides_innermost_first(out),
           x.ndim, arg_casts={5: "int32"}, threads=[inner, outer], group_size=[min(inner, 256), 1])
    return out


def run_unary_dense(lib, name, x):
    out = torch.full(x.shape, float("nan"), dtype=x.dtype)
    t = METAL_TYPE[x.dtype]
    n = x.numel()
    getattr(lib, f"{name}_dense_{t}_{t}")(out, x, n, arg_casts={2: "int32"}, threads=(n + 3) // 4)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op,ref,domain", [
    ("exp", torch.exp, (-5, 5)),
    ("erfinv", torch.erfinv, (-0.99, 0.99)),
    ("i0", torch.special.i0, (-8, 8)),
    ("digamma", torch.digamma, (0.1, 20)),
    ("bessel_j0", torch.special.bessel_j0, (-20, 20)),
])
def test_register_unary_op_strided_non_contiguous_matches_torch(ulib, op, ref, domain, dtype):
    lo, hi = domain
    base = (torch.rand(7, 5, 9) * (hi - lo) + lo).to(dtype)
    x = base.permute(2, 0, 1)[:, 1:4, ::2]  # non-contiguous, offset, stepped
    assert not x.is_contiguous()
    out = run_unary_strided(ulib, op, x)
    expected = ref(x.float()).to(dtype)
    torch.testing.assert_close(out, expected, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_register_unary_op_dense_with_four_elements_per_thread(ulib, dtype):
    x = torch.randn(1001).to(dtype)  # not a multiple of ILP_PER_THREAD
    out = run_unary_dense(ulib, "exp", x)
    torch.testing.assert_close(out, torch.exp(x.float()).to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_register_unary_op_integer_types(ulib, dtype):
    x = torch.randint(-100, 100, (6, 4), dtype=dtype).t()
    out = run_unary_strided(ulib, "neg", x)
    assert torch.equal(out, -x)


@pytest.mark.parametrize("op,dtype,ref", [
    ("fmax", torch.float32, torch.maximum),
    ("fmax", torch.float16, torch.maximum),
    ("fmax", torch.int64, torch.maximum),
    ("hypot", torch.float32, torch.hypot),
    ("hypot", torch.bfloat16, torch.hypot),
])
def test_register_binary_op_strided_with_broadcast_matches_torch(ulib, op, dtype, ref):
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(6, 8, generator=g) * 10).to(dtype).t()  # (8, 6) transposed
    b = (torch.randn(6, generator=g) * 10).to(dtype)[None, :].expand(8, 6)  # stride-0 broadcast
    if op == "hypot":
        # c10::metal::hypot(a, b) is negative when both inputs are (it skips the
        # absolute values); the emulation reproduces that, so test the domain
        # where it agrees with torch.hypot.
        a, b = a.abs(), b.abs()
    if dtype.is_floating_point:
        a[0, 0] = float("nan")  # NaN propagation of c10::metal::max
    out = torch.full((8, 6), -7, dtype=dtype) if not dtype.is_floating_point else torch.full((8, 6), float("inf"), dtype=dtype)
    t = METAL_TYPE[dtype]
    kernel = getattr(ulib, f"{op}_strided_{t}_{t}")
    kernel(out, a, b, list(reversed(out.shape)), _strides_innermost_first(out), _strides_innermost_first(a),
           _strides_innermost_first(b), [2, 0, 0, 0], arg_casts={7: "int32"}, threads=out.numel())
    expected = ref(a.float(), b.float()).to(dtype) if dtype.is_floating_point else ref(a, b)
    torch.testing.assert_close(out, expected, equal_nan=True, **TOL.get(dtype, {}))


def test_threadgroup_sum_from_reduction_utils(ulib):
    a = torch.rand(1000 * 8)
    out = torch.full((8,), float("nan"))
    ulib.tg_sum(a, out, threads=a.numel(), group_size=1000)
    torch.testing.assert_close(out, a.reshape(8, 1000).sum(1), rtol=1e-5, atol=1e-4)
