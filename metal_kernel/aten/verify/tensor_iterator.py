"""Emulated verification of an op's generated Metal kernels against the CPU op.

The kernels file the op was added to is compiled with `metal_kernel.compile_shader`
(against the checkout's `c10/metal` headers); every OpInfo sample of every
dtype the op is instantiated for then runs through `MpsHost` — the Python twin
of `exec_unary_kernel` / `exec_binary_kernel` — in several layouts (as given,
non-contiguous, column-major, strided `out=`, castout `out=`, forced ILP flavor,
Python-scalar operands for Scalar overloads) and is compared with the CPU op
under test_mps's tolerances: fp16 (atol 2e-2, rtol 1e-2), bf16 (5e-2, 5e-2),
assert_close defaults otherwise. dtypes the CPU op lacks (half/bfloat16 for
some special functions) are compared with the float32 CPU result cast down.
Ops with a host recipe (take) are verified by recipe.py instead.
"""

from __future__ import annotations

import torch

from ..model import dtypes as dt
from ..twin.mps_host import MpsHost, cpu_scalar
from .report import DtypeResult, max_error
from ..twin.tensor_iter import TensorIter


def _as_number(t: torch.Tensor):
    return t.reshape(-1)[0].item()


def _noncontiguous_out(shape, dtype) -> torch.Tensor | None:
    if len(shape) == 0:
        return None
    return torch.empty(*shape[:-1], shape[-1] * 2, dtype=dtype)[..., ::2]


def _column_major(t):
    return t.mT.contiguous().mT if isinstance(t, torch.Tensor) and t.dim() >= 2 else t


class Verifier:
    def __init__(self, lib, kernel: str, arity: str, fn, cpu_dtypes, scalar_overloads: bool):
        self.lib, self.kernel, self.arity, self.fn = lib, kernel, arity, fn
        self.cpu_dtypes = cpu_dtypes
        self.scalar_overloads = scalar_overloads

    def reference(self, args, dtype, out_dtype=None):
        if dtype in self.cpu_dtypes:
            res = self.fn(*args)
        else:  # CPU lacks this dtype: compute in float32, cast down
            up = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
            res = self.fn(*up).to(dtype)
        return res.to(out_dtype) if out_dtype is not None else res

    def emulate(self, args, out, out_dtype, common, force):
        tensors = [a if isinstance(a, torch.Tensor) else cpu_scalar(a) for a in args]
        it = TensorIter(out, tensors, out_dtype, common)
        host = MpsHost(self.lib, force=force)
        if self.arity == "unary":
            host.exec_unary_kernel(it, self.kernel)
        else:
            host.exec_binary_kernel(it, self.kernel)
        return it.output(), [launch.kernel for launch in host.launches]

    def cases(self, sample, dtype):
        """(label, args, out or None, out dtype or None, force flavor)."""
        args = [sample.input, *sample.args][: 1 if self.arity == "unary" else 2]
        yield "as given", args, None, None, None
        yield "forced ILP", args, None, None, "ilp"
        nc = sample.noncontiguous()
        yield "non-contiguous", [nc.input, *nc.args][: len(args)], None, None, None
        yield "column-major", [_column_major(a) for a in args], None, None, None
        yield "strided out=", args, "noncontiguous", None, None
        if self.arity == "unary" and dtype.is_floating_point:
            yield "castout out=", args, "contiguous", (torch.float32 if dtype != torch.float32
                                                       else torch.float16), None
        if self.scalar_overloads and self.arity == "binary":
            a, b = args
            if isinstance(b, torch.Tensor) and b.numel():
                yield "Scalar rhs", [a, _as_number(b)], None, None, None
            if isinstance(a, torch.Tensor) and a.numel():
                yield "Scalar lhs", [_as_number(a), b], None, None, None

    def run_dtype(self, infos, dtype) -> DtypeResult:
        result = DtypeResult(dt.short_name(dtype))
        atol, rtol = dt.TOLERANCES.get(dtype, (None, None))
        for info in infos:
            for sample in info.sample_inputs("cpu", dtype):
                if sample.kwargs:
                    continue
                for label, args, out_kind, out_dtype, force in self.cases(sample, dtype):
                    expected = self.reference(args, dtype, out_dtype)
                    out = None
                    if out_kind == "noncontiguous":
                        out = _noncontiguous_out(expected.shape, expected.dtype)
                        if out is None:
                            continue
                    elif out_kind == "contiguous":
                        out = torch.empty(expected.shape, dtype=out_dtype)
                    common = self.reference(args, dtype).dtype
                    actual, kernels = self.emulate(args, out, expected.dtype, common, force)
                    result.cases += 1
                    result.kernels.update(kernels)
                    result.max_error = max(result.max_error, max_error(actual, expected))
                    try:
                        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol,
                                                   equal_nan=True, check_stride=False)
                    except AssertionError as err:
                        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args]
                        first = str(err).strip().splitlines()[0]
                        result.failures.append(f"{label} {shapes} via {', '.join(kernels)}: {first}")
        return result
