"""The metal-kernel command: output for tools, exit codes that mean something."""

import json

from click.testing import CliRunner

from metal_kernel.cli import main

GOOD = """#include <metal_stdlib>
using namespace metal;
kernel void scale(device float* x [[buffer(0)]], constant float& s [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  threadgroup float tmp[64];
  tmp[i % 64] = x[i];
  x[i] = tmp[i % 64] * s;
}
"""


def test_compile_lists_kernels_as_json(tmp_path):
    f = tmp_path / "k.metal"
    f.write_text(GOOD)
    r = CliRunner().invoke(main, ["compile", str(f), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    (k,) = data["kernels"]
    assert k["name"] == "scale" and [b["name"] for b in k["buffers"]] == ["x", "s"]
    assert k["static_thread_group_memory_length"] == 256 and k["attributes"] == ["thread_position_in_grid"]


def test_compile_error_exits_1_and_names_the_line(tmp_path):
    f = tmp_path / "bad.metal"
    f.write_text(GOOD.replace("* s;", "* missing;"))
    r = CliRunner().invoke(main, ["compile", str(f), "--json"])
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert data["ok"] is False and data["line"] == 7 and "missing" in data["error"]


def test_missing_file_is_a_usage_error():
    r = CliRunner().invoke(main, ["compile", "/nonexistent.metal"])
    assert r.exit_code == 2


def test_doctor_runs_the_self_test():
    r = CliRunner().invoke(main, ["doctor"])
    assert r.exit_code == 0, r.output
    assert "self-test:     ok" in r.output
