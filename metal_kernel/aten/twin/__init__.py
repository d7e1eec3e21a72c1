"""A Python twin of PyTorch's MPS host side, to run generated kernels as PyTorch would.

- tensor_iter.py: TensorIterator's layout logic (broadcast, reorder, coalesce);
- mps_host.py: MetalShaderLibrary's exec_unary_kernel / exec_binary_kernel
  (kernel choice, argument binding, grid);
- mps_stream.py: MPSStream's kernel error buffer and checkLastError;
- aten_host.py: the ATen helpers custom host functions call (overlap checks, resize_output).
"""
