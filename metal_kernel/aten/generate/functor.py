"""The Metal text of `aten add`: a functor and its REGISTER_* instantiations per dtype.

The functor comes from the user (`--functor FILE` holding `struct <name>_functor`,
plus any helpers it needs) or from a one-expression template (`--expr`). Each dtype
the op supports is instantiated for the dtype the CPU op returns for it (int -> float
ops instantiate `(long, float)` etc.), with the kernels file's own registration
macros where they fit. Where the text lands in the file is edit/metal.py's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import AtenError
from ..model import dtypes as dt
from ..model.arity import ARITY


def functor_struct_re(name: str) -> re.Pattern:
    return re.compile(rf"\bstruct\s+{re.escape(name)}_functor\b")


@dataclass(frozen=True)
class KernelSpec:
    name: str  # kernel family name: host names are <name>_dense_<out>_<in>, ...
    arity: str
    out_dtype: dict  # input dtype -> output dtype

    @property
    def pairs(self) -> set[tuple[str, str]]:
        """(input, output) Metal type names, as REGISTER_*(name, in, out) takes them."""
        return {(dt.METAL_TYPE[i], dt.METAL_TYPE[o]) for i, o in self.out_dtype.items()}


def registration_statements(spec: KernelSpec, per_name_macros: list[tuple[str, set]]) -> list[str]:
    """The REGISTER_* statements instantiating `spec`, in the file's own style.

    `per_name_macros` are the file's one-parameter macros (REGISTER_FLOAT_BINARY_OP(NAME)
    and the like) with the (in, out) pairs each instantiates. Macros whose pairs the op
    needs, and no other, are used, largest first and without overlap, as a PyTorch
    author writes `REGISTER_FLOAT_BINARY_OP(op); REGISTER_INT2FLOAT_BINARY_OP(op);`;
    what they leave is one `REGISTER_<ARITY>_OP(op, in, out);` line per dtype.
    """
    needed = spec.pairs
    chosen, covered = [], set()
    for name, pairs in sorted(per_name_macros, key=lambda m: -len(m[1])):
        if pairs <= needed and not pairs & covered:
            chosen.append((name, pairs))
            covered |= pairs
    rank = {dt.METAL_TYPE[d]: n for n, d in enumerate(dt.ORDER)}
    chosen.sort(key=lambda m: min(rank.get(i, 99) for i, _ in m[1]))
    macro = ARITY[spec.arity].register_macro
    rest = sorted(needed - covered, key=lambda p: rank.get(p[0], 99))
    return ([f"{name}({spec.name});" for name, _ in chosen]
            + [f"{macro}({spec.name}, {i}, {o});" for i, o in rest])


def functor_from_file(path: Path, candidates: list[str]) -> tuple[str, str]:
    """(kernel name, source) of the first `struct <candidate>_functor` in `path`."""
    path = Path(path)
    if not path.is_file():
        raise AtenError("functor file does not exist", path)
    text = path.read_text()
    for name in candidates:
        if functor_struct_re(name).search(text):
            return name, text.strip() + "\n"
    wanted = " or ".join(f"struct {c}_functor" for c in candidates)
    raise AtenError(f"no {wanted} in the functor file", path)


def _integral_result(spec: KernelSpec) -> str | None:
    outs = {o == i for i, o in spec.out_dtype.items() if not i.is_floating_point and not i.is_complex}
    ints_to_float = {o for i, o in spec.out_dtype.items() if not i.is_floating_point and not i.is_complex}
    if not ints_to_float:
        return None
    if outs == {True}:
        return "T"
    if ints_to_float == {torch.float32}:
        return "float"
    raise AtenError(f"'{spec.name}' maps integer inputs to mixed result types; write the functor "
                    "yourself and pass it with --functor")


def functor_from_expr(spec: KernelSpec, expr: str) -> str:
    if any(d.is_complex for d in spec.out_dtype):
        raise AtenError(f"--expr cannot express complex overloads of '{spec.name}'; use --functor")
    names = ARITY[spec.arity].variables
    params = ", ".join(f"const T {n}" for n in names)
    lines = [f"struct {spec.name}_functor {{"]
    if any(d.is_floating_point for d in spec.out_dtype):
        lines += [
            "  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>",
            f"  inline T operator()({params}) {{",
            f"    return static_cast<T>({expr});",
            "  }",
        ]
    result = _integral_result(spec)
    if result == "T":
        lines += [
            "  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>",
            f"  inline T operator()({params}) {{",
            f"    return static_cast<T>({expr});",
            "  }",
        ]
    elif result == "float":
        raw = ", ".join(f"const T {n}_" for n in names)
        lines += [
            "  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>",
            f"  inline float operator()({raw}) {{",
            *[f"    const float {n} = static_cast<float>({n}_);" for n in names],
            f"    return {expr};",
            "  }",
        ]
    lines.append("};")
    return "\n".join(lines) + "\n"
