"""Direct kernels write large outputs with non-temporal stores
(runtime/streaming.py). The variant must compute exactly what the ordinary
loop computes, whatever the alignment of the buffers, and must never be
used for kernels whose stores it could slow down or break.

Which kernels get a variant depends on the vector width the build target
has (AVX2, AVX-512, ...): expectations are derived from it, so the file
passes on any x86-64 CPU and under any METAL_KERNEL_MARCH."""

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel.runtime.binding import Bound
from metal_kernel.runtime.library import _disjoint
from metal_kernel.runtime.pass2 import target_vector_bytes
from metal_kernel.runtime.streaming import MIN_VECTOR_BYTES, add_streaming_variants
from metal_kernel.runtime.toolchain import find_toolchain

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void saxpy(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                  device const float* y [[buffer(2)]], constant float& a [[buffer(3)]],
                  uint i [[thread_position_in_grid]]) {
  out[i] = a * x[i] + y[i];
}
kernel void scale_in_place(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = x[i] * 3.0f + 1.0f;
}
kernel void to_half(device half* out [[buffer(0)]], device const float* x [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  out[i] = half(x[i]);
}
kernel void two_outputs(device int* s [[buffer(0)]], device int* d [[buffer(1)]],
                        device const int* a [[buffer(2)]], device const int* b [[buffer(3)]],
                        uint i [[thread_position_in_grid]]) {
  s[i] = a[i] + b[i];
  d[i] = a[i] - b[i];
}
// A private array: its stores must stay ordinary (no variant at all).
kernel void private_array(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                          constant uint& k [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  float t[8];
  for (uint j = 0; j < 8; ++j) t[j] = x[i] * float(j);
  out[i] = t[k % 8] + t[(k + i) % 8];
}
kernel void wild_write(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (i == 4099) { device float* p = (device float*)16; *p = 1; }
  out[i] = float(i);
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


@pytest.fixture(params=["0", "1"], ids=["ordinary", "streaming"])
def streaming(request, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_STREAMING_STORES", request.param)
    return request.param == "1"


def _view_at(byte_offset: int, n: int, dtype=np.float32) -> np.ndarray:
    """An n-element array starting `byte_offset` bytes past a 64-byte boundary."""
    item = np.dtype(dtype).itemsize
    raw = np.empty(n * item + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + byte_offset
    return raw[start:start + n * item].view(dtype)


def _widest_store(element_bytes: int) -> int:
    """Bytes of the widest store a vectorised loop over float inputs makes
    for outputs of `element_bytes` on this build target."""
    return target_vector_bytes(find_toolchain()) // 4 * element_bytes


def test_simple_direct_kernels_have_a_streaming_variant(lib):
    # float/int outputs: one vector of the target's width per store; half
    # outputs of float inputs: half as wide (16 bytes with AVX2: no variant).
    # (scale_in_place reads the buffer it writes: never streamed, below.)
    for name, element_bytes in (("saxpy", 4), ("to_half", 2), ("two_outputs", 4), ("wild_write", 4)):
        k = getattr(lib, name)
        assert k.execution_mode == "direct"
        assert k.streaming_stores == (_widest_store(element_bytes) >= MIN_VECTOR_BYTES), name


def test_the_target_vector_width_follows_metal_kernel_march(monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_MARCH", "x86-64-v3")  # AVX2
    assert _widest_store(4) == 32 and _widest_store(2) == 16
    monkeypatch.setenv("METAL_KERNEL_MARCH", "x86-64")  # SSE2
    assert _widest_store(4) == 16


def test_a_buffer_the_kernel_reads_is_never_streamed(lib):
    # x[i] = x[i] * 3 + 1: its lines are in the cache already (issue 14).
    assert lib.scale_in_place.execution_mode == "direct"
    assert not lib.scale_in_place.streaming_stores


def test_kernels_with_private_arrays_or_threadgroup_memory_have_none(lib):
    assert not lib.private_array.streaming_stores
    tg = metal_kernel.compile_shader(r"""
    kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]],
                  uint l [[thread_position_in_threadgroup]]) {
      threadgroup float s[64];
      s[l] = float(i);
      out[i] = s[l] * 2.0f;
    }""")
    assert tg.k.execution_mode == "direct"
    assert not tg.k.streaming_stores


def test_streaming_off_at_build_time_builds_no_variant(monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_STREAMING_STORES", "0")
    lib0 = metal_kernel.compile_shader(SOURCE)
    assert not lib0.saxpy.streaming_stores
    out = torch.full((1000,), float("nan"))
    x, y = torch.rand(1000), torch.rand(1000)
    lib0.saxpy(out, x, y, 2.0, threads=1000)
    torch.testing.assert_close(out, 2.0 * x + y)


# 64-byte aligned, 16-byte aligned only, 4-byte aligned only: the three
# paths of each rewritten store. Sizes leave remainders after the vector loop.
@pytest.mark.parametrize("offset", [0, 16, 4, 48])
@pytest.mark.parametrize("n", [4096 + 13, 1000])
def test_saxpy_any_alignment(lib, streaming, offset, n):
    rng = np.random.default_rng(n + offset)
    x = _view_at(offset, n)
    y = _view_at((offset * 3) % 64, n)
    out = _view_at(offset, n)
    x[:] = rng.random(n, dtype=np.float32)
    y[:] = rng.random(n, dtype=np.float32)
    out[:] = np.nan
    lib.saxpy(out, x, y, 1.5, threads=n, group_size=256)
    np.testing.assert_allclose(out, np.float32(1.5) * x + y, rtol=1e-6)


def test_in_place_update(lib, streaming):
    x = torch.rand(70_001)
    want = x * 3.0 + 1.0
    lib.scale_in_place(x, threads=x.numel(), group_size=64)
    torch.testing.assert_close(x, want)


def test_half_outputs_and_unaligned_views(lib, streaming):
    base = torch.full((20_000,), float("nan"), dtype=torch.float16)
    out = base[3:]  # 6 bytes past the storage start
    x = torch.randn(out.numel())
    lib.to_half(out, x, threads=out.numel(), group_size=128)
    assert torch.equal(out, x.half())
    assert torch.isnan(base[:3]).all()  # nothing written before the view


def test_two_outputs_of_different_alignment(lib, streaming):
    n = 9_999
    a = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    b = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    s = torch.full((n + 1,), -0x5A5A5A5A, dtype=torch.int32)[1:]
    d = torch.full((n,), -0x5A5A5A5A, dtype=torch.int32)
    lib.two_outputs(s, d, a, b, threads=n, group_size=32)
    assert torch.equal(s, a + b)
    assert torch.equal(d, a - b)


def test_large_dispatch_uses_the_cache_size_rule(lib, monkeypatch):
    # "auto": buffers beyond the last-level cache take the streaming variant.
    monkeypatch.setenv("METAL_KERNEL_STREAMING_STORES", "auto")
    from metal_kernel.runtime.library import _use_streaming_stores, last_level_cache_bytes

    llc = last_level_cache_bytes()
    assert llc >= 1 << 16
    assert _use_streaming_stores(llc) and not _use_streaming_stores(llc - 1)
    n = max(llc // 8, 1 << 16)  # three n-float buffers: 1.5x the cache
    x, y = torch.rand(n), torch.rand(n)
    out = torch.full((n,), float("nan"))
    lib.saxpy(out, x, y, -2.0, threads=n, group_size=256)
    torch.testing.assert_close(out, -2.0 * x + y)


@pytest.mark.no_metal_check  # faults on purpose (the checker would stop the store)
def test_a_fault_in_the_streaming_variant_names_the_thread(lib, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_STREAMING_STORES", "1")
    out = torch.full((8192,), float("nan"))
    with pytest.raises(metal_kernel.KernelError) as e:
        lib.wild_write(out, threads=8192, group_size=256)
    assert e.value.thread == [4099, 0, 0]
    lib.saxpy(out, torch.ones(8192), torch.ones(8192), 1.0, threads=8192)  # still works
    assert (out == 2).all()


# The transform's rules on a minimal loop (clang's shape: numbered blocks,
# a self loop whose phi names the block being split).
_LOOP_IR = """define void @__mk_fast_0(ptr %0, i64 %1) {
  br label %3

3:
  %4 = phi i64 [ 0, %2 ], [ %7, %3 ]
  %5 = getelementptr inbounds float, ptr %0, i64 %4
  store <16 x float> zeroinitializer, ptr %5, align 4
  store <16 x float> %v, ptr %5, align 4
  {extra}
  %7 = add i64 %4, 16
  %8 = icmp ult i64 %7, %1
  br i1 %8, label %3, label %9

9:
  ret void
}"""


def _transform(extra: str):
    from metal_kernel.runtime.streaming import add_streaming_variants

    return add_streaming_variants(_LOOP_IR.replace("{extra}", extra), [0])


def test_transform_rewrites_wide_stores_and_the_phi_of_the_split_block():
    r = _transform("")
    assert r.symbols == {0}
    clone = r.text[r.text.index("@__mk_stream_0("):]
    assert clone.count("!nontemporal") == 2  # one store has a constant operand: untouched
    assert "align 64, !nontemporal" in clone and "align 16, !nontemporal" in clone
    # the back edge now comes from the block after the split
    assert "[ %7, %mk.nt0.tail ]" in clone and "[ %7, %3 ]" not in clone


@pytest.mark.parametrize("extra", [
    "fence release",
    "%a = atomicrmw add ptr %0, i32 1 monotonic",
    "store atomic i32 1, ptr %0 release, align 4",
    "%p = alloca [8 x float], align 16",
])
def test_transform_leaves_kernels_with_atomics_fences_or_private_arrays(extra):
    assert _transform(extra).symbols == set()


# ---- only buffers a kernel writes and never reads are streamed (issue 14),
# and only when the call's buffers do not overlap (runtime/library.py) ----

# clang's shape of a direct loop: buffer pointers loaded from the launch's
# table (slot 0 loaded twice), the loop reading b and a, writing a and c.
_RMW_IR = """define void @__mk_fast_0(ptr %0, i64 %n) {
  %t = load ptr, ptr %0, align 8
  %a = load ptr, ptr %t, align 8
  %bs = getelementptr inbounds nuw i8, ptr %t, i64 8
  %b = load ptr, ptr %bs, align 8
  %cs = getelementptr inbounds nuw i8, ptr %t, i64 16
  %c = load ptr, ptr %cs, align 8
  %a2 = load ptr, ptr %t, align 8
  {extra}
  br label %3

3:
  %i = phi i64 [ 0, %1 ], [ %next, %3 ]
  %pa = getelementptr inbounds float, ptr %a, i64 %i
  %pa2 = getelementptr inbounds float, ptr %a2, i64 %i
  %pb = getelementptr inbounds float, ptr %b, i64 %i
  %pc = getelementptr inbounds float, ptr %c, i64 %i
  %va = load <16 x float>, ptr %pa2, align 4
  %vb = load <16 x float>, ptr %pb, align 4
  %s = fadd <16 x float> %va, %vb
  store <16 x float> %s, ptr %pa, align 4
  store <16 x float> %vb, ptr %pc, align 4
  %next = add i64 %i, 16
  %more = icmp ult i64 %next, %n
  br i1 %more, label %3, label %9

9:
  ret void
}"""


def _clone(extra: str = "") -> str | None:
    r = add_streaming_variants(_RMW_IR.replace("{extra}", extra), [0])
    if 0 not in r.symbols:
        return None
    return r.text[r.text.index("@__mk_stream_0("):]


def test_only_the_write_only_buffer_is_streamed():
    clone = _clone()
    # c's store: one wide and one 16-byte non-temporal form; a's stays ordinary.
    assert clone.count("!nontemporal") == 2
    assert "ptr %pc, align 64, !nontemporal" in clone
    assert "store <16 x float> %s, ptr %pa, align 4\n" in clone


def test_a_read_it_cannot_trace_turns_streaming_off():
    # A load through an address made from an integer may read any buffer.
    extra = "%raw = inttoptr i64 %n to ptr\n  %q = load float, ptr %raw, align 4"
    assert _clone(extra) is None


def test_a_call_reading_a_buffer_counts_as_a_read():
    extra = "call void @llvm.memcpy.p0.p0.i64(ptr %b, ptr %c, i64 64, i1 false)"
    assert _clone(extra) is None  # c is read by the call: no store left to stream


@pytest.mark.parametrize("mode", ["0", "1", "auto"])
def test_out_of_place_kernel_called_in_place(lib, monkeypatch, mode):
    # out and y the same tensor: the buffers overlap, so no streaming
    # variant (the kernel reads what it writes); the result is right
    # whatever the variant.
    monkeypatch.setenv("METAL_KERNEL_STREAMING_STORES", mode)
    n = 50_001
    x, y = torch.rand(n), torch.rand(n)
    want = 1.5 * x + y
    lib.saxpy(y, x, y, 1.5, threads=n, group_size=256)
    torch.testing.assert_close(y, want)


class _Fake(Bound):
    def __init__(self, spans):
        super().__init__()
        self.ptrs = [p for p, _ in spans]
        self.sizes = [n for _, n in spans]


def test_overlap_rule():
    assert _disjoint(_Fake([(1000, 100), (1100, 50), (4000, 8)]))
    assert not _disjoint(_Fake([(1000, 100), (1099, 50)]))  # one byte shared
    assert not _disjoint(_Fake([(1000, 400), (1100, 50)]))  # one inside the other
    assert _disjoint(_Fake([(0, 100), (1000, 0), (1000, 10)]))  # null and empty buffers are no memory


def test_views_of_one_storage_that_do_not_overlap_are_disjoint():
    base = np.arange(3000, dtype=np.float32)
    b = _Fake([(base[:1000].ctypes.data, 4000), (base[1000:2000].ctypes.data, 4000),
               (base[2000:].ctypes.data, 4000)])
    assert _disjoint(b)
