"""Input values that find bugs OpInfo's random samples miss, per dtype.

- `edge_values`: a fixed set per dtype: +-0, +-inf, NaN, the smallest subnormal,
  the smallest normal, the dtype's max and min, values around 0 and +-1, and the
  ends of the op's OpInfo `domain` with their neighbours on both sides (for
  special.ndtri's (0, 1): 0, 1 and the floats just inside and outside them);
- `dense_sweep`: at least 10,000 values (or every value of a small dtype): every
  half and bfloat16 bit pattern, 65,536 float32 values spread over every
  exponent and sign plus a linear sweep of a finite domain, all int8/uint8/int16
  values, and for wider integers every value in [-5000, 5000] plus powers of two,
  their neighbours and the extremes.

When an op's OpInfo skips `test_reference_numerics_large` (the CPU op is known
to be inaccurate for large arguments), values stay within +-LARGE_LIMIT (integer
ones too: the op computes on them as floats): OpInfo's large-value tests start at 501. Binary ops take finite edge values
within +-BINARY_LIMIT: an operand may be a loop count (a Laguerre polynomial of
order 2^31 runs 2^31 steps on the CPU, tens of seconds), and what a float beyond
int64 converts to differs between x86 (INT64_MIN) and ARM (saturation).
"""

from __future__ import annotations

import math

import torch

LARGE_LIMIT = 500.0
BINARY_LIMIT = 65536
SEED = 20130


def _float_edges(dtype: torch.dtype) -> list[float]:
    info = torch.finfo(dtype)
    eps = info.eps
    values = [0.0, -0.0, math.inf, -math.inf, math.nan,
              info.smallest_normal, -info.smallest_normal, info.max, -info.max,
              1.0, -1.0, 1.0 + eps, 1.0 - eps / 2, -1.0 - eps, -1.0 + eps / 2,
              0.5, -0.5, 2.0, -2.0, 1e-3, -1e-3, 3.0, -3.0, 10.0, -10.0, 100.0, -100.0]
    subnormal = torch.tensor(0.0, dtype=dtype).nextafter(torch.tensor(1.0, dtype=dtype)).item()
    return values + [subnormal, -subnormal]


def _neighbours(value: float, dtype: torch.dtype) -> list[float]:
    t = torch.tensor(value, dtype=dtype)
    return [t.item(), t.nextafter(torch.tensor(-math.inf, dtype=dtype)).item(),
            t.nextafter(torch.tensor(math.inf, dtype=dtype)).item()]


def _int_edges(dtype: torch.dtype) -> list[int]:
    if dtype == torch.bool:
        return [False, True]
    info = torch.iinfo(dtype)
    values = [0, 1, 2, 3, 10, 100, info.max, info.max - 1, info.min, info.min + 1]
    if info.min < 0:
        values += [-1, -2, -3, -10, -100]
    return [v for v in values if info.min <= v <= info.max]


def edge_values(dtype: torch.dtype, domain=(None, None), limit: float | None = None) -> torch.Tensor:
    if dtype.is_complex:
        real = _float_edges(torch.float32 if dtype == torch.complex64 else torch.float16)
        parts = [v for v in real if not math.isfinite(v) or abs(v) <= 10.0]
        return torch.tensor([complex(a, b) for a in parts[::2] for b in parts[1::3]], dtype=dtype)
    if not dtype.is_floating_point:
        values = _int_edges(dtype)
        lo, hi = domain
        for end in (lo, hi):
            if end is not None and dtype != torch.bool:
                values += [math.floor(end) - 1, math.floor(end), math.ceil(end), math.ceil(end) + 1]
        if dtype != torch.bool:
            info = torch.iinfo(dtype)
            values = [v for v in values if info.min <= v <= info.max and (limit is None or abs(v) <= limit)]
        return torch.tensor(sorted(set(values)), dtype=dtype)
    values = _float_edges(dtype)
    for end in domain:
        if end is not None:
            values += _neighbours(float(end), dtype)
    if all(end is not None for end in domain):
        values.append((domain[0] + domain[1]) / 2)
    if limit is not None:
        values = [v for v in values if not math.isfinite(v) or abs(v) <= limit]
    return torch.tensor(values, dtype=dtype)


def dense_sweep(dtype: torch.dtype, domain=(None, None), limit: float | None = None) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype in (torch.float16, torch.bfloat16):
        values = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(dtype)
    elif dtype == torch.float32:
        gen = torch.Generator().manual_seed(SEED)
        high = torch.arange(1 << 16, dtype=torch.int64) << 16
        low = torch.randint(0, 1 << 16, (1 << 16,), generator=gen, dtype=torch.int64)
        values = ((high | low) - (1 << 32) * ((high | low) >= (1 << 31))).to(torch.int32).view(torch.float32)
        lo, hi = domain
        if lo is not None and hi is not None:
            values = torch.cat([values, torch.linspace(lo, hi, 10_001, dtype=torch.float32)])
    elif dtype.is_complex:
        real = dense_sweep(torch.float32, domain, limit if limit is not None else 1e4)[:: 1 << 6]
        real = real[torch.isfinite(real)][:128]
        values = torch.complex(real.repeat_interleave(real.numel()), real.repeat(real.numel())).to(dtype)
    elif torch.iinfo(dtype).bits <= 16:
        info = torch.iinfo(dtype)
        values = torch.arange(info.min, info.max + 1, dtype=torch.int64).to(dtype)
    else:
        info = torch.iinfo(dtype)
        powers = [s * (1 << k) + d for k in range(info.bits - 1) for s in (1, -1) for d in (-1, 0, 1)]
        extra = [info.min, info.min + 1, info.max - 1, info.max] + powers
        values = torch.cat([torch.arange(-5000, 5001, dtype=torch.int64),
                            torch.tensor([v for v in extra if info.min <= v <= info.max], dtype=torch.int64)])
        values = values.to(dtype)
    if limit is not None and dtype != torch.bool and not dtype.is_complex:
        wide = values.double()
        values = values[~(wide.abs() > limit) | ~torch.isfinite(wide)]
    return values
