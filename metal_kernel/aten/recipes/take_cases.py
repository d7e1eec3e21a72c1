"""What take is asked during verification, per dtype.

From each OpInfo sample: as given, non-contiguous, transposed self, out= to be
resized, strided out=, and every index of `self` in both signs. Error cases (once
per dtype): indices past either end (the kernel must report them), an int32 index,
an empty `self`, a mismatched out= dtype, and the OpInfo error inputs (aliased out=).
A case is (label, args, out); `shared` cases hand the same tensors to the CPU op and
the twin, because their aliasing is the point.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch.testing import make_tensor


@dataclass
class Case:
    label: str
    args: tuple
    out: torch.Tensor | None = None
    shared: bool = False


def _strided(shape, dtype) -> torch.Tensor:
    return torch.empty(*shape[:-1], shape[-1] * 2, dtype=dtype)[..., ::2]


def sample_cases(sample, dtype):
    x, index = sample.input.detach(), sample.args[0]
    yield Case("as given", (x, index))
    nc = sample.noncontiguous()
    yield Case("non-contiguous", (nc.input.detach(), nc.args[0]))
    if x.dim() >= 2:
        yield Case("transposed self", (x.mT, index))
    yield Case("out= resized", (x, index), torch.empty(0, dtype=dtype))
    if index.dim() >= 1:
        yield Case("strided out=", (x, index), _strided(index.shape, dtype))
    if x.numel():
        n = x.numel()
        yield Case("every index, both signs", (x, torch.arange(-n, n).reshape(2, n)))


def error_cases(dtype, infos):
    x = make_tensor((3, 3), dtype=dtype, device="cpu")
    yield Case("index past the end", (x, torch.tensor([0, 9, 1])))
    yield Case("index before the start", (x, torch.tensor([[4], [-10]])))
    yield Case("indices past both ends", (x, torch.tensor([12, 0, -20])))
    yield Case("int32 index", (x, torch.tensor([0], dtype=torch.int32)))
    yield Case("empty self", (torch.empty(0, dtype=dtype), torch.tensor([0])))
    other = torch.int64 if dtype != torch.int64 else torch.float32
    yield Case("out= of another dtype", (x, torch.tensor([0])), torch.empty(1, dtype=other))
    for info in infos:
        if info.error_inputs_func is None:
            continue
        for n, error in enumerate(info.error_inputs("cpu")):
            s = error.sample_input
            if s.input.dtype == dtype:
                yield Case(f"OpInfo error input {n}", (s.input, *s.args), s.kwargs.get("out"), shared=True)


_OUT_OF_RANGE = re.compile(r"^out of range: tried to access index (-?\d+) on a tensor of (\d+) elements\.$")


def kernel_error_matches(case: Case, cpu_err: Exception, kernel_err: Exception) -> bool:
    """A kernel-reported error stands for the CPU's only where the CPU raised IndexError
    for an out-of-range index, and the kernel names one of the case's out-of-range
    indices in the CPU's words (threads race, so it may report another than the CPU's
    first)."""
    if not isinstance(cpu_err, IndexError) or not _OUT_OF_RANGE.match(str(cpu_err)):
        return False
    x, index = case.args[0], case.args[1]
    n = x.numel()
    bad = {int(i) for i in index.reshape(-1).tolist() if not -n <= i < n}
    return str(kernel_err) in {f"out of range: tried to access index {i} on a tensor of {n} elements."
                               for i in bad}
