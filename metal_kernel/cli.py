"""The `metal-kernel` command: one subcommand per front door.

Exit codes: 0 success, 1 the checked thing failed (compile error, kernel
fault, verification mismatch), 2 bad usage or input (click's convention).
"""

from __future__ import annotations

import json
import shutil
import sys

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="metal-kernel")
def main():
    """Run, check, port and upstream Metal compute kernels on any machine.

    \b
    Examples:
      metal-kernel compile my_kernels.metal          # compile, list kernels
      metal-kernel compile k.metal --json            # machine-readable
      metal-kernel doctor                            # toolchain + self-test
      metal-kernel check -- python my_script.py      # run it with every dispatch checked
      metal-kernel port kernels.cu -o out/ --verify   # CUDA -> Metal, every kernel verified
      metal-kernel aten coverage                     # ops missing MPS
    """


def _parse_defines(values):
    out = {}
    for v in values:
        name, _, value = v.partition("=")
        out[name] = value if _ else None
    return out


@main.command("compile")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-I", "--include", "include_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Add an include directory (repeatable).")
@click.option("-D", "--define", "defines", multiple=True, metavar="NAME[=VALUE]",
              help="Predefine a macro (repeatable).")
@click.option("--std", "language_version", default="3.2", show_default=True,
              type=click.Choice(["3.0", "3.1", "3.2", "4.0"]), help="Metal language version.")
@click.option("--json", "as_json", is_flag=True, help="Print the kernels as JSON.")
def compile_cmd(file, include_dirs, defines, language_version, as_json):
    """Compile a .metal FILE for the CPU runtime and list its kernels.

    Exits 1 with the compiler's message (pointing at your line) when it does
    not compile.
    """
    from .runtime import MetalCompileError, compile_shader

    with open(file) as f:
        source = f.read()
    try:
        lib = compile_shader(source, include_dirs=include_dirs, defines=_parse_defines(defines),
                             language_version=language_version, source_name=file)
    except MetalCompileError as e:
        if as_json:
            click.echo(json.dumps({"ok": False, "file": e.filename, "line": e.lineno,
                                   "error": e.detail}))
        else:
            click.echo(f"error: {e}", err=True)
        sys.exit(1)
    kernels = []
    for name in dir(lib):
        # A large file's kernels are built on first use: list them unbuilt
        # (their threadgroup memory is known once built).
        entry = lib._entries[name]
        k = None if lib._compiled.lazy else getattr(lib, name)
        kernels.append({
            "name": name,
            "buffers": [{"index": p.index, "name": p.name} for p in entry.params if p.kind == "buffer"],
            "threadgroup_buffers": [p.index for p in entry.params if p.kind == "threadgroup"],
            "attributes": [p.attribute for p in entry.params if p.kind == "attribute"],
            "max_threads_per_threadgroup": min(entry.max_threads, 1024),
            "static_thread_group_memory_length": k.static_thread_group_memory_length if k else None,
            "line": entry.line,
        })
    if as_json:
        click.echo(json.dumps({"ok": True, "file": file, "kernels": kernels}, indent=2))
        return
    click.echo(f"{file}: {len(kernels)} kernel(s)")
    for k in kernels:
        bufs = ", ".join(f"{b['index']}:{b['name']}" for b in k["buffers"])
        tg = k["static_thread_group_memory_length"]
        click.echo(f"  {k['name']}  buffers[{bufs}]  tg_mem={'?' if tg is None else f'{tg}B'}")


@main.command()
def doctor():
    """Show the toolchain, cache and torch headers, and run a self-test kernel."""
    from .runtime import compile_shader
    from .runtime.compiler import cache_dir, torch_include_dir
    from .runtime.toolchain import find_toolchain

    ok = True
    try:
        tc = find_toolchain()
        click.echo(f"compiler:      {' '.join(tc.command)}  ({tc.version})")
    except Exception as e:  # noqa: BLE001 - reported, not raised
        click.echo(f"compiler:      MISSING - {e}")
        sys.exit(1)
    click.echo(f"cache:         {cache_dir()}")
    click.echo(f"torch headers: {torch_include_dir() or 'not found (pip install torch)'}")
    import numpy as np

    lib = compile_shader(
        "kernel void iota(device int* o, uint i [[thread_position_in_grid]]) { o[i] = int(i) * 3; }"
    )
    out = np.full(100, -1, np.int32)
    lib.iota(out)
    good = bool((out == np.arange(100) * 3).all())
    ok &= good
    click.echo(f"self-test:     {'ok' if good else 'FAILED'}")
    sys.exit(0 if ok else 1)


@main.group()
def cache():
    """Inspect or clear the compiled-kernel cache."""


@cache.command("dir")
def cache_dir_cmd():
    """Print the cache directory."""
    from .runtime.compiler import cache_dir

    click.echo(str(cache_dir()))


@cache.command("clear")
def cache_clear():
    """Delete every cached kernel library (they are rebuilt on demand)."""
    from .runtime.compiler import cache_dir

    d = cache_dir()
    shutil.rmtree(d, ignore_errors=True)
    click.echo(f"cleared {d}")


def _mount_check():
    from .check.cli import check_cmd

    main.add_command(check_cmd, "check")


_mount_check()


def _mount_port():
    from .port.to_metal.cli import port_cmd

    main.add_command(port_cmd, "port")


_mount_port()


def _mount_optional():
    try:
        from .aten.cli import aten
    except ImportError as e:
        missing = str(e)

        @main.command("aten", context_settings={"ignore_unknown_options": True})
        @click.argument("args", nargs=-1, type=click.UNPROCESSED)
        def aten_unavailable(args):
            """The PyTorch MPS workflow (needs torch: pip install 'metal-kernel[torch]')."""
            click.echo(f"error: `metal-kernel aten` needs torch and torchgen ({missing}); "
                       "install them with: pip install 'metal-kernel[torch]'", err=True)
            sys.exit(2)

        return
    main.add_command(aten, "aten")


_mount_optional()

if __name__ == "__main__":
    main()
