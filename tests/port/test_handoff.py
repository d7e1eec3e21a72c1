"""MK1040: a kernel that hands device memory to another thread block with
__threadfence() and an atomic (a last-block sum) ports to Metal with what
Metal's model needs on top (coherent(device) buffers, a fence after the
atomic), and verify proves it; a port without either part fails verify."""

from __future__ import annotations

import numpy as np
import pytest

from metal_kernel.port import port_cuda

from .conftest import poisoned

SOURCE = """
__global__ void block_sums(const float* x, float* partial, unsigned* count, float* out, int n) {
  __shared__ unsigned ticket;
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
  partial[blockIdx.x * blockDim.x + threadIdx.x] = v;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) ticket = atomicAdd(count, 1u);
  __syncthreads();
  if (ticket == gridDim.x - 1) {
    float s = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) s += partial[b * blockDim.x + threadIdx.x];
    out[threadIdx.x] = s;
  }
}
"""
GRID, BLOCK, N = 6, 16, 1000
X = np.random.default_rng(3).standard_normal(N).astype(np.float32)


def _args():
    return (X, poisoned(GRID * BLOCK), np.zeros(1, np.uint32), poisoned(BLOCK), N)


def _port(old: str = "", new: str = "", source: str = SOURCE):
    p = port_cuda(source, filename="handoff.cu")
    if old:
        hits = [c for c in p.chunks if old in c.text]
        assert hits, f"{old!r} is not in the port"
        for c in hits:
            c.text = c.text.replace(old, new)
    return p


def test_the_port_is_coherent_and_acquires_and_verifies():
    p = _port()
    assert [d.code for d in p.diagnostics] == ["MK1040"]
    assert "coherent(device) device float* partial" in p.metal
    assert "mk_acquire(atomic_fetch_add_explicit" in p.metal
    assert "const float* x" in p.metal and "coherent(device) device const" not in p.metal  # read-only: as is
    # only what is read after the ticket: not the counter, not the output
    assert "coherent(device) device unsigned* count" not in p.metal
    assert "coherent(device) device float* out" not in p.metal
    res = p.verify("block_sums", *_args(), grid=GRID, block=BLOCK)
    assert res.ok, str(res)
    assert not res.original_findings and not res.port_findings


@pytest.mark.parametrize("old,new,hint", [
    ("mk_acquire(atomic_fetch_add_explicit", "(atomic_fetch_add_explicit", "no device-scope fence after it"),
    ("coherent(device) device float* partial", "device float* partial", "not declared coherent(device)"),
], ids=["no-acquire", "not-coherent"])
def test_a_port_missing_part_of_the_handoff_fails_verify(old, new, hint):
    res = _port(old, new).verify("block_sums", *_args(), grid=GRID, block=BLOCK)
    assert not res.ok and not res.original_findings
    races = [f for f in res.port_findings if f.kind == "race"]
    assert races and any(hint in " ".join(f.details) for f in races), str(res)


def test_without_the_original_s_fence_both_sides_race():
    p = _port(source=SOURCE.replace("__threadfence();", ""))
    assert "MK1040" not in [d.code for d in p.diagnostics] and "mk_acquire" not in p.metal
    res = p.verify("block_sums", *_args(), grid=GRID, block=BLOCK)
    assert not res.ok
    assert any(f.kind == "race" for f in res.original_findings)
    assert any(f.kind == "race" for f in res.port_findings)
