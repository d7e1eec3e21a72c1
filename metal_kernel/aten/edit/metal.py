"""Put an op's functor and REGISTER_* lines into kernels/<Unary|Binary>Kernel.metal.

Existing functors and registrations are left alone, so a second run changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..generate.functor import KernelSpec, functor_struct_re
from ..model.arity import ARITY
from .fileops import FileChange, read_or_none

HEADER = """\
#include <c10/metal/indexing.h>
#include <c10/metal/special_math.h>
#include <c10/metal/utils.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;
"""


def plan_metal(kernels_dir: Path, spec: KernelSpec, functor_source: str) -> FileChange:
    path = Path(kernels_dir) / ARITY[spec.arity].kernel_file
    old = read_or_none(path)
    text = old if old is not None else HEADER
    blocks = []
    if not functor_struct_re(spec.name).search(text):
        blocks.append(functor_source.rstrip("\n"))
    present = set(re.findall(r"REGISTER_\w+_OP\([^;]*\);", re.sub(r"\s+", " ", text)))
    present = {re.sub(r"\s+", "", p) for p in present}
    missing = [r for r in spec.registrations if re.sub(r"\s+", "", r) not in present]
    if missing:
        blocks.append("\n".join(missing))
    if not blocks:
        return FileChange(path, old, text)
    new = text.rstrip("\n") + "\n\n" + "\n\n".join(blocks) + "\n"
    return FileChange(path, old, new)
