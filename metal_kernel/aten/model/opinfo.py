"""What PyTorch's OpInfo database says about an op: CPU dtypes, samples, MPS skips.

`op_db` is imported lazily (it takes a few seconds and needs `expecttest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from ..errors import AtenError
from . import dtypes as dt


@lru_cache(maxsize=1)
def op_db():
    try:
        from torch.testing._internal.common_methods_invocations import op_db as db
    except ImportError as err:  # expecttest missing, typically
        raise AtenError(f"cannot import torch's OpInfo database ({err}); "
                        "install the `expecttest` package") from None
    return db


def opinfos_for(base: str) -> list:
    """OpInfos testing aten op `base` (matched on aten_name or dotted name)."""
    hits = []
    for info in op_db():
        names = {info.name.replace(".", "_"), str(info.aten_name).replace(".", "_")}
        if base in names:
            hits.append(info)
    return hits


@dataclass(frozen=True)
class SkipReport:
    opinfo: str
    test: str
    kind: str

    def __str__(self) -> str:
        return f"{self.opinfo}: {self.kind} for {self.test} on mps"


def mps_skips(infos) -> list[SkipReport]:
    """DecorateInfo entries of the OpInfos that still skip or xfail MPS."""
    out = []
    for info in infos:
        for deco in info.decorators:
            if getattr(deco, "device_type", None) != "mps":
                continue
            kinds = sorted({getattr(d, "__name__", None) or type(d).__name__ for d in deco.decorators})
            test = ".".join(x for x in (deco.cls_name, deco.test_name) if x) or "all tests"
            out.append(SkipReport(info.name + info.variant_test_name, test, "/".join(kinds)))
    return out


def cpu_dtypes(infos) -> set[torch.dtype]:
    found: set[torch.dtype] = set()
    for info in infos:
        found |= set(info.dtypes)
    return found


def probe_result_dtype(fn, arity: int, dtype: torch.dtype) -> torch.dtype:
    """dtype the CPU op returns for inputs of `dtype` (float math for ops CPU lacks)."""
    probe = dtype if dtype not in dt.MPS_LOW_PRECISION_FLOATS else torch.float32
    args = [torch.ones(2, dtype=probe) for _ in range(arity)]
    try:
        out = fn(*args)
    except Exception:
        return dtype
    if dtype in dt.MPS_LOW_PRECISION_FLOATS and out.dtype == torch.float32:
        return dtype
    return out.dtype


def domain(infos) -> tuple:
    """The op's OpInfo `domain` (low, high), ends exclusive; (None, None) when not given."""
    for info in infos:
        if getattr(info, "domain", None):
            return tuple(info.domain)
    return (None, None)


def skips_large_values(infos) -> bool:
    """Whether OpInfo skips the op's large-argument reference test (the CPU op is not
    accurate there), e.g. special.airy_ai."""
    return any(getattr(deco, "test_name", None) == "test_reference_numerics_large"
               and getattr(deco, "device_type", None) in (None, "cpu")
               for info in infos for deco in info.decorators)
