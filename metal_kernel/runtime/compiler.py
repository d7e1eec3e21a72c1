"""MSL source -> loadable shared library, cached on disk by content.

Pass 1 preprocesses the source with Metal's predefined macros (Metal headers
resolve to empty stubs, so only the user's code and its includes expand).
The rewriter turns the result into C++, and pass 2 compiles that against the
C++ Metal standard library (include/mk/prelude.h).

Cache layout (``$METAL_KERNEL_CACHE_DIR`` or ``~/.cache/metal-kernel``):
    manifests/<key>.json   source + options -> object key, dependency stamps
    objects/<key>.so       the kernel library
    objects/<key>.json     what the rewriter found (kernels, parameters)
Every file is written to a temporary name and renamed into place, so
concurrent processes and interrupted writes never leave a partial entry; an
entry that fails to parse or load is discarded and rebuilt.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .errors import MetalCompileError
from .rewriter import KernelEntry, Param, rewrite
from .toolchain import Toolchain, find_toolchain

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE / "include"
PASS1_DIR = INCLUDE_DIR / "pass1"
RUNTIME_SOURCE = HERE / "src" / "mkrt.cpp"
SOURCE_NAME = "source.metal"

LANGUAGE_VERSIONS = {"3.0": 300, "3.1": 310, "3.2": 320, "4.0": 400}

COMMON_FLAGS = [
    "-std=c++17",
    "-fPIC",
    "-march=native",
    "-fno-exceptions",
    "-fno-rtti",
    "-fno-math-errno",
    "-fwrapv",  # GPU integer arithmetic wraps
    "-fno-omit-frame-pointer",  # the scheduler tells simd call paths apart by them
    # x86 traps on integer division by zero; report it (see mk/prelude.h)
    "-fsanitize=integer-divide-by-zero", "-fsanitize-minimal-runtime", "-fno-sanitize-recover=all",
    "-fdeclspec",  # vector swizzles are declspec properties
    "-Xclang", "-ffloat16-excess-precision=none",  # half rounds at every op
    "-Xclang", "-fbfloat16-excess-precision=none",
    # The AVX-512 BF16 / AVX-NE-CONVERT float->bfloat instructions flush
    # subnormals; mk/types.h converts with exact round-to-nearest-even instead.
    "-mno-avx512bf16", "-mno-avxneconvert",
    "-g0",  # zig's driver emits debug info unless told not to
]


@dataclass(frozen=True)
class CompileOptions:
    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    language_version: str = "3.2"
    function_constants: tuple[tuple[str, object], ...] = ()
    optimize: str = "-O2"
    source_name: str = SOURCE_NAME
    frontend: str = "metal"  # a name in FRONTENDS: the source language
    math: str = "exact"  # or "bounds[:seed]": see math_mode() and mk/bounds.h
    # The checked build (metal_kernel.check): every access instrumented.
    checked: bool = False

    def key(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Frontend:
    """What makes a source language: how pass 1 preprocesses it, how the
    preprocessed text becomes C++ with entry points, and the prelude pass 2
    compiles it against. Everything after that (pass 2, work-item loops,
    the cache, the scheduler) is shared."""
    name: str
    pass1_args: Callable[[CompileOptions], list[str]]  # clang -E arguments before the file
    # (preprocessed text, function constants, tg_helpers, workitem) -> RewriteResult
    rewrite: Callable
    prelude: Path  # force-included (precompiled) in pass 2
    include_dirs: tuple[str, ...] = ()  # pass 2, besides runtime/include
    # Words that can reach a synchronising call; a library without any runs
    # every kernel in direct mode.
    sync_words: re.Pattern = None
    version_files: tuple[Path, ...] = ()  # part of every cache key
    pass2_flags: tuple[str, ...] = ()  # the language's own code-generation rules


    def version(self) -> str:
        h = hashlib.sha256(self.name.encode())
        h.update(" ".join(self.pass2_flags).encode())
        for f in self.version_files:
            if f.is_file():
                h.update(str(f.name).encode())
                h.update(f.read_bytes())
        return h.hexdigest()[:16]


FRONTENDS: dict[str, Frontend] = {}


def frontend_of(opts: CompileOptions) -> Frontend:
    return FRONTENDS[opts.frontend]


def math_mode(value: str | None) -> str:
    """The math mode for `compile_shader(math=...)`, else $METAL_KERNEL_MATH:
    "exact" (the default: math computed in float or better, rounded once) or
    "bounds" / "bounds:<seed>" (each math-library result drawn within the MSL
    specification's ulp bound, docs/math-bounds.md)."""
    raw = value if value is not None else os.environ.get("METAL_KERNEL_MATH", "exact")
    mode = str(raw).strip().lower() or "exact"
    if mode == "exact":
        return mode
    name, _, seed = mode.partition(":")
    if name == "bounds" and (seed == "" or seed.isdigit()):
        return f"bounds:{int(seed or 0)}"
    source = "math=" if value is not None else "METAL_KERNEL_MATH="
    raise ValueError(f"{source}{raw!r}: choose 'exact', 'bounds' or 'bounds:<seed>' (a non-negative integer)")


def _math_defines(opts: CompileOptions) -> list[str]:
    if not opts.math.startswith("bounds"):
        return []
    return ["-DMK_MATH_BOUNDS=1", f"-DMK_MATH_SEED={opts.math.partition(':')[2] or 0}ull"]


@dataclass
class CompiledLibrary:
    path: str
    kernels: list[KernelEntry]
    tg_sizes_known: bool = True
    deps: list = field(default_factory=list)
    check: dict | None = None  # checked builds: sites and per-kernel facts (check/build.py)


def cache_dir() -> Path:
    env = os.environ.get("METAL_KERNEL_CACHE_DIR")
    if env:
        base = Path(env)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) / "metal-kernel" if xdg else Path.home() / ".cache" / "metal-kernel"
    for sub in ("manifests", "objects"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    return base


@functools.lru_cache(maxsize=1)
def runtime_version() -> str:
    """Hash of everything that shapes a compiled kernel besides its source."""
    h = hashlib.sha256()
    files = sorted(INCLUDE_DIR.rglob("*")) + [RUNTIME_SOURCE, HERE / "rewriter.py", HERE / "address_spaces.py",
                                               HERE / "lexer.py", HERE / "workitem.py", HERE / "streaming.py",
                                               HERE / "simdgroup_uniform.py", HERE / "ir.py", Path(__file__)]
    files += sorted((HERE.parent / "check").glob("*.py"))  # the checked build's passes
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(HERE.parent)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def cpu_identity() -> str:
    """-march=native code is only valid on the same kind of CPU."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = re.search(r"model name\s*:\s*(.*)", text)
        flags = re.search(r"flags\s*:\s*(.*)", text)
        return hashlib.sha256(
            ((model.group(1) if model else "") + (flags.group(1) if flags else "")).encode()
        ).hexdigest()[:12]
    except OSError:
        import platform

        return platform.machine()


@functools.lru_cache(maxsize=1)
def torch_include_dir() -> str | None:
    """The installed torch's include dir, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    inc = Path(spec.origin).parent / "include"
    return str(inc) if (inc / "c10" / "metal").is_dir() else None


def _atomic_write(path: Path, data: bytes):
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _sha(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


# ------------------------------------------------------------------ pass 1 --
def _pass1_args(tc: Toolchain, opts: CompileOptions) -> list[str]:
    return tc.cxx(*frontend_of(opts).pass1_args(opts))


def _metal_pass1_args(opts: CompileOptions) -> list[str]:
    version = LANGUAGE_VERSIONS.get(opts.language_version)
    if version is None:
        raise ValueError(
            f"unknown Metal language version {opts.language_version!r}; "
            f"choose one of {', '.join(LANGUAGE_VERSIONS)}"
        )
    args = ["-E", "-x", "c++", "-std=c++17", "-fno-caret-diagnostics", "-nostdinc", "-nostdinc++", "-I", str(PASS1_DIR)]
    for d in opts.include_dirs:
        args += ["-I", str(d)]
    torch_inc = torch_include_dir()
    if torch_inc:
        args += ["-I", torch_inc]
    args += ["-D__METAL__=1", f"-D__METAL_VERSION__={version}", "-D__HAVE_MK_RUNTIME__=1"]
    for name, value in opts.defines:
        args.append(f"-D{name}={value}" if value is not None else f"-D{name}")
    args += ["-include", str(INCLUDE_DIR / "mk" / "macros.h")]
    return args


_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<kind>fatal error|error): (?P<msg>.*)$",
                   re.MULTILINE)


def _compile_error(output: str, opts: CompileOptions, source: str, tmpdir: str) -> MetalCompileError:
    """The first error, located in the user's files, with the compiler's words."""
    output = output.replace(os.path.join(tmpdir, SOURCE_NAME), opts.source_name)
    output = output.replace(SOURCE_NAME, opts.source_name) if opts.source_name != SOURCE_NAME else output
    lines = [ln for ln in output.splitlines() if ": warning:" not in ln]
    text = "\n".join(lines).strip()
    m = _DIAG.search(text)
    if not m:
        return MetalCompileError("compilation failed:\n" + text, compiler_output=output)
    file, line = m.group("file"), int(m.group("line"))
    src_line = None
    if file == opts.source_name:
        src = source.splitlines()
        if 0 < line <= len(src):
            src_line = src[line - 1]
    # Keep the compiler's diagnostics (errors and their notes), without the
    # huge template back-traces into the runtime's own headers.
    shown = [ln for ln in lines if "/metal_kernel/runtime/include/" not in ln.split(":")[0]][:40]
    return MetalCompileError(
        m.group("msg") + "\n" + "\n".join(shown), file=file, line=line, text=src_line,
        compiler_output=output,
    )


def preprocess(source: str, opts: CompileOptions, tc: Toolchain, tmpdir: str) -> str:
    src_path = os.path.join(tmpdir, SOURCE_NAME)
    with open(src_path, "w") as f:
        f.write(source)
    proc = subprocess.run(_pass1_args(tc, opts) + [SOURCE_NAME], capture_output=True, text=True,
                          cwd=tmpdir)
    if proc.returncode != 0:
        raise _compile_error(proc.stderr, opts, source, tmpdir)
    text = proc.stdout
    if opts.source_name != SOURCE_NAME:
        text = text.replace(f'"{SOURCE_NAME}"', json.dumps(opts.source_name))
    return text


_MARKER_FILE = re.compile(r'^# \d+ "((?:\\.|[^"\\])*)"', re.MULTILINE)


def dependencies(pp_text: str, opts: CompileOptions) -> list[list]:
    deps = []
    seen = set()
    for m in _MARKER_FILE.finditer(pp_text):
        name = m.group(1)
        if name in seen or name.startswith("<") or name == opts.source_name:
            continue
        seen.add(name)
        try:
            st = os.stat(name)
            deps.append([name, st.st_mtime_ns, st.st_size])
        except OSError:
            pass
    return deps


def _deps_fresh(deps: list) -> bool:
    for name, mtime, size in deps:
        try:
            st = os.stat(name)
        except OSError:
            return False
        if st.st_mtime_ns != mtime or st.st_size != size:
            return False
    return True


# ------------------------------------------------------------------ pass 2 --
def extra_flags() -> list[str]:
    """$METAL_KERNEL_CXXFLAGS: extra pass-2 flags (e.g. -g), part of the cache key."""
    import shlex

    return shlex.split(os.environ.get("METAL_KERNEL_CXXFLAGS", ""))


PRELUDE = INCLUDE_DIR / "mk" / "prelude.h"
_PCH_TROUBLE = ("precompiled", "pch", "PCH")


def _prelude(tc: Toolchain, flags: list[str], header: Path = PRELUDE) -> list[str]:
    """Arguments that give a pass-2 compile with `flags` the Metal standard
    library: a precompiled prelude.h (built once per flags, runtime version
    and compiler, in the cache), which saves ~100 ms per library — clang
    parses the prelude's C++ in ~140 ms, loads the PCH in ~40 — or, when no
    PCH can be built, the header itself."""
    key = _sha("pch", tc.identity, runtime_version(), cpu_identity(), flags, header)
    pch = cache_dir() / "objects" / f"prelude-{key}.pch"
    if not pch.exists():
        tmp = pch.with_name(f"{pch.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            proc = subprocess.run(tc.cxx(*flags, "-x", "c++-header", str(header), "-o", str(tmp)),
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                return ["-include", str(header)]
            os.replace(tmp, pch)  # atomic: concurrent builders write the same bytes
        except OSError:
            return ["-include", str(header)]
        finally:
            tmp.unlink(missing_ok=True)
    return ["-include-pch", str(pch)]


def _compile_with_prelude(tc: Toolchain, flags: list[str], rest: list[str], cwd: str,
                          link_to: str | None = None, header: Path = PRELUDE) -> subprocess.CompletedProcess:
    """clang `flags` + the prelude + `rest` (input, outputs), and the link
    when `link_to` is given. A precompiled prelude that clang rejects (a
    stale or foreign file) costs a retry with the header, never an error."""
    def run(prelude):
        args = [*flags, *prelude, *rest]
        if link_to:
            return _compile_and_link(tc, args, link_to, cwd)
        return subprocess.run(tc.cxx(*args), capture_output=True, text=True, cwd=cwd)

    prelude = _prelude(tc, flags, header)
    proc = run(prelude)
    if proc.returncode != 0 and prelude[0] == "-include-pch" and any(w in proc.stderr for w in _PCH_TROUBLE):
        Path(prelude[1]).unlink(missing_ok=True)  # rebuilt by the next compile
        proc = run(["-include", str(header)])
    return proc


def _compile_and_link(tc: Toolchain, compile_args: list[str], out_path: str,
                      cwd: str, objects: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Compiles to an object and links it (with `objects`) into `out_path`."""
    obj = out_path + ".o"
    proc = subprocess.run(tc.cxx(*compile_args, "-c", "-o", obj), capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        return proc
    return subprocess.run(tc.link_shared(obj, out_path, *objects), capture_output=True, text=True, cwd=cwd)


def _pass2(tc: Toolchain, cpp_path: str, out_path: str, opts: CompileOptions,
           kernels: list[KernelEntry]) -> subprocess.CompletedProcess:
    """Pass 2 for a library whose kernels never synchronise: the C++ to
    optimised IR, streaming-store variants added (runtime/streaming.py),
    the IR to the library."""
    cwd = os.path.dirname(cpp_path)
    ll = os.path.join(cwd, "kernel.ll")
    flags = _pass2_flags(opts)
    streamable = _streamable(kernels)
    if not streamable:
        return _compile_with_prelude(tc, flags, [cpp_path], cwd, link_to=out_path,
                                     header=frontend_of(opts).prelude)
    proc = _compile_with_prelude(tc, flags, [cpp_path, "-S", "-emit-llvm", "-o", ll], cwd,
                                 header=frontend_of(opts).prelude)
    if proc.returncode != 0:
        return proc
    text = _add_streaming(Path(ll).read_text(), kernels, streamable)
    out_ll = os.path.join(cwd, "kernel.stream.ll")
    Path(out_ll).write_text(text)
    # The IR is optimised already: code generation only, so the blocks the
    # streaming variants add stay as written.
    proc = _compile_and_link(tc, [*_codegen_flags(opts), "-Xclang", "-disable-llvm-passes", out_ll],
                             out_path, cwd)
    if proc.returncode != 0:
        # A bug of streaming.py, never the user's: build without the variants.
        for k in kernels:
            k.streaming = False
        return _compile_with_prelude(tc, flags, [cpp_path], cwd, link_to=out_path,
                                     header=frontend_of(opts).prelude)
    return proc


def _pass2_flags(opts: CompileOptions, *defines: str) -> list[str]:
    """Flags for compiling the rewritten C++ (the prelude and input follow)."""
    includes = ["-I", str(INCLUDE_DIR)]
    for d in frontend_of(opts).include_dirs:
        includes += ["-I", d]
    return ["-x", "c++", *COMMON_FLAGS, *frontend_of(opts).pass2_flags, opts.optimize, "-w", "-ferror-limit=10",
            "-fno-caret-diagnostics",
            *extra_flags(), *_math_defines(opts), *defines, *includes]


def _codegen_flags(opts: CompileOptions) -> list[str]:
    """Flags for compiling IR (not C++) into the library's object."""
    return [opts.optimize, "-fPIC", "-march=native", "-mno-avx512bf16", "-mno-avxneconvert", "-g0", "-w",
            *extra_flags()]


def _streamable(kernels: list[KernelEntry]) -> list[int]:
    """Kernels that may get a streaming-store variant: direct ones without
    threadgroup memory (see runtime/streaming.py)."""
    if not streaming_enabled():
        return []
    return [k.symbol for k in kernels
            if k.mode == "direct" and not k.has_tg_size and not any(p.kind == "threadgroup" for p in k.params)]


def _add_streaming(text: str, kernels: list[KernelEntry], symbols: list[int]) -> str:
    """`text` with __mk_stream_N variants; sets each kernel's `streaming`."""
    from .streaming import add_streaming_variants

    try:
        result = add_streaming_variants(text, symbols)
    except Exception:  # noqa: BLE001 - a bug of ours: no variants, same kernels
        return text
    for k in kernels:
        k.streaming = k.symbol in result.symbols
    return result.text


def streaming_setting() -> str:
    """$METAL_KERNEL_STREAMING_STORES as "auto" (the default: streaming
    stores for dispatches larger than the last-level cache), "always" or
    "never"."""
    value = os.environ.get("METAL_KERNEL_STREAMING_STORES", "auto").strip().lower()
    if value in ("1", "true", "yes", "on", "always"):
        return "always"
    if value in ("0", "false", "no", "off", "never"):
        return "never"
    return "auto"


def streaming_enabled() -> bool:
    """Whether libraries get streaming-store variants at all (part of the
    cache key; runtime/library.py decides per dispatch when to use them)."""
    return streaming_setting() != "never"


def _entries_to_json(entries: list[KernelEntry]) -> list:
    return [dataclasses.asdict(e) for e in entries]


def _entries_from_json(data: list) -> list[KernelEntry]:
    out = []
    for e in data:
        e = dict(e)
        e["params"] = [Param(**p) for p in e["params"]]
        out.append(KernelEntry(**e))
    return out


def compile_library(source: str, opts: CompileOptions, rebuild: bool = False) -> CompiledLibrary:
    """The compiled library for `source`; `rebuild` ignores (and replaces) cached files."""
    tc = find_toolchain()
    base = cache_dir()
    manifest_key = _sha("manifest", source, json.dumps(opts.key(), sort_keys=True, default=str),
                        tc.identity, runtime_version(), cpu_identity(), extra_flags(), workitem_enabled(),
                        streaming_enabled(), frontend_of(opts).version())
    manifest = base / "manifests" / f"{manifest_key}.json"
    # Direct mode (as ccache): same source and options, and no included file
    # changed since -> the library, without running the preprocessor.
    try:
        data = json.loads(manifest.read_text())
        so = base / "objects" / f"{data['object']}.so"
        meta = json.loads((base / "objects" / f"{data['object']}.json").read_text())
        if not rebuild and so.exists() and _deps_fresh(data["deps"]):
            return CompiledLibrary(str(so), _entries_from_json(meta["kernels"]), meta["tg_sizes_known"],
                                   data["deps"], meta.get("check"))
    except (OSError, ValueError, KeyError, TypeError):
        pass

    with tempfile.TemporaryDirectory(prefix="mk-build-", dir=base) as tmp:
        pp = preprocess(source, opts, tc, tmp)
        fcs = dict(opts.function_constants)
        obj_key = _sha("object", pp, sorted((str(k), repr(v)) for k, v in fcs.items()), opts.optimize, opts.math,
                       opts.checked,
                       tc.identity, runtime_version(), cpu_identity(), extra_flags(), workitem_enabled(),
                       streaming_enabled(), frontend_of(opts).version())
        if rebuild:
            # The cached file did not load. A new name, because the dynamic
            # loader may still hold the old file under the old one.
            for stale in (base / "objects").glob(f"{obj_key}*"):
                stale.unlink(missing_ok=True)
            obj_key += "-" + os.urandom(4).hex()
        so = base / "objects" / f"{obj_key}.so"
        meta_path = base / "objects" / f"{obj_key}.json"
        deps = dependencies(pp, opts)
        meta = None
        if so.exists() and not rebuild:
            try:
                meta = json.loads(meta_path.read_text())
            except (OSError, ValueError):
                meta = None
        if meta is None:
            meta = _build(pp, fcs, opts, tc, tmp, so, source)
            _atomic_write(meta_path, json.dumps(meta).encode())
        _atomic_write(manifest, json.dumps({"object": obj_key, "deps": deps}).encode())
    return CompiledLibrary(str(so), _entries_from_json(meta["kernels"]), meta["tg_sizes_known"], deps,
                           meta.get("check"))


# ------------------------------------------------------ work-item loops --
# Words that can reach a synchronising call (barriers, simd/quad functions,
# simdgroup matrices). A library without any of them runs every kernel in
# direct mode and skips the work-item build.
# (`simdgroup_\w+` also catches simdgroup_load/store, which ask the runtime for
# the lane: such kernels must not take the bookkeeping-free direct loop.)
# (`__metal_simd_sum` & co. are Apple's builtins behind them, mk/builtins.h.)
_SYNC_WORDS = re.compile(r"(?:\b|__metal_)(threadgroup_barrier|simdgroup_\w+|simd_\w+|quad_\w+)\b")


def workitem_enabled() -> bool:
    """$METAL_KERNEL_WORKITEM_LOOPS=0 keeps every synchronising kernel on
    fibers (part of the cache key)."""
    return os.environ.get("METAL_KERNEL_WORKITEM_LOOPS", "1").strip().lower() not in ("0", "false", "no", "off")


def _workitem_debug() -> bool:
    return os.environ.get("METAL_KERNEL_WI_DEBUG", "") not in ("", "0")


def _force_inline(ll: str, names: set[str]) -> str:
    """Marks the given function definitions alwaysinline (unless noinline)."""
    out = []
    for line in ll.split("\n"):
        if line.startswith("define "):
            m = re.search(r"@(\"[^\"]*\"|[-a-zA-Z$._0-9]+)\(", line)
            name = m.group(1).strip('"') if m else ""
            if name in names and " noinline" not in line:
                close = line.rindex(")")
                # after the parameter list: ... ) local_unnamed_addr #N {
                hash_at = line.find(" #", close)
                at = hash_at if hash_at >= 0 else line.rindex("{") - 1
                line = line[:at] + " alwaysinline" + line[at:]
        out.append(line)
    return "\n".join(out)


def _pass2_workitem(tc: Toolchain, cpp_path: str, out_path: str, opts: CompileOptions,
                    kernels: list[KernelEntry]) -> subprocess.CompletedProcess:
    """Pass 2 through LLVM IR: the C++ to optimised IR, per-thread functions
    cut into work-item loops (runtime/workitem.py), the IR to the library.
    Sets each kernel's `mode`."""
    from . import workitem

    cwd = os.path.dirname(cpp_path)
    ll = os.path.join(cwd, "kernel.ll")
    flags = _pass2_flags(opts, "-DMK_WORKITEM=1")
    syms = [k.symbol for k in kernels]
    # The whole-simdgroup build is independent of this one: side by side.
    from .simdgroup_uniform import Built

    uniform_job = _background(_whole_simdgroup_build, tc, flags, opts, cpp_path, cwd, syms, default=Built())
    proc = _compile_with_prelude(tc, flags, [cpp_path, "-S", "-emit-llvm", "-o", ll], cwd,
                                 header=frontend_of(opts).prelude)
    uniform = uniform_job()
    if proc.returncode != 0:
        return proc
    text = Path(ll).read_text()

    def fallback(why: str) -> subprocess.CompletedProcess:
        # The transform failed on this module (a bug, never the user's): build
        # the library the plain way, every synchronising kernel on fibers.
        if _workitem_debug():
            import sys

            print(f"metal-kernel: work-item loops off for this library: {why}", file=sys.stderr)
        for k in kernels:
            k.mode = "fibers"
            k.streaming = False
        return _pass2(tc, cpp_path, out_path, opts, kernels)

    try:
        result = workitem.transform(text, syms, uniform=uniform.symbols)
    except Exception as e:  # noqa: BLE001
        return fallback(f"{type(e).__name__}: {e}")
    if result.force_inline:
        # A helper that synchronises was not inlined into a per-thread
        # function: inline it and optimise once more.
        ll2 = os.path.join(cwd, "kernel.inl.ll")
        Path(ll2).write_text(_force_inline(text, result.force_inline))
        ll3 = os.path.join(cwd, "kernel.opt.ll")
        p2 = subprocess.run(tc.cxx(ll2, opts.optimize, "-w", "-S", "-emit-llvm", "-o", ll3),
                            capture_output=True, text=True, cwd=cwd)
        if p2.returncode == 0:
            try:
                again = workitem.transform(Path(ll3).read_text(), syms, uniform=uniform.symbols)
            except Exception:  # noqa: BLE001 - keep the first result
                again = result
            if sum(m == "workitem-loops" for m in again.modes.values()) > \
                    sum(m == "workitem-loops" for m in result.modes.values()):
                result = again
    wi_ll = os.path.join(cwd, "kernel.wi.ll")
    for k in kernels:
        k.mode = result.modes.get(k.symbol, "fibers")
        k.whole_simdgroup = k.mode == "workitem-loops" and k.symbol in uniform.symbols
    Path(wi_ll).write_text(_add_streaming(result.text, kernels, _streamable(kernels)))
    codegen = [*_codegen_flags(opts), *workitem.CODEGEN_FLAGS]
    if not any(k.mode == "workitem-loops" for k in kernels):
        # Nothing was cut (e.g. a header mentions simd functions no kernel
        # calls): the IR is optimised already, code generation only.
        codegen += ["-Xclang", "-disable-llvm-passes"]
    proc = _compile_and_link(tc, [*codegen, wi_ll], out_path, cwd, uniform.objects)
    if proc.returncode != 0 and uniform.objects:
        # A bug of the whole-simdgroup build, never the user's: link without
        # it (its functions are weak references, null when absent).
        for k in kernels:
            k.whole_simdgroup = False
        proc = _compile_and_link(tc, [*codegen, wi_ll], out_path, cwd)
    if proc.returncode != 0:
        return fallback("clang rejected the transformed IR:\n" + proc.stderr[:4000])
    if _workitem_debug():
        import sys

        for k in kernels:
            why = result.reasons.get(k.symbol)
            print(f"metal-kernel: kernel {k.host_name}: {result.modes.get(k.symbol)}"
                  + (f" ({why})" if why else ""), file=sys.stderr)
    return proc


def _background(fn, *args, default=None):
    """Runs fn(*args) in a thread (its time is in subprocesses); the returned
    function waits for the result (`default` if fn raised)."""
    import threading

    out = []

    def run():
        try:
            out.append(fn(*args))
        except Exception:  # noqa: BLE001 - the caller gets the default
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()

    def wait():
        t.join()
        return out[0] if out else default
    return wait


def _whole_simdgroup_build(tc: Toolchain, flags: list[str], opts: CompileOptions, cpp_path: str, cwd: str,
                           syms: list[int]):
    """The library's kernels that may run once per simdgroup, built with the
    whole-matrix simdgroup_matrix (runtime/simdgroup_uniform.py): their
    symbols and the object to link. Nothing when the library multiplies no
    simdgroup matrices, or when anything on the way fails."""
    from . import simdgroup_uniform as sgu

    none = sgu.Built()
    if not sgu.uses_matrices(Path(cpp_path).read_text()):
        return none
    ll = os.path.join(cwd, "kernel.sgu.ll")
    proc = _compile_with_prelude(tc, [*flags, sgu.DEFINE_FLAG], [cpp_path, "-S", "-emit-llvm", "-o", ll], cwd,
                                 header=frontend_of(opts).prelude)
    if proc.returncode != 0:
        if _workitem_debug():
            print(f"metal-kernel: no whole-simdgroup build: {proc.stderr[:2000]}", file=sys.stderr)
        return none
    try:
        sel = sgu.select(Path(ll).read_text(), syms)
    except Exception as e:  # noqa: BLE001 - a surprise in the IR: without it
        if _workitem_debug():
            print(f"metal-kernel: no whole-simdgroup build: {type(e).__name__}: {e}", file=sys.stderr)
        return none
    if _workitem_debug():
        for s, why in sorted(sel.reasons.items()):
            print(f"metal-kernel: kernel {s} runs per lane: {why}", file=sys.stderr)
    if not sel.symbols:
        return none
    ll2 = os.path.join(cwd, "kernel.sgu.internal.ll")
    Path(ll2).write_text(sel.text)
    obj = os.path.join(cwd, "kernel.sgu.o")
    proc = subprocess.run(tc.cxx(*_codegen_flags(opts), ll2, "-c", "-o", obj), capture_output=True, text=True,
                          cwd=cwd)
    if proc.returncode != 0:
        if _workitem_debug():
            print(f"metal-kernel: whole-simdgroup module rejected: {proc.stderr[:2000]}", file=sys.stderr)
        return none
    return sgu.Built(sel.symbols, (obj,))


def _build(pp: str, fcs: dict, opts: CompileOptions, tc: Toolchain, tmp: str, so: Path,
           source: str) -> dict:
    if opts.checked:
        from ..check.build import build_checked

        return build_checked(pp, fcs, opts, tc, tmp, str(so), source)
    cpp_path = os.path.join(tmp, "kernel.cpp")
    out_tmp = os.path.join(tmp, "kernel.so")
    tg_known = True
    fe = frontend_of(opts)
    synchronises = bool(fe.sync_words.search(pp))
    use_wi = synchronises and workitem_enabled() and opts.optimize not in ("-O0",)

    def compile_(res):
        Path(cpp_path).write_text(res.text)
        if use_wi:
            return _pass2_workitem(tc, cpp_path, out_tmp, opts, res.kernels)
        for k in res.kernels:
            k.mode = "fibers" if synchronises else "direct"
        return _pass2(tc, cpp_path, out_tmp, opts, res.kernels)

    result = fe.rewrite(pp, fcs, True, use_wi)
    proc = compile_(result)
    if proc.returncode != 0 and any(e.has_tg_size for e in result.kernels):
        # The threadgroup-size helpers could not see a name local to a kernel
        # body; build without them (sizes are then measured at run time).
        retry = fe.rewrite(pp, fcs, False, use_wi)
        proc2 = compile_(retry)
        if proc2.returncode == 0:
            result, proc, tg_known = retry, proc2, False
    if proc.returncode != 0:
        raise _compile_error(proc.stderr, opts, source, tmp)
    os.replace(out_tmp, so)
    return {"kernels": _entries_to_json(result.kernels), "tg_sizes_known": tg_known}


def build_runtime_library() -> str:
    """The scheduler library (src/mkrt.cpp), built once per version."""
    tc = find_toolchain()
    base = cache_dir()
    key = _sha("runtime", runtime_version(), tc.identity, cpu_identity())
    so = base / "objects" / f"mkrt-{key}.so"
    if so.exists():
        return str(so)
    with tempfile.TemporaryDirectory(prefix="mk-build-", dir=base) as tmp:
        out = os.path.join(tmp, "mkrt.so")
        args = ["-x", "c++", "-std=c++17", "-O2", "-fPIC", "-pthread", "-fno-omit-frame-pointer",
                "-fno-exceptions", "-fno-rtti", "-g0", "-I", str(INCLUDE_DIR), str(RUNTIME_SOURCE)]
        proc = _compile_and_link(tc, args, out, tmp)
        if proc.returncode != 0:
            raise RuntimeError("metal-kernel could not build its runtime library:\n" + proc.stderr)
        os.replace(out, so)
    return str(so)


FRONTENDS["metal"] = Frontend(
    name="metal",
    pass1_args=_metal_pass1_args,
    rewrite=lambda pp, fcs, tg_helpers, workitem: rewrite(pp, fcs, tg_helpers=tg_helpers, workitem=workitem),
    prelude=PRELUDE,
    sync_words=_SYNC_WORDS,
    # A buffer's vectors may sit at any 4-byte boundary (Apple GPUs tolerate
    # a float4 at a float's alignment; ggml/candle rely on it): accesses
    # through pointers assume at most 4-byte alignment, so x86 never gets an
    # aligned vector move (unaligned moves cost the same on aligned data).
    # CUDA requires natural alignment (and its 8-byte atomics rely on it).
    pass2_flags=("-fmax-type-align=4",),
)
