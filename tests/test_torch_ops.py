"""A torch custom op whose CPU implementation is the Metal kernel itself."""

import pytest
import torch

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void softplus_scaled(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                            constant float& beta [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = log(1 + exp(beta * x[i])) / beta;
}
kernel void add_inplace(device float* x [[buffer(0)]], constant float& v [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  x[i] += v;
}
"""


def _fake(x, beta):
    return torch.empty_like(x)


@metal_kernel.metal_op("mk_test::softplus_scaled", SOURCE, fake=_fake)
def softplus_scaled(lib, x: torch.Tensor, beta: float) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    lib.softplus_scaled(out, x, beta, threads=x.numel())
    return out


@metal_kernel.metal_op("mk_test::add_inplace", SOURCE, mutates_args=("x",))
def add_inplace(lib, x: torch.Tensor, v: float) -> None:
    lib.add_inplace(x, v)


def test_custom_op_runs_the_kernel_on_cpu_tensors():
    x = torch.randn(4, 33)
    out = torch.ops.mk_test.softplus_scaled(x, 2.0)
    torch.testing.assert_close(out, torch.nn.functional.softplus(x, beta=2.0))


def test_custom_op_passes_torch_opcheck():
    torch.library.opcheck(softplus_scaled, (torch.randn(5, 3), 1.5))


def test_custom_op_works_under_torch_compile_with_a_fake():
    f = torch.compile(lambda t: softplus_scaled(t, 1.0) * 2, backend="eager", fullgraph=True)
    x = torch.randn(10)
    torch.testing.assert_close(f(x), torch.nn.functional.softplus(x) * 2)


def test_mutating_custom_op():
    x = torch.zeros(7)
    add_inplace(x, 1.5)
    assert x.tolist() == [1.5] * 7


def test_launcher_without_library_parameter_is_rejected():
    with pytest.raises(TypeError, match="first parameter"):
        metal_kernel.metal_op("mk_test::bad", SOURCE)(lambda: None)


def test_other_devices_get_a_clear_error():
    with pytest.raises(RuntimeError, match="not on 'meta'"):
        softplus_scaled.metal_libraries.for_device("meta")
