"""Dispatch-time proofs (check/affine.py, check/loops.py, check/prove.py):
kernels whose every access is proven in bounds and owned run in the ordinary
build; a proof never hides a bug, so each case that is proven has a twin
with the bug that must not be proven and must be found."""

from __future__ import annotations

import pytest
import torch

import metal_kernel
from metal_kernel.check.cfg import Blocks
from metal_kernel.check.loops import counted_loop

LOOPS = """#include <metal_stdlib>
using namespace metal;
kernel void mm(device float* c, device const float* a, device const float* b, constant uint* dims,
               uint2 gid [[thread_position_in_grid]]) {
  uint M = dims[0], K = dims[1], N = dims[2];
  if (gid.y >= M || gid.x >= N) return;
  float acc = 0;
  for (uint k = 0; k < K; k++) acc += a[gid.y * K + k] * b[k * N + gid.x];
  c[gid.y * N + gid.x] = acc;
}
kernel void row_sum_off_by_one(device float* out, device const float* x, constant uint& n,
                               uint i [[thread_position_in_grid]]) {
  float s = 0;
  for (uint k = 0; k < n; k++) s += x[i * n + k + 1];
  out[i] = s;
}
kernel void strided(device float* out, device const float* x, constant uint& n,
                    uint i [[thread_position_in_grid]]) {
  float s = 0;
  for (uint k = 0; k < n; k += 4) s += x[k];
  out[i] = s;
}
kernel void triangle(device float* out, device const float* x, constant uint& n,
                     uint i [[thread_position_in_grid]]) {
  float s = 0;
  for (uint r = 0; r < n; r++)
    for (uint k = r; k < n; k++) s += x[r * n + k];
  out[i] = s + i;
}
kernel void guarded(device float* y, device const float* x, constant uint& n,
                    uint i [[thread_position_in_grid]]) {
  if (i < n) y[i] = 2 * x[i];
}
kernel void guarded_off_by_one(device float* y, device const float* x, constant uint& n,
                               uint i [[thread_position_in_grid]]) {
  if (i <= n) y[i] = 2 * x[i];
}
kernel void early_return_2d(device float* y, constant uint& rows, constant uint& cols,
                            uint2 p [[thread_position_in_grid]]) {
  if (p.y >= rows || p.x >= cols) return;
  y[p.y * cols + p.x] = p.y * 1000 + p.x;
}
kernel void guard_on_the_wrong_axis(device float* y, constant uint& rows, constant uint& cols,
                                    uint2 p [[thread_position_in_grid]]) {
  if (p.y >= rows || p.y >= cols) return;
  y[p.y * cols + p.x] = p.y * 1000 + p.x;
}
kernel void grid_stride(device float* y, device const float* x, constant uint& n,
                        uint i [[thread_position_in_grid]], uint threads [[threads_per_grid]]) {
  for (uint k = i; k < n; k += threads) y[k] = 2 * x[k];
}
kernel void tiled(device const float* A, device const float* B, device float* C, constant uint& N,
                  uint2 gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float As[8][8], Bs[8][8];
  float acc = 0.0f;
  for (uint t = 0; t < N; t += 8) {
    As[lid.y][lid.x] = A[gid.y * N + t + lid.x];
    Bs[lid.y][lid.x] = B[(t + lid.y) * N + gid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 8; ++k) acc += As[lid.y][k] * Bs[k][lid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  C[gid.y * N + gid.x] = acc;
}
kernel void tiled_one_past(device const float* A, device const float* B, device float* C, constant uint& N,
                           uint2 gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float As[8][8], Bs[8][8];
  float acc = 0.0f;
  for (uint t = 0; t < N; t += 8) {
    As[lid.y][lid.x] = A[gid.y * N + t + lid.x + 1];
    Bs[lid.y][lid.x] = B[(t + lid.y) * N + gid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 8; ++k) acc += As[lid.y][k] * Bs[k][lid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  C[gid.y * N + gid.x] = acc;
}
kernel void first_thread_writes(device float* out, device const float* x,
                                uint lid [[thread_position_in_threadgroup]],
                                uint tg [[threadgroup_position_in_grid]], uint gid [[thread_position_in_grid]]) {
  if (lid == 0) out[tg] = x[gid];
}
kernel void first_two_threads_write(device float* out, device const float* x,
                                    uint lid [[thread_position_in_threadgroup]],
                                    uint tg [[threadgroup_position_in_grid]], uint gid [[thread_position_in_grid]]) {
  if (lid <= 1) out[tg] = x[gid];
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(LOOPS, source_name="loops.metal")


def _mm(lib, a, b, M, K, N, dims=None):
    c = torch.full((M * N,), float("nan"))
    dims = torch.tensor(dims or [M, K, N], dtype=torch.int32)
    with metal_kernel.check() as report:
        lib.mm(c, a, b, dims, threads=(N, M), group_size=(8, 4))
    return c, report


def test_a_loop_bounded_by_a_buffer_scalar_is_proven(lib):
    M, K, N = 12, 20, 16
    a, b = torch.rand(M * K), torch.rand(K * N)
    c, report = _mm(lib, a, b, M, K, N)
    assert report.ok and report.proven == 1, str(report)
    torch.testing.assert_close(c.view(M, N), a.view(M, K) @ b.view(K, N))


def test_a_loop_bound_past_the_buffer_is_not_proven_and_is_found(lib):
    M, K, N = 12, 20, 16
    a, b = torch.rand(M * K - 1), torch.rand(K * N)  # a is one element short
    _, report = _mm(lib, a, b, M, K, N)
    assert report.proven == 0
    assert [f.kind for f in report.findings] == ["oob"] and report.findings[0].buffer == (1, "a")


def test_an_off_by_one_in_the_loop_body_is_not_proven_and_is_found(lib):
    n, rows = 10, 8
    out = torch.full((rows,), float("nan"))
    with metal_kernel.check() as report:
        lib.row_sum_off_by_one(out, torch.rand(rows * n), torch.tensor([n], dtype=torch.int32),
                               threads=rows, group_size=rows)
    assert report.proven == 0
    assert report.findings and {f.kind for f in report.findings} == {"oob"}
    assert all(f.buffer == (1, "x") and f.offset == rows * n * 4 for f in report.findings)


def test_a_step_larger_than_one_and_a_triangle_of_loops_are_proven(lib):
    n = 9
    x = torch.rand(n * n)
    for name, expect in (("strided", x[:n:4].sum()), ("triangle", torch.triu(x.view(n, n)).sum())):
        out = torch.full((4,), float("nan"))
        with metal_kernel.check() as report:
            getattr(lib, name)(out, x, torch.tensor([n], dtype=torch.int32), threads=4, group_size=4)
        assert report.ok and report.proven == 1, (name, str(report))
        torch.testing.assert_close(out - torch.arange(4.0) * (name == "triangle"), expect.expand(4))


def test_a_loop_that_walks_a_range_proves_bounds_but_not_ownership(lib):
    """Grid-stride writes are in bounds but a loop's range belongs to no
    one thread, so the dispatch still runs checked (and passes)."""
    n = 1000
    x, y = torch.rand(n), torch.full((n,), float("nan"))
    with metal_kernel.check() as report:
        lib.grid_stride(y, x, torch.tensor([n], dtype=torch.int32), threads=128, group_size=32)
    assert report.ok and report.proven == 0, str(report)
    torch.testing.assert_close(y, 2 * x)


def _u32(v: int) -> torch.Tensor:
    return torch.tensor([v], dtype=torch.int32)


def test_a_store_guarded_by_its_bound_is_proven_on_a_rounded_up_grid(lib):
    n = 100
    x, y = torch.rand(n), torch.full((n,), float("nan"))
    with metal_kernel.check() as report:
        lib.guarded(y, x, _u32(n), threads=128, group_size=32)
    assert report.ok and report.proven == 1, str(report)
    torch.testing.assert_close(y, 2 * x)


def test_a_guard_one_past_the_bound_is_not_proven_and_is_found(lib):
    n = 100
    x, y = torch.rand(n), torch.full((n,), float("nan"))
    with metal_kernel.check() as report:
        lib.guarded_off_by_one(y, x, _u32(n), threads=128, group_size=32)
    assert report.proven == 0
    assert {(f.kind, f.offset) for f in report.findings} == {("oob", 400)}
    assert {f.buffer[1] for f in report.findings} == {"x", "y"}


def test_an_early_return_on_both_axes_is_proven_and_one_on_the_wrong_axis_is_not(lib):
    rows, cols = 10, 13
    y = torch.full((rows * cols,), float("nan"))
    with metal_kernel.check() as report:
        lib.early_return_2d(y, _u32(rows), _u32(cols), threads=(16, 12), group_size=(8, 4))
    assert report.ok and report.proven == 1, str(report)
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    assert torch.equal(y.view(rows, cols), (r * 1000 + c).float())
    y = torch.full((rows * cols,), float("nan"))
    with metal_kernel.check() as report:
        lib.guard_on_the_wrong_axis(y, _u32(rows), _u32(cols), threads=(16, 12), group_size=(8, 4))
    # threads past the last column write the next row's first elements (a
    # race with their owners) and, in the last row, past the end
    assert report.proven == 0 and {f.kind for f in report.findings} == {"oob", "race"}


def test_one_thread_per_group_writing_its_group_slot_is_proven_and_two_are_not(lib):
    # `lid == 0` leaves one thread per group; the group's index reaches the
    # offset as the low word of an 8-byte load of the group's position.
    x = torch.rand(8 * 32)
    out = torch.full((8,), float("nan"))
    with metal_kernel.check() as report:
        lib.first_thread_writes(out, x, threads=x.numel(), group_size=32)
    assert report.ok and report.proven == 1, str(report)
    assert torch.equal(out, x[::32])
    out.fill_(float("nan"))  # thread 0 would store what is there: no access for racecheck
    with metal_kernel.check() as report:
        lib.first_two_threads_write(out, x, threads=x.numel(), group_size=32)
    assert report.proven == 0 and {f.kind for f in report.findings} == {"race"}, str(report)


def test_a_tiled_matmuls_device_accesses_are_proven_and_one_past_is_not(lib):
    # The tile loop steps by 8 below N (its last tile starts at N - 8); the
    # optimiser reloads N after each barrier, peels the N == 0 case into a
    # phi with 0 and packs the thread's x and y into one i64: all followed.
    from metal_kernel.check.prove import prove
    from metal_kernel.check.session import checked_library
    n = 32
    a, b = torch.rand(n, n), torch.rand(n, n)
    for name, inside in (("tiled", {0, 1, 2, 3}), ("tiled_one_past", {1, 2, 3})):
        k = getattr(lib, name)
        ck = getattr(checked_library(k._library), name)
        facts = ck._library._compiled.check_of(ck._entry)["kernels"][str(ck._entry.symbol)]
        bound = k._bind((a, b, torch.empty(n, n), _u32(n)), {})
        spans = list(zip(bound.ptrs, bound.sizes))
        proof = prove(facts, [n, n, 1], [8, 8, 1], [n // 8, n // 8, 1], bound.ptrs, bound.sizes, spans)
        assert proof.inside == inside and proof.device == (name == "tiled"), name
    c = torch.full((n, n), float("nan"))
    with metal_kernel.check() as report:
        lib.tiled(a, b, c, _u32(n), threads=(n, n), group_size=(8, 8))
    assert report.ok and report.by_representatives == 1, str(report)
    torch.testing.assert_close(c, a @ b)
    with metal_kernel.check() as report:
        lib.tiled_one_past(a, b, c, _u32(n), threads=(n, n), group_size=(8, 8))
    assert {(f.kind, f.buffer) for f in report.findings} == {("oob", (0, "A"))}, str(report)


def test_an_empty_loop_is_not_a_proof_and_still_runs(lib):
    M, K, N = 4, 0, 8
    c, report = _mm(lib, torch.rand(1), torch.rand(1), M, K, N)
    assert report.ok, str(report)
    assert torch.equal(c, torch.zeros(M * N))


def _loop_ir(step: str, cmp: str, back_on_true: bool) -> tuple[str, list[str]]:
    branch = "label %4, label %6" if back_on_true else "label %6, label %4"
    lines = [
        "define void @f(i64 %0) {",
        "  br label %4",
        "4:",
        "  %2 = phi i64 [ 0, %1 ], [ %3, %4 ]",
        f"  %3 = {step}",
        f"  %5 = {cmp}",
        f"  br i1 %5, {branch}",
        "6:",
        "  ret void",
        "}",
    ]
    defs = {}
    for ln in lines:
        s = ln.strip()
        if s.startswith("%") and " = " in s:
            k, v = s.split(" = ", 1)
            defs[k] = v
    return defs, lines


@pytest.mark.parametrize("step,cmp,back,expect", [
    ("add nuw nsw i64 %2, 1", "icmp eq i64 %3, %0", False, ("ne", "%0", 1)),
    ("add i64 %2, 4", "icmp ult i64 %3, %0", True, ("lt", "%0", 4)),
    ("add i64 %2, 4", "icmp ugt i64 %0, %3", True, ("lt", "%0", 4)),
    ("add i64 %2, 2", "icmp uge i64 %3, %0", False, ("lt", "%0", 2)),
    ("add i64 %2, 2", "icmp eq i64 %3, %0", False, None),       # may step over the bound
    ("add i64 %2, -1", "icmp ult i64 %3, %0", True, None),      # counts down
    ("add i64 %2, %0", "icmp ult i64 %3, %0", True, None),      # step not a constant
    ("add i64 %2, 1", "icmp ugt i64 %3, %0", True, None),       # continues above the bound
    ("add i64 %2, 1", "icmp ult i64 %3, %0", False, None),      # leaves while below it
])
def test_counted_loops_are_recognised_only_when_the_bound_limits_them(step, cmp, back, expect):
    defs, lines = _loop_ir(step, cmp, back)
    loop = counted_loop("%2", defs["%2"], defs, Blocks(lines))
    if expect is None:
        assert loop is None
    else:
        assert (loop["kind"], loop["bound"], loop["step"]) == expect and loop["start"] == "0"


def test_a_counter_that_could_wrap_gives_no_interval():
    from metal_kernel.check.affine import Evaluator, Geometry, Offset, const, sym, to_json

    def loop(bound: int, kind: str = "lt", start: int = 0, bits: int = 32) -> dict:
        return {"start": Offset(const(start)).to_json(), "bound": Offset(const(bound)).to_json(),
                "step": 1, "kind": kind, "bits": bits}

    geom = Geometry([64, 1, 1], [32, 1, 1], [2, 1, 1])
    ev = Evaluator(geom, lambda *a: None, [loop(100), loop(1 << 31), loop(0, "ne"), loop(50, "ne", 7),
                                             loop(1 << 31, bits=64)])
    assert ev.iv_interval(0) == (0, 99)
    assert ev.iv_interval(1) is None        # 2^31 does not fit an i32 counter's signed range
    assert ev.iv_interval(2) is None        # `!=` loop entered at its bound would wrap
    assert ev.iv_interval(3) == (7, 49)
    assert ev.iv_interval(4) == (0, (1 << 31) - 1)
    assert ev.linear(add_iv := {("iv:0",): 4, ("x",): 1}) == {"iv:0": 4, "x": 1}
    assert ev.extremes(ev.linear(add_iv)) == (0, 4 * 99 + 31)  # x: the position in the group
    assert ev.linear({("iv:0", "x"): 1}) is None  # a product with a thread variable is not linear
    assert not ev.exclusive([(ev.linear(sym("iv:0")), 4, [])])
    assert to_json(sym("iv:0")) == [[["iv:0"], 1]]


def _function(body: list[str]) -> tuple[dict, list[str]]:
    lines = ["define void @f(i32 %x, i32 %y, i32 %n, i32 %m) {", *body, "}"]
    defs = {}
    for ln in lines:
        s = ln.strip()
        if s.startswith("%") and " = " in s:
            k, v = s.split(" = ", 1)
            defs[k] = v
    return defs, lines


def test_guards_are_the_conditions_of_edges_that_dominate_the_block():
    from metal_kernel.check.guards import Guards

    defs, lines = _function([
        "  %a = icmp ult i32 %x, %n",
        "  %b = icmp sgt i32 %m, %y",
        "  %c = select i1 %a, i1 %b, i1 false",
        "  br i1 %c, label %then, label %join",
        "then:",
        "  %d = icmp uge i32 %x, 7",
        "  %e = xor i1 %d, true",
        "  br i1 %e, label %inner, label %join",
        "inner:",
        "  br label %join",
        "join:",
        "  ret void",
    ])
    g = Guards(Blocks(lines), defs)
    assert g.at("%then") == [("%x", "ult", "%n", 32), ("%y", "slt", "%m", 32)]
    assert sorted(g.at("%inner")) == sorted([("%x", "ult", "%n", 32), ("%y", "slt", "%m", 32),
                                             ("%x", "ult", "7", 32)])
    assert g.at("%join") == []  # reached from both sides of every branch


def test_a_disjunction_guards_only_its_false_edge():
    from metal_kernel.check.guards import Guards

    defs, lines = _function([
        "  %a = icmp uge i32 %x, %n",
        "  %b = icmp uge i32 %y, %m",
        "  %c = or i1 %a, %b",
        "  br i1 %c, label %out, label %body",
        "body:",
        "  ret void",
        "out:",
        "  ret void",
    ])
    g = Guards(Blocks(lines), defs)
    assert g.at("%body") == [("%x", "ult", "%n", 32), ("%y", "ult", "%m", 32)]
    assert g.at("%out") == []  # `a || b` says neither alone
