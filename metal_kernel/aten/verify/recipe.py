"""Verification of a recipe op (take): its kernel file through the Python twin of its `.mm`.

kernels/<Stem>.metal is compiled with the runtime against the checkout's
`c10/metal` headers; the twin (same checks, output shape, kernel name, binding
order, grid and error buffer as the generated host functions) runs every case of
every dtype the op is instantiated for, next to the CPU op:
- both return: the results must match (bit for bit for copy ops such as take);
- both raise: a host check must raise the CPU's exception type with the CPU's
  message; an error the kernel reported through the error buffer
  (`torch.AcceleratorError`) is accepted only where the CPU raised the matching
  data-dependent error (for take: an IndexError naming one of the case's
  out-of-range indices, `Recipe.kernel_error_matches`) and is listed in the report;
- one raises and the other returns: failure.
"""

from __future__ import annotations

import torch

from ..errors import AtenError
from ..model import dtypes as dt
from ..model import opinfo
from ..model.tree import PyTorchTree
from ..recipes import Recipe
from ..twin.mps_stream import MpsStream, error_messages_layout
from .compare import max_error
from .checked import run_checked
from .compile import compile_kernel_file
from .report import DtypeResult, Failure, VerifyReport
from .tolerance import Tolerance

EXACT = Tolerance(0.0, 0.0, "exact: a copy is compared bit for bit")


def _attempt(fn):
    try:
        return fn(), None
    except Exception as err:  # compared with the other side's outcome, never swallowed
        return None, err


def _fresh(out: torch.Tensor | None) -> torch.Tensor | None:
    """A second out= tensor with the same shape and strides (contents are overwritten)."""
    return None if out is None else torch.empty_strided(out.shape, out.stride(), dtype=out.dtype)


def _describe(err: Exception) -> str:
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"


class RecipeVerifier:
    def __init__(self, recipe: Recipe, twin):
        self.recipe, self.twin = recipe, twin

    def _run(self, case):
        out_cpu = case.out if case.shared else _fresh(case.out)
        out_twin = case.out if case.shared else _fresh(case.out)
        if case.out is None:
            expected = _attempt(lambda: self.recipe.reference(*case.args))
            actual = _attempt(lambda: self.twin.functional(*case.args))
        else:
            expected = _attempt(lambda: self.recipe.reference(*case.args, out=out_cpu))
            actual = _attempt(lambda: self.twin.out_variant(*case.args, out_twin))
        return expected, actual

    def check(self, case, result: DtypeResult) -> None:
        self.twin.launches.clear()
        (expected, cpu_err), (actual, twin_err) = self._run(case)
        result.cases += 1
        result.saw(case.args)
        result.kernels.update(launch.kernel for launch in self.twin.launches)
        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in case.args]
        where = f"{case.label} {shapes}"
        if cpu_err is not None and twin_err is not None:
            if isinstance(twin_err, torch.AcceleratorError):
                if self.recipe.kernel_error_matches(case, cpu_err, twin_err):
                    result.kernel_errors.append(f"{case.label}: {twin_err}")
                else:
                    result.failures.append(Failure(where, f"the kernel reports {_describe(twin_err)}; "
                                                          f"the CPU raises {_describe(cpu_err)}"))
            elif type(twin_err) is not type(cpu_err) or str(twin_err) != str(cpu_err):
                result.failures.append(Failure(where, f"CPU raises {_describe(cpu_err)}; "
                                                      f"the MPS host raises {_describe(twin_err)}"))
        elif cpu_err is not None:
            result.failures.append(Failure(where, f"CPU raises {_describe(cpu_err)}; the MPS host returns a result"))
        elif twin_err is not None:
            result.failures.append(Failure(where, f"the MPS host raises {_describe(twin_err)}"))
        else:
            tol = result.tolerance
            result.max_error = max(result.max_error, max_error(actual, expected))
            try:
                torch.testing.assert_close(actual, expected, atol=tol.atol, rtol=tol.rtol, equal_nan=True,
                                           check_stride=False)
            except AssertionError as err:
                first = str(err).strip().splitlines()[0]
                result.failures.append(Failure(f"{where} via {', '.join(sorted(result.kernels))}", first))

    def run_dtype(self, infos, dtype, math: str) -> DtypeResult:
        result = DtypeResult(dtype, EXACT if self.recipe.exact else Tolerance(None, None, "assert_close defaults"),
                             math)
        for info in infos:
            for sample in info.sample_inputs("cpu", dtype):
                for case in self.recipe.sample_cases(sample, dtype):
                    self.check(case, result)
        for case in self.recipe.error_cases(dtype, infos):
            self.check(case, result)
        return result


def verify_recipe(tree: PyTorchTree, op: str, recipe: Recipe, dtypes=None, modes=("exact",),
                  check: bool = True) -> VerifyReport:
    path = tree.kernels_dir / f"{recipe.stem}.metal"
    if not path.is_file():
        raise AtenError("kernel file missing: run `aten add` first", path)
    infos = opinfo.opinfos_for(recipe.op)
    if not infos:
        raise AtenError(f"no OpInfo tests '{recipe.op}'", tree.native_functions)
    chosen = dtypes or dt.mps_dtypes(opinfo.cpu_dtypes(infos))
    results, notes = [], []
    for mode in modes:
        lib = compile_kernel_file(path, tree, mode)
        stream = MpsStream(error_messages_layout(tree.c10_metal / "error.h"))
        verifier = RecipeVerifier(recipe, recipe.twin(lib, stream))
        results += [run_checked(lambda d=d: verifier.run_dtype(infos, d, mode), check, notes) for d in chosen]
    return VerifyReport(op, recipe.op, results, notes)
