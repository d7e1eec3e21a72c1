"""The Objective-C++ text of `aten add` (aten/src/ATen/native/mps/operations/*.mm).

Two shapes, as in PyTorch:
- TensorIterator ops with a DispatchStub: a `<name>_mps_kernel` calling
  `lib.exec_unary_kernel` / `lib.exec_binary_kernel`, and its `REGISTER_DISPATCH` line;
- custom kernels (recipes/): a whole `<Stem>.mm` with the `getBundledLibrary`
  boilerplate and the recipe's host functions under the signatures torchgen
  declares for their `MPS:` rows.
Where the text lands in an existing file is edit/mm.py's job.
"""

from __future__ import annotations

from pathlib import Path

from torchgen import local
from torchgen.api.types import NativeSignature

from ..model.arity import ARITY
from ..model.stubs import Stub

MM_FILE = """\
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
{includes}
namespace at::native {{
#ifndef PYTORCH_JIT_COMPILE_SHADERS
static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();
#else
#include <ATen/native/mps/{stem}_metallib.h>
#endif
{body}
}} // namespace at::native
"""


def stub_function_name(kernel: str) -> str:
    return f"{kernel}_mps_kernel"


def stub_function(stub: Stub, kernel: str) -> list[str]:
    """`static void <kernel>_mps_kernel(TensorIteratorBase& iter) { lib.exec_..(iter, "<kernel>"); }`"""
    return [
        f"static void {stub_function_name(kernel)}(TensorIteratorBase& iter) {{",
        f'  lib.{ARITY[stub.arity].exec_method}(iter, "{kernel}");',
        "}",
    ]


def register_dispatch(stub: Stub, kernel: str, address: bool = True) -> str:
    return f"REGISTER_DISPATCH({stub.name}, {'&' if address else ''}{stub_function_name(kernel)})"


def stub_header_include(stub: Stub, native_dir: Path) -> str:
    """`#include <ATen/native/...h>` of the header declaring the stub."""
    try:
        rel = Path(stub.path).resolve().relative_to(Path(native_dir).resolve())
    except ValueError:
        rel = Path(stub.path).name
    return f"#include <ATen/native/{rel.as_posix()}>"


def new_stub_file(stub: Stub, kernel: str, native_dir: Path) -> str:
    body = "\n" + "\n".join(stub_function(stub, kernel)) + "\n\n" + register_dispatch(stub, kernel) + "\n"
    includes = (f"#include <ATen/native/TensorIterator.h>\n{stub_header_include(stub, native_dir)}\n"
                "#include <ATen/native/mps/OperationUtils.h>\n")
    return MM_FILE.format(includes=includes, stem=ARITY[stub.arity].host_stem, body=body)


def native_signature(fn, name: str) -> str:
    """The definition line torchgen declares for kernel `name` of `fn` (NativeFunctions.h)."""
    with local.parametrize(use_const_ref_for_mutable_tensors=fn.use_const_ref_for_mutable_tensors,
                           use_ilistref_for_tensor_lists=fn.part_of_structured_group):
        return NativeSignature(fn.func, symint=False).defn(name=name)


def recipe_functions(recipe, out_fn: tuple, functional_fn: tuple) -> str:
    """The recipe's two host functions; each argument is (NativeFunction, C++ name)."""
    return recipe.render_functions((out_fn[1], native_signature(*out_fn)),
                                   (functional_fn[1], native_signature(*functional_fn)))


def new_recipe_file(recipe, functions: str) -> str:
    return MM_FILE.format(includes=recipe.mm_includes, stem=recipe.stem, body="\n" + functions)
