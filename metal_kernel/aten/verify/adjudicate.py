"""Before an element where kernel and CPU differ counts as the kernel's fault.

The CPU result is the reference, but the dense sweeps and edge values reach inputs
test_mps never uses, where the CPU op itself can be wrong. Two checks, on the
elements outside the tolerance only:

- accuracy: the CPU op run in float64 (inputs widened, result cast back). Where the
  kernel is within the tolerance of that result, the CPU's lower-precision result is
  what is off (Airy at x = -5000: CPU float32 0.0635, float64 0.0632, kernel 0.0632);
- consistency: the CPU op run on the same inputs once after one canary input and once
  after another. A result that changes with its neighbour comes from undefined
  behaviour in the CPU kernel (special_laguerre_polynomial_l returns the previous
  element's result for NaN x: an uninitialised variable); such elements are not judged.

Both are counted in the report; only what is left fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

CHECKED = 1 << 20  # elements re-examined per case, at most (the rest count as failing)


@dataclass
class Verdict:
    failing: list[int] = field(default_factory=list)  # flat indices the kernel gets wrong
    cpu_less_accurate: int = 0
    cpu_inconsistent: int = 0


def _wide(t):
    """float64 (complex128) operands; integers pass through float32 first, as the op
    (promoting them to the default float dtype) sees them."""
    if not isinstance(t, torch.Tensor) or t.dtype == torch.bool:
        return t
    if t.is_complex():
        return t.to(torch.complex128)
    return (t if t.dtype.is_floating_point else t.to(torch.float32)).to(torch.float64)


def _close(actual, expected, atol, rtol) -> torch.Tensor:
    if actual.is_complex() or expected.is_complex():
        return torch.isclose(actual.to(torch.complex128), expected.to(torch.complex128), rtol=rtol, atol=atol,
                             equal_nan=True)
    if actual.dtype.is_floating_point or expected.dtype.is_floating_point:
        return torch.isclose(actual.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True)
    return actual.to(torch.int64) == expected.to(torch.int64)


def _elements(args, shape, index: torch.Tensor) -> list:
    out = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            out.append(torch.broadcast_to(arg, shape).reshape(-1)[index].clone())
        else:
            out.append(arg)
    return out


def _canary(like: torch.Tensor, value: float) -> torch.Tensor:
    return torch.full((1,), value, dtype=like.dtype) if like.dtype != torch.bool else torch.ones(1, dtype=torch.bool)


def _after(elements, value: float):
    """Each element preceded by a canary input: [c, e0, c, e1, ...]."""
    out = []
    for e in elements:
        if isinstance(e, torch.Tensor):
            c = _canary(e, value).expand(e.numel())
            out.append(torch.stack([c, e], 1).reshape(-1))
        else:
            out.append(e)
    return out


def adjudicate(reference, fn, args, actual, expected, bad: torch.Tensor, atol: float, rtol: float) -> Verdict:
    """`reference(*args)` is the CPU result as the comparison computed it, `fn` the CPU op."""
    verdict = Verdict()
    checked, rest = bad[:CHECKED], bad[CHECKED:]
    verdict.failing += rest.tolist()  # beyond the budget: judged as they stand
    elems = _elements(args, actual.shape, checked)
    got = actual.reshape(-1)[checked]
    unsure = torch.zeros(checked.numel(), dtype=torch.bool)
    try:
        first = reference(*_after(elems, 0.5))[1::2]
        second = reference(*_after(elems, 2.0))[1::2]
        unsure = ~_close(first, second, 0.0, 0.0)
    except Exception:  # the op rejects the rearranged inputs: no consistency verdict
        pass
    better = torch.zeros_like(unsure)
    if expected.dtype.is_floating_point or expected.is_complex():
        try:
            wide = fn(*[_wide(e) for e in elems]).to(expected.dtype)
            better = _close(got, wide, atol, rtol)
        except Exception:  # no float64 CPU kernel
            pass
    verdict.cpu_inconsistent = int(unsure.sum())
    verdict.cpu_less_accurate = int((better & ~unsure).sum())
    verdict.failing = checked[~unsure & ~better].tolist() + verdict.failing
    return verdict
