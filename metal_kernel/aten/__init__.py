"""metal_kernel.aten: the in-tree PyTorch MPS workflow, grouped by stage.

- model/: what a PyTorch tree says (yaml, stubs, dtypes, OpInfo, test lists);
- generate/: the text `add` writes (functors, REGISTER_* lines, host code);
- edit/: planned, atomic edits of the tree's files;
- recipes/: non-TensorIterator ops with a host recipe (take);
- twin/: a Python twin of PyTorch's MPS host side;
- verify/: generated kernels on the runtime against the CPU operator;
- add.py, migrate.py, coverage.py: the commands; cli.py mounts them (`metal-kernel aten`).
"""

from .errors import AtenError
from .model.tree import PyTorchTree

__all__ = ["AtenError", "PyTorchTree"]
