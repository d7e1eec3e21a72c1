"""Put host code into aten/src/ATen/native/mps/operations/*.mm, surgically.

- TensorIterator ops: the file's per-name dispatch macro line, or a
  `<name>_mps_kernel` function after the other host functions and its
  REGISTER_DISPATCH line after the others, plus the stub's header include after the
  other `ATen/native` includes; a missing file is created with PyTorch's boilerplate.
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


_FUNCTION = re.compile(r"^static void (?P<name>\w+)\(TensorIteratorBase& iter[^)]*\)\s*\{")
_REGISTER = re.compile(r"^REGISTER_DISPATCH\(\s*(?P<stub>\w+)\s*,\s*&?(?P<fn>\w+)\s*\);?\s*$")


def _functions(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Host functions `static void f(TensorIteratorBase& iter...) {` -> (first, last) line."""
    found = {}
    for i, line in enumerate(lines):
        m = _FUNCTION.match(line)
        if m:
            end = next((k for k in range(i, len(lines)) if lines[k].rstrip() == "}"), i)
            found[m["name"]] = (i, end)
    return found


def _dispatch_macro(text: str, method: str) -> str | None:
    """The file's `#define X(NAME)` defining NAME##_kernel_mps with `lib.<method>(iter, #NAME)`
    and `REGISTER_DISPATCH(NAME##_stub, ...)` (UnaryKernel.mm's REGISTER_UNARY_TI_DISPATCH)."""
    for m in re.finditer(r"#define (\w+)\(NAME\)((?:.*\\\n)*.*)", text):
        body = m[2]
        if f"{method}(iter, #NAME)" in body and "REGISTER_DISPATCH(NAME##_stub" in body:
            return m[1]
    return None


def plan_stub_host(operations_dir: Path, native_dir: Path, stub: Stub, kernel: str) -> FileChange:
    """The stub's host function and REGISTER_DISPATCH, in the file's own style.

    A stub named after its kernel in a file with a per-name dispatch macro gets one
    `MACRO(kernel);` line after the others; otherwise a `<kernel>_mps_kernel` function
    after the file's last host function and a REGISTER_DISPATCH line after the last
    registration. A stub already registered to other code is a different
    implementation: the change replaces it and is marked `replaces`.
    """
    arity = ARITY[stub.arity]
    path = Path(operations_dir) / f"{arity.host_stem}.mm"
    old = read_or_none(path)
    if old is None:
        return FileChange(path, None, host.new_stub_file(stub, kernel, native_dir))
    lines = old.splitlines()
    functions = _functions(lines)
    macro = _dispatch_macro(old, arity.exec_method) if stub.name == f"{kernel}_stub" else None
    by_macro = {i for i, l in enumerate(lines) if macro and re.match(rf"^{macro}\(\w+\);", l)}
    registered = {i: m for i, l in enumerate(lines) if (m := _REGISTER.match(l))}
    registration_lines = sorted(by_macro | set(registered))
    mine = [i for i, m in registered.items() if m["stub"] == stub.name]
    inserts: dict[int, list[str]] = {}
    include = host.stub_header_include(stub, native_dir)
    if include not in old:
        includes = [i for i, l in enumerate(lines) if l.startswith("#include <ATen/native/")]
        inserts.setdefault(includes[-1] if includes else 0, []).append(include)
    if macro:
        if any(lines[i].startswith(f"{macro}({kernel});") for i in by_macro):
            return FileChange(path, old, old)
        line = f"{macro}({kernel});"
        if mine:  # registered to other code: that line becomes the macro's
            new = edit_lines(old, replace={mine[0]: line}, insert_after=inserts, delete=set(mine[1:]))
            return FileChange(path, old, new, replaces=True)
        inserts.setdefault(registration_lines[-1] if registration_lines else len(lines) - 2, []).append(line)
        return FileChange(path, old, edit_lines(old, insert_after=inserts))
    fn_name = host.stub_function_name(kernel)
    # The file's own spelling: `REGISTER_DISPATCH(s, &f)` or `(s, f)`, with or without `;`.
    semicolon = sum(lines[i].rstrip().endswith(";") for i in registered) > len(registered) / 2
    address = sum("&" in lines[i] for i in registered) >= len(registered) / 2
    register_line = host.register_dispatch(stub, kernel, address) + (";" if semicolon else "")
    wanted = [*host.stub_function(stub, kernel)]
    replace: dict[int, str] = {}
    delete: set[int] = set()
    replaces = False
    if mine:
        current_fn = registered[mine[0]]["fn"]
        if current_fn != fn_name or fn_name not in functions:
            replace[mine[0]] = register_line
            replaces = True
        delete.update(mine[1:])
    if fn_name in functions:
        first, last = functions[fn_name]
        if [l.rstrip() for l in lines[first:last + 1]] != wanted:
            replaces = True
            delete.update(range(first, last + 1))
            inserts.setdefault(first - 1, []).extend(wanted)
    else:
        ends = [last for _, last in functions.values()]
        at = max(ends) if ends else (registration_lines[0] - 1 if registration_lines else len(lines) - 2)
        inserts.setdefault(at, []).extend(["", *wanted] if ends else [*wanted, ""])
    if not mine:
        at = registration_lines[-1] if registration_lines else len(lines) - 2
        inserts.setdefault(at, []).append(register_line)
    new = edit_lines(old, replace=replace, insert_after=inserts, delete=delete)
    return FileChange(path, old, new, replaces=replaces)


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
