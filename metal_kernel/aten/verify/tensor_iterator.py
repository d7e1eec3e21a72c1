"""Verification of a TensorIterator op's generated kernels against the CPU op.

Each case of cases.py runs twice: on the CPU, as test_mps's `_run_op` does (an op
the CPU lacks for half/bfloat16 -- NotImplementedError -- runs on float32 inputs and
is cast back), and through `MpsHost`, the twin of `exec_unary_kernel` /
`exec_binary_kernel`, on kernels compiled by the runtime, with the output poisoned
first. The results are compared as test_mps compares them (compare.py), under the
tolerances test_mps applies to the op (tolerance.py); elements where the CPU result
itself is unreliable are set aside and counted (adjudicate.py). A case the CPU
rejects is skipped, with the reason; one the twin rejects while the CPU accepts it
fails.
"""

from __future__ import annotations

import torch

from ..twin.mps_host import MpsHost, cpu_scalar
from ..twin.tensor_iter import TensorIter
from .cases import Case, OpView, Skip, all_cases
from .adjudicate import adjudicate
from .compare import compare, describe, max_error
from .poison import poison, unwritten, unwritten_in_both
from .report import DtypeResult, Failure
from .tolerance import Tolerance

LOW_PRECISION = (torch.float16, torch.bfloat16)
NAMES = {1: ("x",), 2: ("a", "b")}


def _describe(err: Exception) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


class Verifier:
    def __init__(self, lib, kernel: str, op: OpView, fn, cpu_dtypes, math: str = "exact", runner=None):
        self.lib, self.kernel, self.op, self.fn = lib, kernel, op, fn
        self.cpu_dtypes, self.math, self.runner = set(cpu_dtypes), math, runner

    def reference(self, args, dtype):
        """The CPU result, as test_mps's _run_op computes it."""
        try:
            if dtype not in self.cpu_dtypes and dtype in LOW_PRECISION:
                raise NotImplementedError
            return self.fn(*args)
        except NotImplementedError:
            # As the op would: operands in the common dtype first (int16 32767 -> bfloat16 32768),
            # then computed in float32 and cast back.
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            common = torch.result_type(*tensors) if len(tensors) > 1 else dtype
            up = [a.to(common).float() if isinstance(a, torch.Tensor) and common in LOW_PRECISION else a
                  for a in args]
            res = self.fn(*up)
            return res.to(dtype) if res.dtype == torch.float32 and dtype in LOW_PRECISION else res

    def emulate(self, case: Case, expected: torch.Tensor, common: torch.dtype, second_poison: bool = False):
        tensors = [a if isinstance(a, torch.Tensor) else cpu_scalar(a) for a in case.args]
        out = None
        if case.out == "strided" and expected.dim():
            shape = list(expected.shape)
            out = torch.empty(*shape[:-1], shape[-1] * 2, dtype=expected.dtype)[..., ::2]
        elif case.out == "castout":
            out = torch.empty(expected.shape, dtype=case.castout)
        it = TensorIter(out, tensors, expected.dtype if out is None else out.dtype, common)
        poison(it.output(), second_poison)
        host = MpsHost(self.lib, force=case.force, runner=self.runner)
        if self.op.arity == "unary":
            host.exec_unary_kernel(it, self.kernel)
        else:
            host.exec_binary_kernel(it, self.kernel)
        return it.output(), [launch.kernel for launch in host.launches]

    def check(self, case: Case, result: DtypeResult) -> None:
        dtype = result.dtype
        try:
            expected = self.reference(case.args, dtype)
        except Exception as err:  # the CPU op rejects these inputs: nothing to compare with
            result.skipped[f"the CPU op rejects the case ({_describe(err)})"] += 1
            return
        common = expected.dtype  # the op's result type: TensorIterator's common dtype here
        if case.out == "castout":
            expected = expected.to(case.castout)
        result.cases += 1
        result.saw(case.args)
        try:
            actual, kernels = self.emulate(case, expected, common)
        except Exception as err:  # the twin or the kernel fails where the CPU succeeds
            result.failures.append(Failure(case.label, f"the MPS host raises {_describe(err)}"))
            return
        result.kernels.update(kernels)
        missing = unwritten(actual)
        if missing:  # or outputs that are the poison's bits (see poison.py): run again under another
            missing = unwritten_in_both(actual, self.emulate(case, expected, common, second_poison=True)[0])
        if missing:
            result.failures.append(Failure(f"{case.label} via {', '.join(kernels)}",
                                           f"{missing} of {actual.numel()} output elements never written"))
            return
        result.out_dtype = expected.dtype if case.out != "castout" else result.out_dtype
        tol = result.tolerance
        effective = tol.effective(expected.dtype)
        problem, bad = compare(actual, expected, tol.atol, tol.rtol, effective)
        set_aside = None
        if problem and bad is not None and bad.numel():
            verdict = adjudicate(lambda *a: self.reference(list(a), dtype), self.fn, case.args, actual, expected,
                                 bad, *effective)
            result.cpu_less_accurate += verdict.cpu_less_accurate
            result.cpu_inconsistent += verdict.cpu_inconsistent
            set_aside = sorted(set(bad.tolist()) - set(verdict.failing))
            problem = (describe(actual, expected, verdict.failing, case.args, NAMES[self.op.n_inputs])
                       if verdict.failing else None)
        result.max_error = max(result.max_error, max_error(actual, expected, set_aside))
        if problem:
            result.failures.append(Failure(f"{case.label} via {', '.join(kernels)}", problem))

    def run_dtype(self, dtype: torch.dtype, tolerance: Tolerance) -> DtypeResult:
        result = DtypeResult(dtype, tolerance, self.math)
        for case in all_cases(self.op, dtype):
            if isinstance(case, Skip):
                result.skipped[case.reason] += 1
            else:
                self.check(case, result)
        return result
