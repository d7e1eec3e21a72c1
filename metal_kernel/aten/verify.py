"""Emulated verification of an op's generated Metal kernels against the CPU op.

The kernels file the op was added to is compiled with `metal_kernel.compile_shader`
(against the checkout's `c10/metal` headers); every OpInfo sample of every
dtype the op is instantiated for then runs through `MpsHost` — the Python twin
of `exec_unary_kernel` / `exec_binary_kernel` — in several layouts (as given,
non-contiguous, column-major, strided `out=`, castout `out=`, forced ILP flavor,
Python-scalar operands for Scalar overloads) and is compared with the CPU op
under test_mps's tolerances: fp16 (atol 2e-2, rtol 1e-2), bf16 (5e-2, 5e-2),
assert_close defaults otherwise. dtypes the CPU op lacks (half/bfloat16 for
some special functions) are compared with the float32 CPU result cast down.
Ops with a host recipe (take) are verified by verify_custom.py instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from . import dtypes as dt
from . import opinfo
from .errors import AtenError
from .metal_gen import ARITY, functor_struct_re
from .mps_host import MpsHost, cpu_scalar
from .stubs import find_stubs, stub_for
from .tensor_iter import TensorIter
from .tree import PyTorchTree
from .yaml_model import NativeFunctions


def runtime_available() -> bool:
    import metal_kernel

    return hasattr(metal_kernel, "compile_shader")


@dataclass
class DtypeResult:
    dtype: str
    cases: int = 0
    max_error: float = 0.0
    kernels: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    kernel_errors: list[str] = field(default_factory=list)  # reported through the error buffer

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass
class VerifyReport:
    op: str
    kernel: str
    results: list[DtypeResult]
    exact: bool = False  # compared bit for bit instead of with test_mps tolerances

    @property
    def failed(self) -> bool:
        return any(not r.ok for r in self.results)

    def render(self) -> str:
        lines = [f"verify {self.op} (kernel '{self.kernel}'):"]
        for r in self.results:
            tol = dt.TOLERANCES.get(getattr(torch, r.dtype))
            tol_s = ("exact" if self.exact else f"atol {tol[0]:g} rtol {tol[1]:g}" if tol
                     else "assert_close defaults")
            reported = f"; {len(r.kernel_errors)} kernel-reported errors" if r.kernel_errors else ""
            lines.append(f"  {r.dtype:<9} {'ok  ' if r.ok else 'FAIL'} {r.cases:4d} cases  "
                         f"max error {r.max_error:.3g}  ({tol_s}; {len(r.kernels)} kernels{reported})")
            lines += [f"      {f}" for f in r.failures[:5]]
        first = next((r.kernel_errors[0] for r in self.results if r.kernel_errors), None)
        if first:
            lines.append(f"  kernel-reported error, e.g. {first}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"op": self.op, "kernel": self.kernel, "failed": self.failed,
                "exact": self.exact,
                "dtypes": [{"dtype": r.dtype, "cases": r.cases, "max_error": r.max_error,
                            "kernels": sorted(r.kernels), "failures": r.failures,
                            "kernel_errors": r.kernel_errors} for r in self.results]}


def max_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    if actual.numel() == 0:
        return 0.0
    a, e = actual.detach(), expected.detach()
    if a.is_complex() or e.is_complex():
        a, e = torch.view_as_real(a.resolve_conj()), torch.view_as_real(e.resolve_conj())
    a, e = a.double(), e.double()
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))
    diff = torch.where(same, torch.zeros_like(a), (a - e).abs())
    value = float(diff.max())
    return value if not math.isnan(value) else float("inf")


def _as_number(t: torch.Tensor):
    return t.reshape(-1)[0].item()


def _noncontiguous_out(shape, dtype) -> torch.Tensor | None:
    if len(shape) == 0:
        return None
    return torch.empty(*shape[:-1], shape[-1] * 2, dtype=dtype)[..., ::2]


def _column_major(t):
    return t.mT.contiguous().mT if isinstance(t, torch.Tensor) and t.dim() >= 2 else t


class Verifier:
    def __init__(self, lib, kernel: str, arity: str, fn, cpu_dtypes, scalar_overloads: bool):
        self.lib, self.kernel, self.arity, self.fn = lib, kernel, arity, fn
        self.cpu_dtypes = cpu_dtypes
        self.scalar_overloads = scalar_overloads

    def reference(self, args, dtype, out_dtype=None):
        if dtype in self.cpu_dtypes:
            res = self.fn(*args)
        else:  # CPU lacks this dtype: compute in float32, cast down
            up = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
            res = self.fn(*up).to(dtype)
        return res.to(out_dtype) if out_dtype is not None else res

    def emulate(self, args, out, out_dtype, common, force):
        tensors = [a if isinstance(a, torch.Tensor) else cpu_scalar(a) for a in args]
        it = TensorIter(out, tensors, out_dtype, common)
        host = MpsHost(self.lib, force=force)
        if self.arity == "unary":
            host.exec_unary_kernel(it, self.kernel)
        else:
            host.exec_binary_kernel(it, self.kernel)
        return it.output(), [launch.kernel for launch in host.launches]

    def cases(self, sample, dtype):
        """(label, args, out or None, out dtype or None, force flavor)."""
        args = [sample.input, *sample.args][: 1 if self.arity == "unary" else 2]
        yield "as given", args, None, None, None
        yield "forced ILP", args, None, None, "ilp"
        nc = sample.noncontiguous()
        yield "non-contiguous", [nc.input, *nc.args][: len(args)], None, None, None
        yield "column-major", [_column_major(a) for a in args], None, None, None
        yield "strided out=", args, "noncontiguous", None, None
        if self.arity == "unary" and dtype.is_floating_point:
            yield "castout out=", args, "contiguous", (torch.float32 if dtype != torch.float32
                                                       else torch.float16), None
        if self.scalar_overloads and self.arity == "binary":
            a, b = args
            if isinstance(b, torch.Tensor) and b.numel():
                yield "Scalar rhs", [a, _as_number(b)], None, None, None
            if isinstance(a, torch.Tensor) and a.numel():
                yield "Scalar lhs", [_as_number(a), b], None, None, None

    def run_dtype(self, infos, dtype) -> DtypeResult:
        result = DtypeResult(dt.short_name(dtype))
        atol, rtol = dt.TOLERANCES.get(dtype, (None, None))
        for info in infos:
            for sample in info.sample_inputs("cpu", dtype):
                if sample.kwargs:
                    continue
                for label, args, out_kind, out_dtype, force in self.cases(sample, dtype):
                    expected = self.reference(args, dtype, out_dtype)
                    out = None
                    if out_kind == "noncontiguous":
                        out = _noncontiguous_out(expected.shape, expected.dtype)
                        if out is None:
                            continue
                    elif out_kind == "contiguous":
                        out = torch.empty(expected.shape, dtype=out_dtype)
                    common = self.reference(args, dtype).dtype
                    actual, kernels = self.emulate(args, out, expected.dtype, common, force)
                    result.cases += 1
                    result.kernels.update(kernels)
                    result.max_error = max(result.max_error, max_error(actual, expected))
                    try:
                        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol,
                                                   equal_nan=True, check_stride=False)
                    except AssertionError as err:
                        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args]
                        first = str(err).strip().splitlines()[0]
                        result.failures.append(f"{label} {shapes} via {', '.join(kernels)}: {first}")
        return result


def _kernel_name(source: str, candidates) -> str:
    for name in candidates:
        if functor_struct_re(name).search(source):
            return name
    raise AtenError(f"no `struct <name>_functor` for any of {', '.join(candidates)}: run `aten add` first")


def compile_kernel_file(path, tree: PyTorchTree):
    """The runtime's library for a kernels/*.metal file, with the checkout's c10/metal headers."""
    import metal_kernel

    try:
        return metal_kernel.compile_shader(path.read_text(), include_dirs=[str(tree.include_dir)])
    except Exception as err:  # the runtime's compile error carries the compiler's message
        first = next((l for l in str(err).splitlines() if l.strip()), type(err).__name__)
        raise AtenError(f"the runtime cannot compile this kernel file: {first}", path) from err


def verify_op(tree: PyTorchTree, op: str, dtypes=None) -> VerifyReport:
    from .recipes import recipe_for

    nf = NativeFunctions.load(tree.native_functions, tree.tags)
    family = nf.family(op)
    base = str(family[0].fn.func.name.name.base)
    stub = stub_for(base, find_stubs(tree.native_dir))
    if (stub is None or stub.arity is None) and recipe_for(base) is not None:
        from .verify_custom import verify_recipe

        return verify_recipe(tree, op, recipe_for(base), dtypes)
    if stub is None or stub.arity is None:
        raise AtenError(f"'{base}' is neither a unary/binary TensorIterator op with a DispatchStub "
                        "nor an op with a host recipe: nothing to verify it through")
    path = tree.kernels_dir / ARITY[stub.arity][0]
    if not path.is_file():
        raise AtenError("kernel file missing: run `aten add` first", path)
    kernel = _kernel_name(path.read_text(), list(dict.fromkeys([stub.kernel_name, base, op.split(".")[0]])))
    lib = compile_kernel_file(path, tree)
    infos = opinfo.opinfos_for(base)
    if not infos:
        raise AtenError(f"no OpInfo tests '{base}'", tree.native_functions, family[0].line)
    cpu = opinfo.cpu_dtypes(infos)
    fn = next((i.op for i in infos if not i.variant_test_name), infos[0].op)
    scalar_overloads = any(
        any(str(a.type) == "Scalar" for a in e.fn.func.arguments.flat_positional[:2]) for e in family)
    verifier = Verifier(lib, kernel, stub.arity, fn, cpu, scalar_overloads)
    chosen = dtypes or dt.mps_dtypes(cpu)
    return VerifyReport(op, kernel, [verifier.run_dtype(infos, d) for d in chosen])
