#!/usr/bin/env python3
"""`metal-kernel aten add` on the six ops of issue 11, timed, on a scratch copy of a tree.

The tree is either a PyTorch checkout given with --pytorch (the files `aten` reads
and edits are copied to a temporary directory: the checkout is never written) or,
by default, the test tree: the torch wheel's yaml/headers/common_mps.py plus the
fixtures modeled on PyTorch's kernels files (tests/aten/fixtures/tree). Each op is
added with the functors of tests/aten/fixtures/functors in a fresh process, with
an empty runtime cache (METAL_KERNEL_CACHE_DIR), so compile times are cold:

    python benchmarks/bench_aten_add.py                      # the test tree
    python benchmarks/bench_aten_add.py --pytorch ~/pytorch  # a real checkout
    python benchmarks/bench_aten_add.py --ops heaviside --whole-file

--whole-file also times a cold compile of each kernels file as a whole (what
verification compiled before it compiled only the op's instantiations), stopped
after --whole-file-timeout seconds.
Exit 1 if an add fails.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUNCTORS = ROOT / "tests/aten/fixtures/functors"
OPS = {
    "heaviside": ["--expr", (FUNCTORS / "heaviside.expr").read_text().strip()],
    "special_ndtri": ["--functor", str(FUNCTORS / "ndtri.metal")],
    "special_log_ndtr": ["--functor", str(FUNCTORS / "log_ndtr.metal")],
    "special_airy_ai": ["--functor", str(FUNCTORS / "airy_ai.metal")],
    "special_laguerre_polynomial_l": ["--functor", str(FUNCTORS / "laguerre_polynomial_l.metal")],
    "special_legendre_polynomial_p": ["--functor", str(FUNCTORS / "legendre_polynomial_p.metal")],
}
# What `aten` reads or edits in a checkout (relative paths; directories copied whole).
CHECKOUT_FILES = [
    "aten/src/ATen/native/native_functions.yaml", "aten/src/ATen/native/tags.yaml",
    "aten/src/ATen/native/mps/kernels", "aten/src/ATen/native/mps/operations/UnaryKernel.mm",
    "aten/src/ATen/native/mps/operations/BinaryKernel.mm", "c10/metal", "test/test_mps.py",
    "torch/testing/_internal/common_mps.py",
]


def copy_checkout(src: Path, dst: Path) -> None:
    for rel in CHECKOUT_FILES:
        source, target = src / rel, dst / rel
        if source.is_dir():
            shutil.copytree(source, target)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    for header in (src / "aten/src/ATen/native").glob("*.h"):  # the DispatchStub declarations
        shutil.copy(header, dst / "aten/src/ATen/native" / header.name)


def test_tree(dst: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests/aten"))
    from aten_tree import build_tree

    build_tree(dst)


def cold_env(cache: Path) -> dict:
    env = dict(os.environ, METAL_KERNEL_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return env


def add(tree: Path, op: str, cache: Path, math: str) -> tuple[int, float, str]:
    cmd = [sys.executable, "-m", "metal_kernel.cli", "aten", "add", op, "--pytorch", str(tree), *OPS[op],
           "--math", math]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=cold_env(cache))
    return done.returncode, time.perf_counter() - t0, done.stdout + done.stderr


def whole_file(tree: Path, name: str, cache: Path, timeout: float) -> str:
    code = ("import sys, time, metal_kernel\n"
            "from metal_kernel.aten.model.tree import PyTorchTree\n"
            "from metal_kernel.aten.verify.compile import include_dirs\n"
            f"t = PyTorchTree.from_root({str(tree)!r}); path = t.kernels_dir / {name!r}\n"
            "t0 = time.perf_counter()\n"
            "try:\n"
            "    metal_kernel.compile_shader(path.read_text(), include_dirs=include_dirs(t))\n"
            "    print(f'{time.perf_counter() - t0:.1f} s')\n"
            "except Exception as err:\n"
            "    print(f'does not compile after {time.perf_counter() - t0:.1f} s: ' + str(err).splitlines()[0])\n")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cold_env(cache),
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"did not finish within {timeout:.0f} s (stopped)"
    lines = (done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}").splitlines()
    return lines[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pytorch", type=Path, help="a PyTorch checkout (copied, never written)")
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated ops (default: all six)")
    parser.add_argument("--math", default="exact", choices=["exact", "bounds", "both"])
    parser.add_argument("--whole-file", action="store_true", help="also time each kernels file compiled whole")
    parser.add_argument("--whole-file-timeout", type=float, default=900, help="seconds (default 900)")
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "pytorch"
        if args.pytorch:
            copy_checkout(args.pytorch.resolve(), tree)
        else:
            test_tree(tree)
        print(f"tree: {args.pytorch or 'the test tree (tests/aten/fixtures/tree + the torch wheel)'}")
        if args.whole_file:
            for name in ("UnaryKernel.metal", "BinaryKernel.metal"):
                result = whole_file(tree, name, Path(tmp) / f"whole-{name}", args.whole_file_timeout)
                print(f"  whole {name}, cold compile: {result}")
        print(f"{'op':<32} {'exit':>4} {'add (s)':>8} {'verify (s)':>10}  result")
        for n, op in enumerate(args.ops.split(",")):
            code, seconds, out = add(tree, op, Path(tmp) / f"cache{n}", args.math)
            verified = re.search(r"verified in ([\d.]+)s", out)
            status = re.findall(r"^  (\S+)\s+(?:-> \S+ )?(ok|FAIL)", out, re.M)
            summary = (f"{sum(s == 'ok' for _, s in status)}/{len(status)} dtypes ok" if status
                       else out.strip().splitlines()[-1][:100] if out.strip() else "")
            print(f"{op:<32} {code:>4} {seconds:8.1f} {verified.group(1) if verified else '-':>10}  {summary}")
            failed += code != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
