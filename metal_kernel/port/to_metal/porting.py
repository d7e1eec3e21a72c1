"""port_cuda: the CUDA file -> its Metal port, a report, and the means to
prove each kernel computes what the original does.

    p = port.port_cuda(source, filename="kernels.cu")   # never raises on what it cannot translate
    p.metal, p.diagnostics, p.stats
    lib = p.load()                                       # the port, compiled
    p.verify("scale<float>", x, y, 1.5, n, grid=4, block=128)
    p.verify_all(sizes={"n": 4096})
    port.port_cuda(source, double="float")              # local doubles computed in float (MK1038)

Stages: source.py (pass 1, parse, the front end's analysis) -> facts.py
(functions, calls, what each needs) -> mapper.py / emit.py (the Metal) ->
verify.py (the original through load_cuda, the port through compile_shader).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...runtime.errors import MetalCompileError
from ..parse import file_scope
from . import stats as stats_mod
from .diagnostics import Diagnostic, make
from .doubles import check_mode
from .emit import Emitter
from .facts import collect
from .launcher import PortLibrary
from .mapper import Translation
from .model import Chunk, KernelPort
from .source import CudaSource, PreprocessError, load_source

METAL_NAME = "kernels.metal"


@dataclass
class PortResult:
    source: str
    filename: str
    chunks: list[Chunk]
    kernels: list[KernelPort]
    diagnostics: list[Diagnostic]
    counts: dict  # converted / unconverted / unknown counters, changed and total lines
    include_dirs: tuple = ()
    defines: dict | None = None
    verified: dict = field(default_factory=dict)  # spelling -> bool
    verifications: dict = field(default_factory=dict)  # spelling -> VerifyResult
    global_sizes: dict = field(default_factory=dict)
    global_init: dict = field(default_factory=dict)
    fast_math: bool = False
    double: str = "reject"  # port_cuda's double=: "float" computes local doubles in float (MK1038)
    _library: PortLibrary | None = None
    _cuda = None
    _src: CudaSource | None = None
    _compiled_text: str | None = None

    # -------------------------------------------------------------- text --
    @property
    def metal(self) -> str:
        """The Metal source: one kernel per CUDA kernel instantiation; a kernel
        that does not translate (or compile) stays as a comment block in #if 0."""
        return _assemble(self.chunks, self.kernels)

    @property
    def stats(self) -> dict:
        c = self.counts
        return stats_mod.build(c["converted"], c["unconverted"], c["unknown"], c["changed"], c["total"],
                               self.kernels, self.verified)

    def stats_text(self) -> str:
        return stats_mod.text(self.stats, self.filename)

    def kernel(self, name: str) -> KernelPort:
        for k in self.kernels:
            if k.spelling == name or k.metal_name == name:
                return k
        lib = self.load()
        return lib[name].port

    def port_again(self, source: str) -> PortResult:
        """port_cuda on another text of the file (e.g. with the instantiations
        a program's launches deduced) with this port's options."""
        return port_cuda(source, filename=self.filename, include_dirs=self.include_dirs, defines=self.defines,
                         fast_math=self.fast_math, double=self.double)

    # -------------------------------------------------------------- load --
    def load(self) -> PortLibrary:
        """Compiles the port (compile_shader). A kernel whose port does not
        compile is left out (#if 0) with a MK1021 diagnostic carrying the
        compiler's message, and the rest is compiled again."""
        if self._library is not None:
            return self._library
        from ...runtime import compile_shader

        for _ in range(len(self.kernels) + 2):
            text = self.metal
            if not any(k.translated for k in self.kernels):
                self._library = PortLibrary(None, self.kernels)
                self._compiled_text = text
                return self._library
            try:
                lib = compile_shader(text, source_name=_metal_name(self.filename))
            except MetalCompileError as e:
                if not self._exclude(e, text):
                    raise
                continue
            for k in self.kernels:
                mk = lib._kernels.get(k.metal_name) if k.translated else None
                if mk is not None and mk.static_thread_group_memory_length > 32 * 1024:
                    self._fail(k, make("MK1010", (k.file, k.line, 1),
                                       f"kernel '{k.spelling}' declares {mk.static_thread_group_memory_length} "
                                       "bytes of threadgroup memory (an Apple GPU has 32768)", k.spelling))
            self._library = PortLibrary(lib, self.kernels, self.global_sizes, self.global_init)
            self._compiled_text = text
            return self._library
        raise RuntimeError("the port does not compile")  # pragma: no cover - each round removes a kernel

    def _exclude(self, e: MetalCompileError, text: str) -> bool:
        """Marks the kernels owning the failing line as failed; False when the
        line belongs to no kernel (the whole port fails)."""
        line = e.lineno or 0
        name = _metal_name(self.filename)
        if e.filename != name:  # an error in a header: the port's line that led there
            m = re.search(rf"^{re.escape(name)}:(\d+):", e.compiler_output or "", re.MULTILINE)
            line = int(m.group(1)) if m else 0
        spans, at = [], 1
        for ch in _assemble_spans(self.chunks, self.kernels):
            n = ch[0].count("\n") + 1
            spans.append((at, at + n - 1, ch[1]))
            at += n + 1
        owner = next((c for lo, hi, c in spans if lo <= line <= hi), None)
        message = " ".join(e.detail.splitlines()[0].split()) if e.detail else str(e)
        culprits = owner.kernels if owner is not None and owner.function and owner.kernels else None
        if not culprits:
            culprits = frozenset(k.spelling for k in self.kernels if k.translated)
            if not culprits:
                return False
        progress = False
        for k in self.kernels:
            if k.spelling in culprits and k.translated:
                self._fail(k, make("MK1021", (_metal_name(self.filename), line, 1),
                                   f"the port of '{k.spelling}' does not compile: {message}", k.spelling))
                progress = True
        if not progress:  # the line is in code every kernel needs: none compiles
            for k in self.kernels:
                if k.translated:
                    self._fail(k, make("MK1021", (_metal_name(self.filename), line, 1),
                                       f"the port does not compile: {message}", k.spelling))
        return True

    def _fail(self, k: KernelPort, d: Diagnostic):
        k.translated = False
        k.diagnostics = list(k.diagnostics) + [d]
        if d not in self.diagnostics:
            self.diagnostics.append(d)

    def cuda_library(self):
        """The original, through load_cuda (the reference verify compares with).
        A function load_cuda cannot build either (inline PTX, textures: the
        kernels the port flags too) is blanked out of this copy of the source,
        so that the file's other kernels can still be verified."""
        if self._cuda is not None:
            return self._cuda
        from .. import CudaCompileError, load_cuda

        text = self.source
        for _ in range(64):
            try:
                self._cuda = load_cuda(text, filename=self.filename, include_dirs=self.include_dirs,
                                       defines=self.defines)
                return self._cuda
            except CudaCompileError as e:
                span = self._function_lines(e.filename, e.lineno)
                if span is None:
                    raise
                lines = text.split("\n")
                for i in range(span[0] - 1, min(span[1], len(lines))):
                    lines[i] = ""
                text = "\n".join(lines)
        raise RuntimeError(f"{self.filename}: load_cuda keeps failing")

    def _function_lines(self, file, line) -> tuple[int, int] | None:
        """The lines of the main file's top-level item (function, template,
        struct, declaration) that holds `line`."""
        src = self._src
        if src is None or file != self.filename or not line:
            return None
        for n in file_scope(src.pp.root):
            f1, l1, _ = src.where(n.start_byte)
            _, l2, _ = src.where(max(n.end_byte - 1, n.start_byte))
            if f1 == file and l1 <= line <= l2 and n.type not in ("comment", "translation_unit"):
                return l1, l2
        return None

    # ------------------------------------------------------------ verify --
    def verify(self, name: str, *args, grid, block, shared_mem: int = 0, check: bool = True, rtol=None, atol=None,
               timeout: float | None = 120.0):
        """Runs the original (load_cuda) and the port (compile_shader) on
        copies of `args`; compares every buffer; runs both under check()."""
        from .verify import verify_kernel

        res = verify_kernel(self, name, args, grid, block, shared_mem, check=check, rtol=rtol, atol=atol,
                            timeout=timeout)
        self._record(res)
        return res

    def verify_all(self, sizes: dict | None = None, captures: dict | None = None, check: bool = True,
                   seed: int = 0, timeout: float | None = 120.0) -> list:
        """verify() for every kernel on random inputs: sized by `captures`
        (launches recorded from the file's own program, capture.py) where
        there is one, else by `sizes` (see inputs.py)."""
        from .verify import verify_all

        out = verify_all(self, sizes or {}, captures or {}, check=check, seed=seed, timeout=timeout)
        for r in out:
            self._record(r)
        return out

    def _record(self, res):
        self.verifications[res.kernel] = res
        if res.ran:
            self.verified[res.kernel] = res.ok
            if not res.ok:
                k = next((k for k in self.kernels if k.spelling == res.kernel), None)
                d = make("MK1027", (k.file, k.line, 1) if k else (self.filename, 0, 1),
                         f"kernel '{res.kernel}': {res.summary()}", res.kernel)
                if d not in self.diagnostics:
                    self.diagnostics.append(d)

    # ------------------------------------------------------------ report --
    def to_json(self) -> dict:
        return {
            "file": self.filename,
            "double": self.double,
            "fast_math": self.fast_math,
            "kernels": [k.to_json() for k in self.kernels],
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "stats": self.stats,
            "verification": {name: r.to_json() for name, r in self.verifications.items()},
            "global_sizes": self.global_sizes,
            "global_init": {k: v.hex() for k, v in self.global_init.items()},
        }

    def report(self) -> str:
        lines = [f"{self.filename}: {len(self.kernels)} kernel(s), "
                 f"{sum(k.translated for k in self.kernels)} translated"]
        for k in self.kernels:
            state = "translated" if k.translated else "NOT translated"
            state += ", double computed in float" if k.translated and k.demoted else ""
            v = self.verified.get(k.spelling)
            if v is not None:
                state += ", verified" if v else ", verification FAILED"
            lines.append(f"  {k.spelling} -> {k.metal_name}: {state}")
            for d in k.diagnostics:
                lines.append(f"      {d}")
        shown = [d for d in self.diagnostics if d.severity != "note"]
        if shown:
            lines.append("diagnostics:")
            lines += [f"  {d}" for d in sorted(shown, key=lambda d: (d.file, d.line, d.column))]
        notes = [d for d in self.diagnostics if d.severity == "note"]
        if notes:
            lines.append(f"notes: {len(notes)} (see the .port.json or the comments in the .metal)")
        for name, r in self.verifications.items():
            lines.append(str(r))
        return "\n".join(lines)


def _metal_name(filename: str) -> str:
    base = re.sub(r"\.(cu|cuh|cpp|cc|h|hpp)$", "", filename.split("/")[-1]) or "kernels"
    return base + ".metal"


def _enabled(chunk: Chunk, kernels: list[KernelPort]) -> bool:
    if not chunk.kernels:
        return True
    ok = {k.spelling for k in kernels if k.translated}
    return bool(chunk.kernels & ok)


def _assemble_spans(chunks: list[Chunk], kernels: list[KernelPort]) -> list[tuple[str, Chunk]]:
    out = []
    for c in chunks:
        text = c.text
        if not _enabled(c, kernels) and not text.startswith("#if 0"):
            why = "; ".join(sorted({f"{d.code}" for k in kernels if k.spelling in c.kernels for d in k.diagnostics}))
            text = f"#if 0  // not in the port ({why}): see the diagnostics\n{text}\n#endif"
        out.append((_tidy(text), c))
    return out


def _assemble(chunks: list[Chunk], kernels: list[KernelPort]) -> str:
    return "\n\n".join(t for t, _ in _assemble_spans(chunks, kernels)) + "\n"


def _tidy(text: str) -> str:
    # `__device__ float f()` loses its keyword, not the space after it.
    lines = [re.sub(r"^ (?=[A-Za-z_])", "", ln.rstrip()) for ln in text.split("\n")]
    out, blank = [], 0
    for ln in lines:
        blank = blank + 1 if not ln else 0
        if blank <= 1:
            out.append(ln)
    return "\n".join(out).strip("\n")


def port_cuda(source: str, filename: str = "kernels.cu", include_dirs=(), defines=None,
              fast_math: bool = False, double: str = "reject") -> PortResult:
    """Translates CUDA source to Metal. Never raises on what it cannot
    translate: each such construct is a diagnostic, and a kernel that needs
    one is left out of the port (kept in #if 0). `fast_math`: map expf & co.
    to fast:: instead of precise::. `double`: "reject" (a kernel using
    double is not translated, MK1001) or "float" (what a kernel computes in
    double inside itself is computed in float, each site a MK1038 warning;
    a kernel parameter or host-written global holding a double stays MK1001:
    see doubles.py)."""
    if not isinstance(source, str):
        raise TypeError(f"port_cuda expects the CUDA source as a str, got {type(source).__name__}")
    check_mode(double)
    try:
        src = load_source(source, filename, include_dirs, defines)
    except PreprocessError as e:
        d = make("MK1017", (e.file or filename, e.line or 0, 1), f"the file does not preprocess: {e}")
        return PortResult(source, filename, [], [], [d], _empty_counts(source), tuple(include_dirs), defines,
                          fast_math=fast_math, double=double)
    return _translate(src, source, filename, tuple(include_dirs), defines, fast_math, double)


def _empty_counts(source: str) -> dict:
    from collections import Counter

    return {"converted": Counter(), "unconverted": Counter(), "unknown": Counter(), "changed": 0,
            "total": source.count("\n") + 1}


def _translate(src: CudaSource, source: str, filename: str, include_dirs, defines, fast_math,
               double) -> PortResult:
    facts = collect(src)
    tr = Translation(src, facts, fast_math, double)
    for note in src.unit.notes:
        m = re.match(r"(.*):(\d+): (.*)", note)
        if m:
            tr.diagnostics[("MK1022", note)] = make("MK1022", (m.group(1), int(m.group(2)), 1), m.group(3))
    chunks, kernels = Emitter(src, facts, tr).run()
    diags = sorted(tr.diagnostics.values(), key=lambda d: (d.file != filename, d.file, d.line, d.column, d.code))
    user_lines = _user_line_count(src)
    counts = {"converted": tr.converted, "unconverted": tr.unconverted, "unknown": tr.unknown,
              "changed": len(tr.changed), "total": user_lines}
    from .globals_init import initial_values

    sizes, init = initial_values(src, facts)
    return PortResult(source, filename, chunks, kernels, diags, counts, include_dirs, defines,
                      global_sizes=sizes, global_init=init, fast_math=fast_math, double=double, _src=src)


def _user_line_count(src: CudaSource) -> int:
    """Lines of the user's files the port read (the .cu and its own headers)."""
    files = set(re.findall(rb'^# \d+ "([^"\n]+)"', src.pp.data, re.MULTILINE))
    total = 0
    for raw in files:
        f = raw.decode("utf-8", errors="replace")
        if f.startswith("<") or "/port/include/" in f:
            continue
        if f == src.filename:
            total += src.original.count("\n") + 1
            continue
        try:
            with open(f, encoding="utf-8", errors="replace") as fh:
                total += fh.read().count("\n") + 1
        except OSError:
            pass
    return total or src.original.count("\n") + 1
