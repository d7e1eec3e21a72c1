"""`aten verify OP`: find how OP reaches MPS and verify it that way.

- a unary/binary TensorIterator op (a DispatchStub exists): its kernels file through
  the twin of exec_unary_kernel / exec_binary_kernel (tensor_iterator.py);
- an op with a host recipe (take): its kernel file through the Python twin of the
  recipe's .mm host functions (recipe.py).
"""

from __future__ import annotations

from ..errors import AtenError
from ..generate.functor import functor_struct_re
from ..model import dtypes as dt
from ..model import opinfo
from ..model.arity import ARITY
from ..model.native_functions import NativeFunctions
from ..model.stubs import find_stubs, stub_for
from ..model.tree import PyTorchTree
from ..recipes import recipe_for
from .compile import compile_kernel_file
from .recipe import verify_recipe
from .report import VerifyReport
from .tensor_iterator import Verifier


def _kernel_name(source: str, candidates) -> str:
    for name in candidates:
        if functor_struct_re(name).search(source):
            return name
    raise AtenError(f"no `struct <name>_functor` for any of {', '.join(candidates)}: run `aten add` first")



def verify_op(tree: PyTorchTree, op: str, dtypes=None) -> VerifyReport:
    nf = NativeFunctions.load(tree.native_functions, tree.tags)
    family = nf.family(op)
    base = str(family[0].fn.func.name.name.base)
    stub = stub_for(base, find_stubs(tree.native_dir))
    if (stub is None or stub.arity is None) and recipe_for(base) is not None:
        return verify_recipe(tree, op, recipe_for(base), dtypes)
    if stub is None or stub.arity is None:
        raise AtenError(f"'{base}' is neither a unary/binary TensorIterator op with a DispatchStub "
                        "nor an op with a host recipe: nothing to verify it through")
    path = tree.kernels_dir / ARITY[stub.arity].kernel_file
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
