"""`aten coverage`: every native function with a CUDA kernel but none for MPS.

Coverage follows torchgen: an entry has a backend when that backend is in its
`dispatch:` map or in its `structured_delegate`'s. Counts come from torchgen's
backend indices (ufunc-generated CPU/CUDA kernels included).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from torchgen.model import DispatchKey

from .model.common_mps import CommonMps, opinfo_key_to_aten
from .model.native_functions import NativeFunctions
from .model.op_classes import CLASS_NAMES, classify
from .model.stubs import find_stubs, stub_for
from .model.tree import PyTorchTree


@dataclass
class MissingOp:
    name: str
    base: str
    op_class: str
    line: int
    stub: str | None
    xfails: list[str] = field(default_factory=list)  # "LIST[key]=value"


@dataclass
class CoverageReport:
    source: str
    entries: int
    explicit: dict[str, int]
    effective: dict[str, int]
    cuda_not_mps_explicit: int
    missing: list[MissingOp]

    @property
    def by_class(self) -> dict[str, int]:
        counts = Counter(m.op_class for m in self.missing)
        return {c: counts.get(c, 0) for c in CLASS_NAMES}

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "entries": self.entries,
            "explicit": self.explicit,
            "effective": self.effective,
            "cuda_not_mps": len(self.missing),
            "cuda_not_mps_explicit": self.cuda_not_mps_explicit,
            "by_class": self.by_class,
            "ops": [asdict(m) for m in self.missing],
        }


KEYS = {"CPU": DispatchKey.CPU, "CUDA": DispatchKey.CUDA, "MPS": DispatchKey.MPS}


def compute(tree: PyTorchTree) -> CoverageReport:
    nf = NativeFunctions.load(tree.native_functions, tree.tags)
    stubs = find_stubs(tree.native_dir)
    xfails: dict[str, list[str]] = {}
    for e in CommonMps.load(tree.common_mps).entries:
        xfails.setdefault(opinfo_key_to_aten(e.key), []).append(f"{e.list_name}[{e.key!r}]={e.value}")
    fns = [e.fn for e in nf.entries]
    explicit = {k: sum(nf.explicit(v, f) for f in fns) for k, v in KEYS.items()}
    effective = {k: sum(nf.effective(v, f) for f in fns) for k, v in KEYS.items()}
    cuda_not_mps_explicit = sum(
        nf.explicit(DispatchKey.CUDA, f) and not nf.explicit(DispatchKey.MPS, f) for f in fns)
    family_tags: dict[str, set[str]] = {}
    for f in fns:  # classify by family: in-place rows carry no `pointwise` tag
        family_tags.setdefault(str(f.func.name.name.base), set()).update(f.tags)
    missing = []
    for e in nf.entries:
        f = e.fn
        if not nf.effective(DispatchKey.CUDA, f) or nf.effective(DispatchKey.MPS, f):
            continue
        base = str(f.func.name.name.base)
        stub = stub_for(base, stubs)
        missing.append(MissingOp(
            name=e.name, base=base, op_class=classify(base, family_tags[base], stub is not None),
            line=e.line, stub=stub.name if stub else None, xfails=xfails.get(base, [])))
    missing.sort(key=lambda m: (CLASS_NAMES.index(m.op_class), m.name))
    return CoverageReport(str(tree.root or "installed torch"), len(fns), explicit, effective,
                          cuda_not_mps_explicit, missing)


def render_table(report: CoverageReport) -> str:
    out = [
        f"source: {report.source}",
        f"entries: {report.entries}  "
        + "  ".join(f"{k}: {report.explicit[k]} explicit / {report.effective[k]} with delegates"
                    for k in KEYS),
        f"CUDA but not MPS: {len(report.missing)} (explicit keys only: {report.cuda_not_mps_explicit})",
        "by class: " + ", ".join(f"{c} {n}" for c, n in report.by_class.items()),
        "",
    ]
    width = max((len(m.name) for m in report.missing), default=10)
    out.append(f"{'op':<{width}}  {'class':<14}  {'stub':<32}  xfail entries")
    for m in report.missing:
        out.append(f"{m.name:<{width}}  {m.op_class:<14}  {m.stub or '-':<32}  "
                   + ("; ".join(m.xfails) or "-"))
    return "\n".join(out)
