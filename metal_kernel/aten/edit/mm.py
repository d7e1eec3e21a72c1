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
    mm = _MmFile(old, stub, kernel, arity.exec_method)
    include = host.stub_header_include(stub, native_dir)
    if include not in old:
        includes = [i for i, l in enumerate(mm.lines) if l.startswith("#include <ATen/native/")]
        mm.insert(includes[-1] if includes else 0, [include])
    (mm.with_macro if mm.macro else mm.with_function)()
    return FileChange(path, old, mm.new(), replaces=mm.replaces)


class _MmFile:
    """Line edits of one operations/*.mm for one stub."""

    def __init__(self, text: str, stub: Stub, kernel: str, method: str):
        self.text, self.lines, self.stub, self.kernel = text, text.splitlines(), stub, kernel
        self.functions = _functions(self.lines)
        self.macro = _dispatch_macro(text, method) if stub.name == f"{kernel}_stub" else None
        by_macro = {i for i, l in enumerate(self.lines) if self.macro and re.match(rf"^{self.macro}\(\w+\);", l)}
        self.by_macro = by_macro
        self.registered = {i: m for i, l in enumerate(self.lines) if (m := _REGISTER.match(l))}
        self.registration_lines = sorted(by_macro | set(self.registered))
        self.mine = [i for i, m in self.registered.items() if m["stub"] == stub.name]
        self.replace: dict[int, str] = {}
        self.delete: set[int] = set()
        self.inserts: dict[int, list[str]] = {}
        self.replaces = False

    def insert(self, after: int, lines: list[str]) -> None:
        self.inserts.setdefault(after, []).extend(lines)

    def after_registrations(self) -> int:
        return self.registration_lines[-1] if self.registration_lines else len(self.lines) - 2

    def with_macro(self) -> None:
        line = f"{self.macro}({self.kernel});"
        if any(self.lines[i].startswith(line) for i in self.by_macro):
            self.inserts.clear()  # already there: no change at all
            return
        if self.mine:  # registered to other code: that line becomes the macro's
            self.replace[self.mine[0]] = line
            self.delete.update(self.mine[1:])
            self.replaces = True
        else:
            self.insert(self.after_registrations(), [line])

    def with_function(self) -> None:
        fn_name = host.stub_function_name(self.kernel)
        registered = self.registered
        # The file's own spelling: `REGISTER_DISPATCH(s, &f)` or `(s, f)`, with or without `;`.
        semicolon = sum(self.lines[i].rstrip().endswith(";") for i in registered) > len(registered) / 2
        address = sum("&" in self.lines[i] for i in registered) >= len(registered) / 2
        register_line = host.register_dispatch(self.stub, self.kernel, address) + (";" if semicolon else "")
        wanted = host.stub_function(self.stub, self.kernel)
        if self.mine:
            if registered[self.mine[0]]["fn"] != fn_name or fn_name not in self.functions:
                self.replace[self.mine[0]] = register_line
                self.replaces = True
            self.delete.update(self.mine[1:])
        else:
            self.insert(self.after_registrations(), [register_line])
        if fn_name in self.functions:
            first, last = self.functions[fn_name]
            if [l.rstrip() for l in self.lines[first:last + 1]] != wanted:
                self.replaces = True
                self.delete.update(range(first, last + 1))
                self.insert(first - 1, wanted)
        else:
            ends = [last for _, last in self.functions.values()]
            if ends:
                self.insert(max(ends), ["", *wanted])
            else:
                self.insert((self.registration_lines[0] - 1) if self.registration_lines else len(self.lines) - 2,
                            [*wanted, ""])

    def new(self) -> str:
        if not (self.replace or self.delete or self.inserts):
            return self.text
        return edit_lines(self.text, replace=self.replace, insert_after=self.inserts, delete=self.delete)


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
