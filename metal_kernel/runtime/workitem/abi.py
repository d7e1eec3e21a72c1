"""Names and limits the work-item-loop compiler shares with the C side: the
markers the rewriter's per-thread functions call, and the group driver's
layouts and limits (mk/workitem.h, mk/simd.h)."""

BARRIER = "__mk_sync_barrier"
SIMD = "__mk_sync_simd"
THREAD_INDEX = "__mk_thread_index"
TG_ALLOC = "__mk_tg_alloc"
SYNC_MARKERS = (BARRIER, SIMD)
# The flags of a barrier marker that is a resume point in a loop
# (loop_points.py; Sync kind 3, SYNC_POINT in mk/workitem/descriptor.h): no barrier.
POINT_FLAGS = 0x40000000
ALL_MARKERS = (BARRIER, SIMD, THREAD_INDEX, TG_ALLOC)
FIBER_PREFIX = "__mk_fiber_"  # the markers' fiber-mode bodies (mk/workitem/group.h)

DONE = 0x7FFFFFFF
MAX_THREADS = 1024
WIGROUP_TG_ALLOCS = 80  # offsetof(WiGroup, tg_allocs), mk/workitem/group.h
WIGROUP_SIZE = 1624  # sizeof(WiGroup)
MAX_TG_ALLOCS = 64
MAX_SYNC_POINTS = 512
MAX_REMAT = 48  # instructions recomputed per value and resume point
MAX_SIMD_BYTES = 256  # operand / result of one simd call
# simd operations whose computation never reads the lane argument (mk/simd.h,
# enum SimdOp): barrier, the reductions and scans, broadcast_first, ballot,
# any, all, is_first, active mask. Their calls store no argument per thread.
# (Shuffles, broadcast and simdgroup matrices read it.)
ARGLESS_SIMD_OPS = frozenset(range(1, 13)) | frozenset(range(22, 28))
