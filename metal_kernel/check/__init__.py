"""Checked execution of Metal kernels: compute-sanitizer's tools for Metal.

    with metal_kernel.check() as report:
        lib.kernel(*args, threads=..., group_size=...)
    print(report)            # compute-sanitizer-shaped text
    report.findings          # list[Finding]; report.ok: no findings

Every dispatch inside the block runs in the checked build of its library
(instrumented loads and stores, check/instrument.py; hooks in the group
driver, mk/workitem.h), then again under other legal schedules
(check/session.py). Tools: memcheck (out-of-bounds and misaligned accesses),
racecheck (threadgroup and device memory, Metal's barrier flags honoured),
synccheck (barrier divergence, simd functions reading inactive lanes),
initcheck (threadgroup and private memory read before any write)."""

from __future__ import annotations

from contextlib import contextmanager

from ..runtime import library as _library
from .report import Finding, OtherAccess, Report
from .session import ALL_TOOLS, Session


@contextmanager
def check(tools=ALL_TOOLS, schedules: int = 4, seed: int = 0, max_findings: int = 100):
    """Runs every dispatch of the block checked; yields the Report, filled
    as dispatches run (complete when the block ends)."""
    session = Session(tools, schedules, seed, max_findings)
    prev = _library.set_dispatch_interceptor(session.dispatch)
    try:
        yield session.report
    finally:
        _library.set_dispatch_interceptor(prev)
        session.finish()


__all__ = ["check", "Report", "Finding", "OtherAccess", "ALL_TOOLS"]
