"""The CUDA conformance set (tests/cuda: one kernel file per rule of the CUDA
front end) through the porter: every kernel that uses only translatable
constructs ports and passes verify against load_cuda on the case's own
inputs; the others carry the diagnostic that says why.

Verification here compares every buffer without metal_kernel.check() (the
checked builds of ~60 files would cost minutes in CI); test_rules.py and
test_verify.py verify with check() on."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from metal_kernel.port import port_cuda

CUDA_TESTS = Path(__file__).resolve().parents[1] / "cuda"
_spec = importlib.util.spec_from_file_location("cuda_cases", CUDA_TESTS / "cases.py")
cases = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("cuda_cases", cases)
_spec.loader.exec_module(cases)

# Not translated: the construct Metal has no counterpart for.
UNTRANSLATABLE = {
    "kernel_template_d": "MK1001", "struct_arg": "MK1001", "vector_types": "MK1001", "scalar_params": "MK1001",
    "shfl_types": "MK1001", "double_math": "MK1001", "atomic_float": "MK1001", "cub_block": "MK1016",
    "atomic_u64": "MK1012", "atomic_minmax": "MK1012", "atomic_bits": "MK1012",
}
# Translated with a warning that says where the port may not behave as the
# original (verification fails, or passes only because this CPU runtime reads
# an exited lane as 0, as an H200 does: check() reports the read).
DIVERGENT = {
    "its_converge": "MK1035",  # lanes of two branches exchange values (independent thread scheduling)
    "shfl_exited_source": "MK1035",  # reads lanes that returned (0 on an H200, undefined in Metal)
    "printf_order": "MK1006",  # prints and writes nothing: the port cannot print
    "assert_fail": "MK1015",  # the original stops at its assert; the port has none
}
# A deadlock in CUDA: the original does not finish, so there is nothing to compare.
NOT_COMPARABLE = {"warp_deadlock"}

_ports: dict[str, object] = {}


def ported(file: str):
    if file not in _ports:
        path = cases.KERNELS / file
        _ports[file] = port_cuda(path.read_text(), filename=str(path))
    return _ports[file]


def arguments(case, arrays):
    out = []
    for a in case.args:
        if isinstance(a, cases.Scalar):
            out.append(np.dtype(a.dtype).type(a.value).item() if a.dtype != "bool" else bool(a.value))
        elif isinstance(a, cases.Struct):
            out.append(a.data)
        else:
            out.append(arrays[a.name])
    return out


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_case_ports(case):
    p = ported(case.file)
    k = next((k for k in p.kernels if k.spelling == case.kernel), None)
    assert k is not None, f"{case.kernel} not found: {[x.spelling for x in p.kernels]}"
    if case.name in UNTRANSLATABLE:
        assert not k.translated
        assert UNTRANSLATABLE[case.name] in {d.code for d in k.diagnostics}
        assert all(d.severity == "error" for d in k.diagnostics)
        return
    assert k.translated, [str(d) for d in k.diagnostics]
    arrays = cases.inputs(case)
    lib = p.cuda_library()
    for name, (dtype, values) in case.constants.items():
        lib.set_constant(name, np.asarray(values, dtype=dtype).tobytes())
    for kname, names, grid, block in case.before:  # launches whose state the case reads (__device__ variables)
        lib[kname](*[arrays[n] for n in names], grid=grid, block=block)
    res = p.verify(case.kernel, *arguments(case, arrays), grid=case.grid, block=case.block,
                   shared_mem=case.shared_mem, check=False)
    if case.name in NOT_COMPARABLE:
        assert not res.ok and "original failed" in (res.error or "")
        return
    if case.name in DIVERGENT:
        assert DIVERGENT[case.name] in {d.code for d in p.diagnostics}
        assert res.ok is (case.name == "shfl_exited_source"), str(res)
        return
    assert res.ok, str(res)


def test_every_case_is_classified():
    names = {c.name for c in cases.CASES}
    assert set(UNTRANSLATABLE) | set(DIVERGENT) | NOT_COMPARABLE <= names
