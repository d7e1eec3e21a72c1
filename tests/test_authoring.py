"""The MLX-style authoring API, with the examples of MLX's custom-kernel
documentation re-created (element-wise exp, strided exp, bilinear grid
sampling and its gradient with atomic outputs)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import metal_kernel

EXP_BODY = """
    uint elem = thread_position_in_grid.x;
    T tmp = inp[elem];
    out[elem] = metal::exp(tmp);
"""


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_elementwise_exp_with_a_dtype_template(dtype):
    kernel = metal_kernel.metal_kernel(name="myexp", input_names=["inp"], output_names=["out"], source=EXP_BODY)
    a = torch.randn(4, 16).to(dtype)
    (b,) = kernel(inputs=[a], template=[("T", dtype)], grid=(a.numel(), 1, 1), threadgroup=(256, 1, 1),
                  output_shapes=[a.shape], output_dtypes=[dtype])
    torch.testing.assert_close(b, torch.exp(a.float()).to(dtype), rtol=1e-3, atol=1e-3)


def test_generated_signature_follows_mlx():
    kernel = metal_kernel.metal_kernel(name="myexp", input_names=["inp"], output_names=["out"],
                                       source=EXP_BODY + "(void)inp_strides;")
    src, host = kernel.generate([torch.zeros(3, dtype=torch.float16)], [torch.float16], [("T", torch.float32)])
    assert "const device half* inp [[buffer(0)]]" in src
    assert "const constant int64_t* inp_strides [[buffer(1)]]" in src
    assert "inp_shape" not in src.split("[[kernel]]")[1]  # only what the body mentions
    assert "device half* out [[buffer(2)]]" in src
    assert "uint3 thread_position_in_grid [[thread_position_in_grid]]" in src
    assert "template <typename T>" in src and host == "custom_kernel_myexp_float32"


def test_strided_input_with_shape_strides_ndim():
    body = """
        uint elem = thread_position_in_grid.x;
        int64_t loc = elem_to_loc(elem, inp_shape, inp_strides, inp_ndim);
        T tmp = inp[loc];
        out[elem] = metal::exp(tmp);
    """
    kernel = metal_kernel.metal_kernel(name="myexp_strided", input_names=["inp"], output_names=["out"],
                                       source=body, ensure_row_contiguous=False)
    a = torch.randn(8, 6).t()[::2]  # non-contiguous, stepped
    (b,) = kernel(inputs=[a], template=[("T", torch.float32)], grid=(a.numel(), 1, 1),
                  threadgroup=(256, 1, 1), output_shapes=[a.shape], output_dtypes=[torch.float32])
    torch.testing.assert_close(b, torch.exp(a))


def test_dict_inputs_and_outputs_and_int_bool_templates():
    kernel = metal_kernel.metal_kernel(
        name="affine", input_names=["x"], output_names=["y"],
        source="uint i = thread_position_in_grid.x; y[i] = NEG ? -(x[i] * S) : x[i] * S;")
    x = np.arange(10, dtype=np.float32)
    res = kernel(inputs={"x": x}, template={"S": 3, "NEG": True}, grid=(10, 1, 1), threadgroup=(4, 1, 1),
                 output_shapes={"y": (10,)}, output_dtypes={"y": torch.float32})
    assert res["y"].tolist() == [-3.0 * i for i in range(10)]


def test_init_value_fills_outputs():
    kernel = metal_kernel.metal_kernel(name="partial", input_names=["x"], output_names=["y"],
                                       source="uint i = thread_position_in_grid.x; if (i % 2) y[i] = x[i];")
    (y,) = kernel(inputs=[torch.ones(6)], grid=(6, 1, 1), threadgroup=(6, 1, 1), output_shapes=[(6,)],
                  output_dtypes=[torch.float32], init_value=-1.0)
    assert y.tolist() == [-1, 1, -1, 1, -1, 1]


def test_scalar_input_is_a_constant_reference():
    kernel = metal_kernel.metal_kernel(name="add_scalar", input_names=["x", "s"], output_names=["y"],
                                       source="uint i = thread_position_in_grid.x; y[i] = x[i] + s;")
    src, _ = kernel.generate([torch.zeros(3), torch.tensor(2.0)], [torch.float32], None)
    assert "const constant float& s [[buffer(1)]]" in src
    (y,) = kernel(inputs=[torch.zeros(3), torch.tensor(2.0)], grid=(3, 1, 1), threadgroup=(3, 1, 1),
                  output_shapes=[(3,)], output_dtypes=[torch.float32])
    assert y.tolist() == [2.0, 2.0, 2.0]


GRID_SAMPLE = """
    uint e = thread_position_in_grid.x;
    int H = x_shape[1], W = x_shape[2], C = x_shape[3];
    int gH = grid_shape[1], gW = grid_shape[2];
    int c = e % C;
    uint p = e / C;                     // (batch, gy, gx) position
    int b = p / (gH * gW);
    float fx = ((grid[2 * p] + 1) * W - 1) * 0.5f;
    float fy = ((grid[2 * p + 1] + 1) * H - 1) * 0.5f;
    int x0 = int(floor(fx)), y0 = int(floor(fy));
    float ax = fx - x0, ay = fy - y0;
    T acc = 0;
    for (int dy = 0; dy < 2; ++dy) {
      for (int dx = 0; dx < 2; ++dx) {
        int xx = x0 + dx, yy = y0 + dy;
        if (xx < 0 || xx >= W || yy < 0 || yy >= H) continue;
        float w = (dx ? ax : 1 - ax) * (dy ? ay : 1 - ay);
        acc += T(w) * x[((b * H + yy) * W + xx) * C + c];
      }
    }
    out[e] = acc;
"""

# Gradient of the sampling: scatter the cotangent into x_grad with atomics; the
# grid gradient sums over channels, first across the simdgroup (C is 32 here,
# so a simdgroup covers one grid point), then one atomic add per simdgroup.
GRID_SAMPLE_VJP = """
    uint e = thread_position_in_grid.x;
    int H = x_shape[1], W = x_shape[2], C = x_shape[3];
    int gH = grid_shape[1], gW = grid_shape[2];
    int c = e % C;
    uint p = e / C;
    int b = p / (gH * gW);
    float fx = ((grid[2 * p] + 1) * W - 1) * 0.5f;
    float fy = ((grid[2 * p + 1] + 1) * H - 1) * 0.5f;
    int x0 = int(floor(fx)), y0 = int(floor(fy));
    float ax = fx - x0, ay = fy - y0;
    float g = cotangent[e];
    float dfx = 0, dfy = 0;
    for (int dy = 0; dy < 2; ++dy) {
      for (int dx = 0; dx < 2; ++dx) {
        int xx = x0 + dx, yy = y0 + dy;
        if (xx < 0 || xx >= W || yy < 0 || yy >= H) continue;
        float wx = dx ? ax : 1 - ax, wy = dy ? ay : 1 - ay;
        int idx = ((b * H + yy) * W + xx) * C + c;
        atomic_fetch_add_explicit(&x_grad[idx], wx * wy * g, memory_order_relaxed);
        float v = x[idx];
        dfx += (dx ? 1.0f : -1.0f) * wy * v * g;
        dfy += (dy ? 1.0f : -1.0f) * wx * v * g;
      }
    }
    dfx = simd_sum(dfx);
    dfy = simd_sum(dfy);
    if (thread_index_in_simdgroup == 0) {
      atomic_fetch_add_explicit(&grid_grad[2 * p], dfx * W * 0.5f, memory_order_relaxed);
      atomic_fetch_add_explicit(&grid_grad[2 * p + 1], dfy * H * 0.5f, memory_order_relaxed);
    }
"""


def _inputs():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 6, 32)  # B, H, W, C (channels last, as MLX)
    grid = torch.rand(2, 4, 3, 2) * 2.4 - 1.2  # some points fall outside
    return x, grid


def test_grid_sample_forward_matches_torch():
    x, grid = _inputs()
    kernel = metal_kernel.metal_kernel(name="grid_sample", input_names=["x", "grid"], output_names=["out"],
                                       source=GRID_SAMPLE)
    B, gH, gW, C = 2, 4, 3, 32
    (out,) = kernel(inputs=[x, grid], template=[("T", torch.float32)], grid=(B * gH * gW * C, 1, 1),
                    threadgroup=(256, 1, 1), output_shapes=[(B, gH, gW, C)], output_dtypes=[torch.float32])
    expected = F.grid_sample(x.permute(0, 3, 1, 2), grid, align_corners=False).permute(0, 2, 3, 1)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_grid_sample_gradient_with_atomic_outputs():
    x, grid = _inputs()
    B, gH, gW, C = 2, 4, 3, 32
    cot = torch.randn(B, gH, gW, C)
    kernel = metal_kernel.metal_kernel(name="grid_sample_vjp", input_names=["x", "grid", "cotangent"],
                                       output_names=["x_grad", "grid_grad"], source=GRID_SAMPLE_VJP,
                                       atomic_outputs=True)
    x_grad, grid_grad = kernel(inputs=[x, grid, cot], grid=(B * gH * gW * C, 1, 1), threadgroup=(256, 1, 1),
                               output_shapes=[x.shape, grid.shape], output_dtypes=[torch.float32] * 2,
                               init_value=0)
    xr = x.permute(0, 3, 1, 2).clone().requires_grad_()
    gr = grid.clone().requires_grad_()
    F.grid_sample(xr, gr, align_corners=False).permute(0, 2, 3, 1).backward(cot)
    torch.testing.assert_close(x_grad, xr.grad.permute(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grid_grad, gr.grad, rtol=1e-4, atol=1e-3)


def test_bad_names_are_rejected():
    with pytest.raises(ValueError, match="identifier"):
        metal_kernel.metal_kernel(name="bad name", input_names=["x"], output_names=["y"], source="")
    with pytest.raises(ValueError, match="both as input and output"):
        metal_kernel.metal_kernel(name="k", input_names=["x"], output_names=["x"], source="")


def test_float64_output_is_rejected():
    kernel = metal_kernel.metal_kernel(name="k64", input_names=["x"], output_names=["y"], source="")
    with pytest.raises(TypeError, match="float64"):
        kernel(inputs=[torch.zeros(2)], grid=(2, 1, 1), threadgroup=(2, 1, 1), output_shapes=[(2,)],
               output_dtypes=[torch.float64])
