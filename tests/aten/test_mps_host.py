"""The emulated MPS host picks the kernels and binds the arguments PyTorch's does.

A recording library stands in for the runtime: it lists the host names a
REGISTER_UNARY_OP / REGISTER_BINARY_OP(name, float, float) produces and records
each launch, so these run without a compiler.
"""

import torch

from metal_kernel.aten.twin.mps_host import MpsHost, cpu_scalar
from metal_kernel.aten.twin.tensor_iter import TensorIter

UNARY = [f"f_{k}_float_float" for k in ("dense", "dense_scalar", "strided")] + [
    f"f_{k}_float" for k in ("dense_castout", "dense_castout_ilp", "strided_castout")]
BINARY = [f"g_{k}_float_float" for k in (
    "dense", "dense_ilp4", "strided", "dense_cast", "strided_cast", "dense_scalar", "dense_scalar_lhs",
    "dense_broadcast", "dense_broadcast_rhs", "dense_scalar_cast", "dense_scalar_lhs_cast")]


class RecordingLib:
    def __init__(self, names):
        self._names = names
        self.calls = []

    def __dir__(self):
        return self._names

    def __getattr__(self, name):
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)

        def kernel(*args, threads, group_size):
            self.calls.append((name, args, threads, group_size))
        return kernel


def unary(x, out=None, force=None):
    lib = RecordingLib(UNARY)
    it = TensorIter(out, [x], torch.float32 if out is None else out.dtype, torch.float32)
    MpsHost(lib, force).exec_unary_kernel(it, "f")
    return lib.calls[0], it


def binary(a, b, force=None):
    lib = RecordingLib(BINARY)
    it = TensorIter(None, [a if isinstance(a, torch.Tensor) else cpu_scalar(a),
                           b if isinstance(b, torch.Tensor) else cpu_scalar(b)], torch.float32, torch.float32)
    MpsHost(lib, force).exec_binary_kernel(it, "g")
    return lib.calls[0], it


def test_iterator_coalesces_contiguous_operands_to_one_dimension():
    it = TensorIter(None, [torch.zeros(3, 4, 5)], torch.float32, torch.float32)
    assert it.shape == [60] and it.is_contiguous()
    assert it.strides(0) == [4] and it.strides(1) == [4]


def test_iterator_allocates_output_in_the_input_memory_order():
    x = torch.zeros(4, 6).t()
    it = TensorIter(None, [x], torch.float32, torch.float32)
    assert it.output().stride() == x.stride()
    assert it.is_contiguous()


def test_iterator_strides_are_bytes_innermost_first():
    x = torch.zeros(4, 10)[:, :5]
    it = TensorIter(None, [x], torch.float32, torch.float32)
    assert it.shape == [5, 4]
    assert it.strides(1) == [4, 40] and it.strides(0) == [4, 20]
    assert not it.is_contiguous()


def test_iterator_coalesces_a_uniformly_strided_view_to_one_strided_dimension():
    it = TensorIter(None, [torch.zeros(4, 10)[:, ::2]], torch.float32, torch.float32)
    assert it.shape == [20] and it.strides(1) == [8] and not it.is_contiguous()


def test_small_contiguous_unary_uses_one_thread_per_element():
    (name, args, threads, group), _ = unary(torch.ones(10))
    assert (name, threads, group, len(args)) == ("f_dense_scalar_float_float", 10, 10, 2)


def test_forced_ilp_unary_passes_numel_and_covers_four_elements_per_thread():
    (name, args, threads, _), _ = unary(torch.ones(10), force="ilp")
    assert name == "f_dense_float_float" and threads == 3
    assert args[2].dtype == torch.int32 and args[2].tolist() == [10]


def test_strided_unary_uses_a_2d_grid_with_innermost_first_byte_strides():
    x = torch.ones(4, 10)[:, :5]
    (name, args, threads, group), it = unary(x)
    assert name == "f_strided_float_float"
    assert threads == [5, 4] and group == [5, 4]
    sizes, in_strides, out_strides, ndim = args[2:]
    assert sizes.tolist() == [5, 4] and in_strides.tolist() == [4, 40] and out_strides.tolist() == [4, 20]
    assert ndim.dtype == torch.int32 and ndim.tolist() == [2]
    assert args[1] is x


def test_unary_falls_back_to_castout_when_the_output_dtype_has_no_kernel():
    out = torch.empty(6, dtype=torch.float16)
    (name, args, threads, _), _ = unary(torch.ones(6), out=out)
    assert name == "f_dense_castout_float" and threads == 6
    assert args[2].tolist() == [2, 5]  # element size and ScalarType::Half


def test_binary_with_a_cpu_scalar_uses_the_scalar_kernel_with_the_value_as_float():
    x = torch.ones(8)
    (name, args, threads, _), _ = binary(x, 2.5)
    assert name == "g_dense_scalar_float_float" and threads == 8
    assert args[2].dtype == torch.float32 and args[2].item() == 2.5


def test_binary_with_the_scalar_on_the_left_uses_the_lhs_kernel():
    (name, args, _, _), _ = binary(3.0, torch.ones(8))
    assert name == "g_dense_scalar_lhs_float_float"
    assert args[1].item() == 3.0


def test_binary_with_a_dense_broadcast_operand_uses_the_broadcast_kernel():
    (name, args, threads, _), _ = binary(torch.ones(5, 10, 5), torch.ones(10, 5))
    assert name == "g_dense_broadcast_float_float" and threads == 250
    assert args[3].dtype == torch.int64 and args[3].tolist() == [50]


def test_binary_with_mixed_dtypes_uses_cast_kernels_with_sizes_and_types():
    (name, args, _, _), _ = binary(torch.ones(6), torch.ones(6, dtype=torch.int64))
    assert name == "g_dense_cast_float_float"
    assert args[3].tolist() == [4, 8, 6, 4]


def test_binary_on_non_contiguous_inputs_passes_shape_and_three_stride_arrays():
    a = torch.ones(4, 10)[:, :5]
    (name, args, threads, _), _ = binary(a, torch.ones(4, 5))
    assert name == "g_strided_float_float" and threads == 20
    shape, out_s, a_s, b_s, ndim_types = args[3:]
    assert shape.tolist() == [5, 4] and out_s.tolist() == [4, 20] and a_s.tolist() == [4, 40]
    assert b_s.tolist() == [4, 20] and ndim_types.tolist() == [2, 6, 6, 6]


def test_forced_ilp_binary_uses_the_dense_ilp4_kernel():
    (name, args, threads, _), _ = binary(torch.ones(9), torch.ones(9), force="ilp")
    assert name == "g_dense_ilp4_float_float" and threads == 3 and args[3].tolist() == [9]
