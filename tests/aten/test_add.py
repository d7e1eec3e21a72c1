import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from aten_tree import FUNCTORS, HEAVISIDE, snapshot
from metal_kernel.aten.cli import aten
from metal_kernel.aten.model.tree import PyTorchTree
from metal_kernel.aten.model.native_functions import NativeFunctions

YAML = "aten/src/ATen/native/native_functions.yaml"
KERNELS = "aten/src/ATen/native/mps/kernels"
OPS = "aten/src/ATen/native/mps/operations"
COMMON = "torch/testing/_internal/common_mps.py"



def run(*args):
    return CliRunner().invoke(aten, [str(a) for a in args])


def add(tree, op, *extra):
    return run("add", op, "--pytorch", tree, *FUNCTORS[op], "--no-verify", *extra)


def parse(tree):
    t = PyTorchTree.from_root(tree)
    return NativeFunctions.load(t.native_functions, t.tags)


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    import difflib

    diff = difflib.ndiff(before.splitlines(), after.splitlines())
    return [(d[0], d[2:]) for d in diff if d[0] in "+-"]


def test_add_heaviside_puts_mps_on_the_shared_line_and_torchgen_parses(tree):
    before = (tree / YAML).read_text()
    result = add(tree, "heaviside")
    assert result.exit_code == 0, result.output
    after = (tree / YAML).read_text()
    assert changed_lines(before, after) == [
        ("-", "    CPU, CUDA: heaviside_out"), ("+", "    CPU, CUDA, MPS: heaviside_out")]
    from torchgen.model import DispatchKey

    nf = parse(tree)
    assert all(nf.effective(DispatchKey.MPS, e.fn) for e in nf.family("heaviside"))


def test_add_heaviside_registers_binary_kernels_for_cpu_dtypes_without_float64(tree):
    add(tree, "heaviside")
    metal = (tree / KERNELS / "BinaryKernel.metal").read_text()
    regs = re.findall(r"REGISTER_BINARY_OP\(heaviside, (\w+), (\w+)\);", metal)
    assert regs == [("float", "float"), ("half", "half"), ("bfloat", "bfloat"), ("long", "long"),
                    ("int", "int"), ("short", "short"), ("char", "char"), ("uchar", "uchar"),
                    ("bool", "bool")]
    assert "double" not in metal
    host = (tree / OPS / "BinaryKernel.mm").read_text()
    assert 'lib.exec_binary_kernel(iter, "heaviside");' in host
    assert host.index("heaviside_mps_kernel(TensorIteratorBase") < host.index(
        "REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)")


def test_add_special_ndtri_instantiates_int_to_float_unary_kernels(tree):
    result = add(tree, "special_ndtri")
    assert result.exit_code == 0, result.output
    metal = (tree / KERNELS / "UnaryKernel.metal").read_text()
    assert "struct ndtri_functor" in metal
    regs = re.findall(r"REGISTER_UNARY_OP\(ndtri, (\w+), (\w+)\);", metal)
    assert ("long", "float") in regs and ("bool", "float") in regs and ("half", "half") in regs
    assert "REGISTER_DISPATCH(special_ndtri_stub, &ndtri_mps_kernel)" in (tree / OPS / "UnaryKernel.mm").read_text()
    nf = parse(tree)
    assert nf.by_name["special_ndtri.out"].row_for("MPS").keys == ("CPU", "CUDA", "MPS")


def test_add_special_airy_ai_covers_unsigned_dtypes(tree):
    result = add(tree, "special_airy_ai")
    assert result.exit_code == 0, result.output
    metal = (tree / KERNELS / "UnaryKernel.metal").read_text()
    for t in ("ushort", "uint", "ulong", "uchar"):
        assert f"REGISTER_UNARY_OP(airy_ai, {t}, float);" in metal
    assert "special.airy_ai" not in (tree / COMMON).read_text()


def test_add_laguerre_leaves_composite_scalar_overloads_alone(tree):
    before = (tree / YAML).read_text()
    result = add(tree, "special_laguerre_polynomial_l", "--json")
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output)
    actions = {a["entry"]: a["action"] for a in data["dispatch"]}
    assert actions == {
        "special_laguerre_polynomial_l": "inherits",
        "special_laguerre_polynomial_l.x_scalar": "composite",
        "special_laguerre_polynomial_l.n_scalar": "composite",
        "special_laguerre_polynomial_l.out": "shared",
        "special_laguerre_polynomial_l.x_scalar_out": "composite",
        "special_laguerre_polynomial_l.n_scalar_out": "composite",
    }
    assert len(changed_lines(before, (tree / YAML).read_text())) == 2
    assert "REGISTER_DISPATCH(laguerre_polynomial_l_stub, &laguerre_polynomial_l_mps_kernel)" in (
        tree / OPS / "BinaryKernel.mm").read_text()


def test_add_removes_common_mps_entries_and_reports_opinfo_skips(tree):
    result = add(tree, "heaviside")
    common = (tree / COMMON).read_text()
    assert '"heaviside": None' not in common
    compile(common, COMMON, "exec")
    assert "removed common_mps.py entry UNIMPLEMENTED_XFAILLIST['heaviside']" in result.output
    assert "OpInfo decorator still skips MPS: heaviside: " in result.output
    assert "TestCommon.test_out" in result.output


def test_dry_run_prints_a_diff_and_writes_nothing(tree):
    before = snapshot(tree)
    result = add(tree, "special_ndtri", "--dry-run")
    assert result.exit_code == 0, result.output
    assert snapshot(tree) == before
    assert f"--- a/{YAML}" in result.output
    assert "+    CPU, CUDA, MPS: special_ndtri_out" in result.output
    assert f"+++ b/{KERNELS}/UnaryKernel.metal" in result.output


def test_second_add_changes_nothing(tree):
    for op in FUNCTORS:
        assert add(tree, op).exit_code == 0
    after_first = snapshot(tree)
    for op in FUNCTORS:
        result = add(tree, op)
        assert result.exit_code == 0, result.output
        assert "nothing to change: already done" in result.output
        assert add(tree, op, "--dry-run").output == ""
    assert snapshot(tree) == after_first


def test_add_creates_missing_kernel_and_host_files_with_boilerplate(tree):
    (tree / KERNELS / "UnaryKernel.metal").unlink()
    (tree / OPS / "UnaryKernel.mm").unlink()
    assert add(tree, "special_airy_ai").exit_code == 0
    metal = (tree / KERNELS / "UnaryKernel.metal").read_text()
    assert metal.startswith("#include <c10/metal/indexing.h>")
    host = (tree / OPS / "UnaryKernel.mm").read_text()
    assert "static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();" in host
    assert "#include <ATen/native/UnaryOps.h>" in host
    assert host.rstrip().endswith("} // namespace at::native")


def test_writes_are_atomic_a_failed_replace_leaves_files_intact(tree, monkeypatch):
    before = snapshot(tree)
    real_replace = os.replace
    calls = []

    def failing_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    result = add(tree, "heaviside")
    assert result.exit_code != 0
    after = snapshot(tree)
    # no temp files left, and every file is either wholly old or wholly new
    assert set(after) == set(before)
    assert not [p for p in tree.rglob(".*.tmp")]
    assert after[str(Path(calls[1]).relative_to(tree))] == before[str(Path(calls[1]).relative_to(tree))]


def test_not_a_checkout_is_one_message_and_exit_2(tmp_path):
    (tmp_path / "somefile").write_text("x")
    before = snapshot(tmp_path)
    result = run("add", "heaviside", "--pytorch", tmp_path, *HEAVISIDE)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {tmp_path}: not a PyTorch checkout: missing {YAML}"]
    assert snapshot(tmp_path) == before


def test_unknown_op_is_one_message_and_exit_2(tree):
    before = snapshot(tree)
    result = run("add", "no_such_op", "--pytorch", tree, "--expr", "x")
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "unknown operator 'no_such_op'" in result.output
    assert "native_functions.yaml" in result.output
    assert snapshot(tree) == before


def test_functor_file_without_the_struct_is_rejected_with_its_path(tree, tmp_path):
    bad = tmp_path / "bad.metal"
    bad.write_text("struct something_else_functor {};\n")
    before = snapshot(tree)
    result = run("add", "special_ndtri", "--pytorch", tree, "--functor", bad)
    assert result.exit_code == 2
    assert f"error: {bad}: no struct ndtri_functor" in result.output
    assert snapshot(tree) == before
