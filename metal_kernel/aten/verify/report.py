"""What verification found, per dtype: cases run, kernels used, failures; text and JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..model import dtypes as dt


@dataclass
class DtypeResult:
    dtype: str
    cases: int = 0
    max_error: float = 0.0
    kernels: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    kernel_errors: list[str] = field(default_factory=list)  # reported through the error buffer

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass
class VerifyReport:
    op: str
    kernel: str
    results: list[DtypeResult]
    exact: bool = False  # compared bit for bit instead of with test_mps tolerances

    @property
    def failed(self) -> bool:
        return any(not r.ok for r in self.results)

    def render(self) -> str:
        lines = [f"verify {self.op} (kernel '{self.kernel}'):"]
        for r in self.results:
            tol = dt.TOLERANCES.get(getattr(torch, r.dtype))
            tol_s = ("exact" if self.exact else f"atol {tol[0]:g} rtol {tol[1]:g}" if tol
                     else "assert_close defaults")
            reported = f"; {len(r.kernel_errors)} kernel-reported errors" if r.kernel_errors else ""
            lines.append(f"  {r.dtype:<9} {'ok  ' if r.ok else 'FAIL'} {r.cases:4d} cases  "
                         f"max error {r.max_error:.3g}  ({tol_s}; {len(r.kernels)} kernels{reported})")
            lines += [f"      {f}" for f in r.failures[:5]]
        first = next((r.kernel_errors[0] for r in self.results if r.kernel_errors), None)
        if first:
            lines.append(f"  kernel-reported error, e.g. {first}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"op": self.op, "kernel": self.kernel, "failed": self.failed,
                "exact": self.exact,
                "dtypes": [{"dtype": r.dtype, "cases": r.cases, "max_error": r.max_error,
                            "kernels": sorted(r.kernels), "failures": r.failures,
                            "kernel_errors": r.kernel_errors} for r in self.results]}


def max_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    if actual.numel() == 0:
        return 0.0
    a, e = actual.detach(), expected.detach()
    if a.is_complex() or e.is_complex():
        a, e = torch.view_as_real(a.resolve_conj()), torch.view_as_real(e.resolve_conj())
    a, e = a.double(), e.double()
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))
    diff = torch.where(same, torch.zeros_like(a), (a - e).abs())
    value = float(diff.max())
    return value if not math.isnan(value) else float("inf")
