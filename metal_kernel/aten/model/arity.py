"""What each TensorIterator arity means in a PyTorch tree: one table.

For a unary or binary op: the kernels file its functor and REGISTER_* lines go
to, the registration macro, the variable names `--expr` may use, the `.mm` file
its stub is registered in and the MetalShaderLibrary method that launches it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arity:
    name: str
    kernel_file: str  # aten/src/ATen/native/mps/kernels/<kernel_file>
    register_macro: str  # REGISTER_<..>_OP(name, in, out)
    variables: tuple[str, ...]  # expression variables for --expr
    host_stem: str  # aten/src/ATen/native/mps/operations/<host_stem>.mm
    exec_method: str  # lib.<exec_method>(iter, "name")

    @property
    def inputs(self) -> int:
        return len(self.variables)


ARITY: dict[str, Arity] = {
    "unary": Arity("unary", "UnaryKernel.metal", "REGISTER_UNARY_OP", ("x",), "UnaryKernel",
                   "exec_unary_kernel"),
    "binary": Arity("binary", "BinaryKernel.metal", "REGISTER_BINARY_OP", ("a", "b"), "BinaryKernel",
                    "exec_binary_kernel"),
}
