"""Every verification case runs under metal_kernel.check(): a kernel that
reads or writes out of bounds, races, or reads memory nobody wrote fails its
dtype even when its numbers happen to match the CPU (the neighbouring memory
was right, this schedule hid the race). Contiguous elementwise dispatches are
proven safe before they run and cost nothing extra (docs/checking.md)."""

from __future__ import annotations

from .report import DtypeResult, Failure


def run_checked(run, check: bool, notes: list) -> DtypeResult:
    """`run()` (one dtype's cases) under the checker when `check`; each
    finding becomes a failure of that dtype, the checker's notes go to
    `notes`."""
    if not check:
        return run()
    from ...check import check as checking

    with checking() as report:
        result = run()
    for f in report.findings:
        where = f" at {f.line}" if f.line else ""
        thread = f", thread {f.thread}" if f.thread else ""
        buffer = f", buffer {f.buffer[1]!r}" if f.buffer else ""
        result.failures.append(Failure(f"checker: {f.kind}", f"{f.message} in kernel {f.kernel}{where}{thread}{buffer}"))
    notes.extend(n for n in report.notes if n not in notes)
    # a claim in the report: a kernel that ran without the checker (the
    # notes say why) does not get it
    result.checked = not report.unchecked
    return result
