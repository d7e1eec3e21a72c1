"""A Python twin of PyTorch's MPS host code for TensorIterator kernels.

`exec_unary_kernel` / `exec_binary_kernel` follow MetalShaderLibrary's logic:
choose `<name>_<flavor>_<out>_<in>` (dense_scalar / dense ILP / strided /
castout for unary; dense / dense_ilp4 / strided / cast / scalar[_lhs] /
broadcast[_rhs] for binary), bind buffers in the same order with the same byte
layout as `bind_iter_tensors` + `mtl_setArgs`/`mtl_setBytes`, and dispatch the
same grid (`mtl_dispatch1DJob`, or `mtl_dispatch2DJob` for strided unary).
Kernels run on a library from `metal_kernel.compile_shader`, whose calling
convention is torch.mps.compile_shader's: positional argument i is buffer i,
tensors are bound at their storage offset.

`force` mirrors PYTORCH_UNARY_FORCE_FLAVOR / PYTORCH_BINARY_FORCE_FLAVOR
("ilp" or "scalar"), so tests can reach the ILP kernels with small inputs.
The `inner_contiguous` kernels of later PyTorch versions are not registered by
torch 2.13's indexing.h, so the strided path is taken, as 2.13 does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..model.dtypes import METAL_TYPE, SCALAR_TYPE
from .tensor_iter import TensorIter

ILP_PER_THREAD = 4
ILP_DISPATCH_THRESHOLD = 1 << 18
UINT32_MAX = 2**32 - 1
DEFAULT_MAX_THREADS = 1024


def _bytes(values, dtype) -> torch.Tensor:
    """What `mtl_setBytes` puts in a buffer: the exact C layout of the host value."""
    return torch.tensor(values, dtype=dtype)


def _elem(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _is_cpu_scalar(t: torch.Tensor) -> bool:
    # A wrapped Python number: ATen keeps it on the CPU and binds it with setBytes.
    return t.dim() == 0 and getattr(t, "_mk_cpu_scalar", False)


def bind_tensor(t: torch.Tensor) -> torch.Tensor:
    """`mtl_setBuffer`: CPU scalars are passed by value, double narrowed to float."""
    if _is_cpu_scalar(t):
        if t.dtype == torch.float64:
            return t.to(torch.float32)
        if t.dtype == torch.complex128:
            return t.to(torch.complex64)
    return t


@dataclass
class Launch:
    """One recorded kernel launch (for reports and tests)."""

    kernel: str
    threads: list[int]
    group_size: list[int]
    args: list = field(repr=False, default_factory=list)


class MpsHost:
    def __init__(self, lib, force: str | None = None, runner=None):
        self.lib = lib
        self.force = force
        self.runner = runner  # runner(kernel, args, threads, group_size); None: run it plainly
        self.launches: list[Launch] = []

    # --- MetalShaderLibrary helpers ----------------------------------------
    def has_function(self, name: str) -> bool:
        return name in set(dir(self.lib))

    def pipeline_state(self, name: str) -> None:
        """`getPipelineStateForFunc`: fails as MetalShaderLibrary does for a missing kernel."""
        if not self.has_function(name):
            raise RuntimeError(f"Failed to create function state object for: {name}")

    def mtl_dispatch1DJob(self, name: str, args: list, length: int) -> None:
        """`mtl_setArgs(enc, args...)` + `mtl_dispatch1DJob(enc, pso, length)`."""
        self._dispatch_1d(name, args, length)

    def _max_threads(self, kernel) -> int:
        return int(getattr(kernel, "max_threads_per_threadgroup", DEFAULT_MAX_THREADS))

    def _dispatch_1d(self, name: str, args: list, length: int) -> None:
        kernel = getattr(self.lib, name)
        group = max(1, min(length, self._max_threads(kernel)))
        self.launch(Launch(name, [length], [group], args))

    def _dispatch_2d(self, name: str, args: list, inner: int, outer: int) -> None:
        kernel = getattr(self.lib, name)
        max_threads = self._max_threads(kernel)
        tg_x = min(max_threads, inner)
        tg_y = min(max(outer, 1), max(max_threads // tg_x, 1))
        self.launch(Launch(name, [inner, outer], [tg_x, tg_y], args))

    def launch(self, launch: Launch) -> None:
        """The one place a kernel runs: every dispatch of the twin goes through here, so a
        checker (metal_kernel.check(), issue 9) can wrap it, by subclassing or by `runner`."""
        self.launches.append(launch)
        kernel = getattr(self.lib, launch.kernel)
        threads = launch.threads[0] if len(launch.threads) == 1 else launch.threads
        group = launch.group_size[0] if len(launch.group_size) == 1 else launch.group_size
        (self.runner or _run)(kernel, launch.args, threads, group)

    @staticmethod
    def _bind_iter_tensors(it: TensorIter) -> list:
        return [bind_tensor(it.tensor(i)) for i in range(it.ntensors)]

    # --- exec_unary_kernel ---------------------------------------------------
    def exec_unary_kernel(self, it: TensorIter, name: str, ilp_threshold: int | None = None) -> None:
        inp, out = it.input(0), it.output()
        length = it.numel()
        if length == 0:
            return
        contiguous = it.is_contiguous()
        ilp_eligible = out.dtype.is_floating_point or ilp_threshold is not None
        dense_ilp = contiguous and ilp_eligible and length >= (ilp_threshold if ilp_threshold is not None
                                                               else ILP_DISPATCH_THRESHOLD)
        if contiguous and self.force in ("ilp", "scalar"):
            dense_ilp = self.force == "ilp"
        suffix = "strided" if not contiguous else ("dense" if dense_ilp else "dense_scalar")
        kernel = f"{name}_{suffix}_{METAL_TYPE[out.dtype]}_{METAL_TYPE[inp.dtype]}"
        cast_needed = cast_ilp = False
        if not self.has_function(kernel):
            cast_needed = True
            cast_ilp = contiguous and ilp_threshold is not None and length >= ilp_threshold
            if contiguous and self.force == "ilp":
                cast_ilp = True
            suffix = "dense_castout_ilp" if cast_ilp else ("dense_castout" if contiguous else "strided_castout")
            kernel = f"{name}_{suffix}_{METAL_TYPE[inp.dtype]}"
        args = self._bind_iter_tensors(it)
        shape = _bytes(it.shape, torch.int64)
        if cast_needed:
            out_type = SCALAR_TYPE[out.dtype]
            if cast_ilp:
                args.append(_bytes([_elem(out.dtype), out_type, length], torch.int32))
                self._dispatch_1d(kernel, args, -(-length // ILP_PER_THREAD))
            elif contiguous:
                args.append(_bytes([_elem(out.dtype), out_type], torch.int32))
                self._dispatch_1d(kernel, args, length)
            else:
                args += [shape, _bytes(it.strides(1), torch.int64), _bytes(it.strides(0), torch.int64),
                         _bytes([it.ndim, out_type], torch.int32)]
                self._dispatch_2d(kernel, args, it.shape[0], length // it.shape[0])
        elif dense_ilp:
            args.append(_bytes([length], torch.int32))
            self._dispatch_1d(kernel, args, -(-length // ILP_PER_THREAD))
        elif not contiguous:
            args += [shape, _bytes(it.strides(1), torch.int64), _bytes(it.strides(0), torch.int64),
                     _bytes([it.ndim], torch.int32)]
            self._dispatch_2d(kernel, args, it.shape[0], length // it.shape[0])
        else:
            self._dispatch_1d(kernel, args, length)

    # --- exec_binary_kernel --------------------------------------------------
    def exec_binary_kernel(self, it: TensorIter, name: str, ilp_threshold: int | None = None) -> None:
        out = it.output()
        if out.dtype == torch.float64:
            raise ValueError("float64 is not supported on MPS")
        numel = it.numel()
        if numel == 0:
            return
        inp, other = bind_tensor(it.input(0)), bind_tensor(it.input(1))
        cast_needed = inp.dtype != other.dtype
        use_bc = use_scalar = bc_lhs = scalar_lhs = False
        bc_numel = 0
        input_full, other_full = inp.numel() == out.numel(), other.numel() == out.numel()
        input_bc = is_dense_broadcastable(inp, out) and not input_full
        other_bc = is_dense_broadcastable(other, out) and not other_full
        if input_bc and other_full and other.is_contiguous() and out.is_contiguous():
            bc_numel = inp.numel()
            use_scalar, scalar_lhs = (True, True) if bc_numel == 1 else (False, False)
            use_bc, bc_lhs = (not use_scalar), (not use_scalar)
        elif other_bc and input_full and inp.is_contiguous() and out.is_contiguous():
            bc_numel = other.numel()
            use_scalar = bc_numel == 1
            use_bc = not use_scalar
        common = it.common_dtype
        if use_scalar and cast_needed:
            tensor_dtype = other.dtype if scalar_lhs else inp.dtype
            scalar_dtype = inp.dtype if scalar_lhs else other.dtype
            common_real = common.to_real() if common.is_complex else common
            scalar_integral = not scalar_dtype.is_floating_point and not scalar_dtype.is_complex
            if tensor_dtype == common and scalar_integral and common_real == torch.float32:
                if scalar_lhs:
                    inp = inp.to(common)
                else:
                    other = other.to(common)
                cast_needed = False
        ilp_applicable = not use_scalar and not use_bc and it.is_contiguous() and not cast_needed
        threshold = ilp_threshold if ilp_threshold is not None else (
            ILP_DISPATCH_THRESHOLD if out.dtype.is_floating_point else UINT32_MAX)
        dense_ilp = ilp_applicable and numel >= threshold
        if ilp_applicable and self.force in ("ilp", "scalar"):
            dense_ilp = self.force == "ilp"
        o = METAL_TYPE[out.dtype]
        cast_suffix = f"{o}_{METAL_TYPE[common] if out.dtype == torch.bool else o}"
        if use_scalar:
            operand = other if scalar_lhs else inp
            lhs = "_lhs" if scalar_lhs else ""
            kernel = (f"{name}_dense_scalar{lhs}_cast_{cast_suffix}" if cast_needed
                      else f"{name}_dense_scalar{lhs}_{o}_{METAL_TYPE[operand.dtype]}")
        elif use_bc:
            operand = other if bc_lhs else inp
            rhs = "_rhs" if bc_lhs else ""
            kernel = (f"{name}_dense_broadcast{rhs}_cast_{cast_suffix}" if cast_needed
                      else f"{name}_dense_broadcast{rhs}_{o}_{METAL_TYPE[operand.dtype]}")
        else:
            suffix = (f"dense_ilp{ILP_PER_THREAD}" if dense_ilp else "dense") if it.is_contiguous() else "strided"
            kernel = (f"{name}_{suffix}_cast_{cast_suffix}" if cast_needed
                      else f"{name}_{suffix}_{o}_{METAL_TYPE[inp.dtype]}")
        args = self._bind_iter_tensors(it)
        sizes_types = [_elem(inp.dtype), _elem(other.dtype), SCALAR_TYPE[inp.dtype], SCALAR_TYPE[other.dtype]]
        threads = numel
        if use_scalar:
            args[1 if scalar_lhs else 2] = inp if scalar_lhs else other  # rebind (maybe promoted)
            if cast_needed:
                args.append(_bytes(sizes_types, torch.int32))
        elif use_bc:
            args.append(_bytes([bc_numel], torch.int64))
            if cast_needed:
                args.append(_bytes(sizes_types, torch.int32))
        elif it.is_contiguous():
            if dense_ilp:
                args.append(_bytes([numel], torch.int32))
                threads = -(-numel // ILP_PER_THREAD)
            if cast_needed:
                args.append(_bytes(sizes_types, torch.int32))
        else:
            args += [_bytes(it.shape, torch.int64), _bytes(it.strides(0), torch.int64),
                     _bytes(it.strides(1), torch.int64), _bytes(it.strides(2), torch.int64),
                     _bytes([it.ndim, SCALAR_TYPE[inp.dtype], SCALAR_TYPE[other.dtype],
                             SCALAR_TYPE[out.dtype]], torch.int32)]
        self._dispatch_1d(kernel, args, threads)


def _run(kernel, args, threads, group_size) -> None:
    kernel(*args, threads=threads, group_size=group_size)


def is_dense_broadcastable(src: torch.Tensor, into: torch.Tensor) -> bool:
    if not src.is_contiguous() or not into.is_contiguous():
        return False
    checking_squeezable = False
    for d in range(src.dim()):
        if checking_squeezable:
            if src.size(-d - 1) == 1:
                continue
            return False
        checking_squeezable = src.size(-d - 1) != into.size(-d - 1)
    return True


def cpu_scalar(value, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A wrapped number as ATen makes it from a Python scalar (double, long or bool)."""
    if dtype is None:
        dtype = (torch.bool if isinstance(value, bool) else
                 torch.int64 if isinstance(value, int) else torch.float64)
    t = torch.tensor(value, dtype=dtype)
    t._mk_cpu_scalar = True
    return t
