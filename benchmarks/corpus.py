"""Real-world Metal corpora through metal-kernel: does every file compile,
how long does it take, and do the kernels compute the right numbers?

    python benchmarks/corpus.py --mlx DIR --ggml DIR --candle DIR --pytorch DIR \
        [--json corpus.json] [--update-doc docs/compatibility.md] [--timeout 600] [--only NAME]

Each DIR is a checkout (or any folder holding the files): MLX's
mlx/backend/metal/kernels/**.metal, ggml's ggml-metal.metal (llama.cpp or
ggml), candle's candle-metal-kernels/**.metal, PyTorch's
aten/src/ATen/native/mps/kernels/*.metal. Nothing is copied into this
repository. Each file is compiled in a fresh process with an empty cache
(the precompiled prelude and the runtime library are built once first), the
way a user's first `compile_shader` runs; files that use textures, or Metal 4
tensors / MetalPerformancePrimitives, are counted apart as out of scope. Then
at least five kernels per corpus run on random data against torch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

_TEXTURE = re.compile(r"\b(texture[123]d\w*|texturecube\w*|texture_buffer|depth2d\w*|sampler)\b")
_METAL4 = re.compile(r"MetalPerformancePrimitives|\bmpp::|<metal_tensor>")


@dataclass
class FileResult:
    corpus: str
    file: str  # relative to the corpus root
    scope: str  # "in scope", "textures", "metal 4 tensors"
    ok: bool = False
    seconds: float = 0.0  # wall clock
    cpu_seconds: float = 0.0  # CPU time of the process and its clang children
    kernels: int = 0
    error: str = ""


@dataclass
class CheckResult:
    corpus: str
    file: str
    kernel: str
    ok: bool
    max_error: float | None = None
    error: str = ""


@dataclass
class Report:
    files: list[FileResult] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)


# --------------------------------------------------------------- corpora --
def _mlx_files(root: Path):
    base = next((p for p in (root / "mlx/backend/metal/kernels", root) if p.is_dir()), root)
    top = base
    while top != top.parent and not (top / "mlx" / "backend").is_dir():
        top = top.parent
    return [(f, [str(top), str(f.parent)]) for f in sorted(base.rglob("*.metal"))]


def _ggml_files(root: Path):
    return [(f, [str(f.parent), str(f.parent.parent)]) for f in sorted(root.rglob("ggml-metal.metal"))]


def _candle_files(root: Path):
    return [(f, [str(f.parent)]) for f in sorted(root.rglob("*.metal")) if "candle-metal-kernels" in str(f)
            or "candle-metal-kernels" not in str(root.resolve())]


def _pytorch_files(root: Path):
    """The checkout's own c10/metal headers come first when it has them
    (kernels of PyTorch main use helpers a released wheel may lack); else
    the installed torch's, which compile_shader adds."""
    base = next((p for p in (root / "aten/src/ATen/native/mps/kernels", root) if p.is_dir()), root)
    src = next((p for p in base.parents if p.name == "src" and (p / "ATen").is_dir()), None)
    incs = [str(root)] if (root / "c10" / "metal").is_dir() else []
    incs += [str(src)] if src else []
    return [(f, incs + [str(f.parent)]) for f in sorted(base.glob("*.metal"))]


CORPORA = {"mlx": _mlx_files, "ggml": _ggml_files, "candle": _candle_files, "pytorch": _pytorch_files}


def scope_of(path: Path) -> str:
    text = path.read_text(errors="replace")
    if "_nax" in path.stem or _METAL4.search(text):
        return "metal 4 tensors"
    if _TEXTURE.search(text):
        return "textures"
    return "in scope"


# --------------------------------------------------------------- compile --
def compile_one(path: str, include_dirs: list[str]) -> dict:
    """Runs in a child process: compile_shader on one file, timed."""
    import metal_kernel

    t, c = time.perf_counter(), _cpu()
    try:
        lib = metal_kernel.compile_shader(Path(path).read_text(), include_dirs=include_dirs, source_name=path)
        got = {"ok": True, "kernels": len(dir(lib))}
    except Exception as e:  # noqa: BLE001 - reported per file
        first = str(e).split("\n")[0]
        got = {"ok": False, "error": f"{type(e).__name__}: {first}"[:400]}
    return {**got, "seconds": time.perf_counter() - t, "cpu_seconds": _cpu() - c}


def _compile_in_child(path: Path, include_dirs: list[str], cache: str, timeout: float) -> dict:
    env = dict(os.environ, METAL_KERNEL_CACHE_DIR=cache)
    cmd = [sys.executable, __file__, "--compile-one", str(path), "--include", json.dumps(include_dirs)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "seconds": timeout, "error": f"timed out after {timeout:.0f} s"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "seconds": 0.0, "error": f"the compiling process died: {proc.stderr.strip()[-300:]}"}


def _warm(cache: str):
    """Builds the runtime library and the precompiled prelude once, so per-file
    times are a user's first compile of that file, not of the runtime."""
    env = dict(os.environ, METAL_KERNEL_CACHE_DIR=cache)
    code = ("import metal_kernel; metal_kernel.compile_shader('kernel void w(device float* o [[buffer(0)]], "
            "uint i [[thread_position_in_grid]]) { o[i] = 1; }')")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)


def _cpu() -> float:
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def profile(path: Path, include_dirs: list[str]) -> list[tuple[str, float, float]]:
    """Where one file's compile time goes, as (phase, wall s, CPU s): pass 1
    (clang -E), the Python rewriter, the whole-file check (clang), and the
    first kernel built on demand (clang + the work-item pass if it
    synchronises)."""
    import metal_kernel
    from metal_kernel.runtime import compiler, pass2
    from metal_kernel.runtime.rewriter import rewrite

    opts = compiler.CompileOptions(include_dirs=tuple(include_dirs), source_name=str(path))
    tc = compiler.find_toolchain()
    out = []

    def timed(what, fn):
        t, c = time.perf_counter(), _cpu()
        try:
            value = fn()
        except Exception as e:  # noqa: BLE001 - reported, the profile goes on
            what += f" [{type(e).__name__}: {str(e).splitlines()[0][:80]}]"
            value = None
        out.append((what, time.perf_counter() - t, _cpu() - c))
        return value

    with tempfile.TemporaryDirectory() as tmp:
        pp = timed("pass 1 (clang -E)", lambda: compiler.preprocess(path.read_text(), opts, tc, tmp))
        rw = timed("rewriter (Python)", lambda: rewrite(pp, {}))
        ctx = pass2.Context(tc, opts.optimize, compiler.cache_dir() / "objects", compiler.runtime_version(), tmp)
        if rw is not None and len(rw.kernels) > compiler.EAGER_KERNELS:
            timed(f"whole-file check of {len(rw.kernels)} kernels (clang -fsyntax-only)",
                  lambda: pass2.syntax_check(ctx, rw.check_source()))
    lib = timed("compile_shader, all phases (cache cold for this file)",
                lambda: metal_kernel.compile_shader(path.read_text(), include_dirs=include_dirs,
                                                    source_name=str(path)))
    if lib is not None and dir(lib):
        kernel = timed(f"first use of {dir(lib)[0]}", lambda: getattr(lib, dir(lib)[0]))
        if kernel is not None:
            out[-1] = (out[-1][0] + f" ({kernel.execution_mode})", *out[-1][1:])
    return out


# ---------------------------------------------------------------- checks --
def _torch():
    import torch

    torch.manual_seed(0)
    return torch


def _unary(fn, arg_order="in_out", size_arg=True, threads=None, domain=(-3.0, 3.0), tol=1e-5, dtype="float32"):
    """A check of an elementwise kernel `kernel(in, out[, n])` against `fn`."""
    def run(kernel):
        torch = _torch()
        n = 1000
        dt = getattr(torch, dtype)
        x = (torch.rand(n) * (domain[1] - domain[0]) + domain[0]).to(dt)
        out = torch.full((n,), float("nan"), dtype=dt)
        args = [x, out] if arg_order == "in_out" else [out, x]
        if size_arg:
            args.append(n)
        kernel(*args, threads=threads(n) if threads else n)
        return _compare(out, fn(x.float()).to(dt), tol)
    return run


def _compare(got, want, tol) -> tuple[bool, float]:
    torch = _torch()
    g, w = got.double(), want.double()
    same = (torch.isnan(g) & torch.isnan(w)) | (g == w)  # NaN for NaN, inf for inf
    err = ((g - w).abs() / (w.abs() + 1.0)).masked_fill(same, 0.0)
    worst = float(err.max()) if err.numel() else 0.0
    return (not math.isnan(worst) and worst <= tol), worst


def _candle_binary(op, dtype, work):
    def run(kernel):
        torch = _torch()
        n = 999
        dt = getattr(torch, dtype)
        a, b = torch.rand(n).to(dt), (torch.rand(n) + 0.5).to(dt)
        out = torch.full((n,), float("nan"), dtype=dt)
        kernel(n, a, b, out, threads=(n + work - 1) // work)
        return _compare(out, op(a.float(), b.float()).to(dt), 1e-3 if dtype != "float32" else 1e-6)
    return run


def _candle_fill(kernel):
    torch = _torch()
    out = torch.full((77,), float("nan"))
    kernel(out, 2.5, 77, threads=77)
    return _compare(out, torch.full((77,), 2.5), 0)


def _candle_cast(kernel):
    torch = _torch()
    n = 501
    x = torch.randn(n) * 100
    out = torch.full((n,), float("nan"), dtype=torch.float16)
    kernel(n, x, out, threads=(n + 1) // 2)
    return _compare(out, x.half(), 0)


def _candle_where(kernel):
    torch = _torch()
    n = 300
    ids = (torch.rand(n) > 0.5).to(torch.uint8)
    t, f = torch.rand(n), -torch.rand(n)
    out = torch.full((n,), float("nan"))
    one = [1]
    kernel(n, 1, [n], one, one, one, ids, t, f, out, threads=(n + 1) // 2)
    return _compare(out, torch.where(ids.bool(), t, f), 0)


def _pytorch_binary(op, dtype="float32", tol=1e-6):
    def run(kernel):
        torch = _torch()
        n = 1000
        dt = getattr(torch, dtype)
        a = (torch.rand(n) * 4 - 2).to(dt) if dt.is_floating_point else torch.randint(-50, 50, (n,), dtype=dt)
        b = (torch.rand(n) * 4 - 2).to(dt) if dt.is_floating_point else torch.randint(-50, 50, (n,), dtype=dt)
        out = torch.full((n,), -7, dtype=dt) if not dt.is_floating_point else torch.full((n,), float("nan"), dtype=dt)
        kernel(out, a, b)
        return _compare(out, op(a, b), tol)
    return run


def _pytorch_lerp(kernel):
    torch = _torch()
    n = 512
    s, e, w = torch.randn(n), torch.randn(n), torch.rand(n)
    out = torch.full((n,), float("nan"))
    kernel(out, s, e, w)
    return _compare(out, torch.lerp(s, e, w), 1e-6)


def _pytorch_cross(kernel):
    torch = _torch()
    a, b = torch.randn(100, 3), torch.randn(100, 3)
    out = torch.full((100, 3), float("nan"))
    kernel(out, a, b, 1, threads=100)  # cross dim innermost: stride 1
    return _compare(out, torch.linalg.cross(a, b, dim=-1), 1e-6)


def _pytorch_renorm(kernel):
    torch = _torch()
    norm = torch.rand(200) * 4
    out = torch.full((200,), float("nan"))
    kernel(norm, out, 2.0)
    want = torch.where(norm > 2.0, 2.0 / (norm + 1e-7), torch.ones(200))
    return _compare(out, want, 1e-6)


def _pytorch_eye(kernel):
    torch = _torch()
    rows, cols = 5, 7
    out = torch.full((rows, cols), float("nan"))
    kernel(out, cols, 1, threads=[cols, rows], group_size=[cols, 1])
    return _compare(out, torch.eye(rows, cols), 0)


def _pytorch_repeat_interleave(kernel):
    torch = _torch()
    repeats = torch.randint(0, 4, (50,), dtype=torch.int64)
    want = torch.repeat_interleave(torch.arange(50), repeats)
    out = torch.full((int(repeats.sum()),), -1, dtype=torch.int64)
    kernel(repeats, repeats.cumsum(0), out, threads=50)
    return _compare(out, want, 0)


def _pytorch_layer_norm(kernel):
    torch = _torch()
    rows, n = 6, 1000
    x = torch.randn(rows, n)
    w, b = torch.rand(n), torch.randn(n)
    out = torch.full((rows, n), float("nan"))
    mean, rstd = torch.full((rows,), float("nan")), torch.full((rows,), float("nan"))
    group = (n + 3) // 4
    kernel(x, out, mean, rstd, n, 1e-5, 1, 1, w, b, threads=rows * group, group_size=group)
    want = torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
    ok_out, err = _compare(out, want, 1e-4)
    ok_mean, err_mean = _compare(mean, x.mean(1), 1e-5)
    return ok_out and ok_mean, max(err, err_mean)


def _pytorch_amp_unscale(kernel):
    torch = _torch()
    data = torch.randn(300)
    data[17] = float("inf")
    want = data * 0.25
    found = torch.zeros(1)
    kernel(data, found, 0.25)
    ok, err = _compare(data, want, 0)
    return ok and found.item() == 1.0, err


def _mlx_add(kernel):
    torch = _torch()
    n = 1000
    a, b = torch.randn(n), torch.randn(n)
    out = torch.full((n,), float("nan"))
    kernel(a, b, out, n)
    return _compare(out, a + b, 0)


def _gelu_tanh(x):
    import torch.nn.functional as F

    return F.gelu(x, approximate="tanh")


# corpus -> [(file name, kernel, check)]
CHECKS = {
    "candle": [
        ("binary.metal", "badd_f32", _candle_binary(lambda a, b: a + b, "float32", 2)),
        ("binary.metal", "bmul_f16", _candle_binary(lambda a, b: a * b, "float16", 4)),
        ("binary.metal", "bdiv_f32", _candle_binary(lambda a, b: a / b, "float32", 2)),
        ("fill.metal", "fill_f32", _candle_fill),
        ("cast.metal", "cast_f32_f16", _candle_cast),
        ("ternary.metal", "where_u8_f32", _candle_where),
    ],
    "pytorch": [
        ("BinaryKernel.metal", "add_dense_float_float", _pytorch_binary(lambda a, b: a + b)),
        ("BinaryKernel.metal", "hypot_dense_float_float", _pytorch_binary(lambda a, b: a.hypot(b))),
        ("BinaryKernel.metal", "atan2_dense_float_float", _pytorch_binary(lambda a, b: a.atan2(b))),
        ("BinaryKernel.metal", "maximum_dense_int_int", _pytorch_binary(lambda a, b: a.maximum(b), "int32", 0)),
        ("BinaryKernel.metal", "logaddexp_dense_float_float", _pytorch_binary(lambda a, b: a.logaddexp(b))),
        ("BinaryKernel.metal", "lerp_tensor_dense_float", _pytorch_lerp),
        ("CrossKernel.metal", "cross_dense_float", _pytorch_cross),
        ("RenormKernel.metal", "renorm_float", _pytorch_renorm),
        ("Eye.metal", "eye_float", _pytorch_eye),
        ("Repeat.metal", "repeat_interleave_int64_t", _pytorch_repeat_interleave),
        ("LayerNorm.metal", "layer_norm_single_row_float", _pytorch_layer_norm),
        ("Amp.metal", "ampNonFiniteCheckAndUnscaleSingle_float", _pytorch_amp_unscale),
    ],
    "ggml": [
        ("ggml-metal.metal", "kernel_relu", _unary(lambda x: x.clamp(min=0), size_arg=False)),
        ("ggml-metal.metal", "kernel_sigmoid", _unary(lambda x: x.sigmoid(), size_arg=False)),
        ("ggml-metal.metal", "kernel_tanh", _unary(lambda x: x.tanh(), size_arg=False)),
        ("ggml-metal.metal", "kernel_silu", _unary(lambda x: x * x.sigmoid(), size_arg=False)),
        ("ggml-metal.metal", "kernel_gelu", _unary(_gelu_tanh, size_arg=False)),
        ("ggml-metal.metal", "kernel_sqr", _unary(lambda x: x * x, size_arg=False)),
    ],
    "mlx": [
        ("unary.metal", "v_Expfloat32float32", _unary(lambda x: x.exp())),
        ("unary.metal", "v_Sinfloat32float32", _unary(lambda x: x.sin())),
        ("unary.metal", "v_Sqrtfloat32float32", _unary(lambda x: x.sqrt(), domain=(0.0, 9.0))),
        ("unary.metal", "v_Tanhfloat32float32", _unary(lambda x: x.tanh())),
        ("unary.metal", "v_Sigmoidfloat32float32", _unary(lambda x: x.sigmoid())),
        ("binary.metal", "vv_Addfloat32", _mlx_add),
    ],
}


def run_checks(corpus: str, files: dict[str, tuple[Path, list[str]]], compiled: dict[str, bool]) -> list[CheckResult]:
    import metal_kernel

    out = []
    libs = {}
    for name, kernel, check in CHECKS.get(corpus, []):
        if name not in files:
            out.append(CheckResult(corpus, name, kernel, False, error="file not in this checkout"))
            continue
        path, incs = files[name]
        if not compiled.get(name):
            out.append(CheckResult(corpus, name, kernel, False, error="the file does not compile"))
            continue
        try:
            if name not in libs:
                libs[name] = metal_kernel.compile_shader(path.read_text(), include_dirs=incs, source_name=str(path))
            ok, err = check(getattr(libs[name], kernel))
            out.append(CheckResult(corpus, name, kernel, ok, err))
        except Exception as e:  # noqa: BLE001 - reported per kernel
            out.append(CheckResult(corpus, name, kernel, False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"))
    return out


# ----------------------------------------------------------------- report --
def table(report: Report) -> str:
    rows = ["| corpus | files | out of scope | in scope | compile | kernels exposed | slowest compile (CPU) | "
            "median compile (CPU) | numeric checks |", "|---|---|---|---|---|---|---|---|---|"]
    for corpus in CORPORA:
        files = [f for f in report.files if f.corpus == corpus]
        if not files:
            continue
        scope = [f for f in files if f.scope == "in scope"]
        outs = [f for f in files if f.scope != "in scope"]
        ok = [f for f in scope if f.ok]
        times = sorted(f.cpu_seconds for f in scope)
        checks = [c for c in report.checks if c.corpus == corpus]
        out_text = ", ".join(f"{sum(f.scope == s for f in outs)} {s}" for s in sorted({f.scope for f in outs})) or "0"
        rows.append(f"| {corpus} | {len(files)} | {out_text} | {len(scope)} | **{len(ok)}** | "
                    f"{sum(f.kernels for f in ok):,} | {times[-1] if times else 0:.1f} s | "
                    f"{times[len(times) // 2] if times else 0:.1f} s | {sum(c.ok for c in checks)}/{len(checks)} |")
    return "\n".join(rows) + "\n"


def details(report: Report) -> str:
    lines = ["| corpus | file | compiles | wall s | CPU s | kernels | first error |", "|---|---|---|---|---|---|---|"]
    for f in report.files:
        if f.scope != "in scope":
            continue
        err = f.error.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {f.corpus} | {f.file} | {'yes' if f.ok else 'no'} | {f.seconds:.1f} | {f.cpu_seconds:.1f} | "
                     f"{f.kernels} | {err} |")
    lines += ["", "| corpus | kernel | right | max relative error | why not |", "|---|---|---|---|---|"]
    for c in report.checks:
        err = "" if c.max_error is None else f"{c.max_error:.2e}"
        lines.append(f"| {c.corpus} | {c.file}: `{c.kernel}` | {'yes' if c.ok else 'no'} | {err} | "
                     f"{c.error.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"


def update_doc(path: Path, report: Report, command: str, when: str):
    """Replaces the corpus section of docs/compatibility.md (between its markers)."""
    text = path.read_text()
    begin, end = "<!-- corpus:begin -->", "<!-- corpus:end -->"
    body = (f"{begin}\nMeasured with `{command}` on {when}:\n\n"
            f"{table(report)}\n<details><summary>Per file and per kernel</summary>\n\n"
            f"{details(report)}\n</details>\n{end}")
    if begin in text and end in text:
        text = text[:text.index(begin)] + body + text[text.index(end) + len(end):]
    else:
        text += "\n" + body + "\n"
    path.write_text(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for c in CORPORA:
        ap.add_argument(f"--{c}", type=Path, help=f"{c} checkout")
    ap.add_argument("--json", type=Path, help="write every result as JSON")
    ap.add_argument("--update-doc", type=Path, help="rewrite the corpus section of this markdown file")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per file (default 600)")
    ap.add_argument("--only", help="only files whose name contains this")
    ap.add_argument("--profile", type=Path, help="print where the compile time of this one file goes")
    ap.add_argument("--from-json", type=Path, help="rewrite --update-doc from an earlier --json, compiling nothing")
    ap.add_argument("--compile-one", help=argparse.SUPPRESS)
    ap.add_argument("--include", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.compile_one:
        print(json.dumps(compile_one(args.compile_one, json.loads(args.include))))
        return 0
    roots = {c: getattr(args, c) for c in CORPORA if getattr(args, c)}
    if args.from_json:
        data = json.loads(args.from_json.read_text())
        report = Report([FileResult(**f) for f in data["files"]], [CheckResult(**c) for c in data["checks"]])
        if args.update_doc:
            corpora = [c for c in CORPORA if any(f.corpus == c for f in report.files)]
            update_doc(args.update_doc, report, _command(corpora), data.get("when", ""))
        print(table(report))
        return 0
    if args.profile:
        incs = next((i for c, r in roots.items() for f, i in CORPORA[c](r) if f == args.profile.resolve()),
                    [str(args.profile.parent)])
        with tempfile.TemporaryDirectory(prefix="mk-corpus-") as cache:
            _warm(cache)
            os.environ["METAL_KERNEL_CACHE_DIR"] = cache
            print(f"  {'phase':70s} {'wall s':>7s} {'CPU s':>7s}")
            for what, wall, cpu in profile(args.profile.resolve(), incs):
                print(f"  {what:70s} {wall:7.2f} {cpu:7.2f}")
        return 0
    if not roots:
        ap.error("give at least one of --mlx, --ggml, --candle, --pytorch")
    report = Report()
    with tempfile.TemporaryDirectory(prefix="mk-corpus-") as cache:
        _warm(cache)
        os.environ["METAL_KERNEL_CACHE_DIR"] = cache  # the checks reuse what the compiles built
        for corpus, root in roots.items():
            found = {}
            compiled = {}
            for path, incs in CORPORA[corpus](root):
                if args.only and args.only not in path.name:
                    continue
                found[path.name] = (path, incs)
                res = FileResult(corpus, str(path.relative_to(root)), scope_of(path))
                if res.scope == "in scope":
                    got = _compile_in_child(path, incs, cache, args.timeout)
                    res.ok, res.seconds = got["ok"], round(got["seconds"], 2)
                    res.cpu_seconds = round(got.get("cpu_seconds", 0.0), 2)
                    res.kernels = got.get("kernels", 0)
                    res.error = got.get("error", "").replace(str(root.resolve()) + "/", "").replace(str(root) + "/", "")
                    compiled[path.name] = res.ok
                report.files.append(res)
                state = "ok " if res.ok else ("-- " if res.scope != "in scope" else "ERR")
                print(f"{corpus:8s} {state} {res.seconds:7.1f}s {res.cpu_seconds:7.1f}s cpu {res.kernels:6d}  "
                      f"{res.file}  {res.error[:120]}",
                      flush=True)
            report.checks += run_checks(corpus, found, compiled)
    print()
    print(table(report))
    for c in report.checks:
        print(f"  {c.corpus:8s} {c.kernel:32s} {'right' if c.ok else 'WRONG' if c.max_error is not None else 'not run'}"
              f"  {'' if c.max_error is None else f'{c.max_error:.1e}'}  {c.error}")
    when = (f"{time.strftime('%Y-%m-%d')} ({os.cpu_count()} cores, load average "
            f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end: other processes shared them)")
    if args.json:
        args.json.write_text(json.dumps({**asdict(report), "when": when}, indent=1))
    if args.update_doc:
        update_doc(args.update_doc, report, _command(list(roots)), when)
    return 0


def _command(corpora: list[str]) -> str:
    return "python benchmarks/corpus.py " + " ".join(f"--{c} <{c} checkout>" for c in corpora)


if __name__ == "__main__":
    sys.exit(main())
