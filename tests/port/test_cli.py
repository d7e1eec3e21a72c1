"""`metal-kernel port FILE -o DIR [--json] [--stats] [--verify]`: the files it
writes, what it prints, its exit codes (0 all translated and verified, 1 a
kernel failed, 2 bad input)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
from click.testing import CliRunner

from metal_kernel.cli import main

GOOD = """
template <typename T>
__global__ void scale_kernel(const T* x, T* y, T s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s;
}
void host(const float* x, float* y, int n) { scale_kernel<float><<<(n + 127) / 128, 128>>>(x, y, 2.0f, n); }
"""
BAD = GOOD + "__global__ void dbl(double* x) { x[threadIdx.x] *= 2.0; }\n"


def _run(tmp_path, source, *args, name="kernels.cu"):
    f = tmp_path / name
    f.write_text(source)
    out = tmp_path / "out"
    return CliRunner().invoke(main, ["port", str(f), "-o", str(out), *args]), out


def test_port_writes_metal_launcher_and_report(tmp_path):
    r, out = _run(tmp_path, GOOD, "--verify", "--stats", "--size", "n=300")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["kernels.metal", "kernels.port.json", "kernels.py"]
    assert "kernel void scale_kernel" in (out / "kernels.metal").read_text()
    report = json.loads((out / "kernels.port.json").read_text())
    assert report["kernels"][0]["spelling"] == "scale_kernel<float>"
    assert report["verification"]["scale_kernel<float>"]["ok"] is True
    assert report["stats"]["kernels"] == {"found": 1, "translated": 1, "verified": 1, "failed": 0, "not_verified": 0}
    assert "CONVERTED refs count" in r.output and "verified" in r.output
    # the launcher module runs the port
    spec = importlib.util.spec_from_file_location("kernels", out / "kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = np.arange(200, dtype=np.float32)
    y = np.full(200, np.nan, np.float32)
    mod.scale_kernel_float(x, y, 3.0, 200, grid=2, block=128)
    assert np.array_equal(y, x * 3)


def test_untranslated_kernel_exits_1(tmp_path):
    r, out = _run(tmp_path, BAD, "--json")
    assert r.exit_code == 1
    report = json.loads(r.output)
    dbl = next(k for k in report["kernels"] if k["spelling"] == "dbl")
    assert dbl["translated"] is False and "MK1001" in dbl["why_not"]
    assert any(d["code"] == "MK1001" and d["line"] == 8 for d in report["diagnostics"])
    assert "MK1001" in (out / "kernels.metal").read_text()


def test_bad_input_exits_2(tmp_path):
    r, _ = _run(tmp_path, '#include "nowhere.h"\n')
    assert r.exit_code == 2 and "does not preprocess" in r.output
    r = CliRunner().invoke(main, ["port", str(tmp_path / "missing.cu")])
    assert r.exit_code == 2
    r, _ = _run(tmp_path, GOOD, "--verify", "--size", "n=lots")
    assert r.exit_code == 2 and "--size" in r.output


def test_rerun_replaces_the_files(tmp_path):
    r, out = _run(tmp_path, GOOD)
    assert r.exit_code == 0
    first = (out / "kernels.metal").read_text()
    r, out = _run(tmp_path, GOOD)
    assert r.exit_code == 0 and (out / "kernels.metal").read_text() == first
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left


DOUBLE_SUM = GOOD + """
__global__ void dsum(const float* x, float* y, int n) {
  double s = 0.0;
  for (int j = 0; j < n; j++) s += x[j];
  if (blockIdx.x == 0 && threadIdx.x == 0) y[0] = (float)s;
}
"""


def test_double_float_translates_with_a_warning(tmp_path):
    r, _ = _run(tmp_path, DOUBLE_SUM, "--verify", "--size", "n=300")
    assert r.exit_code == 1 and "MK1001" in r.output  # the default: refused
    r, out = _run(tmp_path, DOUBLE_SUM, "--double", "float", "--verify", "--size", "n=300")
    assert r.exit_code == 0, r.output
    assert "warning: MK1038" in r.output and "double computed in float" in r.output
    report = json.loads((out / "kernels.port.json").read_text())
    assert report["double"] == "float"
    dsum = next(k for k in report["kernels"] if k["spelling"] == "dsum")
    assert dsum["translated"] and dsum["demoted"] and report["verification"]["dsum"]["ok"]
    assert "// MK1038 warning" in (out / "kernels.metal").read_text()
    assert "its double computed in float: MK1038" in (out / "kernels.py").read_text()
    r = CliRunner().invoke(main, ["port", "--help"])
    assert "--double [reject|float]" in r.output and "MK1038" in r.output
