"""`aten verify OP`: find how OP reaches MPS and verify it that way.

- a unary/binary TensorIterator op (a DispatchStub exists): the op's instantiations
  in its kernels file (compile.py), through the twin of exec_unary_kernel /
  exec_binary_kernel (tensor_iterator.py), for every dtype the file instantiates
  that test_mps runs;
- an op with a host recipe (take): its kernel file through the Python twin of the
  recipe's .mm host functions (recipe.py).

Both run in every math mode the runtime offers (`exact`, and `bounds` -- device-like
precision -- where compile_shader takes `math=`); the report says which ran.
"""

from __future__ import annotations

from ..errors import AtenError
from ..generate.functor import functor_struct_re
from ..model import dtypes as dt
from ..model import opinfo
from ..model.arity import ARITY
from ..model.metal_file import MetalFile
from ..model.native_functions import NativeFunctions
from ..model.stubs import find_stubs, stub_for
from ..model.tree import PyTorchTree
from ..recipes import recipe_for
from .cases import OpView
from .checked import run_checked
from .compile import compile_op, math_modes
from .recipe import verify_recipe
from .report import VerifyReport
from .tensor_iterator import Verifier
from .tolerance import MpsTolerances
from .values import LARGE_LIMIT

DTYPE_OF = {metal: dtype for dtype, metal in dt.METAL_TYPE.items()}


def _kernel_name(source: str, candidates) -> str:
    for name in candidates:
        if functor_struct_re(name).search(source):
            return name
    raise AtenError(f"no `struct <name>_functor` for any of {', '.join(candidates)}: run `aten add` first")


def _modes(requested) -> tuple[list[str], list[str]]:
    """(modes to run, notes) for the requested math modes (None: every mode offered)."""
    offered = math_modes()
    wanted = list(requested or ("exact", "bounds"))
    notes = []
    if "bounds" in wanted and "bounds" not in offered:
        notes.append("device-like precision (math='bounds') not run: this runtime's compile_shader "
                     "has no math= option, so only its exact math (more accurate than a GPU) was checked")
    return [m for m in wanted if m in offered], notes


def _dtypes(text: str, tree: PyTorchTree, kernel: str, cpu, requested, notes: list) -> list:
    """The dtypes to verify: those requested, else those the file instantiates that test_mps runs."""
    registered = {DTYPE_OF[leaf.input_type] for _, leaves in MetalFile(text, tree.c10_metal).registrations()
                  for leaf in leaves if leaf.belongs_to(kernel) and leaf.input_type in DTYPE_OF}
    if requested:
        return dt.sort_dtypes(requested)
    missing = [dt.short_name(d) for d in dt.mps_dtypes(cpu) if d not in registered]
    if missing:
        notes.append(f"test_mps will run {', '.join(missing)} too, which the kernels file does not "
                     f"instantiate for '{kernel}'")
    return dt.sort_dtypes(registered & set(dt.test_mps_dtypes()))


def _op_view(infos, family, arity: str, chosen, notes: list) -> OpView:
    scalar_overloads = any(
        any(str(a.type) == "Scalar" for a in e.fn.func.arguments.flat_positional[:2]) for e in family)
    large = opinfo.skips_large_values(infos)
    if large:
        notes.append(f"OpInfo skips {infos[0].name}'s large-argument test on the CPU: inputs stay "
                     f"within +-{LARGE_LIMIT:g}")
    return OpView(infos, arity, scalar_overloads, opinfo.domain(infos), LARGE_LIMIT if large else None, chosen)


def verify_op(tree: PyTorchTree, op: str, dtypes=None, math=None, runner=None, check: bool = True) -> VerifyReport:
    """Verify OP's kernels in `math` modes (default: every mode offered) for `dtypes`
    (default: every dtype instantiated that test_mps runs). `runner` wraps each kernel
    launch (twin/mps_host.py MpsHost.launch); with `check` every case runs under
    metal_kernel.check() and a finding fails its dtype (checked.py)."""
    nf = NativeFunctions.load(tree.native_functions, tree.tags)
    family = nf.family(op)
    base = str(family[0].fn.func.name.name.base)
    stub = stub_for(base, find_stubs(tree.native_dir))
    modes, notes = _modes(math)
    if (stub is None or stub.arity is None) and recipe_for(base) is not None:
        report = verify_recipe(tree, op, recipe_for(base), dtypes, modes, check)
        report.notes += notes
        return report
    if stub is None or stub.arity is None:
        raise AtenError(f"'{base}' is neither a unary/binary TensorIterator op with a DispatchStub "
                        "nor an op with a host recipe: nothing to verify it through")
    path = tree.kernels_dir / ARITY[stub.arity].kernel_file
    if not path.is_file():
        raise AtenError("kernel file missing: run `aten add` first", path)
    text = path.read_text()
    kernel = _kernel_name(text, list(dict.fromkeys([stub.kernel_name, base, op.split(".")[0]])))
    infos = opinfo.opinfos_for(base)
    if not infos:
        raise AtenError(f"no OpInfo tests '{base}'", tree.native_functions, family[0].line)
    cpu = opinfo.cpu_dtypes(infos)
    chosen = _dtypes(text, tree, kernel, cpu, dtypes, notes)
    view = _op_view(infos, family, stub.arity, chosen, notes)
    primary = next((i for i in infos if not i.variant_test_name), infos[0])  # test_mps's op.name
    tolerances = MpsTolerances.load(tree.root)
    if tolerances.note:
        notes.append(tolerances.note)
    results = []
    # All of the op's instantiations unless dtypes were picked: the same source `aten add`
    # compiled before writing, so the runtime's cache has it.
    input_types = {dt.METAL_TYPE[d] for d in chosen if d in dt.METAL_TYPE} if dtypes else None
    for mode in modes:
        lib = compile_op(tree, path, kernel, stub.arity, input_types, math=mode)
        verifier = Verifier(lib, kernel, view, primary.op, cpu, mode, runner)
        results += [run_checked(lambda d=d: verifier.run_dtype(d, tolerances.for_op(primary, d)), check, notes)
                    for d in chosen]
    return VerifyReport(op, kernel, results, notes)
