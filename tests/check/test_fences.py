"""racecheck across threadgroups: a device-scope fence and an atomic order
two groups (mk/check_sync.h); anything short of that is still a race, with
what was missing named. Metal needs coherent(device) and a fence on both
sides; CUDA (the Programming Guide's __threadfence example) needs the
writer's fence only."""

from __future__ import annotations

import pytest
import torch

import metal_kernel as mk
from metal_kernel import port

GROUPS, THREADS = 8, 8
FENCE = "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);"

# Each group writes its partial sums (WRITES), then thread 0 takes a ticket;
# the group that takes the last one sums every group's partials.
MSL = """
#include <metal_stdlib>
using namespace metal;
kernel void last_block(COH device float* partial [[buffer(0)]], device atomic_uint* count [[buffer(1)]],
                       device float* out [[buffer(2)]],
                       uint g [[threadgroup_position_in_grid]], uint t [[thread_position_in_threadgroup]],
                       uint ng [[threadgroups_per_grid]], uint nt [[threads_per_threadgroup]]) {
  threadgroup uint last;
  WRITES
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (t == 0) {
    last = atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
    ACQUIRE
  }
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (last == ng - 1) {
    float s = 0;
    for (uint j = 0; j < ng; ++j) s += partial[j * nt + t];
    out[t] = s;
  }
}
"""
WRITE = "partial[g * nt + t] = float(g * nt + t);"


def _expected():
    return torch.tensor([sum(float(j * THREADS + t) for j in range(GROUPS)) for t in range(THREADS)])


def _run_msl(writes: str, acquire: str = FENCE, coherent: bool = True):
    src = MSL.replace("COH", "coherent(device)" if coherent else "").replace("WRITES", writes)
    lib = mk.compile_shader(src.replace("ACQUIRE", acquire))
    out = torch.full((THREADS,), float("nan"))
    with mk.check() as report:
        lib.last_block(torch.full((GROUPS * THREADS,), float("nan")), torch.zeros(1, dtype=torch.int32), out,
                       threads=GROUPS * THREADS, group_size=THREADS)
    return report, out


def _races(report):
    return [f for f in report.findings if f.kind == "race"]


def test_a_fenced_last_block_sum_on_a_coherent_buffer_is_ordered():
    report, out = _run_msl(f"{WRITE}\n  {FENCE}")
    assert report.ok, str(report)
    assert torch.equal(out, _expected())


def test_one_fence_after_the_barrier_releases_every_thread_s_writes():
    # The barrier carries the other threads' writes to thread 0's fence.
    writes = (f"{WRITE}\n  threadgroup_barrier(mem_flags::mem_device);\n"
              f"  if (t == 0) {{ {FENCE} }}")
    report, out = _run_msl(writes)
    assert report.ok, str(report)
    assert torch.equal(out, _expected())


@pytest.mark.parametrize("fence", [
    "",  # no release at all
    "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_threadgroup);",
    "atomic_thread_fence(mem_flags::mem_threadgroup, memory_order_seq_cst, thread_scope_device);",
    "atomic_thread_fence(mem_flags::mem_device, memory_order_relaxed, thread_scope_device);",
], ids=["none", "threadgroup-scope", "threadgroup-memory", "relaxed"])
def test_a_fence_that_does_not_order_device_memory_across_groups_releases_nothing(fence):
    report, _ = _run_msl(f"{WRITE}\n  {fence}")
    races = _races(report)
    assert races and all(f.buffer == (0, "partial") for f in races if f.address_space == "device"), str(report)
    assert any("ordered only when" in " ".join(f.details) for f in races), str(report)


def test_a_write_after_the_thread_s_fence_is_not_released():
    writes = f"{FENCE}\n  {WRITE}"
    report, _ = _run_msl(writes)
    assert _races(report), str(report)


def test_a_fence_by_another_thread_in_the_same_epoch_does_not_release_a_write():
    # Thread 1 writes thread 0's slot too, after the barrier-free fence of thread 0.
    writes = (f"{WRITE}\n  {FENCE}\n  threadgroup_barrier(mem_flags::mem_device);\n"
              "  if (t == 1) partial[g * nt] = -1.0f;")
    report, _ = _run_msl(writes)
    races = _races(report)
    assert races and any(f.offset % (THREADS * 4) == 0 for f in races), str(report)


def test_without_the_reader_s_fence_the_race_says_the_acquire_is_missing():
    report, _ = _run_msl(f"{WRITE}\n  {FENCE}", acquire="")
    races = _races(report)
    assert races and all("no device-scope fence after it" in " ".join(f.details) for f in races), str(report)


def test_a_buffer_that_is_not_coherent_is_never_ordered_across_groups():
    report, _ = _run_msl(f"{WRITE}\n  {FENCE}", coherent=False)
    races = _races(report)
    assert races and all("not declared coherent(device)" in " ".join(f.details) for f in races), str(report)


CUDA = """
__global__ void last_block(float* partial, unsigned* count, float* out) {
  __shared__ unsigned last;
  partial[blockIdx.x * blockDim.x + threadIdx.x] = float(blockIdx.x * blockDim.x + threadIdx.x);
  FENCE
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(count, 1u);
  __syncthreads();
  if (last == gridDim.x - 1) {
    float s = 0;
    for (unsigned j = 0; j < gridDim.x; ++j) s += partial[j * blockDim.x + threadIdx.x];
    out[threadIdx.x] = s;
  }
}
"""


@pytest.mark.parametrize("fence,ordered", [("__threadfence();", True), ("__threadfence_system();", True),
                                           ("__threadfence_block();", False), ("", False)])
def test_cuda_last_block_needs_the_writer_s_threadfence_only(fence, ordered):
    lib = port.load_cuda(CUDA.replace("FENCE", fence))
    out = torch.full((THREADS,), float("nan"))
    with mk.check() as report:
        lib["last_block"](torch.full((GROUPS * THREADS,), float("nan")), torch.zeros(1, dtype=torch.int32), out,
                          grid=GROUPS, block=THREADS)
    assert report.ok == ordered, str(report)
    assert torch.equal(out, _expected())


def test_an_acquisition_reaches_the_other_threads_only_through_a_device_barrier():
    # The second barrier orders threadgroup memory only: `last` reaches every
    # thread, thread 0's acquisition of the other groups' partials does not.
    src = MSL.replace("COH", "coherent(device)").replace("WRITES", f"{WRITE}\n  {FENCE}").replace("ACQUIRE", FENCE)
    second = src.rindex("threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);")
    src = src[:second] + "threadgroup_barrier(mem_flags::mem_threadgroup);" + src[second + len(
        "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);"):]
    lib = mk.compile_shader(src)
    with mk.check() as report:
        lib.last_block(torch.full((GROUPS * THREADS,), float("nan")), torch.zeros(1, dtype=torch.int32),
                       torch.full((THREADS,), float("nan")), threads=GROUPS * THREADS, group_size=THREADS)
    races = _races(report)
    assert races and all("no barrier that orders device memory" in " ".join(f.details) for f in races), str(report)
    # thread 0 itself read after its own fence: never reported
    assert all(f.thread[0] % THREADS != 0 for f in races), str(report)


def test_releases_past_the_last_tracked_address_are_not_followed_and_say_so():
    # Every group releases to a counter of its own: ten addresses, eight tracked.
    src = MSL.replace("COH", "coherent(device)").replace("WRITES", f"{WRITE}\n  {FENCE}").replace("ACQUIRE", FENCE)
    src = src.replace("atomic_fetch_add_explicit(count, 1u", "atomic_fetch_add_explicit(count + g, 1u")
    src = src.replace("if (last == ng - 1)", "if (g == ng - 1 && last == 0)")
    lib = mk.compile_shader(src)
    groups = 10
    with mk.check() as report:
        lib.last_block(torch.full((groups * THREADS,), float("nan")), torch.zeros(groups, dtype=torch.int32),
                       torch.full((THREADS,), float("nan")), threads=groups * THREADS, group_size=THREADS)
    assert _races(report), str(report)  # unordered anyway: the last group acquires only its own counter
    assert any("more than 8 addresses" in n for n in report.notes), report.notes


def _fence(order: str) -> str:
    return f"atomic_thread_fence(mem_flags::mem_device, memory_order_{order}, thread_scope_device);"


@pytest.mark.parametrize("writer,reader,ordered", [
    ("release", "acquire", True), ("acq_rel", "acq_rel", True),
    ("acquire", "acquire", False),  # an acquire fence releases nothing
    ("release", "release", False),  # a release fence acquires nothing
])
def test_a_fence_releases_or_acquires_by_its_memory_order(writer, reader, ordered):
    report, out = _run_msl(f"{WRITE}\n  {_fence(writer)}", acquire=_fence(reader))
    assert report.ok == ordered, str(report)
    assert torch.equal(out, _expected())


# Two levels of tickets: the last group of each row of four takes a ticket
# of the grid's; the last of those reads every group's partials, the other
# row's ordered only through that row's last group (a chain through a third
# group). BETWEEN is what the row's last group does between its two tickets.
TWO_LEVEL = """
#include <metal_stdlib>
using namespace metal;
kernel void two_level(coherent(device) device float* partial [[buffer(0)]], device atomic_uint* rows [[buffer(1)]],
                      device atomic_uint* total [[buffer(2)]], device float* out [[buffer(3)]],
                      uint g [[threadgroup_position_in_grid]], uint t [[thread_position_in_threadgroup]],
                      uint ng [[threadgroups_per_grid]], uint nt [[threads_per_threadgroup]]) {
  threadgroup uint row_last, last;
  partial[g * nt + t] = float(g * nt + t);
  FENCE
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (t == 0) {
    row_last = atomic_fetch_add_explicit(rows + g / 4, 1u, memory_order_relaxed);
    FENCE
  }
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (row_last != 3) return;
  if (t == 0) {
    BETWEEN
    last = atomic_fetch_add_explicit(total, 1u, memory_order_relaxed);
    FENCE
  }
  threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
  if (last != ng / 4 - 1) return;
  float s = 0;
  for (uint j = 0; j < ng; ++j) s += partial[j * nt + t];
  out[t] = s;
}
"""


@pytest.mark.parametrize("between,ordered", [
    (FENCE, True),  # the row's acquisition, then a fence, then the release to `total`: carried on
    ("", False),    # no fence after the row's acquisition: the release to `total` carries nothing
], ids=["fenced", "not-fenced"])
def test_an_order_passes_through_a_third_group_when_it_fenced_after_acquiring(between, ordered):
    # Thread 0 fenced after taking the row's ticket; in "not-fenced" its only
    # fence is that acquire-and-release one: drop it, keep the acquire.
    src = TWO_LEVEL.replace("BETWEEN", between).replace("FENCE", FENCE)
    if not ordered:
        first = src.index(FENCE, src.index("rows + g / 4"))
        src = src[:first] + _fence("acquire") + src[first + len(FENCE):]
    lib = mk.compile_shader(src)
    out = torch.full((THREADS,), float("nan"))
    with mk.check() as report:
        lib.two_level(torch.full((GROUPS * THREADS,), float("nan")), torch.zeros(2, dtype=torch.int32),
                      torch.zeros(1, dtype=torch.int32), out, threads=GROUPS * THREADS, group_size=THREADS)
    assert report.ok == ordered, str(report)
    assert torch.equal(out, _expected())
