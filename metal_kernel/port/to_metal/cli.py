"""`metal-kernel port FILE.cu -o DIR [--json] [--stats] [--verify] [--double float]`.

Writes DIR/NAME.metal (the port), DIR/NAME.py (a launcher per kernel) and
DIR/NAME.port.json (kernels, diagnostics, statistics, verification), each
atomically. Exit codes: 0 every kernel translated (and verified, with
--verify); 1 a kernel did not translate, compile or verify; 2 bad input.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import click

from .doubles import MODES


def _write_atomic(path: Path, text: str):
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _parse_sizes(values) -> dict:
    out = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep:
            raise click.BadParameter(f"{v!r}: write NAME=VALUE", param_hint="--size")
        try:
            out[name] = float(value) if re.search(r"[.eE]", value) and not value.startswith("0x") else int(value, 0)
        except ValueError:
            raise click.BadParameter(f"{v!r}: VALUE must be a number", param_hint="--size") from None
    return out


@click.command("port")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, readable=True))
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Folder for NAME.metal, NAME.py and NAME.port.json.")
@click.option("-I", "--include", "include_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Add an include directory (repeatable).")
@click.option("-D", "--define", "defines", multiple=True, metavar="NAME[=VALUE]", help="Predefine a macro.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (the .port.json).")
@click.option("--stats", is_flag=True, help="Print the statistics (hipify --print-stats layout).")
@click.option("--verify", is_flag=True, help="Run every kernel and its port on the same random inputs and compare.")
@click.option("--size", "sizes", multiple=True, metavar="NAME=VALUE",
              help="For --verify without a launch in the file: n=ELEMENTS, block=, grid=, shared_mem=, or a "
                   "parameter's value (repeatable).")
@click.option("--capture/--no-capture", default=True, show_default=True,
              help="With --verify, size the inputs from the file's own launches (builds and runs its main).")
@click.option("--fast-math", is_flag=True, help="Map expf & co. to fast:: instead of precise::.")
@click.option("--double", "double", type=click.Choice(MODES), default="reject", show_default=True,
              help="Apple GPUs have no 64-bit floating point. 'reject': a kernel using double is not translated "
                   "(MK1001). 'float': double computed inside a kernel (local accumulators, casts, double2, math) "
                   "is computed in float, so results differ by float rounding; each site is a MK1038 warning and "
                   "--verify compares with the original computing in double. A kernel parameter or host-written "
                   "global of a double type stays MK1001 (the host lays it out as doubles).")
@click.option("--no-check", is_flag=True, help="With --verify, do not run the sides under metal_kernel.check().")
def port_cmd(file, out_dir, include_dirs, defines, as_json, stats, verify, sizes, capture, fast_math, double,
             no_check):
    """Port a CUDA FILE to Metal, with numbered diagnostics and a verified launcher.

    \b
    Examples:
      metal-kernel port kernels.cu -o out/                  # kernels.metal, kernels.py, kernels.port.json
      metal-kernel port kernels.cu -o out/ --verify --stats # prove each kernel, hipify-style counts
      metal-kernel port kernels.cu --verify --size n=4096 --size block=256
      metal-kernel port kernels.cu --verify --double float  # local doubles computed in float (MK1038)
    """
    from .capture import capture_launches, explicit_instantiations
    from .porting import port_cuda

    try:
        source = Path(file).read_text()
    except (OSError, UnicodeDecodeError) as e:
        click.echo(f"error: cannot read {file}: {e}", err=True)
        sys.exit(2)
    try:
        size_map = _parse_sizes(sizes)
    except click.BadParameter as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(2)
    defs = {}
    for d in defines:
        name, sep, value = d.partition("=")
        defs[name] = value if sep else None
    p = port_cuda(source, filename=file, include_dirs=include_dirs, defines=defs, fast_math=fast_math,
                  double=double)
    if not p.kernels and any(d.code == "MK1017" and "does not preprocess" in d.message for d in p.diagnostics):
        for d in p.diagnostics:
            click.echo(f"error: {d}", err=True)
        sys.exit(2)
    if verify:
        captures = {}
        if capture and re.search(r"\bint\s+main\s*\(", source):
            captures, problems = capture_launches(source, file, include_dirs=include_dirs, defines=defs,
                                                  cwd=str(Path(file).resolve().parent))
            for msg in problems:
                click.echo(f"note: {msg}; kernels without a recorded launch use --size", err=True)
            extra = explicit_instantiations(p, list(captures))
            if extra:  # template kernels the program launched with deduced arguments
                p = p.port_again(source + extra)
        p.load()
        p.verify_all(sizes=size_map, captures=captures, check=not no_check)
    else:
        p.load()
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        click.echo(f"error: cannot create {out}: {e}", err=True)
        sys.exit(2)
    stem = re.sub(r"\.(cu|cuh|cpp|cc)$", "", Path(file).name)
    module = re.sub(r"\W", "_", stem)
    module = module if module.isidentifier() else "k_" + module
    from .launcher import launcher_module

    report = p.to_json()
    _write_atomic(out / f"{stem}.metal", p.metal)
    _write_atomic(out / f"{stem}.port.json", json.dumps(report, indent=1) + "\n")
    _write_atomic(out / f"{module}.py", launcher_module(stem, Path(file).name, p.kernels))
    if as_json:
        click.echo(json.dumps(report, indent=1))
    else:
        click.echo(p.report())
        click.echo(f"wrote {out / (stem + '.metal')}, {out / (module + '.py')}, {out / (stem + '.port.json')}")
    if stats:
        click.echo(p.stats_text())
    failed = [k for k in p.kernels if not k.translated] + \
        [k for k in p.kernels if verify and k.translated and not p.verified.get(k.spelling, False)]
    sys.exit(1 if failed or not p.kernels else 0)
