"""A model of ATen's TensorIterator layout logic, for the emulated MPS host.

What exec_unary_kernel / exec_binary_kernel read from the iterator: the
broadcast shape and per-operand byte strides after `reorder_dimensions`
(innermost dimension first) and `coalesce_dimensions`, the layout of an
output the iterator allocates, `numel`, `ndim` and `is_contiguous`.
Operands keep their original tensors (`iter.input(i)` is the unbroadcast
tensor), as in ATen.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Operand:
    tensor: torch.Tensor | None
    dtype: torch.dtype
    is_output: bool
    strides: list[int]  # bytes, one per iterator dimension
    will_resize: bool = False

    @property
    def element_size(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()


class TensorIter:
    def __init__(self, output: torch.Tensor | None, inputs: list[torch.Tensor],
                 out_dtype: torch.dtype, common_dtype: torch.dtype):
        self.common_dtype = common_dtype
        shapes = [t.shape for t in inputs] + ([output.shape] if output is not None else [])
        full = list(torch.broadcast_shapes(*shapes))
        self.operands = [Operand(output, out_dtype if output is None else output.dtype, True, [],
                                 will_resize=output is None)]
        self.operands += [Operand(t, t.dtype, False, []) for t in inputs]
        for op in self.operands:
            if op.tensor is not None:
                op.strides = self._byte_strides(op.tensor, full)
        # ATen starts from reversed dims (innermost first), then sorts.
        self.shape = full[::-1]
        for op in self.operands:
            op.strides = op.strides[::-1]
        self._reorder()
        if output is None:
            self._allocate_output(out_dtype)
        self._coalesce()

    @staticmethod
    def _byte_strides(t: torch.Tensor, full: list[int]) -> list[int]:
        lead = len(full) - t.dim()
        out = [0] * lead
        for i in range(t.dim()):
            size = t.size(i)
            out.append(0 if size == 1 and full[lead + i] != 1 else t.stride(i) * t.element_size())
        return out

    def _should_swap(self, d0: int, d1: int) -> int:
        for op in self.operands:
            if op.will_resize or not op.strides:
                continue
            s0, s1 = op.strides[d0], op.strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if self.shape[d0] > self.shape[d1]:
                return 1
        return 0

    def _reorder(self) -> None:
        ndim = len(self.shape)
        perm = list(range(ndim))  # positions in the reversed (innermost-first) order
        for i in range(1, ndim):
            d1 = i
            for d0 in range(i - 1, -1, -1):
                c = self._should_swap(perm[d0], perm[d1])
                if c > 0:
                    perm[d0], perm[d1] = perm[d1], perm[d0]
                    d1 = d0
                elif c < 0:
                    break
        self.perm = perm
        self.shape = [self.shape[p] for p in perm]
        for op in self.operands:
            if op.strides:
                op.strides = [op.strides[p] for p in perm]

    def _allocate_output(self, dtype: torch.dtype) -> None:
        ndim = len(self.shape)
        elem = torch.empty((), dtype=dtype).element_size()
        iter_strides, acc = [], 1
        for size in self.shape:
            iter_strides.append(acc)
            acc *= max(size, 1)
        # iterator dim i is original dim (ndim - 1 - perm[i])
        sizes, strides = [0] * ndim, [0] * ndim
        for i in range(ndim):
            orig = ndim - 1 - self.perm[i]
            sizes[orig], strides[orig] = self.shape[i], iter_strides[i]
        out = torch.empty_strided(sizes, strides, dtype=dtype)
        op = self.operands[0]
        op.tensor, op.will_resize = out, False
        op.strides = [s * elem for s in iter_strides]

    def _coalesce(self) -> None:
        if len(self.shape) <= 1:
            return
        shape = list(self.shape)
        strides = [list(op.strides) for op in self.operands]

        def can(d0, d1):
            if shape[d0] == 1 or shape[d1] == 1:
                return True
            return all(shape[d0] * st[d0] == st[d1] for st in strides)

        prev = 0
        for dim in range(1, len(shape)):
            if can(prev, dim):
                if shape[prev] == 1:
                    for st in strides:
                        st[prev] = st[dim]
                shape[prev] *= shape[dim]
            else:
                prev += 1
                if prev != dim:
                    for st in strides:
                        st[prev] = st[dim]
                    shape[prev] = shape[dim]
        self.shape = shape[:prev + 1]
        for op, st in zip(self.operands, strides):
            op.strides = st[:prev + 1]

    # --- the TensorIteratorBase API the host code uses ---------------------
    def output(self) -> torch.Tensor:
        return self.operands[0].tensor

    def input(self, i: int) -> torch.Tensor:
        return self.operands[1 + i].tensor

    def tensor(self, i: int) -> torch.Tensor:
        return self.operands[i].tensor

    @property
    def ntensors(self) -> int:
        return len(self.operands)

    def strides(self, i: int) -> list[int]:
        return self.operands[i].strides

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def has_contiguous_first_dim(self) -> bool:
        if self.ndim == 0:
            return True
        return all(op.strides[0] == op.element_size for op in self.operands)

    def is_contiguous(self) -> bool:
        if self.numel() == 1:
            return True
        if self.ndim != 1:
            return False
        return self.has_contiguous_first_dim()
