"""The command line of the standalone benchmark scripts (dispatch_cost.py,
matmul_floor.py): --repeat and --json, the machine described, the runs
measured, the table printed, and the JSON written with every run."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path

import machine

import metal_kernel


def main(doc: str, measure: Callable[[int], list[dict]], table: Callable[[list[dict]], str],
         repeat: int, repeat_help: str, extra: dict | None = None, argv=None) -> int:
    """`doc`: the script's docstring (its first paragraph the description);
    `measure(repeat)` the rows, `table(rows)` their table; `extra`: more
    keys for the JSON."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    ap.add_argument("--json", metavar="OUT", help="write every run and the machine to OUT")
    ap.add_argument("--repeat", type=int, default=repeat, help=f"{repeat_help} (default {repeat})")
    args = ap.parse_args(argv)
    workers = int(os.environ.get("METAL_KERNEL_NUM_THREADS", "0") or 0) or os.cpu_count()
    info = machine.describe("n/a (not used)", workers)
    rows = measure(args.repeat)
    print(table(rows))
    if args.json:
        out = {"schema": 1, "machine": info, **(extra or {}), "rows": rows}
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def builds(source: str, switch: str, settings: dict[str, str]) -> dict[str, object]:
    """`source` compiled once per setting of the environment switch `switch`
    (read at compile time, part of the cache key): {label: library}, for
    scripts that time a runtime feature against its absence in one process."""
    libs = {}
    saved = os.environ.get(switch)
    try:
        for label, value in settings.items():
            os.environ[switch] = value
            libs[label] = metal_kernel.compile_shader(source)
    finally:
        if saved is None:
            os.environ.pop(switch, None)
        else:
            os.environ[switch] = saved
    return libs
