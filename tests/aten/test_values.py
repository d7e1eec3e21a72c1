"""The per-dtype edge values and dense sweeps verification feeds the kernels."""

import math

import torch

from metal_kernel.aten.verify.values import LARGE_LIMIT, dense_sweep, edge_values


def bits(t: torch.Tensor) -> set:
    return set(t.view({2: torch.int16, 4: torch.int32}[t.element_size()]).tolist())


def test_float_edge_values_hold_the_special_values():
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        values = edge_values(dtype)
        info = torch.finfo(dtype)
        listed = values.tolist()
        assert math.inf in listed and -math.inf in listed and any(math.isnan(v) for v in listed)
        assert info.max in listed and -info.max in listed and info.smallest_normal in listed
        subnormal = torch.tensor(0.0, dtype=dtype).nextafter(torch.tensor(1.0, dtype=dtype)).item()
        assert subnormal in listed and -subnormal in listed
        zero, negative_zero = torch.tensor(0.0, dtype=dtype), torch.tensor(-0.0, dtype=dtype)
        assert bits(zero.reshape(1)) <= bits(values) and bits(negative_zero.reshape(1)) <= bits(values)
        assert {1.0, -1.0, 0.5, 2.0} <= set(listed)


def test_domain_ends_and_their_neighbours():
    values = edge_values(torch.float32, (0, 1)).tolist()
    for end in (0.0, 1.0):
        t = torch.tensor(end)
        assert t.nextafter(torch.tensor(-1.0)).item() in values and t.nextafter(torch.tensor(2.0)).item() in values
    assert 0.5 in values and 1.0 in values


def test_integer_edges_and_limits():
    assert edge_values(torch.int8).tolist() == sorted(set(edge_values(torch.int8).tolist()))
    assert {-128, 127, 0, 1, -1} <= set(edge_values(torch.int8).tolist())
    assert edge_values(torch.bool).tolist() == [False, True]
    assert max(abs(v) for v in edge_values(torch.int32, limit=65536).tolist()) <= 65536


def test_dense_sweeps_cover_every_small_dtype_and_10000_values_otherwise():
    for dtype in (torch.float16, torch.bfloat16):
        assert len(bits(dense_sweep(dtype))) == 65536  # every bit pattern
    assert dense_sweep(torch.int16).unique().numel() == 65536
    assert dense_sweep(torch.uint8).unique().numel() == 256 and dense_sweep(torch.int8).unique().numel() == 256
    f32 = dense_sweep(torch.float32, (0, 1))
    assert f32.numel() >= 65536 + 10_001
    exponents = set(((f32.view(torch.int32) >> 23) & 0xFF).tolist())
    assert len(exponents) == 256  # every binade, subnormals, inf and NaN included
    assert dense_sweep(torch.int64).unique().numel() >= 10_000


def test_the_large_value_limit_keeps_specials():
    swept = dense_sweep(torch.float16, limit=LARGE_LIMIT)
    finite = swept[torch.isfinite(swept)]
    assert finite.abs().max().item() <= LARGE_LIMIT and torch.isinf(swept).any() and torch.isnan(swept).any()
