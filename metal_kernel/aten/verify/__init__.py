"""Verification of generated kernels on the runtime, against the CPU operator.

- run.py: `verify_op(tree, op)`, the entry point `aten verify` / `aten add` use;
- compile.py: the op's instantiations plus the file's preamble, and per-dtype
  diagnosis of functors that do not compile;
- cases.py, values.py: the inputs (OpInfo samples and reference inputs, edge values,
  dense sweeps, layouts, scalars, type promotion);
- tensor_iterator.py: TensorIterator ops through the twin of MPS's host code
  (twin/), outputs poisoned first (poison.py);
- compare.py, tolerance.py, adjudicate.py: test_mps's comparison and tolerances, and
  the CPU reference's own faults set aside;
- recipe.py: recipe ops (take) through the Python twin of their `.mm`;
- report.py: the per-mode, per-dtype results, as text and JSON.
"""

from .compile import runtime_available
from .report import DtypeResult, VerifyReport
from .run import verify_op

__all__ = ["verify_op", "runtime_available", "VerifyReport", "DtypeResult"]
