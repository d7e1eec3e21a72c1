"""`metal-kernel check -- python script.py`: runs a program with every Metal
kernel dispatch checked, as `compute-sanitizer` wraps a CUDA program."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile

import click

from .report import PREFIX
from .session import ALL_TOOLS


@click.command("check", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--tool", "tools", multiple=True, type=click.Choice(ALL_TOOLS),
              help="A tool to run (repeatable; default: all four).")
@click.option("--schedules", default=4, show_default=True, type=click.IntRange(1, 64),
              help="Schedules each dispatch runs under (1: the instrumented run only).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the shuffled schedules.")
@click.option("--max-findings", default=100, show_default=True, type=click.IntRange(1),
              help="Findings listed at most (the rest are counted).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as JSON on stdout when the program ends (nothing on stderr).")
@click.option("--error-exitcode", type=int, default=None,
              help="Exit with this code when there are findings (default: the program's own exit code).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def check_cmd(tools, schedules, seed, max_findings, as_json, error_exitcode, command):
    """Run COMMAND with every Metal kernel dispatch checked.

    \b
    Every Python process of COMMAND that imports metal_kernel runs its
    dispatches under metal_kernel.check(): out-of-bounds and misaligned
    accesses (memcheck), races on threadgroup and device memory (racecheck),
    barrier divergence and reads of inactive simd lanes (synccheck), reads of
    memory never written (initcheck), and results that change with the
    schedule. Findings print in compute-sanitizer's shape as they are found;
    the ERROR SUMMARY when the program ends.

    \b
    Examples:
      metal-kernel check -- python train.py
      metal-kernel check --tool racecheck --schedules 8 -- python -m pytest tests/
      metal-kernel check --json --error-exitcode 3 -- python demo.py > report.json

    \b
    Exit code: COMMAND's own, or --error-exitcode N when there are findings;
    2 when COMMAND cannot be started.
    """
    folder = tempfile.mkdtemp(prefix="mk-check-")
    env = dict(os.environ)
    env.update({
        "METAL_KERNEL_CHECK": "1",
        "METAL_KERNEL_CHECK_TOOLS": ",".join(tools or ALL_TOOLS),
        "METAL_KERNEL_CHECK_SCHEDULES": str(schedules),
        "METAL_KERNEL_CHECK_SEED": str(seed),
        "METAL_KERNEL_CHECK_MAX_FINDINGS": str(max_findings),
        "METAL_KERNEL_CHECK_REPORT_DIR": folder,
    })
    if as_json:
        env["METAL_KERNEL_CHECK_QUIET"] = "1"
    try:
        rc = subprocess.call(list(command), env=env)
    except OSError as e:
        click.echo(f"error: cannot run {command[0]!r}: {e.strerror or e}", err=True)
        sys.exit(2)
    reports = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            with open(path) as f:
                reports.append(json.load(f))
        except (OSError, ValueError):
            continue
    errors = sum(r.get("errors", 0) for r in reports)
    if as_json:
        merged = {"ok": errors == 0, "errors": errors, "exit_code": rc, "processes": len(reports),
                  "dispatches": sum(r.get("dispatches", 0) for r in reports),
                  "findings": [f for r in reports for f in r.get("findings", [])],
                  "notes": [n for r in reports for n in r.get("notes", [])]}
        click.echo(json.dumps(merged, indent=2))
    elif not reports:
        click.echo(f"{PREFIX}No process of this command checked a Metal kernel dispatch "
                   "(it must be a Python program that imports metal_kernel).", err=True)
    for path in glob.glob(os.path.join(folder, "*")):
        os.unlink(path)
    os.rmdir(folder)
    if errors and error_exitcode is not None:
        sys.exit(error_exitcode)
    sys.exit(rc)
