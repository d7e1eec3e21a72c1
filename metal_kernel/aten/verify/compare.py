"""Compare a kernel's result with the CPU's as test_mps does, and name the inputs that differ.

test_mps's TestConsistency calls `self.assertEqual(cpu_out, mps_out, atol=atol,
rtol=rtol)` of torch's TestCase: same dtype required, NaN equal to NaN, strides
ignored, None tolerances meaning the dtype's defaults. The same method runs here
(`TestCase().assertEqual`). When it fails, the elements outside the tolerance are
located (adjudicate.py then rules out the CPU's own faults) and reported with the
input values that produced them.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

SHOWN = 3  # failing elements quoted per case


@lru_cache(maxsize=1)
def _test_case():
    from torch.testing._internal.common_utils import TestCase

    return TestCase()


def _real(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().resolve_conj()
    return torch.view_as_real(t) if t.is_complex() else t


def max_error(actual: torch.Tensor, expected: torch.Tensor, exclude=None) -> float:
    """Largest |actual - expected| (equal infinities and NaNs count 0), leaving out the
    flat indices `exclude` (elements set aside by adjudicate.py)."""
    if actual.numel() == 0 or actual.shape != expected.shape:
        return 0.0
    if exclude:
        keep = torch.ones(actual.numel(), dtype=torch.bool)
        keep[torch.tensor(exclude)] = False
        actual, expected = actual.reshape(-1)[keep], expected.reshape(-1)[keep]
        if not actual.numel():
            return 0.0
    wide = torch.float64 if torch.float64 in (actual.dtype, expected.dtype) or not \
        actual.dtype.is_floating_point else torch.float32
    a, e = _real(actual).to(wide), _real(expected).to(wide)
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))
    diff = torch.where(same, 0.0, (a - e).abs())
    value = float(diff.max())
    return value if not math.isnan(value) else math.inf


def _format(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value) if not math.isfinite(value) else f"{value:.9g}"
    if isinstance(value, complex):
        return f"({_format(value.real)}{value.imag:+.9g}j)"
    return str(value)


def _mismatches(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Flat indices of the elements assertEqual rejects."""
    if actual.is_complex() or expected.is_complex():
        a, e = actual.resolve_conj(), expected.resolve_conj()
        bad = ~torch.isclose(a.to(torch.complex128), e.to(torch.complex128), rtol=rtol, atol=atol, equal_nan=True)
    elif actual.dtype.is_floating_point or expected.dtype.is_floating_point:
        bad = ~torch.isclose(actual.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = actual.to(torch.int64) != expected.to(torch.int64)
        if actual.dtype == torch.uint64 or expected.dtype == torch.uint64:
            bad = actual.double() != expected.double()
    return bad.reshape(-1).nonzero().reshape(-1)


def _inputs_at(args, shape, index: int, names) -> str:
    parts = []
    for name, arg in zip(names, args):
        if isinstance(arg, torch.Tensor):
            value = torch.broadcast_to(arg, shape).reshape(-1)[index].item() if arg.numel() else None
        else:
            value = arg
        parts.append(f"{name}={_format(value)}")
    return ", ".join(parts)


def compare(actual, expected, atol, rtol, effective) -> tuple[str | None, torch.Tensor | None]:
    """(None, None) if test_mps's assertEqual accepts `actual`; else (what it says, the flat
    indices of the elements outside the tolerance, or None when the whole result is wrong:
    its dtype or shape).

    `atol`/`rtol` are what test_mps passes (None: defaults), `effective` the numbers
    they stand for, used to locate the failing elements.
    """
    try:
        _test_case().assertEqual(expected, actual, atol=atol, rtol=rtol)
        return None, None
    except AssertionError as err:
        first = str(err).strip().splitlines()[0]
    if not isinstance(actual, torch.Tensor) or actual.dtype != expected.dtype or actual.shape != expected.shape:
        what = (f"result dtype {actual.dtype}, CPU returns {expected.dtype}"
                if isinstance(actual, torch.Tensor) and actual.dtype != expected.dtype else first)
        return what, None
    return first, _mismatches(actual, expected, *effective)


def describe(actual, expected, bad: list[int], args, names) -> str:
    """The first failing elements, each with the inputs that produced it."""
    flat_a, flat_e = actual.reshape(-1), expected.reshape(-1)
    quoted = [f"{_inputs_at(args, actual.shape, i, names)}: expected {_format(flat_e[i].item())}, "
              f"got {_format(flat_a[i].item())}" for i in bad[:SHOWN]]
    more = f" ({len(bad)} of {actual.numel()} elements differ)" if len(bad) > 1 else ""
    return "; ".join(quoted) + more
