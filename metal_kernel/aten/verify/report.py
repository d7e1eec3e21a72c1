"""What verification found, per math mode and dtype; as text and as JSON.

A dtype passes only when at least one case ran and none failed: zero cases is a
failure, not an "ok". Skipped samples are counted with their reasons, and the
number of distinct input values (bit patterns) the dtype saw is reported, so a
reader can tell a thorough pass from a thin one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch

from .tolerance import Tolerance

SHOWN_FAILURES = 5


@dataclass
class Failure:
    case: str
    detail: str

    def __str__(self) -> str:
        return f"{self.case}: {self.detail}"


@dataclass
class DtypeResult:
    dtype: torch.dtype
    tolerance: Tolerance
    math: str = "exact"
    cases: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count
    max_error: float = 0.0
    kernels: set[str] = field(default_factory=set)
    failures: list[Failure] = field(default_factory=list)
    kernel_errors: list[str] = field(default_factory=list)  # reported through the error buffer
    out_dtype: torch.dtype | None = None  # the result dtype the tolerance applies to
    cpu_less_accurate: int = 0  # elements where the kernel matches the float64 CPU result instead
    cpu_inconsistent: int = 0  # elements whose CPU result depends on the neighbouring element
    checked: bool = False  # the cases ran under metal_kernel.check() (verify/checked.py)
    _seen: list = field(default_factory=list, repr=False)  # input bit patterns not yet counted
    _distinct: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.int64), repr=False)
    _numbers: set = field(default_factory=set, repr=False)  # Python-number operands

    @property
    def name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    @property
    def ok(self) -> bool:
        return self.cases > 0 and not self.failures

    @property
    def distinct_inputs(self) -> int:
        if self._seen:
            self._distinct = torch.unique(torch.cat([self._distinct, *(s.to(torch.int64) for s in self._seen)]))
            self._seen = []
        return self._distinct.numel() + len(self._numbers)

    def saw(self, args) -> None:
        """Record the input values of one case (as bit patterns: -0.0 and NaNs count apart)."""
        for arg in args:
            if isinstance(arg, torch.Tensor):
                if arg.dtype != self.dtype or not arg.numel():
                    continue
                flat = arg.detach().reshape(-1)
                if flat.is_complex():
                    flat = torch.view_as_real(flat.resolve_conj()).reshape(-1)
                bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[flat.element_size()]
                self._seen.append(flat.contiguous().view(bits))  # made unique once, when counted
            elif isinstance(arg, (bool, int, float, complex)):
                self._numbers.add(repr(arg))

    def status(self) -> str:
        return "ok" if self.ok else ("FAIL" if self.failures else "FAIL (no case ran)")

    def to_json(self) -> dict:
        atol, rtol = self.tolerance.effective(self.out_dtype or self.dtype)
        return {"dtype": self.name, "math": self.math, "ok": self.ok, "cases": self.cases,
                "distinct_inputs": self.distinct_inputs,
                "skipped": sum(self.skipped.values()), "skip_reasons": dict(self.skipped),
                "max_error": self.max_error, "atol": atol, "rtol": rtol,
                "tolerance_source": self.tolerance.source, "kernels": sorted(self.kernels),
                "checked": self.checked, "cpu_less_accurate": self.cpu_less_accurate, "cpu_inconsistent": self.cpu_inconsistent,
                "failures": [str(f) for f in self.failures], "kernel_errors": self.kernel_errors}


@dataclass
class VerifyReport:
    op: str
    kernel: str
    results: list[DtypeResult]
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return not self.results or any(not r.ok for r in self.results)

    def render(self) -> str:
        lines = [f"verify {self.op} (kernel '{self.kernel}'):"]
        modes = list(dict.fromkeys(r.math for r in self.results))
        for mode in modes:
            if len(modes) > 1 or mode != "exact":
                lines.append(f" math={mode}:")
            for r in (r for r in self.results if r.math == mode):
                skipped = sum(r.skipped.values())
                reported = f", {len(r.kernel_errors)} kernel-reported errors" if r.kernel_errors else ""
                out = r.out_dtype or r.dtype
                into = f" -> {str(out).removeprefix('torch.')}" if out != r.dtype else ""
                lines.append(f"  {r.name + into:<9} {r.status():<4} {r.cases:5d} cases, {r.distinct_inputs:,} "
                             f"distinct inputs, {skipped} skipped{reported}; max error {r.max_error:.3g}; "
                             f"{r.tolerance.describe(out)}")
                if r.cpu_less_accurate:
                    lines.append(f"      {r.cpu_less_accurate} elements where the kernel matches the CPU op in "
                                 f"float64 and the CPU's {str(out).removeprefix('torch.')} result is off")
                if r.cpu_inconsistent:
                    lines.append(f"      {r.cpu_inconsistent} elements not judged: the CPU op's result for them "
                                 "changes with the neighbouring element (undefined behaviour in the CPU kernel)")
                lines += [f"      {f}" for f in r.failures[:SHOWN_FAILURES]]
                if len(r.failures) > SHOWN_FAILURES:
                    lines.append(f"      ... {len(r.failures) - SHOWN_FAILURES} more failing cases")
                lines += [f"      skipped {n}: {reason}" for reason, n in r.skipped.items()]
        if not self.results:
            lines.append("  FAIL: no dtype was verified")
        first = next((r.kernel_errors[0] for r in self.results if r.kernel_errors), None)
        if first:
            lines.append(f"  kernel-reported error, e.g. {first}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"op": self.op, "kernel": self.kernel, "failed": self.failed, "notes": self.notes,
                "dtypes": [r.to_json() for r in self.results]}
