"""Constructs Metal cannot express are flagged, never silently translated
(kernels/flagged.cu): each gets its numbered diagnostic at its line, as a
console line and as a comment in the .metal; kernels that need an error's
construct stay out of the port, the others compile and run."""

from __future__ import annotations

import numpy as np
import pytest

from metal_kernel.port import port_cuda
from metal_kernel.port.to_metal.table import DIAGNOSTICS

from .conftest import KERNELS, poisoned

# kernel -> (code, severity) it must carry
EXPECTED = {
    "uses_double": ("MK1001", "error"),
    "uses_asm": ("MK1002", "error"),
    "uses_texture": ("MK1003", "error"),
    "uses_grid_sync": ("MK1004", "error"),
    "uses_launch": ("MK1005", "error"),
    "uses_warp64": ("MK1007", "error"),
    "many_buffers": ("MK1008", "error"),
    "uses_constant": ("MK1009", "error"),
    "uses_big_shared": ("MK1010", "error"),
    "uses_atomic64": ("MK1012", "error"),
}


@pytest.fixture(scope="module")
def flagged():
    path = KERNELS / "flagged.cu"
    p = port_cuda(path.read_text(), filename=str(path))
    p.load()  # MK1010 is known once the port is compiled
    return p


@pytest.mark.parametrize("kernel", sorted(EXPECTED))
def test_error_keeps_the_kernel_out(flagged, kernel):
    code, severity = EXPECTED[kernel]
    k = next(k for k in flagged.kernels if k.spelling == kernel)
    assert not k.translated
    assert code in {d.code for d in k.diagnostics}, [str(d) for d in k.diagnostics]
    d = next(d for d in flagged.diagnostics if d.code == code)
    assert d.severity == severity == DIAGNOSTICS[code].severity
    assert d.line > 0 and d.file.endswith("flagged.cu") and d.message and d.suggestion
    assert kernel not in flagged.load()


def test_diagnostics_are_comments_at_the_spot(flagged):
    m = flagged.metal
    lines = m.splitlines()
    constructs = {"MK1001": "double d", "MK1002": "asm(", "MK1006": ";", "MK1011": "simd_shuffle_xor",
                  "MK1012": "atomicAdd"}
    for code, construct in constructs.items():
        i = next(i for i, ln in enumerate(lines) if f"// {code} " in ln)
        assert "docs/port-diagnostics.md#" + code.lower() in lines[i]
        assert construct in lines[i + 1]  # the comment is on the line above the construct
    # the double kernel stays in the file, out of the compiled port
    assert "#if 0" in m and "double d = x[threadIdx.x];" in m


def test_warnings_translate(flagged):
    for kernel, code in (("uses_printf", "MK1006"), ("uses_partial_mask", "MK1011")):
        k = next(k for k in flagged.kernels if k.spelling == kernel)
        assert k.translated
        d = next(d for d in flagged.diagnostics if d.code == code)
        assert d.severity == "warning" and d.function == kernel
    x = np.arange(32, dtype=np.float32)
    res = flagged.verify("uses_printf", x, poisoned(32), grid=1, block=32)
    assert res.ok, str(res)
    # the mask names the lanes that take the branch: the active lanes, as verify shows
    xi = np.arange(32, dtype=np.int32)
    res = flagged.verify("uses_partial_mask", xi, poisoned(32, np.int32), grid=1, block=32)
    assert res.ok, str(res)


def test_the_rest_of_the_file_is_ported(flagged):
    lib = flagged.load()
    assert "fine" in lib
    x = np.arange(64, dtype=np.float32)
    y = poisoned(64)
    lib["fine"](x, y, grid=1, block=64)
    assert np.array_equal(y, x + 1)


def test_statistics_count_what_was_not_converted(flagged):
    s = flagged.stats
    assert s["unconverted"]["by_name"].get("double", 0) >= 1
    assert s["unconverted"]["by_name"].get("asm", 0) >= 1
    assert s["kernels"]["translated"] < s["kernels"]["found"]
    assert s["conversion_percent"] < 100


def test_unknown_identifiers_are_counted_unconverted():
    src = ("__device__ float helper(float);\n"
           "__global__ void k(float* y) { y[threadIdx.x] = __nv_mystery_intrinsic(y[threadIdx.x]); }\n")
    p = port_cuda(src, filename="unknown.cu")
    d = next(d for d in p.diagnostics if d.code == "MK1014")
    assert "__nv_mystery_intrinsic" in d.message and d.line == 2
    assert p.stats["unconverted"]["unknown"] == {"__nv_mystery_intrinsic": 1}
    assert p.stats["conversion_percent"] < 100


def test_port_never_raises_on_what_it_cannot_translate():
    src = ("__global__ void k(float* y) { asm volatile(\"trap;\"); texture<float, 1> t; y[0] = tex1D(t, 0.5f); "
           "cg::this_grid().sync(); double d = 1.0; printf(\"%f\", d); }\n")
    p = port_cuda(src, filename="bad.cu")
    assert not p.kernels[0].translated
    assert {"MK1001", "MK1002", "MK1003"} <= {d.code for d in p.diagnostics}
    assert p.load() is not None and "k" not in p.load()
    bad = port_cuda("#include \"does_not_exist.h\"\n", filename="missing.cu")
    assert bad.kernels == [] and bad.diagnostics[0].code == "MK1017"
