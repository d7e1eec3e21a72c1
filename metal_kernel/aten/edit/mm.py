"""Put host code into aten/src/ATen/native/mps/operations/*.mm, surgically.

- TensorIterator ops: the `<name>_mps_kernel` function before the file's
  REGISTER_DISPATCH block, its REGISTER_DISPATCH line after that block, and the
  stub's header include after the other `ATen/native` includes; a missing file is
  created with PyTorch's boilerplate.
- Recipe ops: a missing `<Stem>.mm` is created whole; an existing one defining
  neither host function gets both before its closing namespace brace; one defining
  both is left alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import AtenError
from ..generate import host
from ..model.arity import ARITY
from ..model.stubs import Stub
from .fileops import FileChange, edit_lines, read_or_none


def plan_stub_host(operations_dir: Path, native_dir: Path, stub: Stub, kernel: str) -> FileChange:
    path = Path(operations_dir) / f"{ARITY[stub.arity].host_stem}.mm"
    old = read_or_none(path)
    if old is None:
        return FileChange(path, None, host.new_stub_file(stub, kernel, native_dir))
    fn_name = host.stub_function_name(kernel)
    include = host.stub_header_include(stub, native_dir)
    lines = old.splitlines()
    inserts: dict[int, list[str]] = {}
    has_fn = re.search(rf"\b{fn_name}\s*\(", old) is not None
    has_reg = re.search(rf"REGISTER_DISPATCH\(\s*{stub.name}\s*,", old) is not None
    registers = [i for i, l in enumerate(lines) if l.startswith("REGISTER_DISPATCH(")]
    closing = next((i for i in range(len(lines) - 1, -1, -1)
                    if lines[i].startswith("} // namespace at::native")), len(lines) - 1)
    if include not in old:
        includes = [i for i, l in enumerate(lines) if l.startswith("#include <ATen/native/")]
        inserts.setdefault(includes[-1] if includes else 0, []).append(include)
    if not has_fn:
        # Define the kernel before the registration block (or the namespace end).
        at = (registers[0] if registers else closing) - 1
        inserts.setdefault(at, []).extend([*host.stub_function(stub, kernel), ""])
    if not has_reg:
        at = registers[-1] if registers else closing - 1
        inserts.setdefault(at, []).append(host.register_dispatch(stub, kernel))
    return FileChange(path, old, edit_lines(old, insert_after=inserts))


def plan_recipe_host(operations_dir: Path, recipe, out_fn: tuple, functional_fn: tuple) -> FileChange:
    """operations/<Stem>.mm for a recipe op; `out_fn` / `functional_fn` are (NativeFunction, name)."""
    path = Path(operations_dir) / f"{recipe.stem}.mm"
    old = read_or_none(path)
    functions = host.recipe_functions(recipe, out_fn, functional_fn)
    if old is None:
        return FileChange(path, None, host.new_recipe_file(recipe, functions))
    names = (out_fn[1], functional_fn[1])
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
