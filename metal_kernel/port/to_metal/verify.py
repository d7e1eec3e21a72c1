"""Stage 4 of the port (verify): the original and the port on copies of the
same inputs, every buffer compared, both sides checked.

- the original runs through port.load_cuda (CUDA semantics on the CPU), the
  port through compile_shader (Metal semantics), each under
  metal_kernel.check() (memcheck, racecheck, synccheck, initcheck, other
  schedules);
- every buffer argument is compared after the runs: integers bit for bit,
  floats within a per-dtype tolerance (the port may sum in another order);
  NaN matches NaN only at the same element;
- a buffer that differs is reported with its largest absolute and relative
  error, the number of differing elements, and the first one with the
  thread that wrote it (trace.py);
- a verification where the original writes nothing, or has findings of its
  own (out-of-bounds accesses, races: the inputs do not fit it), fails: it
  proves nothing;
- a kernel that adds floats atomically (float_atomics.py) sums in an order
  no one fixes: its float buffers are compared with the smaller of
  SPREAD_FACTOR times what the original moves by when run again with its
  groups in reverse order, and FLOAT_ATOMIC_SIGMAS times the expected
  rounding error of such a sum (a random walk of sqrt(m) roundings of the
  buffer's precision at the buffer's scale, m the number of threadgroups
  adding into it), and a schedule-dependence the
  checker reports for it is a note, not a finding; the notes say which
  buffers needed the wider tolerance. Races stay findings;
- a kernel whose double the port computes in float (port_cuda's
  double="float", MK1038) is compared with the original accumulating in
  double: its float buffers at an rtol of n times float's unit roundoff
  (at least the default), n the longest accumulation into one of its double
  locals at this launch (the trip counts of the loops around the update,
  doubles.accumulations). n*u is the first-order worst-case relative error
  of a float sum of n terms (Higham's gamma_n), what computing the sum in
  float instead of double may cost; it is relative to each element, so a
  result that float loses to cancellation still fails. When n is not known
  (a loop bound that is not an expression of the scalar arguments) the
  default stands. A note says which.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ...runtime.binding import is_ndarray as _is_ndarray
from ...runtime.binding import is_tensor as _is_tensor
from ...runtime.errors import KernelError
from .doubles import accumulated_length
from .float_atomics import uses_float_atomics

# dtype kind -> (rtol, atol relative to the buffer's largest magnitude)
TOLERANCES = {"float16": (1e-2, 1e-3), "bfloat16": (2e-2, 4e-3), "float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12)}
# Unit roundoff of each float dtype (the rounding error of one atomic add).
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24, "float64": 2.0 ** -53}
# Standard deviations of the random-walk estimate a float-atomic sum may
# differ by between two orders (two sums, each sqrt(m) roundings: sqrt 2 of it).
FLOAT_ATOMIC_SIGMAS = 2.0
# How many times the original's own order spread (two group orders) a port
# may differ by: two samples of a random walk underestimate its range.
SPREAD_FACTOR = 4.0


@dataclass
class BufferReport:
    index: int
    name: str
    dtype: str
    elements: int
    written: bool  # the original or the port changed it
    match: bool
    mismatches: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    first_index: int | None = None
    original: str | None = None
    port: str | None = None
    thread: tuple | None = None  # threadIdx of the writer of the first differing element
    block: tuple | None = None

    def text(self) -> str:
        head = f"  buffer {self.index} '{self.name}' ({self.dtype}[{self.elements}]): "
        if self.match:
            return head + ("matches" if self.written else "unchanged by both") + \
                (f" (max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g})" if self.max_abs else "")
        where = f" written by thread {self.thread} of block {self.block}" if self.thread is not None else ""
        return (head + f"{self.mismatches} element(s) differ; max abs err {self.max_abs:.3g}, max rel err "
                f"{self.max_rel:.3g}; first at [{self.first_index}]{where}: original {self.original}, "
                f"port {self.port}")


@dataclass
class VerifyResult:
    kernel: str
    ok: bool
    ran: bool  # both sides ran to completion
    buffers: list[BufferReport] = field(default_factory=list)
    original_findings: list = field(default_factory=list)
    port_findings: list = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    launch: dict = field(default_factory=dict)

    def summary(self) -> str:
        if self.error:
            return self.error
        bad = [b for b in self.buffers if not b.match]
        parts = []
        if bad:
            parts.append("; ".join(f"'{b.name}': {b.mismatches} element(s) differ, first at [{b.first_index}]"
                                   for b in bad))
        if self.port_findings:
            parts.append(f"{len(self.port_findings)} finding(s) in the port: "
                         + "; ".join(f.message.split("\n")[0] for f in self.port_findings[:2]))
        if self.original_findings:
            parts.append(f"{len(self.original_findings)} finding(s) in the original: "
                         + "; ".join(f.message.split("\n")[0] for f in self.original_findings[:2]))
        if not any(b.written for b in self.buffers) and not parts:
            parts.append("the original wrote no buffer: the inputs prove nothing")
        return "; ".join(parts) or "outputs match"

    def __str__(self) -> str:
        lines = [f"verify {self.kernel}: {'OK' if self.ok else 'FAILED'} ({self.summary()})"]
        lines += [b.text() for b in self.buffers]
        for f in self.original_findings:
            lines.append(f"  original: {f.message.splitlines()[0]}")
        for f in self.port_findings:
            lines.append(f"  port: {f.message.splitlines()[0]}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "ok": self.ok, "ran": self.ran, "error": self.error,
                "summary": self.summary(), "buffers": [asdict(b) for b in self.buffers],
                "original_findings": [f.to_json() for f in self.original_findings],
                "port_findings": [f.to_json() for f in self.port_findings], "notes": self.notes,
                "launch": self.launch}


def _copy(a):
    if _is_tensor(a):
        return a.detach().clone()
    if _is_ndarray(a):
        return a.copy()
    return a


def _as_numpy(a) -> np.ndarray:
    if _is_tensor(a):
        import torch

        t = a.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.uint16).numpy().view(np.uint16)
        return t.numpy()
    return np.asarray(a)


def _run(kernel, args, launch: dict, check: bool, schedules: int):
    """(findings, error text) of one launch."""
    from ...check import check as checking

    try:
        if check:
            with checking(schedules=schedules) as report:
                kernel(*args, **launch)
            return list(report.findings), None
        kernel(*args, **launch)
        return [], None
    except KernelError as e:
        return [], f"{type(e).__name__}: {e}"
    except (TypeError, ValueError) as e:
        return [], f"{type(e).__name__}: {e}"


def _floats(a: np.ndarray, bf16: bool) -> np.ndarray:
    """A float buffer's values as float64 (bfloat16 arrives as its uint16 bits)."""
    return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64) if bf16 else a.astype(np.float64)


def compare(name: str, index: int, before: np.ndarray, orig: np.ndarray, port: np.ndarray, bf16: bool,
            rtol=None, atol=None, min_rtol: float = 0.0) -> BufferReport:
    dtype = "bfloat16" if bf16 else str(orig.dtype)
    written = not np.array_equal(before.view(np.uint8), orig.view(np.uint8)) or \
        not np.array_equal(before.view(np.uint8), port.view(np.uint8))
    rep = BufferReport(index, name, dtype, int(orig.size), written, True)
    if bf16 or orig.dtype.kind == "f":
        o, p = _floats(orig, bf16), _floats(port, bf16)
    else:
        bad = np.flatnonzero(orig.reshape(-1) != port.reshape(-1))
        if len(bad):
            i = int(bad[0])
            diff = np.abs(orig.reshape(-1).astype(np.float64) - port.reshape(-1).astype(np.float64))
            rep.match, rep.mismatches, rep.first_index = False, int(len(bad)), i
            rep.max_abs = float(diff.max())
            rep.original, rep.port = repr(orig.reshape(-1)[i].item()), repr(port.reshape(-1)[i].item())
        return rep
    o, p = o.reshape(-1), p.reshape(-1)
    r, a = TOLERANCES.get(dtype, (1e-4, 1e-5))
    r = rtol if rtol is not None else max(r, min_rtol)
    finite = np.isfinite(o)
    scale = float(np.abs(o[finite]).max()) if finite.any() else 1.0
    a = atol if atol is not None else a * max(scale, 1.0)
    both_nan = np.isnan(o) & np.isnan(p)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(o - p)
        same_inf = np.isinf(o) & (o == p)
        bad = ~(both_nan | same_inf | (diff <= a + r * np.abs(o)))
        ok_vals = finite & np.isfinite(p)
        if ok_vals.any():
            rep.max_abs = float(diff[ok_vals].max())
            rel = diff[ok_vals] / np.maximum(np.abs(o[ok_vals]), np.finfo(np.float32).tiny)
            rep.max_rel = float(rel.max())
    idx = np.flatnonzero(bad)
    if len(idx):
        i = int(idx[0])
        rep.match, rep.mismatches, rep.first_index = False, int(len(idx)), i
        rep.original, rep.port = repr(float(o[i])), repr(float(p[i]))
        if math.isnan(rep.max_abs) or not np.isfinite(p[i]) or not np.isfinite(o[i]):
            rep.max_abs = float("inf") if not np.isfinite(diff[i]) else rep.max_abs
    return rep


def verify_kernel(result, name: str, args, grid, block, shared_mem=0, check=True, rtol=None, atol=None,
                  timeout=120.0, schedules: int = 2) -> VerifyResult:
    from .trace import writer_of

    launch = {"grid": grid, "block": block, "shared_mem": shared_mem}
    port_k = next((k for k in result.kernels if k.spelling == name), None)
    if port_k is None:
        try:
            port_k = result.load()[name].port
            name = port_k.spelling
        except KeyError as e:
            return VerifyResult(name, False, False, error=str(e).strip("'\""))
    res = VerifyResult(name, False, False, launch={"grid": _jsonable(grid), "block": _jsonable(block),
                                                   "shared_mem": int(shared_mem)})
    if not port_k.translated:
        res.error = "not translated: " + "; ".join(f"{d.code} {d.message}" for d in port_k.diagnostics)
        return res
    try:
        plib = result.load()
        pk = plib[name]
    except KeyError as e:
        res.error = str(e).strip("'\"")
        return res
    try:
        clib = result.cuda_library()
        ck = clib[name]
    except Exception as e:  # noqa: BLE001 - the original does not build: reported, not raised
        res.error = f"the original does not run through load_cuda: {str(e).splitlines()[0]}"
        return res
    for g in port_k.globals:
        try:
            plib.set_constant(g.name, clib.get_constant(g.name))
        except KeyError:
            pass
    if check:
        _share_globals(clib)
    float_atomics = uses_float_atomics(result.metal, name.partition("<")[0].split("::")[-1])
    demoted_rtol = _demoted_rtol(port_k, args, res) if rtol is None else 0.0
    before = [_copy(a) for a in args]
    orig_args = [_copy(a) for a in args]
    port_args = [_copy(a) for a in args]
    full = dict(launch, timeout=timeout)
    res.original_findings, err_o = _run(ck, orig_args, full, check, schedules)
    res.port_findings, err_p = _run(pk, port_args, full, check, schedules)
    if err_o:
        res.error = f"the original failed: {err_o}"
        return res
    if err_p:
        res.error = f"the port failed: {err_p}"
        res.ran = True
        return res
    res.ran = True
    if float_atomics:
        _order_notes(res)
    reordered = None  # the original run again in another group order, when a float-atomic buffer differs
    for i, (b, o, p) in enumerate(zip(before, orig_args, port_args)):
        if not (_is_ndarray(o) or _is_tensor(o)):
            continue
        spec = port_k.params[i] if i < len(port_k.params) else None
        bf16 = bool(spec is not None and spec.dtype == "bfloat16")
        rep = compare(spec.name if spec else f"arg{i}", i, _as_numpy(b), _as_numpy(o), _as_numpy(p), bf16,
                      rtol, atol, demoted_rtol)
        if float_atomics and not rep.match and rep.dtype in UNIT_ROUNDOFF and atol is None:
            if reordered is None:
                reordered = _reordered_original(ck, args, full)
            spread = _spread(_as_numpy(o), _as_numpy(reordered[i]), bf16) if reordered else None
            model = _float_atomic_atol(rep.dtype, _as_numpy(o), bf16, _groups(grid))
            # The original against itself with its groups in reverse order
            # shows how much the order of its float atomics moves this buffer;
            # the port may differ by a few times that, never by more than the
            # rounding model allows.
            floor = model / (FLOAT_ATOMIC_SIGMAS * math.sqrt(2.0 * max(_groups(grid), 1)))  # one rounding
            wide = model if spread is None else min(model, max(SPREAD_FACTOR * spread, floor))
            again = compare(rep.name, i, _as_numpy(b), _as_numpy(o), _as_numpy(p), bf16, rtol, wide)
            if again.match:
                why = (f"{SPREAD_FACTOR:g}x the {spread:.3g} the original itself moves by with its groups in "
                       f"reverse order" if spread is not None and wide < model else
                       f"the rounding a float-atomic sum of {_groups(grid)} threadgroups' contributions may show "
                       f"in another order ({FLOAT_ATOMIC_SIGMAS:g} sigma)")
                res.notes.append(f"'{rep.name}' matches within {wide:.3g}, {why}; at the {rep.dtype} default "
                                 f"tolerance {rep.mismatches} element(s) differ, max abs err {rep.max_abs:.3g}")
                rep = again
        if not rep.match and rep.first_index is not None:
            elem = _as_numpy(o).dtype.itemsize
            offset = rep.first_index * elem
            where = writer_of(lambda: ck(*[_copy(a) for a in args], **full), i, offset, elem) or \
                writer_of(lambda: pk(*[_copy(a) for a in args], **full), i, offset, elem)
            if where is not None:
                rep.thread, rep.block = where
        res.buffers.append(rep)
    if res.original_findings:
        kinds = sorted({f.kind for f in res.original_findings})
        res.notes.append(f"the original has {len(res.original_findings)} finding(s) of its own ({', '.join(kinds)}): "
                         "on these inputs it is not a reference")
    wrote = any(b.written for b in res.buffers)
    res.ok = all(b.match for b in res.buffers) and not res.port_findings and not res.original_findings and wrote
    return res


def _demoted_rtol(port_k, args, res: VerifyResult) -> float:
    """The rtol of a kernel whose double the port computes in float (see the
    module's docstring), with a note; 0 for the others."""
    if not port_k.demoted:
        return 0.0
    scalars = {p.name: int(a) for p, a in zip(port_k.params, args)
               if p.kind == "scalar" and isinstance(a, (int, np.integer)) and not isinstance(a, bool)}
    n = accumulated_length(port_k.accumulations, scalars)
    what = "its double computed in float (MK1038)"
    if not n:
        why = "no loop in the kernel's own body accumulates into a double local" if n == 0 else \
            "the length of its float accumulation is not known from the scalar arguments"
        res.notes.append(f"{what}: {why}; float buffers compared at the default tolerance")
        return 0.0
    r = n * UNIT_ROUNDOFF["float32"]
    if r <= TOLERANCES["float32"][0]:
        res.notes.append(f"{what}: its longest accumulation at this launch is {n} term(s), whose float rounding "
                         f"({n} x 2^-24) is within the default tolerance")
        return 0.0
    res.notes.append(f"{what}: float buffers compared at rtol {r:.3g} = {n} x 2^-24, the worst-case relative "
                     f"rounding of a float sum of {n} terms (its longest accumulation at this launch)")
    return r


def _reordered_original(kernel, args, launch: dict) -> list | None:
    """The original's buffers after a run of it (unchecked) on fresh copies
    of `args` with its threadgroups in reverse order; None when it fails."""
    from ...runtime import library as _library
    from ...runtime.native import ORDER_REVERSE

    copies = [_copy(a) for a in args]

    def reversed_groups(k, _args, b, grid, group, ngroups, tg_mem, timeout_ms):
        run = k._launch_struct(b, grid, group, ngroups, tg_mem)
        run.order = ORDER_REVERSE
        k._run(run, b, timeout_ms)

    prev = _library.set_dispatch_interceptor(reversed_groups)
    try:
        kernel(*copies, **launch)
    except (KernelError, TypeError, ValueError):
        return None
    finally:
        _library.set_dispatch_interceptor(prev)
    return copies


def _spread(a: np.ndarray, b: np.ndarray, bf16: bool) -> float | None:
    """Largest finite |a - b| of two runs of the same float buffer."""
    if not bf16 and a.dtype.kind != "f":
        return None
    d = np.abs(_floats(a, bf16) - _floats(b, bf16))
    d = d[np.isfinite(d)]
    return float(d.max()) if d.size else 0.0


def _groups(grid) -> int:
    return int(np.prod(grid)) if isinstance(grid, (tuple, list)) else int(grid)


def _float_atomic_atol(dtype: str, orig: np.ndarray, bf16: bool, m: int) -> float:
    """FLOAT_ATOMIC_SIGMAS * sqrt(2 m) * u * the buffer's largest magnitude:
    the spread of two orders of m atomic adds in the buffer's precision."""
    o = _floats(orig, bf16)
    finite = np.isfinite(o)
    scale = float(np.abs(o[finite]).max()) if finite.any() else 1.0
    return FLOAT_ATOMIC_SIGMAS * math.sqrt(2.0 * max(m, 1)) * UNIT_ROUNDOFF[dtype] * max(scale, 1.0)


def _order_notes(res: VerifyResult):
    """A kernel adding floats atomically: the checker's schedule-dependence
    findings are what the free order of those adds does (the races the
    checker finds stay findings)."""
    for side, findings in (("original", res.original_findings), ("port", res.port_findings)):
        keep = []
        for f in findings:
            if f.kind == "schedule-dependent":
                res.notes.append(f"{side}: {f.message.splitlines()[0]}: the kernel adds floats atomically, in an "
                                 "order no one fixes (a note, not a finding)")
            else:
                keep.append(f)
        findings[:] = keep


def _share_globals(clib):
    """The checked build of a CUDA library is another library with its own
    __constant__ / __device__ variables: give it the values the caller set
    (check() itself does not copy them)."""
    symbols = getattr(clib, "_symbols", None)
    if not symbols:
        return
    from ...check.session import checked_library

    checked = checked_library(clib)
    for name in symbols:
        checked.set_constant(name, clib.get_constant(name))


def _jsonable(v):
    return list(v) if isinstance(v, (tuple, list)) else int(v)


def verify_all(result, sizes: dict, captures: dict, check=True, seed=0, timeout=120.0) -> list[VerifyResult]:
    from .inputs import make_launch

    out = []
    for k in result.kernels:
        if not k.translated:
            out.append(VerifyResult(k.spelling, False, False, error="not translated: " + "; ".join(
                f"{d.code} {d.message}" for d in k.diagnostics)))
            continue
        try:
            args, launch, notes = make_launch(k, sizes, captures.get(k.spelling), seed)
        except ValueError as e:
            out.append(VerifyResult(k.spelling, False, False, error=str(e)))
            continue
        r = verify_kernel(result, k.spelling, args, check=check, timeout=timeout, **launch)
        r.notes = notes + r.notes
        out.append(r)
    return out
