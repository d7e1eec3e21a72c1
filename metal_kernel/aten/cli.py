"""`metal-kernel aten ...`: the click group the top-level CLI mounts.

Every user error (AtenError) ends as one line on stderr and exit code 2, with
no file changed.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

import click

from .errors import EXIT_USER_ERROR, AtenError
from .edit.fileops import apply_changes
from .model.tree import PyTorchTree


def _user_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AtenError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(EXIT_USER_ERROR)
    return wrapper


def _tree(root: str | None) -> PyTorchTree:
    return PyTorchTree.from_root(root) if root else PyTorchTree.installed()


pytorch_option = click.option("--pytorch", "root", type=click.Path(file_okay=False),
                              help="PyTorch checkout root")
json_option = click.option("--json", "as_json", is_flag=True, help="machine-readable output")


@click.group(name="aten")
def aten():
    """The in-tree PyTorch MPS workflow: coverage, add, migrate, verify."""


@aten.command()
@pytorch_option
@json_option
@_user_errors
def coverage(root, as_json):
    """Ops with a CUDA kernel but no MPS kernel, classified, with their xfail entries."""
    from .coverage import compute, render_table

    report = compute(_tree(root))
    click.echo(json.dumps(report.to_json(), indent=1) if as_json else render_table(report))


@aten.command()
@click.argument("op")
@click.option("--pytorch", "root", type=click.Path(file_okay=False), required=True,
              help="PyTorch checkout root")
@click.option("--functor", "functor_file", type=click.Path(dir_okay=False),
              help="file holding `struct <name>_functor` (and helpers)")
@click.option("--expr", help="one expression of x (unary) or a, b (binary)")
@click.option("--kernel", "kernel_file", type=click.Path(dir_okay=False),
              help="custom Metal kernel for an op with a host recipe (take): a template with a "
                   "`#define REGISTER_<OP>_OP(T, I)` [[host_name]] instantiation macro")
@click.option("--dry-run", is_flag=True, help="print the unified diff, write nothing")
@click.option("--verify/--no-verify", "do_verify", default=True,
              help="run the emulated verification after writing (needs the runtime)")
@json_option
@_user_errors
def add(op, root, functor_file, expr, kernel_file, dry_run, do_verify, as_json):
    """Give OP a native Metal implementation in a PyTorch checkout."""
    from . import add as add_mod

    tree = PyTorchTree.from_root(root)
    plan = add_mod.plan(tree, op, Path(functor_file) if functor_file else None, expr,
                        Path(kernel_file) if kernel_file else None)
    if dry_run:
        if as_json:
            click.echo(json.dumps(plan.to_json(tree) | {"diff": _diff(tree, plan.pending)}, indent=1))
        else:
            click.echo(_diff(tree, plan.pending), nl=False)
        return
    written = apply_changes(plan.pending)
    result = plan.to_json(tree)
    if do_verify and plan.verifiable:
        try:
            result["verify"] = _run_verify(tree, op, as_json)
        except AtenError as err:  # files are written; say so instead of "no change"
            result["verify"] = {"failed": True, "error": str(err)}
            click.echo(f"verification could not run: {err}", err=True)
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    _print_add(tree, plan, written)
    if result.get("verify", {}).get("failed"):
        sys.exit(1)


@aten.command()
@click.argument("op")
@click.option("--pytorch", "root", type=click.Path(file_okay=False), required=True)
@click.option("--dry-run", is_flag=True, help="print the unified diff, write nothing")
@json_option
@_user_errors
def migrate(op, root, dry_run, as_json):
    """Collapse legacy `MPS: op_out_mps` rows of OP into the shared dispatch line."""
    from . import migrate as migrate_mod

    tree = PyTorchTree.from_root(root)
    plan = migrate_mod.plan(tree, op)
    pending = [plan.change] if plan.change.changed else []
    if dry_run:
        click.echo(_diff(tree, pending), nl=False)
        return
    apply_changes(pending)
    if as_json:
        click.echo(json.dumps(plan.to_json(tree), indent=1))
        return
    for a in plan.actions:
        click.echo(f"{a.entry} (line {a.line}): {a.action} {a.detail}".rstrip())
    for kernel, where in plan.legacy:
        click.echo(f"delete the old implementation {kernel}: {', '.join(where) or 'not found in operations/*.mm'}")
    if not pending:
        click.echo("nothing to migrate")


@aten.command()
@click.argument("op")
@click.option("--pytorch", "root", type=click.Path(file_okay=False), required=True)
@json_option
@_user_errors
def verify(op, root, as_json):
    """Run OP's kernels through the emulated MPS host (or its recipe's host twin) against the CPU op."""
    tree = PyTorchTree.from_root(root)
    result = _run_verify(tree, op, as_json)
    if as_json:
        click.echo(json.dumps(result, indent=1))
    if result.get("failed"):
        sys.exit(1)


def _run_verify(tree, op, quiet) -> dict:
    from . import verify as verify_mod

    if not verify_mod.runtime_available():
        msg = "verification skipped: metal_kernel.compile_shader is not available"
        if not quiet:
            click.echo(msg)
        return {"skipped": msg}
    t0 = time.perf_counter()
    report = verify_mod.verify_op(tree, op)
    if not quiet:
        click.echo(report.render())
        click.echo(f"verified in {time.perf_counter() - t0:.1f}s")
    return report.to_json()


def _diff(tree, changes) -> str:
    return "".join(c.diff(tree.relative(c.path)) for c in changes)


def _print_add(tree, plan, written):
    click.echo(f"{plan.op}: kernel '{plan.kernel}' ({plan.arity or 'custom kernel, host recipe'}), "
               f"stub {plan.stub or '-'}, "
               f"dtypes {', '.join(plan.dtypes)}")
    for a in plan.dispatch:
        click.echo(f"  dispatch {a.entry} (line {a.line}): {a.action} {a.detail}".rstrip())
    for path in written:
        click.echo(f"  wrote {tree.relative(path)}")
    if not written:
        click.echo("  nothing to change: already done")
    for x in plan.removed_xfails:
        click.echo(f"  removed common_mps.py entry {x}")
    for s in plan.mps_skips:
        click.echo(f"  OpInfo decorator still skips MPS: {s}")
    for n in plan.notes:
        click.echo(f"  note: {n}")
