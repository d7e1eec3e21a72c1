"""`aten add`: plan every edit for one op, validate, then diff or write.

Nothing is written until every change is planned and the edited
native_functions.yaml has been re-parsed by torchgen; `--dry-run` prints the
unified diff of the same plan. Planning is deterministic and each generator
skips what is already present, so a second run plans no change.

Two paths: unary/binary TensorIterator ops (a DispatchStub exists) get a functor
(`--functor` / `--expr`), MPS on the shared dispatch line and a REGISTER_DISPATCH;
ops with a host recipe (recipes.py, e.g. take) get the `--kernel` file, their own
`MPS: <op>_out_mps` / `<op>_mps` rows and the recipe's `.mm` host functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchgen.model import SchemaKind

from .edit.dispatch import RowAction, plan_add as plan_dispatch
from .edit.fileops import FileChange
from .edit.kernel_file import plan_kernel_file
from .edit.metal import plan_metal
from .edit.mm import plan_recipe_host, plan_stub_host
from .edit.testlist import plan_removal
from .errors import AtenError, DifferentImplementation
from .generate.functor import KernelSpec, functor_from_expr, functor_from_file
from .model import dtypes as dt
from .model import opinfo
from .model.common_mps import CommonMps
from .model.native_functions import NativeFunctions
from .model.stubs import find_stubs, stub_for
from .model.tree import PyTorchTree
from .recipes import RECIPES, recipe_for


@dataclass
class AddPlan:
    op: str
    kernel: str
    arity: str | None
    stub: str | None
    dtypes: list[str]
    changes: list[FileChange]
    dispatch: list[RowAction]
    removed_xfails: list[str] = field(default_factory=list)
    review_entries: list[str] = field(default_factory=list)  # common_mps.py entries left for review
    mps_skips: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    recipe: str | None = None  # custom-kernel op (recipes/), verified through its host twin
    kernel_change: FileChange | None = None  # the kernels/*.metal edit (compiled before writing)

    @property
    def verifiable(self) -> bool:
        return self.arity is not None or self.recipe is not None

    @property
    def pending(self) -> list[FileChange]:
        return [c for c in self.changes if c.changed]

    def to_json(self, tree: PyTorchTree) -> dict:
        return {
            "op": self.op, "kernel": self.kernel, "arity": self.arity, "stub": self.stub,
            "recipe": self.recipe,
            "dtypes": self.dtypes,
            "dispatch": [vars(a) for a in self.dispatch],
            "files": [tree.relative(c.path) for c in self.pending],
            "removed_xfails": self.removed_xfails,
            "review_entries": self.review_entries,
            "mps_skips": self.mps_skips,
            "notes": self.notes,
        }


def _cpu_callable(infos):
    for info in infos:
        if not info.variant_test_name:
            return info.op
    return infos[0].op


def plan(tree: PyTorchTree, op: str, functor_file: Path | None = None,
         expr: str | None = None, kernel_file: Path | None = None, force: bool = False) -> AddPlan:
    if sum(x is not None for x in (functor_file, expr, kernel_file)) != 1:
        raise AtenError("give exactly one of --functor FILE, --expr EXPR (TensorIterator ops) "
                        "or --kernel FILE (custom kernels)")
    nf = NativeFunctions.load(tree.native_functions, tree.tags)
    family = nf.family(op)
    base = str(family[0].fn.func.name.name.base)
    stub = stub_for(base, find_stubs(tree.native_dir))
    tensor_iterator = stub is not None and stub.arity is not None
    recipe = None if tensor_iterator else recipe_for(base)
    if tensor_iterator and kernel_file is not None:
        raise AtenError(f"'{base}' is a {stub.arity} TensorIterator op ({stub.name}): "
                        "give its functor with --functor FILE or --expr EXPR")
    if not tensor_iterator and recipe is None:
        raise AtenError(f"'{base}' is not a unary/binary TensorIterator op and has no host recipe "
                        f"(recipes exist for: {', '.join(RECIPES)})", tree.native_functions, family[0].line)
    if recipe is not None and kernel_file is None:
        raise AtenError(f"'{base}' needs a custom kernel: pass --kernel FILE "
                        "(--functor/--expr describe TensorIterator functors)")
    infos = opinfo.opinfos_for(base)
    if not infos:
        raise AtenError(f"no OpInfo tests '{base}': cannot tell which dtypes it supports on CPU",
                        tree.native_functions, family[0].line)
    cpu = opinfo.cpu_dtypes(infos)
    chosen = dt.mps_dtypes(cpu)
    notes = []
    added = [dt.short_name(d) for d in chosen if d not in cpu]
    if added:
        notes.append(f"instantiated for {', '.join(added)} too (MPS low-precision floats); "
                     "verification compares them with the float32 CPU op, as test_mps does")
    untested = [dt.short_name(d) for d in dt.sort_dtypes(cpu) if d not in chosen and d not in dt.UNSUPPORTED_ON_MPS]
    if untested:
        notes.append(f"not instantiated for {', '.join(untested)}: test_mps's MPS_DTYPES never "
                     "compares them with the CPU")
    if recipe is not None:
        dispatch = plan_dispatch(nf, op, shared=False)
        arity, kernel, kernel_change = None, recipe.op, None
        changes = [dispatch.change, plan_kernel_file(tree.kernels_dir, recipe, kernel_file, chosen),
                   _recipe_host(tree, nf, recipe, family, dispatch.actions)]
    else:
        dispatch = plan_dispatch(nf, op, shared=True)
        changes = [dispatch.change]
        arity = stub.arity
        candidates = [n for n in dict.fromkeys([stub.kernel_name, base, op.split('.')[0]])]
        if functor_file is not None:
            kernel, source = functor_from_file(functor_file, candidates)
        else:
            kernel, source = stub.kernel_name, None
        fn = _cpu_callable(infos)
        n_in = 1 if arity == "unary" else 2
        out_map = {d: opinfo.probe_result_dtype(fn, n_in, d) for d in chosen}
        spec = KernelSpec(kernel, arity, {i: o for i, o in out_map.items() if o in dt.METAL_TYPE})
        if source is None:
            source = functor_from_expr(spec, expr)
        kernel_change = plan_metal(tree.kernels_dir, tree.c10_metal, spec, source)
        changes.append(kernel_change)
        changes.append(plan_stub_host(tree.operations_dir, tree.native_dir, stub, kernel))
    common = CommonMps.load(tree.common_mps)
    keys = {i.name + i.variant_test_name for i in infos}
    lists = plan_removal(common, keys, chosen)
    changes.append(lists.change)
    replacing = [c for c in changes if c.changed and c.replaces]
    if replacing and not force:
        diff = "".join(c.diff(tree.relative(c.path)) for c in replacing)
        files = ", ".join(c.path.name for c in replacing)
        raise DifferentImplementation(f"a different implementation of '{kernel}' is already in {files}; "
                                      "rerun with --force to replace it with this one (diff below)",
                                      diff=diff)
    return AddPlan(
        op=op, kernel=kernel, arity=arity, stub=stub.name if tensor_iterator else None,
        dtypes=[dt.short_name(d) for d in chosen], changes=changes, dispatch=dispatch.actions,
        removed_xfails=[f"{h.list_name}[{h.key!r}] (line {h.start})"
                        + (f", kept for {lists.narrowed[h.key]}" if h.key in lists.narrowed else "")
                        for h in lists.removed],
        review_entries=[f"{h.list_name}[{h.key!r}] = {' '.join(h.value.split())} (line {h.start})"
                        for h in lists.review],
        mps_skips=[str(s) for s in opinfo.mps_skips(infos)], notes=notes,
        recipe=recipe.op if recipe else None, kernel_change=kernel_change)


def _recipe_host(tree, nf, recipe, family, actions) -> FileChange:
    """The recipe's .mm, under the names the `MPS:` rows of the out= and functional entries give."""
    by_entry = {a.entry: a for a in actions}
    roles = {}
    for entry in family:
        kind = entry.fn.func.kind()
        if kind in (SchemaKind.out, SchemaKind.functional) and kind not in roles:
            action = by_entry[entry.name]
            if action.action not in ("new-line", "already"):
                raise AtenError(f"'{entry.name}' reaches MPS as '{action.action}' ({action.detail}), "
                                f"not through an own `MPS:` kernel the {recipe.stem}.mm functions could be",
                                nf.path, entry.line)
            roles[kind] = (entry.fn, action.detail)
    missing = [k.name for k in (SchemaKind.out, SchemaKind.functional) if k not in roles]
    if missing:
        raise AtenError(f"'{recipe.op}' has no {' / '.join(missing)} entry for the host recipe", nf.path)
    return plan_recipe_host(tree.operations_dir, recipe, roles[SchemaKind.out], roles[SchemaKind.functional])


def check_compiles(tree: PyTorchTree, plan: AddPlan, dtypes=None) -> None:
    """Before anything is written: the functor has the overload and result type every
    instantiation needs (KernelCompileError names the dtypes), and the op's kernels --
    for `dtypes` when given -- compile. The library lands in the runtime's cache, where
    the verification after writing finds it."""
    from .model.dtypes import METAL_TYPE
    from .verify.compile import check_functor, compile_op

    change = plan.kernel_change
    if change is None or plan.arity is None:
        return
    check_functor(tree, change.path, plan.kernel, plan.arity, change.new)
    input_types = {METAL_TYPE[d] for d in dtypes if d in METAL_TYPE} if dtypes else None
    compile_op(tree, change.path, plan.kernel, plan.arity, input_types, text=change.new)


def render(tree: PyTorchTree, plan: AddPlan, written) -> str:
    out = [f"{plan.op}: kernel '{plan.kernel}' ({plan.arity or 'custom kernel, host recipe'}), "
           f"stub {plan.stub or '-'}, dtypes {', '.join(plan.dtypes)}"]
    out += [f"  dispatch {a.entry} (line {a.line}): {a.action} {a.detail}".rstrip() for a in plan.dispatch]
    out += [f"  wrote {tree.relative(path)}" for path in written]
    if not written:
        out.append("  nothing to change: already done")
    out += [f"  removed common_mps.py entry {x}" for x in plan.removed_xfails]
    if plan.review_entries:
        out.append("  common_mps.py entries left in place, review them (recorded for crashes, precision, ...):")
        out += [f"    {x}" for x in plan.review_entries]
    out += [f"  OpInfo decorator still skips MPS: {s}" for s in plan.mps_skips]
    out += [f"  note: {n}" for n in plan.notes]
    return "\n".join(out)
