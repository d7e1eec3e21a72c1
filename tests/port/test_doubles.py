"""port_cuda(double="float") and `__trap()` in a kernel: what the port
computes instead of CUDA, each site a warning (MK1038, MK1039), each kernel
checked against load_cuda with verify; and what stays refused (a double in
a kernel's interface, MK1001; `__trap()` in a device function, MK1017)."""

from __future__ import annotations

import numpy as np
import pytest

from metal_kernel.port import port_cuda
from metal_kernel.port.to_metal.doubles import accumulated_length

from .conftest import poisoned

SOURCE = r"""
__global__ void row_sum(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    double sum = 0.0;
    for (int j = 0; j < cols; j++) sum += x[r * cols + j];
    y[r] = (float)sum;
  }
}
__device__ double halve(double v) { return v * 0.5; }
__global__ void double_math(const float* x, float* y) {
  int i = threadIdx.x;
  __shared__ double tile[64];
  double2 v = make_double2((double)x[i], sqrt((double)fabsf(x[i])));
  tile[i] = halve(v.x + static_cast<double>(v.y));
  __syncthreads();
  y[i] = __double2float_rn(__dadd_rn(tile[63 - i], __int2double_rn(i)));
}
template <typename Acc>
__global__ void acc_sum(const float* x, float* y, int cols) {
  Acc a = Acc(0);
  for (int j = 0; j < cols; j++) a += (Acc)x[threadIdx.x * cols + j];
  y[threadIdx.x] = (float)a;
}
template __global__ void acc_sum<double>(const float*, float*, int);
__global__ void cancels(const float* x, float* y) {
  int i = threadIdx.x;
  double s = x[i];
  s += 1e8;
  s -= 1e8;
  y[i] = (float)s;
}
__global__ void double_buffer(const double* x, float* y) { y[threadIdx.x] = (float)x[threadIdx.x]; }
struct Weights { float w; double bias; };
__global__ void struct_by_value(Weights p, float* y) { y[threadIdx.x] = p.w + (float)p.bias; }
__constant__ double scale[4];
__global__ void double_constant(float* y) { y[threadIdx.x] = (float)scale[threadIdx.x % 4]; }
__global__ void double_bits(float* y) { y[threadIdx.x] = (float)(__double_as_longlong(1.5) & 0xff); }
__global__ void traps(const float* x, float* y, int n) {
  if (n % 32 != 0) {
    if (threadIdx.x == 0) printf("n must be a multiple of 32\n");
    __trap();
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
__device__ void check_positive(int n) { if (n <= 0) __trap(); }
__global__ void traps_in_helper(float* y, int n) { check_positive(n); y[threadIdx.x] = (float)n; }
"""


def _line(text: str) -> int:
    return 1 + next(i for i, ln in enumerate(SOURCE.split("\n")) if text in ln)


def _ok(res):
    assert res.ok, str(res)
    assert any(b.written for b in res.buffers)


@pytest.fixture(scope="module")
def demoted():
    return port_cuda(SOURCE, filename="doubles.cu", double="float")


def _kernel(p, name):
    return next(k for k in p.kernels if k.spelling == name)


def _codes(p, function):
    return {d.code for d in p.diagnostics if d.function == function}


def test_double_accumulator(demoted):
    k = _kernel(demoted, "row_sum")
    assert k.translated and k.demoted and k.accumulations == [["cols"]]
    d = next(d for d in demoted.diagnostics if d.code == "MK1038" and d.function == "row_sum")
    assert d.severity == "warning" and d.line == _line("double sum")
    lines = demoted.metal.splitlines()
    i = lines.index("    float sum = 0.0f;")
    assert any(ln.strip().startswith("// MK1038 warning") and "port-diagnostics.md#mk1038" in ln
               for ln in lines[i - 3:i])
    x = np.random.default_rng(0).uniform(-1, 1, 64 * 100).astype(np.float32)
    _ok(demoted.verify("row_sum", x, poisoned(64), 64, 100, grid=2, block=32))
    s = demoted.stats
    assert s["converted"]["by_name"]["double"] >= 8  # row_sum's, double_math's, halve's, cancels', Weights'
    assert s["unconverted"]["by_name"]["double"] == 2  # double_buffer's parameter, the __constant__ scale


def test_accumulation_rounding_is_the_tolerance(demoted):
    # 1 then 4095 terms below half an ulp of 1: the float sum stays 1, the double one is
    # 1.000164 (1.6e-4 off: above the float default rtol 1e-4, within 4096 x 2^-24)
    x = np.full((32, 4096), 4e-8, np.float32)
    x[:, 0] = 1.0
    res = demoted.verify("row_sum", x.reshape(-1), poisoned(32), 32, 4096, grid=1, block=32)
    _ok(res)
    assert res.buffers[1].max_rel > 1e-4
    assert any("4096 x 2^-24" in n for n in res.notes), res.notes
    assert accumulated_length([["B", "T"], ["C + 1"]], {"B": 2, "T": 8, "C": 3}) == 16
    assert accumulated_length([["blockDim.x"]], {}) is None


def test_double_casts_vectors_shared_and_helpers(demoted):
    m = demoted.metal
    assert "float2 v = float2((float)x[i], precise::sqrt((float)fabs(x[i])));" in m
    assert "threadgroup float tile[64];" in m and "float halve(float v)" in m
    assert "y[i] = float((tile[63 - i] + float(i)));" in m
    assert {"MK1038"} <= _codes(demoted, "double_math") and {"MK1038"} <= _codes(demoted, "halve")
    x = np.linspace(-2, 2, 64).astype(np.float32)
    _ok(demoted.verify("double_math", x, poisoned(64), grid=1, block=64))


def test_template_instantiated_with_double(demoted):
    assert 'template [[host_name("acc_sum_double")]] [[kernel]] void acc_sum<float>(' in demoted.metal
    assert "MK1038" in _codes(demoted, "acc_sum<double>")
    k = _kernel(demoted, "acc_sum<double>")
    assert k.translated and k.demoted and k.accumulations == [["cols"]]
    x = np.random.default_rng(1).uniform(0, 1, 32 * 50).astype(np.float32)
    _ok(demoted.verify("acc_sum<double>", x, poisoned(32), 50, grid=1, block=32))


def test_a_result_that_needs_double_fails(demoted):
    # x + 1e8 - 1e8 keeps x in double; in float x + 1e8 rounds to 1e8
    x = np.random.default_rng(2).uniform(0.1, 0.9, 32).astype(np.float32)
    res = demoted.verify("cancels", x, poisoned(32), grid=1, block=32)
    assert res.ran and not res.ok
    assert res.buffers[1].mismatches == 32
    assert "MK1027" in _codes(demoted, "cancels")


@pytest.mark.parametrize("kernel", ["double_buffer", "struct_by_value", "double_constant"])
def test_double_in_the_interface_stays_rejected(demoted, kernel):
    k = _kernel(demoted, kernel)
    assert not k.translated
    d = next(d for d in k.diagnostics if d.code == "MK1001")
    assert "not even with double=\"float\"" in d.message, d.message
    assert kernel not in demoted.load()


def test_the_bits_of_a_double_stay_rejected(demoted):
    k = _kernel(demoted, "double_bits")
    assert not k.translated
    assert "the bits of a double" in next(d for d in k.diagnostics if d.code == "MK1001").message


def test_reject_is_the_default():
    p = port_cuda(SOURCE, filename="doubles.cu")
    assert p.double == "reject" and p.to_json()["double"] == "reject"
    for name in ("row_sum", "double_math", "acc_sum<double>", "cancels"):
        k = _kernel(p, name)
        assert not k.translated and "MK1001" in {d.code for d in k.diagnostics}
    assert "MK1038" not in {d.code for d in p.diagnostics}
    assert "double=\"float\"" in next(d for d in p.diagnostics if d.code == "MK1001").suggestion
    assert p.stats["unconverted"]["by_name"]["double"] >= 4 and "double" not in p.stats["converted"]["by_name"]
    assert _kernel(p, "traps").translated  # __trap does not depend on the option


@pytest.mark.parametrize("value", ["double", "Float", None, True])
def test_an_unknown_double_mode_is_an_error(value):
    with pytest.raises(ValueError, match="'reject', 'float'"):
        port_cuda(SOURCE, filename="doubles.cu", double=value)


def test_options_are_remembered(demoted):
    assert demoted.to_json()["double"] == "float"
    again = demoted.port_again(SOURCE + "\n// edited\n")
    assert again.double == "float" and _kernel(again, "row_sum").translated


def test_trap_in_a_kernel_ends_the_thread(demoted):
    k = _kernel(demoted, "traps")
    assert k.translated
    body = demoted.metal.split("kernel void traps(")[1]
    assert "    return;\n  }" in body.split("int i =")[0]
    d = next(d for d in demoted.diagnostics if d.code == "MK1039")
    assert d.severity == "warning" and d.function == "traps" and d.line == _line("__trap();")
    assert demoted.stats["converted"]["by_name"].get("__trap") == 1
    x = np.arange(64, dtype=np.float32)
    _ok(demoted.verify("traps", x, poisoned(64), 64, grid=2, block=32))
    # where the original traps, it still aborts (load_cuda): nothing to compare
    res = demoted.verify("traps", x, poisoned(64), 60, grid=2, block=32)
    assert not res.ok and "__trap() was called" in res.error


def test_trap_in_a_device_function_stays_rejected(demoted):
    k = _kernel(demoted, "traps_in_helper")
    assert not k.translated
    assert "MK1017" in {d.code for d in k.diagnostics}
    assert "MK1039" not in _codes(demoted, "check_positive")
