"""Host side of `aten add`: Objective-C++ in aten/src/ATen/native/mps/operations/.

Two shapes, as in PyTorch:
- TensorIterator ops with a DispatchStub: a `<name>_mps_kernel` calling
  `lib.exec_unary_kernel` / `lib.exec_binary_kernel` and a `REGISTER_DISPATCH`
  line, in UnaryKernel.mm / BinaryKernel.mm (created with the
  `getBundledLibrary` boilerplate when missing);
- custom kernels (recipes.py; `MPS: <op>_out_mps` / `<op>_mps` rows in the yaml): a
  new `<Stem>.mm` with the boilerplate and the recipe's host functions under the
  signatures torchgen declares for those rows.
"""

from __future__ import annotations

import re
from pathlib import Path

from torchgen import local
from torchgen.api.types import NativeSignature

from .errors import AtenError
from .fileops import FileChange, edit_lines, read_or_none
from .stubs import Stub

# Arity -> (host file stem, MetalShaderLibrary method).
HOST = {
    "unary": ("UnaryKernel", "exec_unary_kernel"),
    "binary": ("BinaryKernel", "exec_binary_kernel"),
}

_FILE = """\
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


def _header_include(stub: Stub, native_dir: Path) -> str:
    try:
        rel = Path(stub.path).resolve().relative_to(Path(native_dir).resolve())
    except ValueError:
        rel = Path(stub.path).name
    return f"#include <ATen/native/{rel.as_posix()}>"


def plan_stub_host(operations_dir: Path, native_dir: Path, stub: Stub, kernel: str) -> FileChange:
    stem, method = HOST[stub.arity]
    path = Path(operations_dir) / f"{stem}.mm"
    fn_name = f"{kernel}_mps_kernel"
    function = [
        f"static void {fn_name}(TensorIteratorBase& iter) {{",
        f'  lib.{method}(iter, "{kernel}");',
        "}",
    ]
    register = f"REGISTER_DISPATCH({stub.name}, &{fn_name})"
    include = _header_include(stub, native_dir)
    old = read_or_none(path)
    if old is None:
        body = "\n" + "\n".join(function) + "\n\n" + register + "\n"
        includes = f"#include <ATen/native/TensorIterator.h>\n{include}\n#include <ATen/native/mps/OperationUtils.h>\n"
        new = _FILE.format(includes=includes, stem=stem, body=body)
        return FileChange(path, None, new)
    lines = old.splitlines()
    inserts: dict[int, list[str]] = {}
    has_fn = re.search(rf"\b{fn_name}\s*\(", old) is not None
    has_reg = re.search(rf"REGISTER_DISPATCH\(\s*{stub.name}\s*,", old) is not None
    has_include = include in old
    registers = [i for i, l in enumerate(lines) if l.startswith("REGISTER_DISPATCH(")]
    closing = next((i for i in range(len(lines) - 1, -1, -1)
                    if lines[i].startswith("} // namespace at::native")), len(lines) - 1)
    if not has_include:
        includes = [i for i, l in enumerate(lines) if l.startswith("#include <ATen/native/")]
        at = includes[-1] if includes else 0
        inserts.setdefault(at, []).append(include)
    if not has_fn:
        # Define the kernel before the registration block (or the namespace end).
        at = (registers[0] if registers else closing) - 1
        inserts.setdefault(at, []).extend([*function, ""])
    if not has_reg:
        at = registers[-1] if registers else closing - 1
        inserts.setdefault(at, []).append(register)
    return FileChange(path, old, edit_lines(old, insert_after=inserts))


def _signature(fn, name: str) -> str:
    """The definition line torchgen declares for kernel `name` of `fn` (NativeFunctions.h)."""
    with local.parametrize(use_const_ref_for_mutable_tensors=fn.use_const_ref_for_mutable_tensors,
                           use_ilistref_for_tensor_lists=fn.part_of_structured_group):
        return NativeSignature(fn.func, symint=False).defn(name=name)


def plan_recipe_host(operations_dir: Path, recipe, out_fn: tuple, functional_fn: tuple) -> FileChange:
    """operations/<Stem>.mm for a recipe op; `out_fn` / `functional_fn` are (NativeFunction, name).

    A missing file is created whole; an existing one defining neither function gets
    both before its closing namespace brace; one defining both is left alone.
    """
    path = Path(operations_dir) / f"{recipe.stem}.mm"
    old = read_or_none(path)
    names = (out_fn[1], functional_fn[1])
    functions = recipe.render_functions((out_fn[1], _signature(*out_fn)),
                                        (functional_fn[1], _signature(*functional_fn)))
    if old is None:
        return FileChange(path, None, _FILE.format(includes=recipe.mm_includes, stem=recipe.stem,
                                                   body="\n" + functions))
    defined = [n for n in names if re.search(rf"\b{re.escape(n)}\s*\(", old)]
    if len(defined) == len(names):
        return FileChange(path, old, old)
    if defined:
        raise AtenError(f"defines {', '.join(defined)} but not the other host function; "
                        "complete it by hand or move the file away", path)
    cut = old.rstrip("\n").rfind("} // namespace at::native")
    if cut < 0:
        raise AtenError("exists without a `} // namespace at::native` line to add the host functions "
                        "before; add them by hand or move the file away", path)
    return FileChange(path, old, old[:cut].rstrip("\n") + "\n\n" + functions + "\n" + old[cut:])
