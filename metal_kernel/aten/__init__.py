"""metal_kernel.aten: the in-tree PyTorch MPS workflow.

- `coverage`: which ops have CUDA but no MPS kernels, classified (coverage.py);
- `add`: dispatch edit, Metal functor, host stub, test-list edits (add.py); for
  non-TensorIterator ops with a host recipe (recipes.py: take), a `--kernel` file
  and a generated `.mm` host function (take_host.py);
- `migrate`: legacy `MPS: op_out_mps` rows to the shared line (migrate.py);
- `verify`: generated kernels through an emulation of PyTorch's MPS host code,
  on the runtime, against the CPU op (verify.py); recipe ops through the Python
  twin of their generated host function (verify_custom.py).

The click group is `metal_kernel.aten.cli.aten`.
"""

from .errors import AtenError
from .tree import PyTorchTree

__all__ = ["AtenError", "PyTorchTree"]
