"""The verifier itself: correct ports pass; corrupted ports (a barrier
dropped, an index swapped, a wrong lane mask, an output not written) fail,
with the first differing element and the thread that wrote it."""

from __future__ import annotations

import numpy as np
import pytest

from metal_kernel.port import port_cuda
from metal_kernel.port.to_metal.verify import compare

from .conftest import KERNELS, poisoned

SOURCE = (KERNELS / "mutants.cu").read_text()
RNG = np.random.default_rng(11)
X = RNG.standard_normal(512).astype(np.float32)
M = RNG.integers(-1000, 1000, 16 * 16).astype(np.int32)
W = RNG.integers(-100, 100, 64).astype(np.int32)


def mutant(old: str, new: str, count: int = 1):
    """The port of mutants.cu with `old` replaced by `new` in the generated Metal."""
    p = port_cuda(SOURCE, filename=str(KERNELS / "mutants.cu"))
    done = 0
    for c in p.chunks:
        if old in c.text:
            c.text = c.text.replace(old, new, count - done)
            done = count
            break
    assert done, f"{old!r} is not in the port"
    return p


@pytest.fixture(scope="module")
def good():
    return port_cuda(SOURCE, filename=str(KERNELS / "mutants.cu"))


def test_correct_port_passes(good):
    assert good.verify("tree_sum", X, poisoned(4), grid=4, block=128).ok
    res = good.verify("transpose", M, poisoned(256, np.int32), 16, grid=(2, 2), block=(8, 8))
    assert res.ok and res.buffers[1].max_abs == 0  # integers: exact
    assert good.verify("warp_sum", W, poisoned(64, np.int32), grid=2, block=32).ok


def test_dropped_barrier_fails():
    p = mutant("    threadgroup_barrier(mem_flags::mem_threadgroup);\n  }", "  }")
    res = p.verify("tree_sum", X, poisoned(4), grid=4, block=128)
    assert not res.ok
    # the checker sees the race on the shared array, or the sum comes out wrong
    assert res.port_findings or not all(b.match for b in res.buffers)
    assert any(f.kind == "race" for f in res.port_findings), str(res)


def test_swapped_index_fails_with_the_element_and_its_thread():
    p = mutant("out[c * n + r] = in[r * n + c]", "out[c * n + r] = in[c * n + r]")
    res = p.verify("transpose", M, poisoned(256, np.int32), 16, grid=(2, 2), block=(8, 8), check=False)
    assert not res.ok and res.ran
    out = res.buffers[1]
    assert not out.match and out.mismatches == 240  # all but the diagonal
    assert out.first_index == 1  # out[0 * 16 + 1], written by (r, c) = (1, 0)
    assert out.thread == (0, 1, 0) and out.block == (0, 0, 0)
    assert out.original == repr(int(M[16])) and out.port == repr(int(M[1]))
    assert "first at [1]" in res.summary()


def test_wrong_lane_mask_fails():
    p = mutant("simd_shuffle_xor(v, ushort((o) & 31))", "simd_shuffle_xor(v, ushort((o) & 15))")
    res = p.verify("warp_sum", W, poisoned(64, np.int32), grid=2, block=32, check=False)
    assert not res.ok and not res.buffers[1].match


def test_output_not_written_fails():
    p = mutant("out[blockIdx.x] = s[0];", ";")
    res = p.verify("tree_sum", X, poisoned(4), grid=4, block=128, check=False)
    assert not res.ok and res.buffers[1].written and not res.buffers[1].match  # NaN poison stays in the port


def test_a_kernel_that_writes_nothing_proves_nothing(good):
    res = good.verify("reads_only", X, poisoned(8), grid=1, block=32)
    assert not res.ok and "prove nothing" in res.summary()


def test_verification_failure_is_a_diagnostic():
    p = mutant("out[c * n + r] = in[r * n + c]", "out[c * n + r] = in[r * n + c] + 1")
    p.verify("transpose", M, poisoned(256, np.int32), 16, grid=(2, 2), block=(8, 8), check=False)
    d = next(d for d in p.diagnostics if d.code == "MK1027")
    assert d.severity == "error" and "transpose" in d.message
    assert p.stats["kernels"]["failed"] >= 1 and p.verified["transpose"] is False


def test_tolerances_per_dtype():
    base = np.linspace(-10, 10, 100).astype(np.float32)
    assert compare("y", 0, poisoned(100), base, base * (1 + 1e-6), False).match
    assert not compare("y", 0, poisoned(100), base, base * (1 + 1e-2), False).match
    ints = np.arange(100, dtype=np.int32)
    assert not compare("i", 0, ints * 0, ints, ints + (ints == 50), False).match  # one off-by-one: fails
    nan_port = base.copy()
    nan_port[3] = np.nan
    rep = compare("y", 0, poisoned(100), base, nan_port, False)
    assert not rep.match and rep.first_index == 3
    both_nan = poisoned(100)
    assert compare("y", 0, poisoned(100), both_nan, both_nan.copy(), False).match  # unwritten by both
    half = base.astype(np.float16)
    assert compare("h", 0, half, half, (half.astype(np.float32) * 1.002).astype(np.float16), False).match


def test_out_of_bounds_inputs_are_reported_not_fatal(good):
    # C = 1024 on 64-element buffers: every thread reads and writes far past them.
    res = good.verify("rows", X[:64].copy(), poisoned(64), 1024, grid=1, block=32)
    assert not res.ok and "in the original" in res.summary()
    assert any(f.kind == "oob" for f in res.original_findings)
