#!/usr/bin/env python3
"""Regenerates tests/cuda/golden/ on a machine with an NVIDIA GPU and nvcc:

    python tests/cuda/golden/run_gpu.py [--out DIR] [--arch sm_90] [--only CASE ...]

For each kernel file of the conformance set (tests/cuda/cases.py) it writes
a launcher (cudaMalloc / cudaMemcpy / cudaLaunchKernel wrappers), compiles
it with nvcc into a shared library, and runs every case of that file with
its seeded inputs and poisoned outputs. Saves golden.npz (inputs and
outputs of every case) and meta.json (GPU, nvcc, printf output, errors).
Cases that must fail on the GPU (a device assert ruins the CUDA context)
run in a subprocess of their own. Needs numpy and nvcc; no CuPy, no torch.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("cuda_cases", HERE.parent / "cases.py")
cases = importlib.util.module_from_spec(_spec)
sys.modules["cuda_cases"] = cases
_spec.loader.exec_module(cases)


def kernels_of(file: str, selected) -> list[str]:
    names = []
    for c in selected:
        if c.file == file:
            for k in [c.kernel, *(b[0] for b in c.before)]:
                if k not in names:
                    names.append(k)
    return names


def symbols_of(file: str, selected) -> list[str]:
    return sorted({name for c in selected if c.file == file for name in c.constants})


def launcher_source(file: str, selected) -> str:
    lines = [f'#include "{cases.KERNELS / file}"', "#include <cuda_runtime.h>", 'extern "C" {',
             "int mk_alloc(void** p, size_t n) { return cudaMalloc(p, n); }",
             "int mk_free(void* p) { return cudaFree(p); }",
             "int mk_h2d(void* d, const void* h, size_t n) { return cudaMemcpy(d, h, n, cudaMemcpyHostToDevice); }",
             "int mk_d2h(void* h, const void* d, size_t n) { return cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost); }",
             "const char* mk_error(int e) { return cudaGetErrorString((cudaError_t)e); }"]
    for i, k in enumerate(kernels_of(file, selected)):
        lines.append(
            f"int mk_launch_{i}(void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,"
            f" unsigned bz, size_t smem) {{ const void* f = (const void*)&{k};"
            " if (smem > 48 * 1024) cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);"
            " int e = cudaLaunchKernel(f, dim3(gx, gy, gz), dim3(bx, by, bz), args, smem, 0);"
            " if (e) return e; return cudaDeviceSynchronize(); }")
    for j, name in enumerate(symbols_of(file, selected)):
        lines.append(f"int mk_symbol_{j}(const void* src, size_t n) {{ return cudaMemcpyToSymbol({name}, src, n); }}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def build(file: str, selected, workdir: Path, arch: str) -> Path:
    stem = Path(file).stem
    src = workdir / f"{stem}_launch.cu"
    src.write_text(launcher_source(file, selected))
    out = workdir / f"lib{stem}.so"
    cmd = ["nvcc", "-O2", f"-arch={arch}", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-o", str(out), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed for {file}:\n{proc.stderr[-4000:]}")
    return out


class Device:
    def __init__(self, lib_path: Path):
        self.lib = ctypes.CDLL(str(lib_path))
        self.lib.mk_error.restype = ctypes.c_char_p
        self.allocs = []

    def check(self, rc: int, what: str):
        if rc != 0:
            raise RuntimeError(f"{what}: CUDA error {rc}: {self.lib.mk_error(rc).decode()}")

    def upload(self, a: np.ndarray) -> ctypes.c_void_p:
        p = ctypes.c_void_p()
        self.check(self.lib.mk_alloc(ctypes.byref(p), ctypes.c_size_t(max(a.nbytes, 1))), "cudaMalloc")
        self.allocs.append(p)
        a = np.ascontiguousarray(a)
        self.check(self.lib.mk_h2d(p, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes)), "cudaMemcpy")
        return p

    def download(self, p, like: np.ndarray) -> np.ndarray:
        out = np.empty_like(like)
        self.check(self.lib.mk_d2h(out.ctypes.data_as(ctypes.c_void_p), p, ctypes.c_size_t(out.nbytes)), "cudaMemcpy")
        return out

    def launch(self, index: int, params: list, grid, block, smem: int):
        keep = []
        ptrs = (ctypes.c_void_p * max(len(params), 1))()
        for i, v in enumerate(params):
            if isinstance(v, ctypes.c_void_p):
                holder = ctypes.c_void_p(v.value)
            elif isinstance(v, bytes):
                holder = ctypes.create_string_buffer(v, len(v))
            else:
                holder = np.ascontiguousarray(v)
            keep.append(holder)
            ptrs[i] = holder.ctypes.data if isinstance(holder, np.ndarray) else ctypes.addressof(holder)
        g, b = cases.dims(grid), cases.dims(block)
        fn = getattr(self.lib, f"mk_launch_{index}")
        return fn(ptrs, *[ctypes.c_uint(x) for x in (*g, *b)], ctypes.c_size_t(smem))


def run_case(case, lib_path: Path, selected) -> tuple[dict, dict]:
    """Runs one case; returns (arrays to save, meta)."""
    dev = Device(lib_path)
    names = kernels_of(case.file, selected)
    syms = symbols_of(case.file, selected)
    arrays = cases.inputs(case)
    saved = {f"{case.name}/in/{a.name}": arrays[a.name] for a in [*case.args, *case.extra]
             if isinstance(a, (cases.In, cases.InOut))}
    device = {name: dev.upload(a) for name, a in arrays.items()}
    for name, (dtype, values) in case.constants.items():
        data = np.asarray(values, dtype=dtype)
        dev.check(getattr(dev.lib, f"mk_symbol_{syms.index(name)}")(data.ctypes.data_as(ctypes.c_void_p),
                                                                    ctypes.c_size_t(data.nbytes)), "cudaMemcpyToSymbol")
    for kname, arg_names, grid, block in case.before:
        dev.check(dev.launch(names.index(kname), [device[n] for n in arg_names], grid, block, 0), kname)
    params = []
    for a in case.args:
        if isinstance(a, cases.Scalar):
            params.append(np.array([a.value], dtype=a.dtype))
        elif isinstance(a, cases.Struct):
            params.append(a.data)
        else:
            params.append(device[a.name])
    meta = {"printf": [], "error": None}
    with tempfile.TemporaryFile() as capture:
        sys.stdout.flush()
        saved_fd = os.dup(1)
        os.dup2(capture.fileno(), 1)
        try:
            rc = dev.launch(names.index(case.kernel), params, case.grid, case.block, case.shared_mem)
            ctypes.CDLL(None).fflush(None)  # the CUDA runtime prints through C stdio
        finally:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
        capture.seek(0)
        printed = capture.read().decode(errors="replace")
    if rc != 0:
        meta["error"] = dev.lib.mk_error(rc).decode()
        return saved, meta
    if case.printf:
        meta["printf"] = [line + "\n" for line in printed.split("\n") if line]
    for a in cases.outputs(case):
        saved[f"{case.name}/out/{a.name}"] = dev.download(device[a.name], arrays[a.name])
    return saved, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--single", help=argparse.SUPPRESS)  # internal: one case in this process
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    args = ap.parse_args()
    selected = [c for c in cases.CASES if c.gpu]
    if args.single:
        case = next(c for c in selected if c.name == args.single)
        saved, meta = run_case(case, Path(args.lib), selected)
        np.savez(Path(args.out) / "single.npz", **saved)
        (Path(args.out) / "single.json").write_text(json.dumps(meta))
        return
    if args.only:
        selected_run = [c for c in selected if c.name in args.only]
    else:
        selected_run = selected
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mk-golden-") as tmp:
        work = Path(tmp)
        files = sorted({c.file for c in selected_run})
        def try_build(f):
            try:
                return build(f, selected, work, args.arch)
            except RuntimeError as e:
                print(e, flush=True)
                return None

        with ThreadPoolExecutor(max(1, min(len(files), os.cpu_count() or 4))) as pool:
            built = dict(zip(files, pool.map(try_build, files)))
        arrays, metas = {}, {}
        for case in selected_run:
            if built[case.file] is None:
                metas[case.name] = {"printf": [], "error": "nvcc failed"}
                print(f"{case.name}: nvcc failed", flush=True)
                continue
            if case.expect_error:
                proc = subprocess.run([sys.executable, __file__, "--single", case.name, "--lib", str(built[case.file]),
                                       "--out", tmp], capture_output=True, text=True)
                meta = json.loads((work / "single.json").read_text()) if proc.returncode == 0 else \
                    {"printf": [], "error": f"harness failed: {proc.stderr[-2000:]}"}
                meta["stderr"] = proc.stderr[-2000:]
                with np.load(work / "single.npz") as z:
                    arrays.update({k: z[k] for k in z.files})
            else:
                saved, meta = run_case(case, built[case.file], selected)
                arrays.update(saved)
            metas[case.name] = meta
            print(f"{case.name}: {'error ' + meta['error'] if meta['error'] else 'ok'}", flush=True)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    np.savez_compressed(out / "golden.npz", **arrays)
    (out / "meta.json").write_text(json.dumps({"gpu": gpu, "nvcc": nvcc, "arch": args.arch, "cases": metas},
                                              indent=1, sort_keys=True) + "\n")
    print(f"saved {len(metas)} cases to {out}")


if __name__ == "__main__":
    main()
