"""verify_all on the file's own launches: the program runs with launch
capture, its first launch of each kernel gives the sizes, scalars and buffer
contents (integer indices stay in range), and a launch with deduced template
arguments names its instantiation."""

from __future__ import annotations

import numpy as np

from metal_kernel.port import port_cuda
from metal_kernel.port.to_metal.capture import capture_launches, explicit_instantiations, template_args

from .conftest import KERNELS


def test_template_arguments_from_the_kernel_signature():
    assert template_args("void k(float *, const T *, int) [T = float]") == "float"
    assert template_args("void k() [T = __half, N = 4]") == "__half, 4"
    assert template_args("void k(int)") is None


def test_verify_all_on_the_programs_launches():
    path = KERNELS / "program.cu"
    source = path.read_text()
    captures, problems = capture_launches(source, str(path), cwd=str(KERNELS))
    assert not problems
    assert set(captures) == {"scale<float>", "gather"}
    g = captures["gather"]
    assert g["grid"] == [3, 1, 1] and g["block"] == [100, 1, 1]
    idx = np.frombuffer(g["args"][0]["data"], np.int32)
    assert idx.tolist()[:4] == [0, 7, 14, 21] and len(idx) == 300
    assert np.frombuffer(g["args"][3]["bytes"], np.int32)[0] == 300
    p = port_cuda(source, filename=str(path))
    assert "scale<float>" not in {k.spelling for k in p.kernels}  # deduced: the source alone does not name it
    extra = explicit_instantiations(p, list(captures))
    assert "template __global__ void scale<float>(const float* x, float* y, float s, int n);" in extra
    p = port_cuda(source + extra, filename=str(path))
    results = {r.kernel: r for r in p.verify_all(captures=captures, check=False)}
    assert set(results) == {"scale<float>", "gather"}
    for r in results.values():
        assert r.ok, str(r)
        assert "the file's own launch" in r.notes[0]
    out = next(b for b in results["gather"].buffers if b.name == "out")
    assert out.written and out.elements == 300
