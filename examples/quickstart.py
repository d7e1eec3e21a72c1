"""The first example of the README: a Metal kernel run on CPU tensors.

The first kernel is the docstring example of torch.mps.compile_shader, word
for word; the second uses PyTorch's own c10/metal macros on a strided,
non-contiguous input, checked against the torch CPU operator.
"""

import torch

import metal_kernel

# 1. torch.mps.compile_shader's docstring example, on the CPU.
lib = metal_kernel.compile_shader(
    "kernel void full(device float* out, constant float& val, uint idx [[thread_position_in_grid]])"
    "{ out[idx] = val; }"
)
x = torch.full((16,), float("nan"))  # poisoned: unwritten elements would show
lib.full(x, 3.14)
assert torch.all(x == torch.tensor(3.14, dtype=torch.float32)), x
print("full:", x[:4].tolist(), "...")

# 2. A pointwise op written the way PyTorch writes its own Metal kernels.
lib = metal_kernel.compile_shader(
    """
#include <c10/metal/indexing.h>
using namespace metal;
struct expm1_functor {
  template <typename T> inline T operator()(const T x) { return T(precise::exp(float(x)) - 1.0); }
};
REGISTER_UNARY_OP(expm1, float, float);
"""
)
inp = torch.randn(8, 6).t()  # non-contiguous view
out = torch.full(inp.shape, float("nan"))
sizes = list(reversed(inp.shape))  # innermost first, as the MPS host code passes them
in_strides = [s * inp.element_size() for s in reversed(inp.stride())]
out_strides = [s * out.element_size() for s in reversed(out.stride())]
lib.expm1_strided_float_float(out, inp, sizes, in_strides, out_strides, inp.ndim,
                              arg_casts={5: "int32"}, threads=[inp.shape[1], inp.shape[0]],
                              group_size=[inp.shape[1], 1])
torch.testing.assert_close(out, torch.expm1(inp))
print("expm1 on a transposed tensor matches torch.expm1; kernels:", len(dir(lib)))
print("OK")
