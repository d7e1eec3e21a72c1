"""The conformance set (cases.py, kernels/*.cu) on the CPU, compared with
what an NVIDIA H200 computed (golden/golden.npz, made by golden/run_gpu.py):
integers and warp-function results bit for bit, floats within CUDA's
documented bounds. Inputs are the GPU run's own; outputs start poisoned."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from metal_kernel import port

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("cuda_cases", HERE / "cases.py")
cases = importlib.util.module_from_spec(_spec)
sys.modules["cuda_cases"] = cases  # dataclasses look their module up
_spec.loader.exec_module(cases)

GOLDEN_NPZ = HERE / "golden" / "golden.npz"
GOLDEN_META = HERE / "golden" / "meta.json"


@pytest.fixture(scope="module")
def golden():
    if not GOLDEN_NPZ.exists():
        pytest.fail("tests/cuda/golden/golden.npz is missing: run tests/cuda/golden/run_gpu.py on a GPU machine")
    with np.load(GOLDEN_NPZ) as z:
        arrays = {k: z[k] for k in z.files}
    return arrays, json.loads(GOLDEN_META.read_text())


_libs: dict[str, port.CudaLibrary] = {}


def library(file: str) -> port.CudaLibrary:
    if file not in _libs:
        path = cases.KERNELS / file
        _libs[file] = port.load_cuda(path.read_text(), filename=str(path))
    return _libs[file]


def run_cpu(case, arrays: dict[str, np.ndarray]):
    """Launches the case on the CPU. Returns (arrays after, printed lines)."""
    lib = library(case.file)
    for name, (dtype, values) in case.constants.items():
        lib.set_constant(name, np.asarray(values, dtype=dtype).tobytes())
    for kname, names, grid, block in case.before:
        lib[kname](*[arrays[n] for n in names], grid=grid, block=block)
    args = []
    for a in case.args:
        if isinstance(a, cases.Scalar):
            args.append(a.value)
        elif isinstance(a, cases.Struct):
            args.append(a.data)
        else:
            args.append(arrays[a.name])
    printed = lib[case.kernel](*args, grid=case.grid, block=case.block, shared_mem=case.shared_mem)
    return arrays, printed


def gpu_inputs(case, z: dict) -> dict[str, np.ndarray]:
    out = {}
    for a in [*case.args, *case.extra]:
        if isinstance(a, (cases.In, cases.InOut)):
            out[a.name] = z[f"{case.name}/in/{a.name}"].copy()
        elif isinstance(a, cases.Out):
            out[a.name] = cases.poison(a)
    return out


@pytest.mark.parametrize("case", [c for c in cases.CASES if c.gpu and not c.expect_error], ids=lambda c: c.name)
def test_matches_gpu(case, golden):
    z, meta = golden
    assert case.name in meta["cases"], f"no golden output for {case.name}: rerun golden/run_gpu.py"
    arrays, printed = run_cpu(case, gpu_inputs(case, z))
    problems = [p for a in cases.outputs(case)
                if (p := cases.compare(a, arrays[a.name], z[f"{case.name}/out/{a.name}"])) is not None]
    assert not problems, "\n".join(problems)
    if case.printf:
        gpu_lines = meta["cases"][case.name]["printf"]
        cpu_lines = [p.text for p in printed]
        assert sorted(cpu_lines) == sorted(gpu_lines)
        # Each thread's lines in its own order (the GPU interleaves threads).
        for p, q in zip(printed, printed[1:]):
            assert (p.block, p.thread) <= (q.block, q.thread)


@pytest.mark.parametrize("case", [c for c in cases.CASES if c.expect_error], ids=lambda c: c.name)
def test_errors(case, golden):
    z, meta = golden
    if case.gpu:
        assert meta["cases"][case.name]["error"], "the GPU run of this case did not fail"
    with pytest.raises(port.KernelError) as e:
        run_cpu(case, gpu_inputs(case, z) if case.gpu else {a.name: cases.poison(a) for a in case.args
                                                             if isinstance(a, cases.Out)})
    assert case.expect_error in str(e.value)
    assert e.value.thread is not None and e.value.block is not None


def test_the_comparison_rejects_wrong_outputs():
    exact = cases.Out("o", "int32", 3)
    a = np.array([1, 2, 3], np.int32)
    assert cases.compare(exact, a, a.copy()) is None
    assert "1 of 3" in cases.compare(exact, a, np.array([1, 2, 4], np.int32))
    f = cases.Out("f", "float32", 3)
    nan_a = np.array([np.nan, 1.0, 2.0], np.float32)
    nan_b = nan_a.copy()
    nan_b.view(np.uint32)[0] = 0x7FFFFFFF  # another NaN payload: still equal
    assert cases.compare(f, nan_a, nan_b) is None
    assert cases.compare(f, nan_a, np.array([0.0, 1.0, 2.0], np.float32)) is not None
    ulp = cases.Out("u", "float32", 2, cases.ULP([2, 0]))
    x = np.array([1.0, 1.0], np.float32)
    three_ulps = np.nextafter(np.nextafter(np.nextafter(x, 2), 2), 2).astype(np.float32)
    assert cases.compare(ulp, np.array([three_ulps[0], 1.0], np.float32), x) is None  # bound 2 + 1
    assert cases.compare(ulp, np.array([1.0, np.nextafter(np.float32(1), 2)], np.float32), x) is not None  # 0: exact
    four = np.nextafter(three_ulps, 2).astype(np.float32)
    assert cases.compare(ulp, np.array([four[0], 1.0], np.float32), x) is not None
    bf = cases.Out("b", "bfloat16", 2)
    assert cases.compare(bf, np.array([0x7FC0, 0x3F80], np.uint16), np.array([0x7FFF, 0x3F80], np.uint16)) is None
    assert cases.compare(bf, np.array([0x3F81, 0x3F80], np.uint16), np.array([0x3F80, 0x3F80], np.uint16)) is not None
