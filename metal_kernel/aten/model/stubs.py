"""DispatchStubs declared in ATen (`DECLARE_DISPATCH(fn_type, name_stub)`).

A pointwise op whose stub exists can get an MPS kernel with one
`REGISTER_DISPATCH` line: that is what makes it "stub-ready". The stub's
function type says how many tensor operands the kernel sees.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_DECLARE = re.compile(r"DECLARE_DISPATCH\(\s*([^,]+?)\s*,\s*(\w+)\s*\)")

# Stub function type -> arity of the TensorIterator kernel (data, not if-chains).
STUB_ARITY = {
    "unary_fn": "unary",
    "structured_unary_fn": "unary",
    "unary_fn_with_scalar": "unary",
    "binary_fn": "binary",
    "structured_binary_fn": "binary",
    "binary_fn_alpha": "binary",
    "structured_binary_fn_alpha": "binary",
    "binary_fn_double": "binary",
}


@dataclass(frozen=True)
class Stub:
    name: str
    fn_type: str
    path: Path
    line: int

    @property
    def arity(self) -> str | None:
        return STUB_ARITY.get(self.fn_type)

    @property
    def kernel_name(self) -> str:
        """Name of the Metal kernel family: stub name without `_stub` and `special_`."""
        return self.name.removesuffix("_stub").removeprefix("special_")


def find_stubs(native_dir: Path) -> dict[str, Stub]:
    stubs: dict[str, Stub] = {}
    native_dir = Path(native_dir)
    for header in sorted([*native_dir.glob("*.h"), *native_dir.glob("*/*.h")]):
        text = header.read_text(errors="replace")
        if "DECLARE_DISPATCH" not in text:
            continue
        for m in _DECLARE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            stubs.setdefault(m.group(2), Stub(m.group(2), m.group(1), header, line))
    return stubs


def stub_candidates(base: str) -> list[str]:
    names = [base, base.removeprefix("special_"), base.lstrip("_")]
    seen = []
    for n in names:
        if f"{n}_stub" not in seen:
            seen.append(f"{n}_stub")
    return seen


def stub_for(base: str, stubs: dict[str, Stub]) -> Stub | None:
    for cand in stub_candidates(base):
        if cand in stubs:
            return stubs[cand]
    return None
