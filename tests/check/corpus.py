"""The checker's corpus: kernels written the way real code is (reductions,
scans, transposes, softmax, histograms, tiled matmuls, c10-style
kernels), each buggy one with the kind of finding it must produce and its
buggy line marked `// BUG`, and clean ones that must produce none.

Every case is `Case(kernel source, run)`; `run(lib)` makes the dispatches
(small sizes: the suite runs them all). The kernels of one list share a
library, so the corpus compiles in a few builds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"


@dataclass
class Case:
    name: str  # the kernel's name
    kind: str  # the finding it must produce ("" for a clean kernel)
    source: str
    run: Callable


def f32(*shape, fill=None, seed=0):
    if fill is not None:
        return torch.full(shape, float(fill))
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * 2 - 1


def i32(*shape, fill=0):
    return torch.full(shape, fill, dtype=torch.int32)


def poison(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype) if dtype.is_floating_point else \
        torch.full(shape, -7, dtype=dtype)


_FENCE = "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);"


def _last_block(name: str, coherent=True, release=True, acquire=True, counters=1, bug="read") -> Case:
    """A last-block sum (the other groups' partials, read by the group that
    takes the last ticket) with one part of the hand-off left out; `bug`
    marks the racing write or read ("": a clean kernel)."""
    mark = {side: "  // BUG" if bug == side else "" for side in ("write", "read")}
    src = f"""
kernel void {name}({"coherent(device) " if coherent else ""}device float* partial [[buffer(0)]],
                 device atomic_uint* count [[buffer(1)]], device float* out [[buffer(2)]],
                 uint g [[threadgroup_position_in_grid]], uint t [[thread_position_in_threadgroup]],
                 uint ng [[threadgroups_per_grid]], uint nt [[threads_per_threadgroup]]) {{
  threadgroup uint last;
  partial[g * nt + t] = float(g * nt + t);{mark["write"]}
  {_FENCE if release else ""}
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (t == 0) {{
    last = atomic_fetch_add_explicit(count + g % {counters}, 1u, memory_order_relaxed);
    {_FENCE if acquire else ""}
  }}
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (last == ng / {counters} - 1) {{
    float s = 0;
    for (uint j = 0; j < ng; ++j) s += partial[j * nt + t];{mark["read"]}
    out[t] = s;
  }}
}}"""
    return Case(name, "race" if bug else "", src, lambda lib: getattr(lib, name)(
        poison(64), i32(counters), poison(8), threads=64, group_size=8))



def _two_level(name: str, carry=True) -> Case:
    """Two levels of tickets: the last group of each row of four takes one
    of the grid's; the last of those sums every group's partials, the other
    rows' ordered only through their last groups, which must fence between
    their two tickets (`carry`) for the order to pass on."""
    between = _FENCE if carry else ""
    bug = "" if carry else "  // BUG"
    src = f"""
kernel void {name}(coherent(device) device float* partial [[buffer(0)]], device atomic_uint* rows [[buffer(1)]],
                 device atomic_uint* total [[buffer(2)]], device float* out [[buffer(3)]],
                 uint g [[threadgroup_position_in_grid]], uint t [[thread_position_in_threadgroup]],
                 uint ng [[threadgroups_per_grid]], uint nt [[threads_per_threadgroup]]) {{
  threadgroup uint row_last, last;
  partial[g * nt + t] = float(g * nt + t);
  {_FENCE}
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (t == 0) {{
    row_last = atomic_fetch_add_explicit(rows + g / 4, 1u, memory_order_relaxed);
    atomic_thread_fence(mem_flags::mem_device, memory_order_acquire, thread_scope_device);
  }}
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (row_last != 3) return;
  if (t == 0) {{
    {between}
    last = atomic_fetch_add_explicit(total, 1u, memory_order_relaxed);
    {_FENCE}
  }}
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (last != ng / 4 - 1) return;
  float s = 0;
  for (uint j = 0; j < ng; ++j) s += partial[j * nt + t];{bug}
  out[t] = s;
}}"""
    return Case(name, "" if carry else "race", src, lambda lib: getattr(lib, name)(
        poison(64), i32(2), i32(1), poison(8), threads=64, group_size=8))

# ------------------------------------------------------------------ buggy --

BUGGY = [
    # ---- out of bounds (memcheck) ----
    Case("oob_shift", "oob", """
kernel void oob_shift(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  y[i + 1] = x[i];  // BUG
}""", lambda lib: lib.oob_shift(f32(100), poison(100), threads=100, group_size=32)),
    Case("oob_reduce_unguarded", "oob", """
kernel void oob_reduce_unguarded(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                 uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                                 uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];  // BUG
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = 32; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) out[tg] = s[0];
}""", lambda lib: lib.oob_reduce_unguarded(f32(100), poison(2), threads=128, group_size=64)),
    Case("oob_transpose_swapped", "oob", """
kernel void oob_transpose_swapped(device const float* a [[buffer(0)]], device float* b [[buffer(1)]],
                                  constant uint2& dims [[buffer(2)]], uint2 p [[thread_position_in_grid]]) {
  // a is rows x cols (dims = rows, cols); b is cols x rows: its row stride is rows, not cols
  b[p.x * dims.y + p.y] = a[p.y * dims.y + p.x];  // BUG
}""", lambda lib: lib.oob_transpose_swapped(f32(8 * 24), poison(24 * 8), np.array([8, 24], np.uint32),
                                            threads=[24, 8], group_size=[8, 8])),
    Case("oob_tile_edge", "oob", """
kernel void oob_tile_edge(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                          device float* c [[buffer(2)]], constant uint& n [[buffer(3)]],
                          uint2 lid [[thread_position_in_threadgroup]], uint2 gid [[thread_position_in_grid]]) {
  threadgroup float ta[8][8], tb[8][8];
  float acc = 0;
  for (uint t = 0; t < (n + 7) / 8; ++t) {
    ta[lid.y][lid.x] = a[gid.y * n + t * 8 + lid.x];  // BUG
    tb[lid.y][lid.x] = b[(t * 8 + lid.y) * n + gid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 8; ++k) acc += ta[lid.y][k] * tb[k][lid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (gid.x < n && gid.y < n) c[gid.y * n + gid.x] = acc;
}""", lambda lib: lib.oob_tile_edge(f32(12 * 12), f32(12 * 12, seed=1), poison(12 * 12), 12,
                                    arg_casts={3: "int32"}, threads=[16, 16], group_size=[8, 8])),
    Case("oob_threadgroup", "oob", """
kernel void oob_threadgroup(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                            uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float tile[64];
  tile[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[gid] = tile[lid] + tile[lid + 1];  // BUG
}""", lambda lib: lib.oob_threadgroup(f32(128), poison(128), threads=128, group_size=64)),
    Case("oob_private", "oob", """
kernel void oob_private(device const int* idx [[buffer(0)]], device float* out [[buffer(1)]],
                        uint gid [[thread_position_in_grid]]) {
  float window[4] = {1, 2, 3, 4};
  window[idx[gid]] = 0;  // BUG
  out[gid] = window[0] + window[3];
}""", lambda lib: lib.oob_private(torch.tensor([0, 3, 4, 1], dtype=torch.int32), poison(4), threads=4,
                                  group_size=4)),
    Case("oob_strided_sizes", "oob", """
kernel void oob_strided_sizes(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                              constant uint* sizes [[buffer(2)]], constant uint* strides [[buffer(3)]],
                              uint i [[thread_position_in_grid]]) {
  // c10 style: sizes and strides innermost first, in elements
  uint rem = i, off = 0;
  for (uint d = 0; d < 2; ++d) { off += (rem % sizes[d]) * strides[d]; rem /= sizes[d]; }
  y[i] = x[off];  // BUG
}""", lambda lib: lib.oob_strided_sizes(f32(6 * 4), poison(24), np.array([4, 6], np.uint32),
                                        np.array([6, 2], np.uint32), threads=24, group_size=24)),
    Case("oob_before_start", "oob", """
kernel void oob_before_start(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                             uint i [[thread_position_in_grid]]) {
  y[i] = x[i] - x[i - 1];  // BUG
}""", lambda lib: lib.oob_before_start(f32(64), poison(64), threads=64, group_size=32)),
    Case("oob_histogram_bins", "oob", """
kernel void oob_histogram_bins(device const uint* x [[buffer(0)]], device atomic_uint* hist [[buffer(1)]],
                               uint i [[thread_position_in_grid]]) {
  atomic_fetch_add_explicit(&hist[x[i] % 17], 1u, memory_order_relaxed);  // BUG
}""", lambda lib: lib.oob_histogram_bins(torch.arange(200, dtype=torch.int32), i32(16), threads=200,
                                         group_size=50)),
    Case("oob_misaligned", "oob", """
kernel void oob_misaligned(device const uchar* bytes [[buffer(0)]], device float* y [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {
  y[i] = *(device const float*)(bytes + 4 * i + 2);  // BUG
}""", lambda lib: lib.oob_misaligned(torch.zeros(260, dtype=torch.uint8), poison(64), threads=64, group_size=64)),
    Case("oob_softmax_le", "oob", """
kernel void oob_softmax_le(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                           constant uint& n [[buffer(2)]], uint row [[threadgroup_position_in_grid]],
                           uint lane [[thread_index_in_simdgroup]]) {
  float m = -INFINITY;
  for (uint i = lane; i < n; i += 32) m = max(m, x[row * n + i]);
  m = simd_max(m);
  float s = 0;
  for (uint i = lane; i < n; i += 32) s += exp(x[row * n + i] - m);
  s = simd_sum(s);
  for (uint i = lane; i <= n; i += 32) y[row * n + i] = exp(x[row * n + i] - m) / s;  // BUG
}""", lambda lib: lib.oob_softmax_le(f32(2 * 64), poison(2 * 64), 64, arg_casts={2: "int32"}, threads=64,
                                     group_size=32)),

    # ---- races (racecheck) ----
    Case("race_reduce_no_barrier", "race", """
kernel void race_reduce_no_barrier(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                   uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                                   uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = 32; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];  // BUG
  }
  if (lid == 0) out[tg] = s[0];
}""", lambda lib: lib.race_reduce_no_barrier(f32(128), poison(2), threads=128, group_size=64)),
    Case("race_mem_none", "race", """
kernel void race_mem_none(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                          uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                          uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];  // BUG
  threadgroup_barrier(mem_flags::mem_none);
  if (lid == 0) {
    float t = 0;
    for (uint i = 0; i < 64; ++i) t += s[i];
    out[tg] = t;
  }
}""", lambda lib: lib.race_mem_none(f32(128), poison(2), threads=128, group_size=64)),
    Case("race_scan_in_place", "race", """
kernel void race_scan_in_place(device const int* x [[buffer(0)]], device int* y [[buffer(1)]],
                               uint lid [[thread_position_in_threadgroup]]) {
  threadgroup int s[64];
  s[lid] = x[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint off = 1; off < 64; off <<= 1) {
    if (lid >= off) s[lid] += s[lid - off];  // BUG
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  y[lid] = s[lid];
}""", lambda lib: lib.race_scan_in_place(torch.arange(64, dtype=torch.int32), poison(64, dtype=torch.int32),
                                         threads=64, group_size=64)),
    Case("race_transpose_tile", "race", """
kernel void race_transpose_tile(device const float* a [[buffer(0)]], device float* b [[buffer(1)]],
                                uint2 lid [[thread_position_in_threadgroup]], uint2 tg [[threadgroup_position_in_grid]]) {
  threadgroup float tile[8][9];
  tile[lid.y][lid.x] = a[(tg.y * 8 + lid.y) * 16 + tg.x * 8 + lid.x];  // BUG
  b[(tg.x * 8 + lid.y) * 16 + tg.y * 8 + lid.x] = tile[lid.x][lid.y];
}""", lambda lib: lib.race_transpose_tile(f32(256), poison(256), threads=[16, 16], group_size=[8, 8])),
    Case("race_device_accumulate", "race", """
kernel void race_device_accumulate(device const float* x [[buffer(0)]], device float* total [[buffer(1)]],
                                   uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  if (lid == 0) total[0] += x[gid];  // BUG
}""", lambda lib: lib.race_device_accumulate(f32(256), torch.zeros(1), threads=256, group_size=64)),
    Case("race_device_barrier_flags", "race", """
kernel void race_device_barrier_flags(device float* scratch [[buffer(0)]], device float* out [[buffer(1)]],
                                      uint lid [[thread_position_in_threadgroup]]) {
  scratch[lid] = lid * 2.0f;  // BUG
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = scratch[63 - lid];
}""", lambda lib: lib.race_device_barrier_flags(torch.zeros(64), poison(64), threads=64, group_size=64)),
    Case("race_simd_no_barrier", "race", """
kernel void race_simd_no_barrier(device float* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]],
                                 uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float s[64];
  s[sg * 32 + lane] = lane * 1.5f;  // BUG
  simdgroup_barrier(mem_flags::mem_none);
  out[sg * 32 + lane] = s[sg * 32 + 31 - lane];
}""", lambda lib: lib.race_simd_no_barrier(poison(64), threads=64, group_size=64)),
    Case("race_softmax_broadcast", "race", """
kernel void race_softmax_broadcast(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                   uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float mx;
  if (lid == 0) {
    float m = -INFINITY;
    for (uint i = 0; i < 64; ++i) m = max(m, x[i]);
    mx = m;  // BUG
  }
  y[lid] = exp(x[lid] - mx);
}""", lambda lib: lib.race_softmax_broadcast(f32(64), poison(64), threads=64, group_size=64)),
    Case("race_matmul_reload", "race", """
kernel void race_matmul_reload(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                               device float* c [[buffer(2)]], uint2 lid [[thread_position_in_threadgroup]],
                               uint2 gid [[thread_position_in_grid]]) {
  threadgroup float ta[8][8], tb[8][8];
  float acc = 0;
  for (uint t = 0; t < 2; ++t) {
    ta[lid.y][lid.x] = a[gid.y * 16 + t * 8 + lid.x];  // BUG
    tb[lid.y][lid.x] = b[(t * 8 + lid.y) * 16 + gid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 8; ++k) acc += ta[lid.y][k] * tb[k][lid.x];
  }
  c[gid.y * 16 + gid.x] = acc;
}""", lambda lib: lib.race_matmul_reload(f32(256), f32(256, seed=1), poison(256), threads=[16, 16],
                                         group_size=[8, 8])),
    Case("race_tg_histogram", "race", """
kernel void race_tg_histogram(device const uint* x [[buffer(0)]], device uint* hist [[buffer(1)]],
                              uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup uint bins[8];
  if (lid < 8) bins[lid] = 0;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  bins[x[gid] % 8] += 1;  // BUG
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid < 8) hist[lid] = bins[lid];
}""", lambda lib: lib.race_tg_histogram(torch.arange(64, dtype=torch.int32), poison(8, dtype=torch.int32),
                                        threads=64, group_size=64)),

    # Every lane stores its own value where llm.c's layernorm stores one
    # value per simdgroup without a lane-0 guard: the stores differ.
    Case("race_warp_slot_values", "race", """
kernel void race_warp_slot_values(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                  uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float part[2];
  part[sg] = x[gid];  // BUG
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = part[0] + part[1];
}""", lambda lib: lib.race_warp_slot_values(f32(64), poison(64), threads=64, group_size=64)),
    # Every group writes the whole output, each its own values.
    Case("race_groups_overwrite", "race", """
kernel void race_groups_overwrite(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]],
                                  uint tg [[threadgroup_position_in_grid]]) {
  out[lid] = float(tg);  // BUG
}""", lambda lib: lib.race_groups_overwrite(poison(32), threads=128, group_size=32)),

    # A last-block sum (CUDA's threadFenceReduction): the other groups'
    # partial sums are ordered before the last group's reads only by a
    # device fence, an atomic both sides make and coherent(device) (MSL 3.2).
    _last_block("race_last_block_no_release", release=False, bug="write"),
    _last_block("race_last_block_no_acquire", acquire=False),
    _last_block("race_last_block_not_coherent", coherent=False),
    # one counter per parity of the group, but the last of each sums every group's
    _last_block("race_last_block_other_address", counters=2),
    # a row's last group hands its row on to the grid's only if it fences between its tickets
    _two_level("race_two_level_no_fence_between", carry=False),
    # ---- barrier divergence (synccheck) ----
    Case("div_branch", "divergence", """
kernel void div_branch(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float s[64];
  s[lid] = lid;
  if (lid < 16) threadgroup_barrier(mem_flags::mem_threadgroup);  // BUG
  out[lid] = s[lid ^ 1];
}""", lambda lib: lib.div_branch(poison(64), threads=64, group_size=64)),
    Case("div_early_return", "divergence", """
kernel void div_early_return(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                             constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]],
                             uint lid [[thread_position_in_threadgroup]], uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float s[64];
  if (gid >= n) return;
  s[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);  // BUG
  if (lid == 0) { float t = 0; for (uint i = 0; i < 64 && tg * 64 + i < n; ++i) t += s[i]; out[tg] = t; }
}""", lambda lib: lib.div_early_return(f32(100), poison(2), 100, arg_casts={2: "int32"}, threads=128,
                                       group_size=64)),
    Case("div_loop_trips", "divergence", """
kernel void div_loop_trips(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float s[64];
  float acc = 0;
  for (uint i = 0; i < 1 + lid / 32; ++i) {
    s[lid] = acc + i;
    threadgroup_barrier(mem_flags::mem_threadgroup);  // BUG
    acc += s[(lid + 1) % 64];
  }
  out[lid] = acc;
}""", lambda lib: lib.div_loop_trips(poison(64), threads=64, group_size=64)),
    Case("div_two_barriers", "divergence", """
kernel void div_two_barriers(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float s[64];
  s[lid] = lid;
  if (lid % 2 == 0) {
    threadgroup_barrier(mem_flags::mem_threadgroup);  // BUG
    out[lid] = s[lid + 1];
  } else {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[lid] = s[lid - 1];
  }
}""", lambda lib: lib.div_two_barriers(poison(64), threads=64, group_size=64)),
    Case("div_reduction_tail", "divergence", """
kernel void div_reduction_tail(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                               uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float s[64];
  s[lid] = x[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = 32; k > 0; k >>= 1) {
    if (lid >= k) return;
    s[lid] += s[lid + k];
    threadgroup_barrier(mem_flags::mem_threadgroup);  // BUG
  }
  if (lid == 0) out[0] = s[0];
}""", lambda lib: lib.div_reduction_tail(f32(64), poison(1), threads=64, group_size=64)),
    Case("div_while", "divergence", """
kernel void div_while(device const uint* work [[buffer(0)]], device uint* out [[buffer(1)]],
                      uint lid [[thread_position_in_threadgroup]]) {
  threadgroup uint s[32];
  uint k = 0;
  while (k < work[lid]) {
    s[lid] = k;
    threadgroup_barrier(mem_flags::mem_threadgroup);  // BUG
    ++k;
  }
  out[lid] = k;
}""", lambda lib: lib.div_while(torch.tensor([1, 2] * 16, dtype=torch.int32), poison(32, dtype=torch.int32),
                                threads=32, group_size=32)),

    # ---- uninitialised reads (initcheck) ----
    Case("uninit_half_tile", "uninit", """
kernel void uninit_half_tile(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                             uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float tile[64];
  if (lid < 32) tile[lid] = x[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[lid] = tile[63 - lid];  // BUG
}""", lambda lib: lib.uninit_half_tile(f32(64), poison(64), threads=64, group_size=64)),
    Case("uninit_reduce_short", "uninit", """
kernel void uninit_reduce_short(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                constant uint& n [[buffer(2)]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float s[64];
  if (lid < n) s[lid] = x[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = 32; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];  // BUG
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) out[0] = s[0];
}""", lambda lib: lib.uninit_reduce_short(f32(40), poison(1), 40, arg_casts={2: "int32"}, threads=64,
                                          group_size=64)),
    Case("uninit_private_acc", "uninit", """
kernel void uninit_private_acc(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                               device const uint* sel [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  float acc[4];
  for (uint k = 0; k < 3; ++k) acc[k] = x[i * 4 + k];
  y[i] = acc[sel[i]];  // BUG
}""", lambda lib: lib.uninit_private_acc(f32(64), poison(16), torch.tensor([0, 1, 2, 3] * 4, dtype=torch.int32),
                                         threads=16, group_size=16)),
    Case("uninit_scan_off_by_one", "uninit", """
kernel void uninit_scan_off_by_one(device const int* x [[buffer(0)]], device int* y [[buffer(1)]],
                                   uint lid [[thread_position_in_threadgroup]]) {
  threadgroup int a[65];
  a[lid + 1] = x[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[lid] = a[lid];  // BUG
}""", lambda lib: lib.uninit_scan_off_by_one(torch.arange(64, dtype=torch.int32), poison(64, dtype=torch.int32),
                                             threads=64, group_size=64)),
    Case("uninit_flag", "uninit", """
kernel void uninit_flag(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                        uint lid [[thread_position_in_threadgroup]]) {
  threadgroup bool any_negative;
  if (x[lid] < -10.0f) any_negative = true;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[lid] = any_negative ? 0.0f : x[lid];  // BUG
}""", lambda lib: lib.uninit_flag(f32(32), poison(32), threads=32, group_size=32)),
    Case("uninit_private_window", "uninit", """
kernel void uninit_private_window(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                  device const uint* n [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  float w[8];
  for (uint k = 0; k < n[0]; ++k) w[k] = x[k];
  float s = 0;
  for (uint k = 0; k < 8; ++k) s += w[k];  // BUG
  y[i] = s;
}""", lambda lib: lib.uninit_private_window(f32(8), poison(4), torch.tensor([5], dtype=torch.int32), threads=4,
                                            group_size=4)),

    # ---- inactive lanes (synccheck) ----
    Case("inactive_shuffle_down", "inactive-lane", """
kernel void inactive_shuffle_down(device float* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
  float v = lane;
  if (lane < 16) v += simd_shuffle_down(v, 8u);  // BUG
  out[lane] = v;
}""", lambda lib: lib.inactive_shuffle_down(poison(32), threads=32, group_size=32)),
    Case("inactive_broadcast_zero", "inactive-lane", """
kernel void inactive_broadcast_zero(device float* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
  float v = lane * 2.0f;
  if (lane > 0) v = simd_broadcast(v, 0u);  // BUG
  out[lane] = v;
}""", lambda lib: lib.inactive_broadcast_zero(poison(32), threads=32, group_size=32)),
    Case("inactive_partial_simdgroup", "inactive-lane", """
kernel void inactive_partial_simdgroup(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]]) {
  float v = lid;
  v += simd_shuffle_xor(v, 16u);  // BUG
  out[lid] = v;
}""", lambda lib: lib.inactive_partial_simdgroup(poison(48), threads=48, group_size=48)),
    Case("inactive_radix_valid", "inactive-lane", """
kernel void inactive_radix_valid(device const uint* keys [[buffer(0)]], device uint* out [[buffer(1)]],
                                 constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]],
                                 uint lane [[thread_index_in_simdgroup]]) {
  bool valid = i < n;
  uint k = valid ? keys[i] : 0;
  if (valid) {
    uint neighbour = simd_shuffle(k, (lane + 1) % 32);  // BUG
    out[i] = k + neighbour;
  }
}""", lambda lib: lib.inactive_radix_valid(torch.arange(32, dtype=torch.int32), poison(32, dtype=torch.int32), 20,
                                           arg_casts={2: "int32"}, threads=32, group_size=32)),
    Case("inactive_quad", "inactive-lane", """
kernel void inactive_quad(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]]) {
  float v = lid;
  if (lid % 4 != 3) v = quad_shuffle(v, 3u);  // BUG
  out[lid] = v;
}""", lambda lib: lib.inactive_quad(poison(32), threads=32, group_size=32)),
    Case("inactive_shuffle_up_loop", "inactive-lane", """
kernel void inactive_shuffle_up_loop(device const uint* len [[buffer(0)]], device float* out [[buffer(1)]],
                                     uint lane [[thread_index_in_simdgroup]]) {
  float v = 1;
  for (uint k = 0; k < len[lane]; ++k) v += simd_shuffle_up(v, 1u);  // BUG
  out[lane] = v;
}""", lambda lib: lib.inactive_shuffle_up_loop(torch.tensor([3, 1] * 16, dtype=torch.int32), poison(32),
                                               threads=32, group_size=32)),

    # ---- results that depend on the schedule ----
    Case("sched_ticket", "schedule-dependent", """
kernel void sched_ticket(device atomic_uint* next [[buffer(0)]], device uint* out [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  uint slot = atomic_fetch_add_explicit(next, 1u, memory_order_relaxed);
  out[slot] = i;
}""", lambda lib: lib.sched_ticket(i32(1), poison(256, dtype=torch.int32), threads=256, group_size=64)),
    Case("sched_last_writer", "schedule-dependent", """
kernel void sched_last_writer(device atomic_uint* who [[buffer(0)]], uint tg [[threadgroup_position_in_grid]],
                              uint lid [[thread_position_in_threadgroup]]) {
  if (lid == 0) atomic_exchange_explicit(who, tg, memory_order_relaxed);
}""", lambda lib: lib.sched_last_writer(i32(1), threads=256, group_size=32)),
    Case("sched_partials_order", "schedule-dependent", """
kernel void sched_partials_order(device const float* x [[buffer(0)]], device atomic_uint* count [[buffer(1)]],
                                 device float* partials [[buffer(2)]], uint gid [[thread_position_in_grid]],
                                 uint lid [[thread_position_in_threadgroup]]) {
  float s = simd_sum(x[gid]);
  if (lid == 0) partials[atomic_fetch_add_explicit(count, 1u, memory_order_relaxed)] = s;
}""", lambda lib: lib.sched_partials_order(f32(256), i32(1), poison(8), threads=256, group_size=32)),
    Case("sched_flag_seen", "schedule-dependent", """
kernel void sched_flag_seen(device atomic_uint* flag [[buffer(0)]], device uint* seen [[buffer(1)]],
                            uint tg [[threadgroup_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  if (lid != 0) return;
  seen[tg] = atomic_load_explicit(flag, memory_order_relaxed);
  if (tg == 3) atomic_store_explicit(flag, 1u, memory_order_relaxed);
}""", lambda lib: lib.sched_flag_seen(i32(1), poison(8, dtype=torch.int32), threads=256, group_size=32)),
    Case("sched_max_index", "schedule-dependent", """
kernel void sched_max_index(device const uint* x [[buffer(0)]], device atomic_uint* best [[buffer(1)]],
                            device atomic_uint* where_ [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  uint old = atomic_fetch_max_explicit(best, x[i], memory_order_relaxed);
  if (x[i] >= old) atomic_store_explicit(where_, i, memory_order_relaxed);
}""", lambda lib: lib.sched_max_index(torch.arange(128, dtype=torch.int32) % 7, i32(1), i32(1), threads=128,
                                      group_size=32)),
    Case("sched_group_order_scan", "schedule-dependent", """
kernel void sched_group_order_scan(device const uint* x [[buffer(0)]], device atomic_uint* running [[buffer(1)]],
                                   device uint* prefix [[buffer(2)]], uint tg [[threadgroup_position_in_grid]],
                                   uint lid [[thread_position_in_threadgroup]], uint i [[thread_position_in_grid]]) {
  uint s = simd_sum(x[i]);
  if (lid == 0) prefix[tg] = atomic_fetch_add_explicit(running, s, memory_order_relaxed);
}""", lambda lib: lib.sched_group_order_scan(torch.ones(256, dtype=torch.int32), i32(1),
                                             poison(8, dtype=torch.int32), threads=256, group_size=32)),
]


# ------------------------------------------------------------------ clean --
# Every kernel here is correct under any legal schedule; several sit on the
# edge (simd functions in divergent code, lanes of one simdgroup talking
# through threadgroup memory after simdgroup_barrier, early returns with no
# barrier after them, float atomics, partial groups and simdgroups).

CLEAN = [
    Case("clean_reduce_tree", "", """
kernel void clean_reduce_tree(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                              constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]],
                              uint lid [[thread_position_in_threadgroup]], uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = gid < n ? x[gid] : 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = 32; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) out[tg] = s[0];
}""", lambda lib: lib.clean_reduce_tree(f32(100), poison(2), 100, arg_casts={2: "int32"}, threads=128,
                                        group_size=64)),
    Case("clean_reduce_simd", "", """
kernel void clean_reduce_simd(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                              uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]],
                              uint sg [[simdgroup_index_in_threadgroup]], uint nsg [[simdgroups_per_threadgroup]],
                              uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float partial[32];
  float v = simd_sum(x[gid]);
  if (lane == 0) partial[sg] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    float p = lane < nsg ? partial[lane] : 0.0f;
    p = simd_sum(p);
    if (lane == 0) out[tg] = p;
  }
}""", lambda lib: lib.clean_reduce_simd(f32(512), poison(2), threads=512, group_size=256)),
    Case("clean_scan_double_buffer", "", """
kernel void clean_scan_double_buffer(device const int* x [[buffer(0)]], device int* y [[buffer(1)]],
                                     uint lid [[thread_position_in_threadgroup]]) {
  threadgroup int a[64], b[64];
  a[lid] = x[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  bool from_a = true;
  for (uint off = 1; off < 64; off <<= 1) {
    if (from_a) b[lid] = a[lid] + (lid >= off ? a[lid - off] : 0);
    else a[lid] = b[lid] + (lid >= off ? b[lid - off] : 0);
    from_a = !from_a;
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  y[lid] = from_a ? a[lid] : b[lid];
}""", lambda lib: lib.clean_scan_double_buffer(torch.arange(64, dtype=torch.int32), poison(64, dtype=torch.int32),
                                               threads=64, group_size=64)),
    Case("clean_scan_simd_prefix", "", """
kernel void clean_scan_simd_prefix(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                   uint lid [[thread_position_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                                   uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float totals[4];
  float v = x[lid];
  float incl = simd_prefix_inclusive_sum(v);
  if (lane == 31) totals[sg] = incl;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float base = 0;
  for (uint k = 0; k < sg; ++k) base += totals[k];
  y[lid] = base + incl - v;
}""", lambda lib: lib.clean_scan_simd_prefix(f32(128), poison(128), threads=128, group_size=128)),
    Case("clean_transpose_tile", "", """
kernel void clean_transpose_tile(device const float* a [[buffer(0)]], device float* b [[buffer(1)]],
                                 uint2 lid [[thread_position_in_threadgroup]], uint2 tg [[threadgroup_position_in_grid]]) {
  threadgroup float tile[8][9];
  tile[lid.y][lid.x] = a[(tg.y * 8 + lid.y) * 16 + tg.x * 8 + lid.x];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  b[(tg.x * 8 + lid.y) * 16 + tg.y * 8 + lid.x] = tile[lid.x][lid.y];
}""", lambda lib: lib.clean_transpose_tile(f32(256), poison(256), threads=[16, 16], group_size=[8, 8])),
    Case("clean_transpose_naive", "", """
kernel void clean_transpose_naive(device const float* a [[buffer(0)]], device float* b [[buffer(1)]],
                                  constant uint2& dims [[buffer(2)]], uint2 p [[thread_position_in_grid]]) {
  b[p.x * dims.x + p.y] = a[p.y * dims.y + p.x];
}""", lambda lib: lib.clean_transpose_naive(f32(6 * 10), poison(60), np.array([6, 10], np.uint32),
                                            threads=[10, 6], group_size=[4, 4])),
    Case("clean_softmax_simd", "", """
kernel void clean_softmax_simd(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                               constant uint& n [[buffer(2)]], uint row [[threadgroup_position_in_grid]],
                               uint lane [[thread_index_in_simdgroup]]) {
  float m = -INFINITY;
  for (uint i = lane; i < n; i += 32) m = max(m, x[row * n + i]);
  m = simd_max(m);
  float s = 0;
  for (uint i = lane; i < n; i += 32) s += exp(x[row * n + i] - m);
  s = simd_sum(s);
  for (uint i = lane; i < n; i += 32) y[row * n + i] = exp(x[row * n + i] - m) / s;
}""", lambda lib: lib.clean_softmax_simd(f32(3 * 50), poison(150), 50, arg_casts={2: "int32"}, threads=96,
                                         group_size=32)),
    Case("clean_softmax_tg", "", """
kernel void clean_softmax_tg(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                             uint lid [[thread_position_in_threadgroup]], uint row [[threadgroup_position_in_grid]]) {
  threadgroup float mx, total;
  threadgroup float e[64];
  if (lid == 0) {
    float m = -INFINITY;
    for (uint i = 0; i < 64; ++i) m = max(m, x[row * 64 + i]);
    mx = m;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  e[lid] = exp(x[row * 64 + lid] - mx);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) { float s = 0; for (uint i = 0; i < 64; ++i) s += e[i]; total = s; }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[row * 64 + lid] = e[lid] / total;
}""", lambda lib: lib.clean_softmax_tg(f32(128), poison(128), threads=128, group_size=64)),
    Case("clean_layernorm", "", """
kernel void clean_layernorm(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                            constant uint& n [[buffer(2)]], uint lid [[thread_position_in_threadgroup]],
                            uint row [[threadgroup_position_in_grid]], uint nt [[threads_per_threadgroup]]) {
  threadgroup float s[32];
  float acc = 0;
  for (uint i = lid; i < n; i += nt) acc += x[row * n + i];
  s[lid] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = nt / 2; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  float mean = s[0] / n;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  acc = 0;
  for (uint i = lid; i < n; i += nt) { float d = x[row * n + i] - mean; acc += d * d; }
  s[lid] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = nt / 2; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  float inv = rsqrt(s[0] / n + 1e-5f);
  for (uint i = lid; i < n; i += nt) y[row * n + i] = (x[row * n + i] - mean) * inv;
}""", lambda lib: lib.clean_layernorm(f32(2 * 100), poison(200), 100, arg_casts={2: "int32"}, threads=64,
                                      group_size=32)),
    Case("clean_histogram_device", "", """
kernel void clean_histogram_device(device const uint* x [[buffer(0)]], device atomic_uint* hist [[buffer(1)]],
                                   uint i [[thread_position_in_grid]]) {
  atomic_fetch_add_explicit(&hist[x[i] % 16], 1u, memory_order_relaxed);
}""", lambda lib: lib.clean_histogram_device(torch.arange(300, dtype=torch.int32), i32(16), threads=300,
                                             group_size=64)),
    Case("clean_histogram_tg", "", """
kernel void clean_histogram_tg(device const uint* x [[buffer(0)]], device atomic_uint* hist [[buffer(1)]],
                               uint i [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup atomic_uint bins[16];
  if (lid < 16) atomic_store_explicit(&bins[lid], 0u, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  atomic_fetch_add_explicit(&bins[x[i] % 16], 1u, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid < 16) atomic_fetch_add_explicit(&hist[lid], atomic_load_explicit(&bins[lid], memory_order_relaxed),
                                          memory_order_relaxed);
}""", lambda lib: lib.clean_histogram_tg(torch.arange(256, dtype=torch.int32), i32(16), threads=256, group_size=64)),
    Case("clean_matmul_tiled", "", """
kernel void clean_matmul_tiled(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                               device float* c [[buffer(2)]], constant uint& n [[buffer(3)]],
                               uint2 lid [[thread_position_in_threadgroup]], uint2 gid [[thread_position_in_grid]]) {
  threadgroup float ta[8][8], tb[8][8];
  float acc = 0;
  for (uint t = 0; t < (n + 7) / 8; ++t) {
    uint ac = t * 8 + lid.x, br = t * 8 + lid.y;
    ta[lid.y][lid.x] = (gid.y < n && ac < n) ? a[gid.y * n + ac] : 0.0f;
    tb[lid.y][lid.x] = (br < n && gid.x < n) ? b[br * n + gid.x] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 8; ++k) acc += ta[lid.y][k] * tb[k][lid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (gid.x < n && gid.y < n) c[gid.y * n + gid.x] = acc;
}""", lambda lib: lib.clean_matmul_tiled(f32(12 * 12), f32(144, seed=1), poison(144), 12, arg_casts={3: "int32"},
                                         threads=[16, 16], group_size=[8, 8])),
    Case("clean_simdgroup_gemm", "", """
kernel void clean_simdgroup_gemm(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                                 device float* c [[buffer(2)]], uint2 tg [[threadgroup_position_in_grid]]) {
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (uint k = 0; k < 16; k += 8) {
    simdgroup_float8x8 ma, mb;
    simdgroup_load(ma, a + tg.y * 8 * 16 + k, 16);
    simdgroup_load(mb, b + k * 16 + tg.x * 8, 16);
    simdgroup_multiply_accumulate(acc, ma, mb, acc);
  }
  simdgroup_store(acc, c + tg.y * 8 * 16 + tg.x * 8, 16);
}""", lambda lib: lib.clean_simdgroup_gemm(f32(256), f32(256, seed=2), poison(256), threadgroups=[2, 2],
                                           group_size=32)),
    Case("clean_saxpy", "", """
kernel void clean_saxpy(device const float* x [[buffer(0)]], device const float* y [[buffer(1)]],
                        device float* out [[buffer(2)]], constant float& a [[buffer(3)]],
                        uint i [[thread_position_in_grid]]) {
  out[i] = a * x[i] + y[i];
}""", lambda lib: lib.clean_saxpy(f32(1000), f32(1000, seed=1), poison(1000), 2.0, threads=1000, group_size=256)),
    Case("clean_saxpy_inplace", "", """
kernel void clean_saxpy_inplace(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                constant float& a [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  y[i] = a * x[i] + y[i];
}""", lambda lib: lib.clean_saxpy_inplace(f32(1000), f32(1000, seed=1), 0.5, threads=1000, group_size=128)),
    Case("clean_uchar_compare", "", """
kernel void clean_uchar_compare(device const float* x [[buffer(0)]], device uchar* y [[buffer(1)]],
                                uint i [[thread_position_in_grid]]) {
  y[i] = x[i] > 0.0f;
}""", lambda lib: lib.clean_uchar_compare(f32(333), poison(333, dtype=torch.uint8), threads=333, group_size=64)),
    Case("clean_half_io", "", """
kernel void clean_half_io(device const half* x [[buffer(0)]], device half* y [[buffer(1)]],
                          uint i [[thread_position_in_grid]]) {
  y[i] = x[i] * 2.0h + 1.0h;
}""", lambda lib: lib.clean_half_io(f32(200).half(), poison(200, dtype=torch.float16), threads=200, group_size=64)),
    Case("clean_bfloat_io", "", """
kernel void clean_bfloat_io(device const bfloat* x [[buffer(0)]], device bfloat* y [[buffer(1)]],
                            uint i [[thread_position_in_grid]]) {
  y[i] = bfloat(float(x[i]) * 3.0f);
}""", lambda lib: lib.clean_bfloat_io(f32(200).bfloat16(), poison(200, dtype=torch.bfloat16), threads=200,
                                      group_size=64)),
    Case("clean_struct_params", "", """
struct Params { float scale; uint n; uint2 pad; };
kernel void clean_struct_params(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                constant Params& p [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  if (i < p.n) y[i] = x[i] * p.scale;
}""", lambda lib: lib.clean_struct_params(f32(64), poison(64), np.array([(2.0, 50, 0, 0)], dtype=[
        ("scale", "<f4"), ("n", "<u4"), ("p0", "<u4"), ("p1", "<u4")]).tobytes(), threads=64, group_size=32)),
    Case("clean_constant_table", "", """
constant float kTable[8] = {0, 1, 4, 9, 16, 25, 36, 49};
kernel void clean_constant_table(device const uint* idx [[buffer(0)]], device float* y [[buffer(1)]],
                                 uint i [[thread_position_in_grid]]) {
  y[i] = kTable[idx[i] & 7];
}""", lambda lib: lib.clean_constant_table(torch.arange(40, dtype=torch.int32), poison(40), threads=40,
                                           group_size=8)),
    Case("clean_private_array", "", """
kernel void clean_private_array(device const float* x [[buffer(0)]], device const uint* sel [[buffer(1)]],
                                device float* y [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  float w[8];
  for (uint k = 0; k < 8; ++k) w[k] = x[i * 8 + k];
  y[i] = w[sel[i] & 7] + w[(sel[i] + 3) & 7];
}""", lambda lib: lib.clean_private_array(f32(16 * 8), torch.arange(16, dtype=torch.int32), poison(16),
                                          threads=16, group_size=16)),
    Case("clean_simd_divergent", "", """
kernel void clean_simd_divergent(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                 uint lane [[thread_index_in_simdgroup]]) {
  float v = x[lane];
  if (lane < 20) v = simd_sum(v);
  else v = simd_max(v);
  y[lane] = v;
}""", lambda lib: lib.clean_simd_divergent(f32(32), poison(32), threads=32, group_size=32)),
    Case("clean_shuffle_reduce", "", """
kernel void clean_shuffle_reduce(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                 uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  float v = x[i];
  for (uint off = 16; off > 0; off >>= 1) v += simd_shuffle_down(v, off);
  if (lane == 0) y[i / 32] = v;
}""", lambda lib: lib.clean_shuffle_reduce(f32(128), poison(4), threads=128, group_size=64)),
    Case("clean_quad_sum", "", """
kernel void clean_quad_sum(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {
  y[i] = quad_sum(x[i]) + quad_shuffle_xor(x[i], 1u);
}""", lambda lib: lib.clean_quad_sum(f32(64), poison(64), threads=64, group_size=32)),
    Case("clean_ballot", "", """
kernel void clean_ballot(device const float* x [[buffer(0)]], device uint* y [[buffer(1)]],
                         uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  simd_vote v = simd_ballot(x[i] > 0.0f);
  if (lane == 0) y[i / 32] = uint(simd_vote::vote_t(v) & 0xffffffffu);
}""", lambda lib: lib.clean_ballot(f32(64), poison(2, dtype=torch.int32), threads=64, group_size=64)),
    Case("clean_simdgroup_barrier_exchange", "", """
kernel void clean_simdgroup_barrier_exchange(device float* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]],
                                             uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float s[64];
  s[sg * 32 + lane] = lane * 1.5f;
  simdgroup_barrier(mem_flags::mem_threadgroup);
  out[sg * 32 + lane] = s[sg * 32 + 31 - lane];
}""", lambda lib: lib.clean_simdgroup_barrier_exchange(poison(64), threads=64, group_size=64)),
    Case("clean_device_exchange", "", """
kernel void clean_device_exchange(device float* scratch [[buffer(0)]], device float* out [[buffer(1)]],
                                  uint lid [[thread_position_in_threadgroup]], uint tg [[threadgroup_position_in_grid]]) {
  scratch[tg * 64 + lid] = lid * 2.0f;
  threadgroup_barrier(mem_flags::mem_device);
  out[tg * 64 + lid] = scratch[tg * 64 + 63 - lid];
}""", lambda lib: lib.clean_device_exchange(torch.zeros(128), poison(128), threads=128, group_size=64)),
    Case("clean_early_return", "", """
kernel void clean_early_return(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                               constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  if (i >= n) return;
  y[i] = sqrt(abs(x[i]));
}""", lambda lib: lib.clean_early_return(f32(100), poison(100), 100, arg_casts={2: "int32"}, threads=128,
                                         group_size=64)),
    Case("clean_grid_2d", "", """
kernel void clean_grid_2d(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                          uint2 p [[thread_position_in_grid]], uint2 size [[threads_per_grid]]) {
  y[p.y * size.x + p.x] = x[p.y * size.x + p.x] + p.y;
}""", lambda lib: lib.clean_grid_2d(f32(13 * 7), poison(91), threads=[13, 7], group_size=[4, 4])),
    Case("clean_grid_3d", "", """
kernel void clean_grid_3d(device float* y [[buffer(0)]], uint3 p [[thread_position_in_grid]],
                          uint3 size [[threads_per_grid]]) {
  y[(p.z * size.y + p.y) * size.x + p.x] = p.x + 10 * p.y + 100 * p.z;
}""", lambda lib: lib.clean_grid_3d(poison(5 * 3 * 3), threads=[5, 3, 3], group_size=[2, 2, 2])),
    Case("clean_float_atomic_sum", "", """
kernel void clean_float_atomic_sum(device const float* x [[buffer(0)]], device atomic_float* total [[buffer(1)]],
                                   uint i [[thread_position_in_grid]]) {
  atomic_fetch_add_explicit(total, x[i], memory_order_relaxed);
}""", lambda lib: lib.clean_float_atomic_sum(f32(4096) * 1000, torch.zeros(1), threads=4096, group_size=64)),
    Case("clean_atomic_counter", "", """
kernel void clean_atomic_counter(device const float* x [[buffer(0)]], device atomic_uint* count [[buffer(1)]],
                                 uint i [[thread_position_in_grid]]) {
  if (x[i] > 0) atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
}""", lambda lib: lib.clean_atomic_counter(f32(500), i32(1), threads=500, group_size=100)),
    Case("clean_tg_param", "", """
kernel void clean_tg_param(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                           threadgroup float* tile [[threadgroup(0)]], uint lid [[thread_position_in_threadgroup]],
                           uint gid [[thread_position_in_grid]], uint nt [[threads_per_threadgroup]]) {
  tile[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[gid] = tile[nt - 1 - lid];
}""", lambda lib: lib.clean_tg_param(f32(128), poison(128), threads=128, group_size=32,
                                     threadgroup_memory={0: 32 * 4})),
    Case("clean_loop_barrier", "", """
kernel void clean_loop_barrier(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                               uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float s[32];
  float v = x[lid];
  for (uint it = 0; it < 4; ++it) {
    s[lid] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    v = 0.5f * (s[lid] + s[(lid + 1) % 32]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  y[lid] = v;
}""", lambda lib: lib.clean_loop_barrier(f32(32), poison(32), threads=32, group_size=32)),
    Case("clean_tg_float3", "", """
kernel void clean_tg_float3(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                            uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float3 v[32];
  v[lid] = float3(x[lid], x[lid] * 2, x[lid] * 3);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float3 w = v[31 - lid];
  y[lid] = w.x + w.y + w.z;
}""", lambda lib: lib.clean_tg_float3(f32(32), poison(32), threads=32, group_size=32)),
    Case("clean_struct_copy", "", """
struct Pair { float a; int b; };
kernel void clean_struct_copy(device const Pair* in [[buffer(0)]], device Pair* out [[buffer(1)]],
                              uint i [[thread_position_in_grid]]) {
  Pair p = in[i];
  p.b += 1;
  out[i] = p;
}""", lambda lib: lib.clean_struct_copy(torch.zeros(16 * 2, dtype=torch.int32), poison(32, dtype=torch.int32),
                                        threads=16, group_size=16)),
    Case("clean_gather", "", """
kernel void clean_gather(device const float* x [[buffer(0)]], device const int* idx [[buffer(1)]],
                         device float* y [[buffer(2)]], constant uint& n [[buffer(3)]],
                         uint i [[thread_position_in_grid]]) {
  int j = idx[i];
  y[i] = (j >= 0 && uint(j) < n) ? x[j] : 0.0f;
}""", lambda lib: lib.clean_gather(f32(50), torch.tensor(list(range(-5, 55)), dtype=torch.int32), poison(60), 50,
                                   arg_casts={3: "int32"}, threads=60, group_size=32)),
    Case("clean_broadcast_first", "", """
kernel void clean_broadcast_first(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                  uint lane [[thread_index_in_simdgroup]]) {
  float v = x[lane];
  if (lane >= 5) v = simd_broadcast_first(v);
  y[lane] = v;
}""", lambda lib: lib.clean_broadcast_first(f32(32), poison(32), threads=32, group_size=32)),
    Case("clean_partial_simdgroup", "", """
kernel void clean_partial_simdgroup(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                    uint lid [[thread_position_in_threadgroup]]) {
  y[lid] = simd_sum(x[lid]) + simd_shuffle_xor(x[lid], 1u);
}""", lambda lib: lib.clean_partial_simdgroup(f32(48), poison(48), threads=48, group_size=48)),
    # Every lane stores the same value (its simdgroup's sum) in its
    # simdgroup's slot: the stores that follow the first change no byte, so
    # no order of them can matter (compute-sanitizer's racecheck agrees:
    # benchmarks/results/sanitizer_h200.json, probe "same_value_in_warp").
    Case("clean_warp_slot_unguarded", "", """
kernel void clean_warp_slot_unguarded(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                      uint gid [[thread_position_in_grid]],
                                      uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float part[2];
  part[sg] = simd_sum(x[gid]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = part[0] + part[1];
}""", lambda lib: lib.clean_warp_slot_unguarded(f32(64), poison(64), threads=64, group_size=64)),
    # Every group computes and stores the same whole row (llm.c's
    # attention_backward kernel1 ignores blockIdx.y the same way); enough
    # groups that workers store the same elements at the same time.
    Case("clean_groups_same_values", "", """
kernel void clean_groups_same_values(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                     uint lid [[thread_position_in_threadgroup]]) {
  out[lid] = 2.0f * x[lid];
}""", lambda lib: lib.clean_groups_same_values(f32(32), poison(32), threads=32 * 512,
                                                     group_size=32)),
    Case("clean_ring_neighbours", "", """
kernel void clean_ring_neighbours(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                  uint lid [[thread_position_in_threadgroup]], uint nt [[threads_per_threadgroup]],
                                  uint gid [[thread_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[gid] = s[(lid + nt - 1) % nt] - 2 * s[lid] + s[(lid + 1) % nt];
}""", lambda lib: lib.clean_ring_neighbours(f32(100), poison(100), threads=100, group_size=64)),
    Case("clean_shuffle_and_fill", "", """
kernel void clean_shuffle_and_fill(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                   uint i [[thread_position_in_grid]]) {
  y[i] = simd_shuffle_and_fill_up(x[i], -1.0f, 2u);
}""", lambda lib: lib.clean_shuffle_and_fill(f32(64), poison(64), threads=64, group_size=64)),
    Case("clean_butterfly_reduce", "", """
kernel void clean_butterfly_reduce(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                   uint i [[thread_position_in_grid]]) {
  float v = x[i];
  for (uint m = 16; m > 0; m >>= 1) v += simd_shuffle_xor(v, m);
  y[i] = v;
}""", lambda lib: lib.clean_butterfly_reduce(f32(64), poison(64), threads=64, group_size=64)),
    Case("clean_shuffle_up_scan", "", """
kernel void clean_shuffle_up_scan(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                  uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  float v = x[i];
  for (uint d = 1; d < 32; d <<= 1) {
    float up = simd_shuffle_up(v, d);
    if (lane >= d) v += up;
  }
  y[i] = v;
}""", lambda lib: lib.clean_shuffle_up_scan(f32(64), poison(64), threads=64, group_size=32)),
    Case("clean_broadcast_scale", "", """
kernel void clean_broadcast_scale(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                  uint i [[thread_position_in_grid]]) {
  float norm = simd_broadcast(x[i] * x[i] + 1.0f, 0u);
  y[i] = x[i] / norm;
}""", lambda lib: lib.clean_broadcast_scale(f32(96), poison(96), threads=96, group_size=32)),
    Case("clean_neighbour_difference", "", """
kernel void clean_neighbour_difference(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                       uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  float next = simd_shuffle_down(x[i], 1u);
  y[i] = lane < 31 ? next - x[i] : 0.0f;
}""", lambda lib: lib.clean_neighbour_difference(f32(64), poison(64), threads=64, group_size=64)),
    Case("clean_quad_broadcast", "", """
kernel void clean_quad_broadcast(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                 uint i [[thread_position_in_grid]]) {
  y[i] = quad_broadcast(x[i], 2u) + quad_shuffle_down(x[i], 1u);
}""", lambda lib: lib.clean_quad_broadcast(f32(32), poison(32), threads=32, group_size=32)),
    Case("clean_shuffle_rotate", "", """
kernel void clean_shuffle_rotate(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                 uint i [[thread_position_in_grid]]) {
  y[i] = simd_shuffle_rotate_down(x[i], 3u) + simd_shuffle(x[i], 7u);
}""", lambda lib: lib.clean_shuffle_rotate(f32(64), poison(64), threads=64, group_size=64)),
    Case("clean_two_kernels", "", """
kernel void clean_two_kernels(device float* a [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  a[i] = i * 0.5f;
}
kernel void clean_two_kernels_consume(device const float* a [[buffer(0)]], device float* b [[buffer(1)]],
                                      uint i [[thread_position_in_grid]], uint n [[threads_per_grid]]) {
  b[i] = a[n - 1 - i];
}""", lambda lib: (lambda a, b: (lib.clean_two_kernels(a, threads=64, group_size=16),
                                 lib.clean_two_kernels_consume(a, b, threads=64, group_size=32)))(
        poison(64), poison(64))),
    _last_block("clean_last_block_sum", bug=""),
    _two_level("clean_two_level_tickets"),
]

# c10-style kernels, with PyTorch's own headers (a library of their own).
CLEAN_C10 = [
    Case("c10_threadgroup_sum", "", """
#include <c10/metal/reduction_utils.h>
kernel void c10_threadgroup_sum(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                uint lid [[thread_position_in_threadgroup]], uint tg [[threadgroup_position_in_grid]],
                                uint nt [[threads_per_threadgroup]]) {
  threadgroup float scratch[32];
  float v = x[tg * nt + lid];
  float s = c10::metal::threadgroup_sum(scratch, v, lid, nt);
  if (lid == 0) out[tg] = s;
}""", lambda lib: lib.c10_threadgroup_sum(f32(512), poison(2), threads=512, group_size=256)),
    Case("c10_strided_unary", "", """
#include <c10/metal/utils.h>
kernel void c10_strided_unary(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                              constant long* sizes [[buffer(2)]], constant long* in_strides [[buffer(3)]],
                              constant uint& ndim [[buffer(4)]], uint i [[thread_position_in_grid]]) {
  long rem = i, off = 0;
  for (uint d = 0; d < ndim; ++d) { off += (rem % sizes[d]) * in_strides[d]; rem /= sizes[d]; }
  out[i] = c10::metal::cast_to<float>(in[off]) * 2.0f;
}""", lambda lib: lib.c10_strided_unary(poison(12), f32(4 * 3), np.array([3, 4], np.int64),
                                        np.array([4, 1], np.int64), 2, arg_casts={4: "int32"}, threads=12,
                                        group_size=12)),
]
