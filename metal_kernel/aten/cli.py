"""`metal-kernel aten ...`: the click group the top-level CLI mounts.

Exit codes, in every output mode (`--json` included):
0 done (and verified, where verification ran);
1 verification failed, found no case for some dtype, or could not run;
2 a user error (AtenError): one line on stderr, nothing written. A different
  implementation already in place is one too: the line, then the diff `--force`
  would apply.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

import click

from .errors import EXIT_USER_ERROR, AtenError, DifferentImplementation
from .model.tree import PyTorchTree

EXIT_VERIFY_FAILED = 1


def _user_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AtenError as err:
            click.echo(f"error: {err}", err=True)
            if isinstance(err, DifferentImplementation):
                click.echo(err.diff, nl=False)
            sys.exit(EXIT_USER_ERROR)
    return wrapper


def _tree(root: str | None) -> PyTorchTree:
    return PyTorchTree.from_root(root) if root else PyTorchTree.installed()


pytorch_option = click.option("--pytorch", "root", type=click.Path(file_okay=False),
                              help="PyTorch checkout root")
json_option = click.option("--json", "as_json", is_flag=True, help="machine-readable output (same exit codes)")
dtype_option = click.option("--dtype", "dtypes", multiple=True,
                            help="verify only these dtypes (torch names: float16, int64, ...); repeatable")
math_option = click.option("--math", "math", type=click.Choice(["exact", "bounds", "both"]), default="both",
                           show_default=True,
                           help="runtime math for verification: exact, device-like ulp-bounded errors "
                                "(bounds, where the runtime offers it), or both")
check_option = click.option("--check/--no-check", "check", default=True, show_default=True,
                            help="run every case under metal_kernel.check(): an out-of-bounds access, race or "
                                 "uninitialised read fails the dtype even when the numbers match")


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
@click.option("--force", is_flag=True,
              help="replace the op's functor, REGISTER_* lines and host registration when a different "
                   "implementation is already there (without it, add shows the diff and stops)")
@click.option("--dry-run", is_flag=True, help="print the unified diff, write nothing")
@click.option("--verify/--no-verify", "do_verify", default=True,
              help="compile the op's kernels before writing and verify them after (needs the runtime)")
@dtype_option
@math_option
@check_option
@json_option
@_user_errors
def add(op, root, functor_file, expr, kernel_file, force, dry_run, do_verify, dtypes, math, check, as_json):
    """Give OP a native Metal implementation in a PyTorch checkout."""
    from . import add as add_mod
    from .edit.fileops import apply_changes
    from .verify import runtime_available

    tree = PyTorchTree.from_root(root)
    dtypes = _dtypes(dtypes)
    plan = add_mod.plan(tree, op, Path(functor_file) if functor_file else None, expr,
                        Path(kernel_file) if kernel_file else None, force=force)
    if dry_run:
        diff = "".join(c.diff(tree.relative(c.path)) for c in plan.pending)
        click.echo(json.dumps(plan.to_json(tree) | {"diff": diff}, indent=1) if as_json else diff, nl=as_json)
        return
    verify = do_verify and plan.verifiable and runtime_available()
    if verify:
        add_mod.check_compiles(tree, plan, dtypes)
    written = apply_changes(plan.pending)
    result = plan.to_json(tree)
    if not as_json:
        click.echo(add_mod.render(tree, plan, written))
    if verify:
        result["verify"] = _run_verify(tree, op, dtypes, math, as_json, check)
    elif do_verify and plan.verifiable:
        result["verify"] = {"skipped": "metal_kernel.compile_shader is not available"}
        if not as_json:
            click.echo("verification skipped: metal_kernel.compile_shader is not available")
    if as_json:
        click.echo(json.dumps(result, indent=1))
    if result.get("verify", {}).get("failed"):
        sys.exit(EXIT_VERIFY_FAILED)


@aten.command()
@click.argument("op")
@click.option("--pytorch", "root", type=click.Path(file_okay=False), required=True)
@click.option("--dry-run", is_flag=True, help="print the unified diff, write nothing")
@json_option
@_user_errors
def migrate(op, root, dry_run, as_json):
    """Collapse legacy `MPS: op_out_mps` rows of OP into the shared dispatch line."""
    from . import migrate as migrate_mod
    from .edit.fileops import apply_changes

    tree = PyTorchTree.from_root(root)
    plan = migrate_mod.plan(tree, op)
    pending = [plan.change] if plan.change.changed else []
    if dry_run:
        click.echo("".join(c.diff(tree.relative(c.path)) for c in pending), nl=False)
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
@dtype_option
@math_option
@check_option
@json_option
@_user_errors
def verify(op, root, dtypes, math, check, as_json):
    """Run OP's kernels through the emulated MPS host (or its recipe's host twin) against the CPU op."""
    from .verify import runtime_available

    tree = PyTorchTree.from_root(root)
    if not runtime_available():
        raise AtenError("metal_kernel.compile_shader (the runtime) is not available")
    result = _run_verify(tree, op, _dtypes(dtypes), math, as_json, check)
    if as_json:
        click.echo(json.dumps(result, indent=1))
    if result.get("failed"):
        sys.exit(EXIT_VERIFY_FAILED)


def _dtypes(names):
    import torch

    found = [getattr(torch, n, None) for n in names]
    bad = [n for n, d in zip(names, found) if not isinstance(d, torch.dtype)]
    if bad:
        raise AtenError(f"unknown dtype {', '.join(bad)} (use torch names: float32, float16, int64, ...)")
    return found or None


def _run_verify(tree, op, dtypes, math, quiet, check: bool = True) -> dict:
    """Verify OP; a verification that cannot run (its kernels do not compile, ...) fails."""
    from .verify import verify_op

    modes = ("exact", "bounds") if math == "both" else (math,)
    t0 = time.perf_counter()
    try:
        report = verify_op(tree, op, dtypes, modes, check=check)
    except AtenError as err:
        click.echo(f"verification could not run: {err}", err=True)
        return {"failed": True, "error": str(err)}
    if not quiet:
        click.echo(report.render())
        click.echo(f"verified in {time.perf_counter() - t0:.1f}s")
    return report.to_json()
