"""The ATen host helpers a custom MPS host function calls, in Python, with ATen's messages.

- `assert_no_internal_overlap`, `assert_no_overlap` (ATen/MemoryOverlap.cpp);
- `resize_output` (ATen/native/Resize.cpp).

They run on the CPU tensors of the twin exactly where the `.mm` calls them, so an
out= tensor that aliases an input fails the same way it does on the device.
"""

from __future__ import annotations

import warnings

import torch

OVERLAP_INTERNAL = ("unsupported operation: more than one element of the written-to tensor refers to a "
                    "single memory location. Please clone() the tensor before performing the operation.")
OVERLAP_INPUT = ("unsupported operation: some elements of the input tensor and the written-to tensor "
                 "refer to a single memory location. Please clone() the tensor before performing the "
                 "operation.")


def non_overlapping_and_dense(t: torch.Tensor) -> bool:
    """TensorImpl::is_non_overlapping_and_dense: some permutation of `t` is contiguous."""
    if t.numel() == 0 or t.is_contiguous():
        return True
    dims = sorted((d for d in range(t.dim()) if t.size(d) != 1), key=t.stride)
    expected = 1
    for d in dims:
        if t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


def _has_internal_overlap(t: torch.Tensor) -> bool:
    """MemOverlap::Yes only (TooHard counts as no, as in ATen)."""
    if non_overlapping_and_dense(t):
        return False
    return any(t.stride(d) == 0 and t.size(d) > 1 for d in range(t.dim()))


def assert_no_internal_overlap(t: torch.Tensor) -> None:
    if _has_internal_overlap(t):
        raise RuntimeError(OVERLAP_INTERNAL)


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """get_overlap_status(a, b) is Partial or Full."""
    if a is b:
        return True
    if a.numel() == 0 or b.numel() == 0:
        return False
    if not non_overlapping_and_dense(a) or not non_overlapping_and_dense(b):
        return False  # TooHard
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    a_begin, b_begin = a.data_ptr(), b.data_ptr()
    a_end, b_end = a_begin + a.numel() * a.element_size(), b_begin + b.numel() * b.element_size()
    return a_begin < b_end and b_begin < a_end


def assert_no_overlap(a: torch.Tensor, b: torch.Tensor) -> None:
    if _overlaps(a, b):
        raise RuntimeError(OVERLAP_INPUT)


def resize_output(out: torch.Tensor, shape) -> bool:
    shape = torch.Size(shape)
    if out.shape == shape:
        return False
    if out.numel() != 0:
        warnings.warn(f"An output with one or more elements was resized since it had shape "
                      f"{list(out.shape)}, which does not match the required output shape {list(shape)}.")
    out.resize_(shape)
    return True
