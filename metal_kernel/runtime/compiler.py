"""MSL source -> kernels ready to load, cached on disk by content.

Pass 1 preprocesses the source with Metal's predefined macros (Metal headers
resolve to empty stubs, so only the user's code and its includes expand).
The rewriter turns the result into C++, and pass 2 (runtime/pass2.py)
compiles that against the C++ Metal standard library (include/mk/prelude.h).

A file with at most EAGER_KERNELS kernels is compiled whole when
compile_shader runs. A larger one (PyTorch's BinaryKernel.metal instantiates
thousands) is checked whole at that point — clang's semantic analysis of
every kernel and instantiation, without code generation, so errors in the
user's code still surface there — and each kernel is compiled on first use
into a library of its own, cached like the rest.

Cache layout (``$METAL_KERNEL_CACHE_DIR`` or ``~/.cache/metal-kernel``):
    manifests/<key>.json        source + options -> object key, dependency stamps
    objects/<key>.json          the kernels (their parameters, modes, files)
    objects/<key>.so, .wi.so    a small file's libraries (.wi: work-item loops)
    objects/<key>.pp            a large file's preprocessed source
    objects/<key>.k<n>.*        a large file's kernel n, built on first use
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
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import pass2
from .diagnostics import compile_error
from .entries import Param
from .errors import MetalCompileError
from .rewriter import KernelEntry, RewriteResult, rewrite
from .toolchain import Toolchain, find_toolchain

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE / "include"
PASS1_DIR = INCLUDE_DIR / "pass1"
RUNTIME_SOURCE = HERE / "src" / "mkrt.cpp"
SOURCE_NAME = "source.metal"

LANGUAGE_VERSIONS = {"3.0": 300, "3.1": 310, "3.2": 320, "4.0": 400}

# Files with at most this many kernels are compiled whole at compile_shader
# time; larger ones kernel by kernel, on first use.
EAGER_KERNELS = 16

# Re-exported for the tests, the CLI and the CUDA front end.
COMMON_FLAGS = pass2.COMMON_FLAGS
workitem_enabled = pass2.workitem_enabled
loop_points_enabled = pass2.loop_points_enabled
interleave_enabled = pass2.interleave_enabled
streaming_setting = pass2.streaming_setting
streaming_enabled = pass2.streaming_enabled
extra_flags = pass2.extra_flags


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
    preprocessed text becomes C++ with entry points, and what pass 2
    compiles it against. Everything after that (pass 2, work-item loops,
    the cache, the scheduler) is shared."""

    name: str
    pass1_args: Callable[[CompileOptions], list[str]]  # clang -E arguments before the file
    # (preprocessed text, function constants) -> an object like rewriter.RewriteResult:
    # `kernels`, `source(symbols, workitem)`, `check_source()`
    rewrite: Callable
    prelude: Path  # force-included (precompiled) in pass 2
    include_dirs: tuple[str, ...] = ()  # pass 2, besides runtime/include
    extra_includes: tuple[Path, ...] = ()  # pass 2: force-included after the prelude
    # Every kernel in one library, decided by the work-item build: for
    # languages whose program-scope variables the host writes (CUDA's
    # __constant__ / __device__), which must exist once.
    single_library: bool = False
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


def _math_defines(opts: CompileOptions) -> tuple[str, ...]:
    if not opts.math.startswith("bounds"):
        return ()
    return ("-DMK_MATH_BOUNDS=1", f"-DMK_MATH_SEED={opts.math.partition(':')[2] or 0}ull")


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
    files = sorted(INCLUDE_DIR.rglob("*")) + sorted(RUNTIME_SOURCE.parent.glob("mkrt*"))  # mkrt.cpp and its parts
    # The runtime's Python, subpackages included (the work-item-loop compiler
    # is runtime/workitem/); include/ is hashed whole above.
    files += sorted(f for f in HERE.rglob("*.py") if INCLUDE_DIR not in f.parents)
    files += sorted((HERE.parent / "check").glob("*.py"))  # the checked build's passes
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(HERE.parent)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = re.search(r"model name\s*:\s*(.*)", text)
        flags = re.search(r"flags\s*:\s*(.*)", text)
        return (model.group(1) if model else "") + (flags.group(1) if flags else "")
    except OSError:
        import platform

        return platform.machine()


def cpu_identity() -> str:
    """-march=native code is only valid on the same kind of CPU; the target
    chosen with $METAL_KERNEL_MARCH is part of it."""
    target = os.environ.get("METAL_KERNEL_MARCH", "").strip() or "native"
    return hashlib.sha256((_cpu_model() + "\0" + target).encode()).hexdigest()[:12]


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


_sha = pass2._sha


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
    # -dD keeps macro definitions in the output: the rewriter expands them in
    # `#pragma unroll(...)` (which the preprocessor does not) and drops them.
    args = ["-E", "-dD", "-x", "c++", "-std=c++17", "-fno-caret-diagnostics", "-nostdinc", "-nostdinc++",
            "-I", str(PASS1_DIR)]
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


def _error(output: str, opts: CompileOptions, source: str, tmpdir: str,
           rw: RewriteResult | None = None) -> MetalCompileError:
    names = {k.symbol: (k.host_name, k.file, k.line) for k in rw.kernels} if rw else {}
    return compile_error(output, opts.source_name, source, names,
                         tmp_names=(os.path.join(tmpdir, SOURCE_NAME), SOURCE_NAME))


def preprocess(source: str, opts: CompileOptions, tc: Toolchain, tmpdir: str) -> str:
    src_path = os.path.join(tmpdir, SOURCE_NAME)
    with open(src_path, "w") as f:
        f.write(source)
    proc = subprocess.run(_pass1_args(tc, opts) + [SOURCE_NAME], capture_output=True, text=True,
                          cwd=tmpdir)
    if proc.returncode != 0:
        raise _error(proc.stderr, opts, source, tmpdir)
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


# ---------------------------------------------------------------- library --
def _entries_to_json(entries: list[KernelEntry]) -> list:
    return [dataclasses.asdict(e) for e in entries]


def _entries_from_json(data: list) -> list[KernelEntry]:
    out = []
    for e in data:
        e = dict(e)
        e["params"] = [Param(**p) for p in e["params"]]
        out.append(KernelEntry(**e))
    return out


@dataclass
class CompiledLibrary:
    """The kernels of one source. Those of a small file are built; a large
    file's are built one by one by `built`, on first use."""

    kernels: list[KernelEntry]
    objects: Path  # the cache's objects/ directory
    key: str
    source: str
    opts: CompileOptions
    lazy: bool = False
    deps: list = field(default_factory=list)
    check: dict | None = None  # checked builds: sites and per-kernel facts (check/build.py)
    main_object: str = ""  # a library built whole: its main file (holding its program-scope variables)
    _rewrite: RewriteResult | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _unit_checks: dict = field(default_factory=dict)  # check_of's cache

    def path(self, entry: KernelEntry) -> str:
        return self.path_of(entry.object)

    def path_of(self, name: str) -> str:
        return str(self.objects / name)

    def built(self, symbol: int, rebuild: bool = False) -> KernelEntry:
        """Kernel `symbol` compiled (from the cache when it is there)."""
        entry = self.kernels[symbol]
        if entry.object and not rebuild:
            return entry
        with self._lock:
            meta_path = self.objects / f"{self.key}.k{symbol}.json"
            try:
                if rebuild:
                    raise OSError
                got = _entries_from_json([json.loads(meta_path.read_text())])[0]
                if (self.objects / got.object).exists():
                    self.kernels[symbol] = got
                    return got
            except (OSError, ValueError, KeyError, TypeError):
                pass
            for got in self._build(self._batch(symbol)):
                _atomic_write(self.objects / f"{self.key}.k{got.symbol}.json",
                              json.dumps(dataclasses.asdict(got)).encode())
                self.kernels[got.symbol] = got
            return self.kernels[symbol]

    def _batch(self, symbol: int) -> list[int]:
        """`symbol` and the other instantiations of its template not built
        yet, up to EAGER_KERNELS: PyTorch's dtypes of one op are used
        together, and one clang run for several kernels costs far less than
        one each. Only one template's: kernels of one body decide alike
        whether they synchronise, so a batch never drags a direct kernel
        through the work-item pass."""
        me = self.kernels[symbol]
        out = [symbol]
        for k in [*range(symbol + 1, len(self.kernels)), *range(symbol - 1, -1, -1)]:
            if len(out) >= EAGER_KERNELS:
                break
            e = self.kernels[k]
            if (e.file, e.line) == (me.file, me.line) and not e.object and \
                    not (self.objects / f"{self.key}.k{k}.json").exists():
                out.append(k)
        return sorted(out)

    def check_of(self, entry: KernelEntry) -> dict:
        """The checked build's facts (sites, per-kernel facts) for the unit
        that holds `entry`: the library's own, or, for a large file's checked
        kernels built on first use, those saved beside their unit."""
        if not self.lazy:
            return self.check or {}
        name = entry.object[:-len(".so")] + ".check.json"
        got = self._unit_checks.get(name)
        if got is None:
            try:
                got = json.loads((self.objects / name).read_text())
            except (OSError, ValueError):
                got = {}
            self._unit_checks[name] = got
        return got

    def _store_facts_path(self, symbol: int) -> Path:
        return self.objects / f"{self.key}.k{symbol}.facts.json"

    def has_store_facts(self, symbol: int) -> bool:
        return self._store_facts_path(symbol).exists()

    def store_facts(self, symbol: int) -> dict:
        """Kernel `symbol`'s dispatch facts (check/build.py kernel_facts:
        its stores as offset polynomials), compiled once and cached beside
        the library; runtime/store_guard.py proves dispatches with them."""
        path = self._store_facts_path(symbol)
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
        from ..check.build import kernel_facts

        tc = find_toolchain()
        with tempfile.TemporaryDirectory(prefix="mk-facts-", dir=self.objects.parent) as tmp:
            with self._lock:
                rewritten = self._rewritten(tc, tmp)
            facts = kernel_facts(_context(tc, self.opts, self.objects, tmp), rewritten, symbol)
        _atomic_write(path, json.dumps(facts).encode())
        return facts

    def _rewritten(self, tc: Toolchain, tmp: str) -> RewriteResult:
        """The file rewritten (once per library): from the preprocessed text a
        large file keeps in the cache, else preprocessed again (a small file's
        store facts). Called under self._lock."""
        if self._rewrite is None:
            pp_path = self.objects / f"{self.key}.pp"
            pp = pp_path.read_text() if pp_path.exists() else preprocess(self.source, self.opts, tc, tmp)
            self._rewrite = frontend_of(self.opts).rewrite(pp, dict(self.opts.function_constants))
        return self._rewrite

    def _build(self, symbols: list[int]) -> list[KernelEntry]:
        tc = find_toolchain()
        with tempfile.TemporaryDirectory(prefix="mk-build-", dir=self.objects.parent) as tmp:
            rewritten = self._rewritten(tc, tmp)
            base = f"{self.key}.k{symbols[0]}-{os.urandom(4).hex()}"
            ctx = _context(tc, self.opts, self.objects, tmp)
            if self.opts.checked:
                from ..check.build import build_checked

                meta = build_checked(ctx, rewritten, self.opts, self.source, os.path.join(tmp, base), symbols)
                # the unit's facts first: an entry is only trusted once they exist
                _atomic_write(self.objects / f"{base}.check.json", json.dumps(meta["check"]).encode())
                got = _entries_from_json(meta["kernels"])
            else:
                try:
                    got = pass2.build_unit(ctx, rewritten, symbols, os.path.join(tmp, base))
                except pass2.BuildError as e:
                    raise _error(e.proc.stderr, self.opts, self.source, tmp, rewritten) from None
            _publish(tmp, base, self.objects)
        return got


def _publish(tmp: str, base: str, objects: Path):
    """Moves the libraries built under `base` into the cache."""
    for suffix in (".so", ".wi.so"):
        src = os.path.join(tmp, base + suffix)
        if os.path.exists(src):
            os.replace(src, objects / (base + suffix))


def _context(tc: Toolchain, opts: CompileOptions, objects: Path, tmp: str) -> pass2.Context:
    fe = frontend_of(opts)
    return pass2.Context(tc, opts.optimize, objects, runtime_version() + fe.version(), tmp, prelude=fe.prelude,
                         include_dirs=fe.include_dirs, extra_includes=fe.extra_includes,
                         language_flags=(*fe.pass2_flags, *_math_defines(opts)))


def _checked_key(opts: CompileOptions):
    """A checked build's switches: loop summaries on or off
    (check/instrument.py summarise_loops)."""
    if not opts.checked:
        return False
    return (True, os.environ.get("METAL_KERNEL_CHECK_SUMMARIES", "1") != "0")


def _object_key(pp: str, opts: CompileOptions, tc: Toolchain) -> str:
    fcs = sorted((str(k), repr(v)) for k, v in opts.function_constants)
    return _sha("object", pp, fcs, opts.optimize, opts.math, _checked_key(opts), tc.identity, runtime_version(), cpu_identity(),
                extra_flags(), workitem_enabled(), loop_points_enabled(), interleave_enabled(), streaming_enabled(),
                frontend_of(opts).version())


def compile_library(source: str, opts: CompileOptions, rebuild: bool = False) -> CompiledLibrary:
    """The compiled library for `source`; `rebuild` ignores (and replaces) cached files."""
    tc = find_toolchain()
    base = cache_dir()
    objects = base / "objects"
    manifest_key = _sha("manifest", source, json.dumps(opts.key(), sort_keys=True, default=str),
                        tc.identity, runtime_version(), cpu_identity(), extra_flags(), workitem_enabled(),
                        loop_points_enabled(), interleave_enabled(), streaming_enabled(), frontend_of(opts).version())
    manifest = base / "manifests" / f"{manifest_key}.json"
    # Direct mode (as ccache): same source and options, and no included file
    # changed since -> the library, without running the preprocessor.
    if not rebuild:
        try:
            data = json.loads(manifest.read_text())
            meta = json.loads((objects / f"{data['object']}.json").read_text())
            if _deps_fresh(data["deps"]):
                lib = _library(meta, objects, data["object"], source, opts, data["deps"])
                if lib is not None:
                    return lib
        except (OSError, ValueError, KeyError, TypeError):
            pass

    with tempfile.TemporaryDirectory(prefix="mk-build-", dir=base) as tmp:
        pp = preprocess(source, opts, tc, tmp)
        key = _object_key(pp, opts, tc)
        if rebuild:
            # The cached file did not load. A new name, because the dynamic
            # loader may still hold the old file under the old one.
            for stale in objects.glob(f"{key}*"):
                stale.unlink(missing_ok=True)
            key += "-" + os.urandom(4).hex()
        deps = dependencies(pp, opts)
        lib = None
        if not rebuild:
            try:
                lib = _library(json.loads((objects / f"{key}.json").read_text()), objects, key, source, opts, deps)
            except (OSError, ValueError, KeyError, TypeError):
                lib = None
        if lib is None:
            meta = _build(pp, opts, tc, tmp, objects, key, source)
            _atomic_write(objects / f"{key}.json", json.dumps(meta).encode())
            lib = _library(meta, objects, key, source, opts, deps)
        _atomic_write(manifest, json.dumps({"object": key, "deps": deps}).encode())
    return lib


def _library(meta: dict, objects: Path, key: str, source: str, opts: CompileOptions,
             deps: list) -> CompiledLibrary | None:
    """The library `meta` describes, or None when a file it needs is gone."""
    kernels = _entries_from_json(meta["kernels"])
    if meta.get("lazy"):
        if not (objects / f"{key}.pp").exists():
            return None
    elif any(not (objects / k.object).exists() for k in kernels) or \
            (meta.get("main_object") and not (objects / meta["main_object"]).exists()):
        return None
    return CompiledLibrary(kernels, objects, key, source, opts, bool(meta.get("lazy")), deps, meta.get("check"),
                           meta.get("main_object", ""))


def _build(pp: str, opts: CompileOptions, tc: Toolchain, tmp: str, objects: Path, key: str,
           source: str) -> dict:
    fe = frontend_of(opts)
    rw = fe.rewrite(pp, dict(opts.function_constants))
    ctx = _context(tc, opts, objects, tmp)
    lazy = len(rw.kernels) > EAGER_KERNELS and not fe.single_library
    if opts.checked and not lazy:
        # The checked build (metal_kernel.check) of a small file: every kernel at once.
        from ..check.build import build_checked

        meta = build_checked(ctx, rw, opts, source, os.path.join(tmp, key))
        _publish(tmp, key, objects)
        return meta
    if lazy:  # checked or not, kernel by kernel on first use (CompiledLibrary.built)
        failed = pass2.syntax_check(ctx, rw.check_source())
        if failed is not None:
            raise _error(failed.stderr, opts, source, tmp, rw)
        _atomic_write(objects / f"{key}.pp", pp.encode())
        return {"kernels": _entries_to_json(rw.kernels), "lazy": True}
    build = pass2.build_single if fe.single_library else pass2.build_unit
    try:
        kernels = build(ctx, rw, [k.symbol for k in rw.kernels], os.path.join(tmp, key))
    except pass2.BuildError as e:
        raise _error(e.proc.stderr, opts, source, tmp, rw) from None
    _publish(tmp, key, objects)
    return {"kernels": _entries_to_json(kernels), "lazy": False,
            "main_object": f"{key}.so" if fe.single_library else ""}


def build_runtime_library() -> str:
    """The scheduler library (src/mkrt.cpp), built once per version."""
    tc = find_toolchain()
    base = cache_dir()
    key = _sha("runtime", runtime_version(), tc.identity, _cpu_model())
    so = base / "objects" / f"mkrt-{key}.so"
    if so.exists():
        return str(so)
    with tempfile.TemporaryDirectory(prefix="mk-build-", dir=base) as tmp:
        out = os.path.join(tmp, "mkrt.so")
        obj = out + ".o"
        args = ["-x", "c++", "-std=c++17", "-O2", "-fPIC", "-pthread", "-fno-omit-frame-pointer",
                "-fno-exceptions", "-fno-rtti", "-g0", "-I", str(INCLUDE_DIR), str(RUNTIME_SOURCE), "-c", "-o", obj]
        proc = subprocess.run(tc.cxx(*args), capture_output=True, text=True, cwd=tmp)
        if proc.returncode == 0:
            proc = subprocess.run(tc.link_shared(obj, out), capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            raise RuntimeError("metal-kernel could not build its runtime library:\n" + proc.stderr)
        os.replace(out, so)
    return str(so)


FRONTENDS["metal"] = Frontend(
    name="metal",
    pass1_args=_metal_pass1_args,
    rewrite=rewrite,
    prelude=pass2.PRELUDE,
    extra_includes=(pass2.BINDING,),  # the parameter descriptions the binding checks read
    # A buffer's vectors may sit at any 4-byte boundary (Apple GPUs tolerate
    # a float4 at a float's alignment; ggml/candle rely on it): accesses
    # through pointers assume at most 4-byte alignment, so x86 never gets an
    # aligned vector move (unaligned moves cost the same on aligned data).
    # CUDA requires natural alignment (and its 8-byte atomics rely on it).
    pass2_flags=("-fmax-type-align=4",),
)
