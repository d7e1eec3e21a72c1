"""Metal side of `aten add OP --kernel FILE` for a non-TensorIterator op.

FILE holds the op's kernel in PyTorch style: a template over the value type (and
index type), and a `#define <MACRO>(T, I)` producing a `[[host_name]]`
instantiation. kernels/<Stem>.metal becomes the recipe's includes, FILE's text
(without lines repeating those includes), and one `<MACRO>(T, I);` line per dtype
the op supports that FILE does not instantiate yet. The result is a function of
FILE alone, so a second run changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import AtenError
from ..model import dtypes as dt
from ..recipes import METAL_HEADER, Recipe
from .fileops import FileChange, read_or_none


def _read_kernel(path: Path) -> str:
    path = Path(path)
    if not path.is_file():
        raise AtenError("kernel file does not exist", path)
    text = path.read_text()
    if not re.search(r"\bkernel\s+void\b", text):
        raise AtenError("no `kernel void` function in the kernel file", path)
    return text


def _body(text: str) -> str:
    header = {line.strip() for line in METAL_HEADER.splitlines()}
    lines = [line for line in text.splitlines() if line.strip() not in header]
    return "\n".join(lines).strip("\n")


def _instantiated(body: str, recipe: Recipe, value, index) -> bool:
    invocation = re.compile(rf"\b{recipe.register_macro}\(\s*{dt.METAL_TYPE[value]}\s*,"
                            rf"\s*{dt.METAL_TYPE[index]}\s*\)")
    return bool(invocation.search(body)) or f'"{recipe.host_name(value, index)}"' in body


def plan_kernel_file(kernels_dir: Path, recipe: Recipe, kernel_file: Path, dtypes) -> FileChange:
    body = _body(_read_kernel(kernel_file))
    missing = [(v, i) for v, i in recipe.instantiations(dtypes) if not _instantiated(body, recipe, v, i)]
    if missing and not re.search(rf"#\s*define\s+{recipe.register_macro}\s*\(", body):
        names = ", ".join(recipe.host_name(v, i) for v, i in missing)
        raise AtenError(f"no kernel instantiated for {names}, and no `#define {recipe.register_macro}"
                        "(T, I)` macro to instantiate them with", kernel_file)
    registrations = "\n".join(recipe.registration(v, i) for v, i in missing)
    new = METAL_HEADER + "\n" + body + "\n" + (f"\n{registrations}\n" if registrations else "")
    path = Path(kernels_dir) / f"{recipe.stem}.metal"
    return FileChange(path, read_or_none(path), new)
