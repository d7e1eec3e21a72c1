"""take on MPS: the host function of Take.mm and its Python twin, from one table.

CPU semantics (TensorAdvancedIndexing.cpp `take_out`): `out` gets `index`'s shape and
`out[i] = self.flatten()[index[i]]`; negative indices count from the end; an index
outside [-numel, numel) raises; `index` must be int64; taking from an empty `self`
raises unless `index` is empty too.

The parts that could drift between the `.mm` and the twin are stated once, as
`host_table` pieces: CHECKS (condition and message), KERNEL_NAME, BIND (the
`mtl_setArgs` order), GRID. The remaining lines are written twice, in the same
order: OUT_BODY (Objective-C++) and `TakeHost.take_out` (Python).

Kernel contract (the `--kernel FILE` must follow it; verification checks it):
host names `take_<value>_<index>` (scalarToMetalTypeString of self and index),
buffers (out, self, index, `constant long& numel`, `device ErrorMessages*`), one
thread per index element. Out-of-range indices are the kernel's to find (the host
cannot read device memory without a sync): it reports them with
`TORCH_REPORT_ERROR(error_buf, ...)`, the host raises at the next synchronize.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from ..model.dtypes import METAL_TYPE, SCALAR_TYPE_NAME
from ..twin.aten_host import assert_no_internal_overlap, assert_no_overlap, resize_output
from ..twin.mps_host import MpsHost
from ..twin.mps_stream import MpsStream
from .host_table import Check, Expr, Text, cpp_args


def _scalar_type(name: str) -> Expr:
    return Expr(f"{name}.scalar_type()", lambda v: SCALAR_TYPE_NAME[getattr(v, name).dtype])


def _device(name: str) -> Expr:
    return Expr(f"{name}.device()", lambda v: str(getattr(v, name).device))


def _metal_type(name: str) -> Expr:
    return Expr(f"scalarToMetalTypeString({name})", lambda v: METAL_TYPE[getattr(v, name).dtype])


def _local(name: str) -> Expr:
    return Expr(name, lambda v: getattr(v, name))


# --- the table --------------------------------------------------------------------------
CHECKS = (
    Check("TORCH_CHECK",
          Expr("index.scalar_type() == ScalarType::Long", lambda v: v.index.dtype == torch.int64),
          Text(("take(): Expected a long tensor for index, but got ", _scalar_type("index")))),
    Check("TORCH_CHECK",
          Expr("self.scalar_type() == out.scalar_type()", lambda v: v.self.dtype == v.out.dtype),
          Text(("take(): self and out expected to have the same dtype, but got self.dtype = ",
                _scalar_type("self"), " and out.dtype = ", _scalar_type("out")))),
    Check("TORCH_CHECK",
          Expr("self.device() == out.device() && self.device() == index.device()",
               lambda v: v.self.device == v.out.device == v.index.device),
          Text(("take(): self, index and out expected to be in the same device, but got self.device = ",
                _device("self"), ", index.device = ", _device("index"), ", and out.device = ",
                _device("out")))),
    Check("TORCH_CHECK_INDEX",
          Expr("!(self.numel() == 0 && index.numel() != 0)",
               lambda v: not (v.self.numel() == 0 and v.index.numel() != 0)),
          Text(("take(): tried to take from an empty tensor",))),
)
KERNEL_NAME = Text(("take_", _metal_type("self_"), "_", _metal_type("index_")))
BIND = (
    _local("output"),
    _local("self_"),
    _local("index_"),
    Expr("numel", lambda v: torch.tensor([v.numel], dtype=torch.int64)),  # const int64_t: 8 bytes
    Expr("stream->getErrorBuffer()", lambda v: v.stream.error_buffer),
)
GRID = Expr("index_.numel()", lambda v: v.index_.numel())
INDEX_DTYPES = (torch.int64,)  # CHECKS[0]: the only index type that reaches a kernel

# --- Objective-C++ ----------------------------------------------------------------------
INCLUDES = """\
#include <ATen/MemoryOverlap.h>
#include <ATen/mps/MPSProfiler.h>
#include <ATen/native/Resize.h>
#include <ATen/native/mps/OperationUtils.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/Functions.h>
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/empty.h>
#include <ATen/ops/take_native.h>
#endif
"""

OUT_BODY = """\
{checks}
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, index);
  at::assert_no_overlap(out, self);
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) {{
    return out;
  }}
  using namespace mps;
  const auto self_ = self.contiguous();
  const auto index_ = index.contiguous();
  auto output = out.is_contiguous() ? out : at::empty(index.sizes(), out.options());
  const int64_t numel = self_.numel();
  MPSStream* stream = getCurrentMPSStream();
  auto pso = lib.getPipelineStateForFunc({kernel_name});
  dispatch_sync_with_rethrow(stream->queue(), ^() {{
    @autoreleasepool {{
      getMPSProfiler().beginProfileKernel(pso, "take", {{self_, index_}});
      auto enc = stream->commandEncoder();
      [enc setComputePipelineState:pso];
      mtl_setArgs(enc, {bind});
      mtl_dispatch1DJob(enc, pso, {grid});
      getMPSProfiler().endProfileKernel(pso);
    }}
  }});
  if (!output.is_same(out)) {{
    out.copy_(output);
  }}
  return out;
"""

FUNCTIONAL_BODY = """\
  auto out = at::empty(index.sizes(), self.options());
  {out_fn}(self, index, out);
  return out;
"""


def render_functions(out_fn: tuple[str, str], functional_fn: tuple[str, str]) -> str:
    """The two host functions; each argument is (C++ name, torchgen definition line)."""
    out_body = OUT_BODY.format(checks="\n".join(c.cpp() for c in CHECKS),
                               kernel_name=KERNEL_NAME.cpp_concat(), bind=cpp_args(BIND),
                               grid=GRID.cpp)
    return (f"{out_fn[1]} {{\n{out_body}}}\n\n"
            f"{functional_fn[1]} {{\n{FUNCTIONAL_BODY.format(out_fn=out_fn[0])}}}\n")


# --- the Python twin ----------------------------------------------------------------------
class TakeHost:
    """`take_out_mps` / `take_mps` of Take.mm, on the kernels of a compiled Take.metal."""

    def __init__(self, lib, stream: MpsStream):
        self.host = MpsHost(lib)
        self.stream = stream

    @property
    def launches(self):
        return self.host.launches

    def take_out(self, input: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        v = SimpleNamespace(self=input, index=index, out=out, stream=self.stream)
        for check in CHECKS:
            check.enforce(v)
        assert_no_internal_overlap(out)
        assert_no_overlap(out, index)
        assert_no_overlap(out, input)
        resize_output(out, index.shape)
        if index.numel() == 0:
            return out
        v.self_ = input.contiguous()
        v.index_ = index.contiguous()
        v.output = out if out.is_contiguous() else torch.empty(index.shape, dtype=out.dtype)
        v.numel = v.self_.numel()
        name = KERNEL_NAME.py(v)
        self.host.pipeline_state(name)
        self.host.mtl_dispatch1DJob(name, [b.py(v) for b in BIND], GRID.py(v))
        self.stream.check_last_error()  # MPSStream::checkLastError at the next synchronize
        if v.output is not out:
            out.copy_(v.output)
        return out

    def take(self, input: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        out = torch.empty(index.shape, dtype=input.dtype, device=input.device)
        self.take_out(input, index, out)
        return out


def host_name(value: torch.dtype, index: torch.dtype) -> str:
    """The kernel name the host builds for these dtypes (KERNEL_NAME, evaluated)."""
    return KERNEL_NAME.py(SimpleNamespace(self_=torch.empty(0, dtype=value),
                                          index_=torch.empty(0, dtype=index)))
