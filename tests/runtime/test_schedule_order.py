"""The other legal schedules a dispatch can run in (Launch::order, which
metal_kernel.check's schedule runs use): threadgroups last first or
shuffled, and in work-item loops the simdgroups of a region between two
barriers last first or shuffled, the threads of a simdgroup in order
(last first too in groups of at most two simdgroups). Each kernel takes a
ticket from an atomic counter in such a region; on one worker the tickets
are the order the threads ran in."""

import numpy as np
import pytest

import metal_kernel
from metal_kernel.runtime.native import ORDER_DEFAULT, ORDER_REVERSE, ORDER_SHUFFLE

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

#define TICKET_KERNEL(name, cond)                                                              \
kernel void name(device atomic_uint* next [[buffer(0)]], device uint* when [[buffer(1)]],      \
                 uint2 lid [[thread_position_in_threadgroup]],                                 \
                 uint li [[thread_index_in_threadgroup]],                                      \
                 uint2 tg [[threadgroup_position_in_grid]],                                    \
                 uint2 ntg [[threadgroups_per_grid]], uint2 size [[threads_per_threadgroup]]) { \
  threadgroup uint first[1];                                                                   \
  if (li == 0) first[0] = 0;                                                                   \
  threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
  if (cond) when[(tg.y * ntg.x + tg.x) * size.x * size.y + li] =                               \
      atomic_fetch_add_explicit(next, 1u, memory_order_relaxed);                               \
  threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
}

// Every thread takes a ticket.
TICKET_KERNEL(ticket_all, true)
// Only the first 40 threads of a group: the others are idle in the region
// (runtime/workitem/prefix_guard.py, a guard on the thread's index).
TICKET_KERNEL(ticket_first_40, li < 40)
// Only the threads with x < 40 (a guard on x: in 2-D groups, the first 40
// of every row).
TICKET_KERNEL(ticket_x_below_40, lid.x < 40)
"""

NONE = 0xFFFFFFFF


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def tickets(kernel, groups: int, group_size: list[int], order: int, seed: int = 0) -> np.ndarray:
    """when[group, thread]: the ticket each thread took (NONE: none), the
    dispatch run on one worker in `order`."""
    n = int(np.prod(group_size))
    nxt, when = np.zeros(1, np.uint32), np.full(groups * n, NONE, np.uint32)
    threads = [group_size[0] * groups, *group_size[1:]]
    b = kernel._bind((nxt, when), None)
    grid, group, ngroups = kernel._geometry((nxt, when), b, threads, group_size, None)
    launch = kernel._launch_struct(b, grid, group, ngroups, None)
    launch.order, launch.seed, launch.max_workers = order, seed, 1
    kernel._run(launch, b)
    return when.reshape(groups, n)


def run_order(when: np.ndarray) -> list[tuple[int, int]]:
    """(group, thread) of the threads that took a ticket, in ticket order."""
    taken = [(int(t), g, i) for g, row in enumerate(when) for i, t in enumerate(row) if t != NONE]
    return [(g, i) for _, g, i in sorted(taken)]


def simdgroups_in_order(threads: list[int], reverse: bool) -> list[int]:
    """`threads` by simdgroup, last simdgroup first when `reverse`, each in order."""
    by_sg: dict[int, list[int]] = {}
    for t in sorted(threads):
        by_sg.setdefault(t // 32, []).append(t)
    return [t for sg in sorted(by_sg, reverse=reverse) for t in by_sg[sg]]


def test_the_kernels_run_as_work_item_loops(lib):
    for name in ("ticket_all", "ticket_first_40", "ticket_x_below_40"):
        assert getattr(lib, name)._entry.mode == "workitem-loops"


ACTIVE = [("ticket_all", lambda t: True), ("ticket_first_40", lambda t: t < 40), ("ticket_x_below_40", lambda t: t < 40)]


@pytest.mark.parametrize("name, active", ACTIVE)
def test_default_order_runs_groups_and_threads_in_order(lib, name, active):
    when = tickets(getattr(lib, name), 3, [256], ORDER_DEFAULT)
    assert run_order(when) == [(g, t) for g in range(3) for t in range(256) if active(t)]


@pytest.mark.parametrize("name, active", ACTIVE)
def test_reversed_runs_groups_and_simdgroups_last_first(lib, name, active):
    when = tickets(getattr(lib, name), 3, [256], ORDER_REVERSE)
    threads = simdgroups_in_order([t for t in range(256) if active(t)], reverse=True)
    assert run_order(when) == [(g, t) for g in (2, 1, 0) for t in threads]


def test_reversed_runs_the_threads_of_small_groups_last_first(lib):
    when = tickets(lib.ticket_all, 2, [64], ORDER_REVERSE)
    assert run_order(when) == [(g, t) for g in (1, 0) for t in range(63, -1, -1)]


@pytest.mark.parametrize("name, active", [("ticket_all", lambda x: True), ("ticket_x_below_40", lambda x: x < 40)])
def test_reversed_in_two_dimensional_groups(lib, name, active):
    # 48 x 4 threads: simdgroups start mid-row.
    when = tickets(getattr(lib, name), 2, [48, 4], ORDER_REVERSE)
    threads = simdgroups_in_order([t for t in range(192) if active(t % 48)], reverse=True)
    assert run_order(when) == [(g, t) for g in (1, 0) for t in threads]


def simdgroup_order(when_row: np.ndarray) -> list[int]:
    """The simdgroups of one group in the order they ran, each checked to
    have run as one piece, its threads in order."""
    ran = [t for t in np.argsort(when_row, kind="stable") if when_row[t] != NONE]
    order = []
    for t in ran:
        if not order or order[-1] != t // 32:
            assert t // 32 not in order, f"simdgroup {t // 32} ran in pieces"
            order.append(t // 32)
    for sg in order:
        mine = [t for t in ran if t // 32 == sg]
        assert mine == sorted(mine), f"simdgroup {sg} ran its threads out of order"
    return order


@pytest.mark.parametrize("name, simdgroups", [("ticket_all", 8), ("ticket_first_40", 2), ("ticket_x_below_40", 2)])
def test_shuffled_runs_whole_simdgroups_in_a_seeded_order(lib, name, simdgroups):
    kernel, groups, orders = getattr(lib, name), 8, set()
    for seed in range(4):
        when = tickets(kernel, groups, [256], ORDER_SHUFFLE, seed)
        assert (tickets(kernel, groups, [256], ORDER_SHUFFLE, seed) == when).all(), "not deterministic"
        # one worker: a group runs whole, then the next
        ran = [g for g, _ in run_order(when)]
        assert sorted(g for i, g in enumerate(ran) if i == 0 or ran[i - 1] != g) == list(range(groups))
        orders |= {tuple(simdgroup_order(row)) for row in when}
    assert all(sorted(o) == list(range(simdgroups)) for o in orders)
    assert len(orders) > 1  # the order varies with the group and the seed


@pytest.mark.parametrize("groups", [1, 3, 17, 100])
def test_shuffled_groups_are_each_run_once_in_a_seeded_order(lib, groups):
    orders = set()
    for seed in (0, 1, 2):
        when = tickets(lib.ticket_all, groups, [32], ORDER_SHUFFLE, seed)
        group_order = [g for g, t in run_order(when) if t == 0]
        assert sorted(group_order) == list(range(groups))
        orders.add(tuple(group_order))
    if groups > 2:
        assert len(orders) > 1  # so at least one is not the default order
