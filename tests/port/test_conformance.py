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
# The MK1001 cases again with double="float" (doubles.py): what each becomes.
# A double in the kernel's interface stays MK1001 (the host lays the buffer or
# argument out as doubles). vector_types only writes sizeof(double2) to a
# buffer: it translates, and verify fails on the `sizes` it writes: at 5
# sizeof(double2) (16 in CUDA, float2's 8 in the port), and at 0, 4, 7
# sizeof(float3), sizeof(char3), sizeof(uint3) (12, 3, 12 in CUDA; Metal's
# 3-component vectors are 16, 4, 16 bytes: the port packs them only in memory,
# MK1030, and does not flag sizeof of one).
WITH_DOUBLE_FLOAT = {
    "kernel_template_d": "MK1001",  # axpy<double, 2>: double buffers and a double scalar
    "struct_arg": "MK1001",  # a struct with a double field, by value
    "scalar_params": "MK1001",  # a double by value
    "shfl_types": "MK1001",  # double buffers
    "double_math": "MK1001",  # double buffers and a double scalar
    "atomic_float": "MK1001",  # a double buffer (and a 64-bit atomic on it)
    "vector_types": [0, 4, 5, 7],  # the elements of `sizes` that differ
}

_ports: dict[tuple, object] = {}


def ported(file: str, double: str = "reject"):
    if (file, double) not in _ports:
        path = cases.KERNELS / file
        _ports[file, double] = port_cuda(path.read_text(), filename=str(path), double=double)
    return _ports[file, double]


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


@pytest.mark.parametrize("case", [c for c in cases.CASES if c.name in WITH_DOUBLE_FLOAT], ids=lambda c: c.name)
def test_double_cases_with_double_float(case):
    p = ported(case.file, "float")
    k = next(k for k in p.kernels if k.spelling == case.kernel)
    if WITH_DOUBLE_FLOAT[case.name] == "MK1001":
        assert not k.translated
        d = next(d for d in k.diagnostics if d.code == "MK1001")
        assert "not even with double=\"float\"" in d.message, [str(d) for d in k.diagnostics]
        return
    assert k.translated and k.demoted, [str(d) for d in k.diagnostics]
    launch = {"grid": case.grid, "block": case.block, "shared_mem": case.shared_mem}
    res = p.verify(case.kernel, *arguments(case, cases.inputs(case)), check=False, **launch)
    assert not res.ok and [b.name for b in res.buffers if not b.match] == ["sizes"], str(res)
    sizes = []
    for lib in (p.cuda_library(), p.load()):
        args = arguments(case, cases.inputs(case))
        lib[case.kernel](*args, **launch)
        sizes.append(args[2])
    assert np.flatnonzero(sizes[0] != sizes[1]).tolist() == WITH_DOUBLE_FLOAT[case.name]
    assert (sizes[0][5], sizes[1][5]) == (16, 8)


def test_every_case_is_classified():
    names = {c.name for c in cases.CASES}
    assert set(UNTRANSLATABLE) | set(DIVERGENT) | NOT_COMPARABLE <= names
    assert {n for n, code in UNTRANSLATABLE.items() if code == "MK1001"} == set(WITH_DOUBLE_FLOAT)
