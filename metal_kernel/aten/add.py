"""`aten add`: plan every edit for one op, validate, then diff or write.

Nothing is written until every change is planned and the edited
native_functions.yaml has been re-parsed by torchgen; `--dry-run` prints the
unified diff of the same plan. Planning is deterministic and each generator
skips what is already present, so a second run plans no change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import dtypes as dt
from . import opinfo
from .dispatch_edit import RowAction, plan_add as plan_dispatch
from .errors import AtenError
from .fileops import FileChange, read_or_none
from .host_gen import plan_custom_host, plan_stub_host
from .metal_gen import HEADER, KernelSpec, functor_from_expr, functor_from_file, plan_metal
from .stubs import find_stubs, stub_for
from .testlist import CommonMps
from .tree import PyTorchTree
from .yaml_model import NativeFunctions


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
    mps_skips: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def pending(self) -> list[FileChange]:
        return [c for c in self.changes if c.changed]

    def to_json(self, tree: PyTorchTree) -> dict:
        return {
            "op": self.op, "kernel": self.kernel, "arity": self.arity, "stub": self.stub,
            "dtypes": self.dtypes,
            "dispatch": [vars(a) for a in self.dispatch],
            "files": [tree.relative(c.path) for c in self.pending],
            "removed_xfails": self.removed_xfails,
            "mps_skips": self.mps_skips,
            "notes": self.notes,
        }


def _cpu_callable(infos):
    for info in infos:
        if not info.variant_test_name:
            return info.op
    return infos[0].op


def plan(tree: PyTorchTree, op: str, functor_file: Path | None = None,
         expr: str | None = None) -> AddPlan:
    if (functor_file is None) == (expr is None):
        raise AtenError("give exactly one of --functor FILE or --expr EXPR")
    nf = NativeFunctions.load(tree.native_functions, tree.tags)
    family = nf.family(op)
    base = str(family[0].fn.func.name.name.base)
    stub = stub_for(base, find_stubs(tree.native_dir))
    tensor_iterator = stub is not None and stub.arity is not None
    dispatch = plan_dispatch(nf, op, shared=tensor_iterator)
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
                     "verification compares them with the float32 CPU op")
    changes = [dispatch.change]
    if tensor_iterator:
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
        changes.append(plan_metal(tree.kernels_dir, spec, source))
        changes.append(plan_stub_host(tree.operations_dir, tree.native_dir, stub, kernel))
    else:
        arity = None
        kernel = base
        if functor_file is None:
            raise AtenError(f"'{base}' has no DispatchStub: --expr cannot describe a custom kernel; "
                            "pass --functor FILE holding its Metal kernels")
        kernel, source = functor_from_file(functor_file, [base])
        stem = "".join(part.capitalize() for part in base.split("_"))
        kpath = Path(tree.kernels_dir) / f"{stem}.metal"
        old = read_or_none(kpath)
        changes.append(FileChange(kpath, old, old if old is not None and source.strip() in old
                                  else HEADER + "\n" + source))
        host_old = read_or_none(Path(tree.operations_dir) / f"{stem}.mm")
        for action in dispatch.actions:
            if action.action == "new-line":
                entry = nf.by_name[action.entry]
                host = plan_custom_host(tree.operations_dir, stem, kernel, entry.fn, action.detail,
                                        existing=host_old)
                host_old = host.new
                changes = [c for c in changes if c.path != host.path] + [host]
        notes.append("custom kernel: check the generated host function's argument binding "
                     "against the kernel signature")
    common = CommonMps.load(tree.common_mps)
    keys = {i.name + i.variant_test_name for i in infos}
    removal, hits = common.removal(keys)
    changes.append(removal)
    return AddPlan(
        op=op, kernel=kernel, arity=arity, stub=stub.name if stub else None,
        dtypes=[dt.short_name(d) for d in chosen], changes=changes, dispatch=dispatch.actions,
        removed_xfails=[f"{h.list_name}[{h.key!r}] (line {h.start})" for h in hits],
        mps_skips=[str(s) for s in opinfo.mps_skips(infos)], notes=notes)
