"""Verification of generated kernels on the runtime, against the CPU operator.

- `verify_op(tree, op)` (run.py): the entry point `aten verify` / `aten add` use;
- tensor_iterator.py: TensorIterator ops through the twin of MPS's host code
  (mps_host.py, tensor_iter.py);
- recipe.py: recipe ops (take) through the Python twin of their `.mm`
  (mps_stream.py, aten_host.py);
- report.py: the per-dtype results, as text and JSON.
"""

from .compile import runtime_available
from .report import DtypeResult, VerifyReport
from .run import verify_op

__all__ = ["verify_op", "runtime_available", "VerifyReport", "DtypeResult"]
