"""Compile what verification needs of a kernels file, and say why when it does not compile.

A real UnaryKernel.metal / BinaryKernel.metal instantiates hundreds of kernels; only
one op's matter here. `op_source` keeps the file's preamble (includes, macros,
functors and helpers: templates cost nothing until instantiated) line for line,
blanks every registration statement, and appends the op's own instantiations (for
the dtypes asked for), so compile errors in the file keep their line numbers.

When the op's instantiations do not compile, a probe -- one static_assert per
instantiation, on SFINAE checks of the functor -- names every dtype whose
`operator()` is missing or returns another type than the REGISTER line says, and the
error shows the overload PyTorch's functors use.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import AtenError
from ..model.arity import ARITY
from ..model.metal_file import Leaf, MetalFile
from ..model.tree import PyTorchTree

MATH_MODES = ("exact", "bounds")

# What PyTorch's functors write for integral inputs of a floating-valued op.
INTEGRAL_OVERLOAD = {
    "unary": ("  template <typename T, enable_if_t<is_scalar_integral_v<T>, bool> = true>\n"
              "  inline float operator()(const T x) {\n"
              "    return <the float formula>(static_cast<float>(x));\n"
              "  }"),
    "binary": ("  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>\n"
               "  inline float operator()(const T a, const T b) {\n"
               "    return <the float formula>(float(a), float(b));\n"
               "  }"),
}
FLOATING_OVERLOAD = {
    "unary": ("  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>\n"
              "  inline T operator()(const T x) {\n"
              "    return static_cast<T>(<the float formula>(static_cast<float>(x)));\n"
              "  }"),
    "binary": ("  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>\n"
               "  inline T operator()(const T a, const T b) {\n"
               "    return static_cast<T>(<the float formula>(float(a), float(b)));\n"
               "  }"),
}
# The runtime's spelling of Metal types in diagnostics.
_RUNTIME_TYPE = {"_Float16": "half", "__bf16": "bfloat", "long long": "long", "unsigned char": "uchar",
                 "signed char": "char", "unsigned short": "ushort", "unsigned int": "uint"}


def runtime_available() -> bool:
    import metal_kernel

    return hasattr(metal_kernel, "compile_shader")


def math_modes() -> tuple[str, ...]:
    """The math modes this runtime offers: `exact` always, `bounds` when compile_shader takes `math=`."""
    import metal_kernel

    params = inspect.signature(metal_kernel.compile_shader).parameters
    return MATH_MODES if "math" in params else ("exact",)


class KernelCompileError(AtenError):
    """The kernels file, or the op's instantiations in it, do not compile."""


@dataclass
class OpSource:
    text: str
    leaves: dict[int, Leaf]  # 1-based line of the appended text -> the instantiation on it


def op_source(text: str, c10_metal: Path, kernel: str, input_types: set[str] | None = None) -> OpSource:
    """The file with only `kernel`'s instantiations (those for `input_types` when given)."""
    mf = MetalFile(text, c10_metal)
    lines = list(mf.lines)
    mine: list[Leaf] = []
    for item, leaves in mf.registrations():
        for n in range(item.first, item.last + 1):
            lines[n] = ""
        mine += [l for l in leaves if l.belongs_to(kernel)
                 and (input_types is None or l.input_type is None or l.input_type in input_types)]
    table = {}
    for leaf in mine:
        lines.append(leaf.text.strip().rstrip(";") + ";")
        table[len(lines)] = leaf
    return OpSource("\n".join(lines) + "\n", table)


def include_dirs(tree: PyTorchTree) -> list[str]:
    """c10/metal's parent, and the checkout's aten/src (for <ATen/native/mps/kernels/*.h>)."""
    dirs = [str(tree.include_dir)]
    if tree.root is not None and (tree.root / "aten/src").is_dir():
        dirs.append(str(tree.root / "aten/src"))
    return dirs


def compile_source(source: str, tree: PyTorchTree, name: str, math: str = "exact"):
    import metal_kernel

    options = {"include_dirs": include_dirs(tree), "source_name": name}
    if math != "exact":
        options["math"] = math  # only offered where math_modes() lists it
    return metal_kernel.compile_shader(source, **options)


def _first_line(err: Exception) -> str:
    return next((l for l in str(err).splitlines() if l.strip()), type(err).__name__)


def compile_op(tree: PyTorchTree, path: Path, kernel: str, arity: str, input_types=None,
               text: str | None = None, math: str = "exact"):
    """The runtime library of `kernel`'s kernels from kernels file `path` (or `text` for it)."""
    text = path.read_text() if text is None else text
    src = op_source(text, tree.c10_metal, kernel, input_types)
    if not src.leaves:
        raise AtenError(f"no instantiation of '{kernel}' in this kernels file: run `aten add` first", path)
    name = tree.relative(path)
    try:
        return compile_source(src.text, tree, name, math)
    except Exception as err:  # MetalCompileError, with the compiler's output
        problems = _probe(tree, src, kernel, arity, name)
        if problems:
            raise KernelCompileError(problems, path) from None
        raise KernelCompileError(f"does not compile: {_first_line(err)}", path) from None


def check_functor(tree: PyTorchTree, path: Path, kernel: str, arity: str, text: str) -> None:
    """Every instantiation of `kernel` has an operator() returning what its REGISTER line says
    (one cheap compile of SFINAE checks, no kernel built); KernelCompileError otherwise."""
    src = op_source(text, tree.c10_metal, kernel)
    problems = _probe(tree, src, kernel, arity, tree.relative(path)) if src.leaves else None
    if problems:
        raise KernelCompileError(problems, path)


def compile_kernel_file(path: Path, tree: PyTorchTree, math: str = "exact"):
    """A whole kernels file (a recipe's kernels/<Stem>.metal)."""
    try:
        return compile_source(path.read_text(), tree, tree.relative(path), math)
    except Exception as err:  # the runtime's compile error carries the compiler's message
        raise KernelCompileError(f"the runtime cannot compile this kernel file: {_first_line(err)}",
                                 path) from None


_PROBE = """
template <typename...> struct mk_probe_void { using type = void; };
template <typename F, typename V, typename = void> struct mk_probe_result {
  using type = void;
  static constant constexpr bool callable = false;
};
template <typename F, typename V>
struct mk_probe_result<F, V, typename mk_probe_void<decltype(::metal::declval<F>()(%s))>::type> {
  using type = decltype(::metal::declval<F>()(%s));
  static constant constexpr bool callable = true;
};
"""


def _probe(tree: PyTorchTree, src: OpSource, kernel: str, arity: str, name: str) -> str | None:
    """Which instantiations fail, and why, from one cheap compile of SFINAE checks."""
    leaves = [l for l in src.leaves.values() if l.macro == ARITY[arity].register_macro]
    if not leaves:
        return None
    call = ", ".join(["::metal::declval<V>()"] * ARITY[arity].inputs)
    preamble = src.text.splitlines()[:min(src.leaves) - 1]
    text = "\n".join(preamble) + _PROBE % (call, call)
    for n, leaf in enumerate(leaves):
        _, t_in, t_out = leaf.args[:3]
        text += (f"static_assert(mk_probe_result<{kernel}_functor, {t_in}>::callable, \"mk-missing {n}\");\n"
                 f"static_assert(!mk_probe_result<{kernel}_functor, {t_in}>::callable || ::metal::is_same_v<"
                 f"typename mk_probe_result<{kernel}_functor, {t_in}>::type, {t_out}>, \"mk-type {n}\");\n")
    try:
        compile_source(text, tree, name)
        return None
    except Exception as err:  # the failed static_asserts say which instantiations
        out, first = str(err), _first_line(err)
    if "mk-missing" not in out and "mk-type" not in out:
        raise KernelCompileError(f"does not compile: {first}", name)
    missing = [leaves[n] for n in sorted({int(n) for n in re.findall(r"mk-missing (\d+)", out)})]
    wrong = {}
    for m in re.finditer(r"is_same_v<(?P<got>[^,>]+), (?P<want>[^>]+)>'?: mk-type (?P<n>\d+)", out):
        wrong[int(m["n"])] = (leaves[int(m["n"])], _RUNTIME_TYPE.get(m["got"].strip(), m["got"].strip()))
    wrong = [wrong[n] for n in sorted(wrong)]
    if not missing and not wrong:
        return None
    parts = []
    if missing:
        types = [l.args[1] for l in missing]
        integral = all(t not in ("float", "half", "bfloat", "float2", "half2") for t in types)
        example = INTEGRAL_OVERLOAD[arity] if integral else FLOATING_OVERLOAD[arity]
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        parts.append(f"{kernel}_functor has no operator() for {', '.join(types)} "
                     f"(needed by {missing[0].text}{more}); PyTorch's functors give "
                     f"{'integral' if integral else 'floating'} inputs an overload like\n{example}")
    for leaf, got in wrong:
        parts.append(f"{kernel}_functor returns {got} for {leaf.args[1]} input, but {leaf.text} "
                     f"registers a {leaf.args[2]} output (the CPU op returns {leaf.args[2]})")
    return "\n".join(parts)
