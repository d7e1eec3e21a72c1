"""Non-TensorIterator ops `aten add --kernel` knows: one recipe per op (take).

A recipe names the op's files (kernels/<stem>.metal, operations/<stem>.mm), the
instantiation macro its kernel file defines, the host functions (rendered from the
recipe's table) and their Python twin, the CPU reference and the verification cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..model.dtypes import METAL_TYPE
from . import take as take_host
from . import take_cases

METAL_HEADER = """\
#include <c10/metal/error.h>
#include <c10/metal/utils.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;
"""


@dataclass(frozen=True)
class Recipe:
    op: str  # aten base name
    stem: str  # kernels/<stem>.metal, operations/<stem>.mm
    register_macro: str  # MACRO(value type, index type) instantiates one host name
    index_dtypes: tuple[torch.dtype, ...]
    host_name: Callable[[torch.dtype, torch.dtype], str]
    mm_includes: str
    render_functions: Callable[[tuple[str, str], tuple[str, str]], str]  # (out=, functional)
    twin: type  # twin(lib, stream): .functional(*args), .out_variant(*args, out)
    reference: Callable  # the CPU op: reference(*args, out=None)
    sample_cases: Callable
    error_cases: Callable
    kernel_error_matches: Callable  # (case, cpu error, kernel-reported error) -> accepted?
    exact: bool = True  # a copy: compared bit for bit, not with test_mps tolerances

    def instantiations(self, dtypes) -> list[tuple[torch.dtype, torch.dtype]]:
        return [(d, i) for d in dtypes for i in self.index_dtypes]

    def registration(self, value: torch.dtype, index: torch.dtype) -> str:
        return f"{self.register_macro}({METAL_TYPE[value]}, {METAL_TYPE[index]});"


class _TakeTwin(take_host.TakeHost):
    def functional(self, input, index):
        return self.take(input, index)

    def out_variant(self, input, index, out):
        return self.take_out(input, index, out)


RECIPES = {
    "take": Recipe(
        op="take", stem="Take", register_macro="REGISTER_TAKE_OP",
        index_dtypes=take_host.INDEX_DTYPES, host_name=take_host.host_name,
        mm_includes=take_host.INCLUDES, render_functions=take_host.render_functions,
        twin=_TakeTwin, reference=torch.take,
        sample_cases=take_cases.sample_cases, error_cases=take_cases.error_cases,
        kernel_error_matches=take_cases.kernel_error_matches),
}


def recipe_for(base: str) -> Recipe | None:
    return RECIPES.get(base)
