"""$METAL_KERNEL_CHECK=1: every dispatch of an unmodified program runs
checked. Findings go to stderr as they are found, the summary at exit.

Options, read at import: METAL_KERNEL_CHECK_TOOLS (comma-separated),
METAL_KERNEL_CHECK_SCHEDULES, METAL_KERNEL_CHECK_SEED,
METAL_KERNEL_CHECK_MAX_FINDINGS; METAL_KERNEL_CHECK_REPORT_DIR (a folder: the
process writes its report there as <pid>.json, which `metal-kernel check`
reads) and METAL_KERNEL_CHECK_QUIET=1 (nothing on stderr)."""

from __future__ import annotations

import atexit
import os
import sys

from ..runtime import library as _library
from .session import ALL_TOOLS, Session

_session: Session | None = None


def enabled() -> bool:
    return os.environ.get("METAL_KERNEL_CHECK", "").strip().lower() not in ("", "0", "false", "no", "off")


def _options() -> dict:
    env = os.environ
    tools = tuple(t.strip() for t in env.get("METAL_KERNEL_CHECK_TOOLS", ",".join(ALL_TOOLS)).split(",") if t.strip())
    return {"tools": tools,
            "schedules": int(env.get("METAL_KERNEL_CHECK_SCHEDULES", "4") or 4),
            "seed": int(env.get("METAL_KERNEL_CHECK_SEED", "0") or 0),
            "max_findings": int(env.get("METAL_KERNEL_CHECK_MAX_FINDINGS", "100") or 100)}


def activate():
    """Installs the process-wide checker (once)."""
    global _session
    if _session is not None:
        return
    quiet = os.environ.get("METAL_KERNEL_CHECK_QUIET", "") not in ("", "0")

    def printed(kernel, findings):
        if quiet:
            return
        for f in findings:
            sys.stderr.write("\n".join(f.text()) + "\n")
        sys.stderr.flush()

    try:
        _session = Session(on_dispatch=printed, **_options())
    except ValueError as e:
        sys.stderr.write(f"metal-kernel: METAL_KERNEL_CHECK: {e}\n")
        return
    _library.set_dispatch_interceptor(_session.dispatch, process_wide=True)
    atexit.register(_finish, quiet)


def _finish(quiet: bool):
    report = _session.finish()
    folder = os.environ.get("METAL_KERNEL_CHECK_REPORT_DIR")
    if folder:
        path = os.path.join(folder, f"{os.getpid()}.json")
        with open(path + ".tmp", "w") as f:
            f.write(report.dumps())
        os.replace(path + ".tmp", path)
    if not quiet:
        for n in report.notes:
            sys.stderr.write(f"========= Note: {n}\n")
        n = len(report.findings)
        sys.stderr.write(f"========= ERROR SUMMARY: {n} error{'s' if n != 1 else ''}\n")
        sys.stderr.flush()
