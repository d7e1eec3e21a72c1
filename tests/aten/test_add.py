"""`aten add` edits, without the runtime (--no-verify): where each edit lands and what it holds."""

import json
import os
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from aten_tree import FIXTURES, FUNCTORS, HEAVISIDE, KERNELS, OPS, TORCH, functor, snapshot
from metal_kernel.aten.cli import aten
from metal_kernel.aten.edit.mm import plan_stub_host
from metal_kernel.aten.model.metal_file import MetalFile
from metal_kernel.aten.model.native_functions import NativeFunctions
from metal_kernel.aten.model.stubs import find_stubs
from metal_kernel.aten.model.tree import PyTorchTree

YAML = "aten/src/ATen/native/native_functions.yaml"
COMMON = "torch/testing/_internal/common_mps.py"
C10_METAL = TORCH / "include/c10/metal"


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


def leaves(tree, name, family):
    mf = MetalFile((tree / KERNELS / name).read_text(), C10_METAL)
    return sorted(l.args[1:] for _, ls in mf.registrations() for l in ls if l.belongs_to(family))


def test_add_heaviside_puts_mps_on_the_shared_line_and_torchgen_parses(tree):
    before = (tree / YAML).read_text()
    result = add(tree, "heaviside")
    assert result.exit_code == 0, result.output
    assert changed_lines(before, (tree / YAML).read_text()) == [
        ("-", "    CPU, CUDA: heaviside_out"), ("+", "    CPU, CUDA, MPS: heaviside_out")]
    from torchgen.model import DispatchKey

    nf = parse(tree)
    assert all(nf.effective(DispatchKey.MPS, e.fn) for e in nf.family("heaviside"))


def test_binary_registrations_use_the_files_macros_inside_the_one_op_paragraph(tree):
    add(tree, "heaviside")
    add(tree, "special_laguerre_polynomial_l")
    lines = (tree / KERNELS / "BinaryKernel.metal").read_text().splitlines()
    at = lines.index("REGISTER_COMPARISON_OP(lt);")
    assert lines[at + 1:at + 6] == [
        "REGISTER_FLOAT_BINARY_OP(heaviside);", "REGISTER_INTEGER_BINARY_OP(heaviside);",
        "REGISTER_FLOAT_BINARY_OP(laguerre_polynomial_l);", "REGISTER_INT2FLOAT_BINARY_OP(laguerre_polynomial_l);",
        "REGISTER_BINARY_ALPHA_OP(add_alpha, float, float, float);"]
    # the same instantiations as the neighbour of the same kind (chebyshev_polynomial_t)
    assert [p[0] for p in leaves(tree, "BinaryKernel.metal", "laguerre_polynomial_l")] == \
        [p[0] for p in leaves(tree, "BinaryKernel.metal", "chebyshev_polynomial_t")]
    assert leaves(tree, "BinaryKernel.metal", "heaviside") == sorted(
        [(t, t) for t in ("float", "half", "bfloat", "long", "int", "short", "uchar", "char", "bool")])
    assert "double" not in "\n".join(lines)


def test_binary_functor_lands_after_the_last_functor_before_the_registrations(tree):
    add(tree, "heaviside")
    text = (tree / KERNELS / "BinaryKernel.metal").read_text()
    assert text.index("DEFINE_BINARY_COMPARISON_FUNCTOR(lt, <);") < text.index("struct heaviside_functor") \
        < text.index("#define REGISTER_INTEGER_BINARY_OP_NO_BOOL")
    host = (tree / OPS / "BinaryKernel.mm").read_text()
    assert host.index("chebyshev_polynomial_t_mps_kernel(TensorIteratorBase") < host.index(
        "heaviside_mps_kernel(TensorIteratorBase") < host.index("REGISTER_DISPATCH(hypot_stub")
    assert host.rstrip().splitlines()[-2] == "REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)"


def test_unary_op_gets_its_own_paragraph_with_its_neighbours_dtype_list(tree):
    result = add(tree, "special_ndtri")
    assert result.exit_code == 0, result.output
    text = (tree / KERNELS / "UnaryKernel.metal").read_text()
    assert text.index("DEFINE_UNARY_FLOATING_FUNCTOR(erfinv);") < text.index("inline float ndtri_lower") \
        < text.index("struct ndtri_functor") < text.index("REGISTER_UNARY_OP(neg, int, int);")
    lines = text.splitlines()
    at = lines.index("REGISTER_UNARY_OP(logical_not, bfloat, bool);")
    assert lines[at + 1] == "" and lines[at + 2] == "REGISTER_UNARY_OP(ndtri, float, float);"
    assert lines[at + 11] == "" and lines[at + 12].startswith("#define INSTANTIATE_UNARY_KERNELS2")
    # exp, a float-valued neighbour, is instantiated for exactly these (in, out) pairs
    assert leaves(tree, "UnaryKernel.metal", "ndtri") == leaves(tree, "UnaryKernel.metal", "exp")
    # the file spells its registrations `REGISTER_DISPATCH(round_stub, round_kernel_mps);`: so does add
    assert "REGISTER_DISPATCH(special_ndtri_stub, ndtri_mps_kernel);" in (tree / OPS / "UnaryKernel.mm").read_text()
    assert parse(tree).by_name["special_ndtri.out"].row_for("MPS").keys == ("CPU", "CUDA", "MPS")


def test_includes_of_a_functor_file_are_added_once(tree, tmp_path):
    source = tmp_path / "ndtri.metal"
    source.write_text("#include <c10/metal/reduction_utils.h>\n#include <c10/metal/utils.h>\n"
                      + (FIXTURES / "functors/ndtri.metal").read_text())
    assert run("add", "special_ndtri", "--pytorch", tree, "--functor", source, "--no-verify").exit_code == 0
    text = (tree / KERNELS / "UnaryKernel.metal").read_text()
    for header in ("special_math.h", "utils.h", "reduction_utils.h"):
        assert text.count(f"#include <c10/metal/{header}>") == 1, header
    includes = [l for l in text.splitlines() if l.startswith("#include")]
    assert includes[-1] == "#include <c10/metal/reduction_utils.h>"
    assert text.index("#include <c10/metal/reduction_utils.h>") < text.index("using namespace metal;")
    assert "// Inverse of the standard normal CDF" in text  # the file's comment travels with its code


def test_airy_ai_dtypes_are_test_mps_dtypes_and_the_rest_is_said(tree):
    result = add(tree, "special_airy_ai")
    assert result.exit_code == 0, result.output
    assert {p[0] for p in leaves(tree, "UnaryKernel.metal", "airy_ai")} == {
        "float", "half", "bfloat", "long", "int", "short", "char", "uchar", "bool"}
    assert "not instantiated for uint16, uint32, uint64: test_mps's MPS_DTYPES never compares them" in result.output
    assert "special.airy_ai" not in (tree / COMMON).read_text()


def test_laguerre_leaves_composite_scalar_overloads_alone(tree):
    before = (tree / YAML).read_text()
    result = add(tree, "special_laguerre_polynomial_l", "--json")
    assert result.exit_code == 0, result.output
    actions = {a["entry"]: a["action"] for a in json.loads(result.output)["dispatch"]}
    assert actions == {
        "special_laguerre_polynomial_l": "inherits",
        "special_laguerre_polynomial_l.x_scalar": "composite",
        "special_laguerre_polynomial_l.n_scalar": "composite",
        "special_laguerre_polynomial_l.out": "shared",
        "special_laguerre_polynomial_l.x_scalar_out": "composite",
        "special_laguerre_polynomial_l.n_scalar_out": "composite",
    }
    assert len(changed_lines(before, (tree / YAML).read_text())) == 2


def test_second_add_changes_nothing(tree):
    for op in FUNCTORS:
        assert add(tree, op).exit_code == 0, op
    after_first = snapshot(tree)
    for op in FUNCTORS:
        result = add(tree, op)
        assert result.exit_code == 0, result.output
        assert "nothing to change: already done" in result.output
        assert add(tree, op, "--dry-run").output == ""
    assert snapshot(tree) == after_first


def test_a_different_functor_is_refused_with_the_diff_and_replaced_with_force(tree, tmp_path):
    assert add(tree, "special_ndtri").exit_code == 0
    first = snapshot(tree)
    changed = tmp_path / "ndtri.metal"
    changed.write_text((FIXTURES / "functors/ndtri.metal").read_text().replace("step < 3", "step < 2")
                       .replace("inline float ndtri_lower", "inline float ndtri_tail"))
    changed.write_text(changed.read_text().replace("ndtri_lower(", "ndtri_tail("))
    result = run("add", "special_ndtri", "--pytorch", tree, "--functor", changed, "--no-verify")
    assert result.exit_code == 2
    assert "error: a different implementation of 'ndtri' is already in UnaryKernel.metal; rerun with --force" \
        in result.output
    assert "--- a/aten/src/ATen/native/mps/kernels/UnaryKernel.metal" in result.output
    assert "+  for (int step = 0; step < 2; ++step) {" in result.output
    assert snapshot(tree) == first
    result = run("add", "special_ndtri", "--pytorch", tree, "--functor", changed, "--no-verify", "--force")
    assert result.exit_code == 0, result.output
    text = (tree / KERNELS / "UnaryKernel.metal").read_text()
    assert "step < 2" in text and text.count("struct ndtri_functor") == 1
    # the old helper had another name: it stays (add only knows the names in the new file)
    assert "inline float ndtri_lower" in text and "inline float ndtri_tail" in text
    assert text.index("inline float ndtri_tail") < text.index("struct ndtri_functor")
    again = run("add", "special_ndtri", "--pytorch", tree, "--functor", changed, "--no-verify")
    assert "nothing to change: already done" in again.output


def test_force_replaces_registrations_of_another_dtype_list(tree):
    assert add(tree, "heaviside").exit_code == 0
    path = tree / KERNELS / "BinaryKernel.metal"
    path.write_text(path.read_text().replace("REGISTER_INTEGER_BINARY_OP(heaviside);\n", ""))
    refused = add(tree, "heaviside")
    assert refused.exit_code == 2 and "+REGISTER_INTEGER_BINARY_OP(heaviside);" in refused.output
    assert add(tree, "heaviside", "--force").exit_code == 0
    assert path.read_text().count("REGISTER_INTEGER_BINARY_OP(heaviside);") == 1


def test_force_replaces_a_dispatch_registered_to_other_code(tree):
    host = tree / OPS / "BinaryKernel.mm"
    host.write_text(host.read_text().replace(
        "REGISTER_DISPATCH(hypot_stub, &hypot_mps_kernel)",
        "REGISTER_DISPATCH(hypot_stub, &hypot_mps_kernel)\nREGISTER_DISPATCH(heaviside_stub, &my_heaviside)"))
    refused = add(tree, "heaviside")
    assert refused.exit_code == 2
    assert "-REGISTER_DISPATCH(heaviside_stub, &my_heaviside)" in refused.output
    assert add(tree, "heaviside", "--force").exit_code == 0
    text = host.read_text()
    assert "my_heaviside" not in text and text.count("REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)") == 1


def test_a_stub_named_after_its_kernel_uses_the_files_dispatch_macro(tree):
    host = tree / OPS / "UnaryKernel.mm"
    host.write_text(host.read_text().replace("REGISTER_UNARY_TI_DISPATCH(exp);\n", ""))
    t = PyTorchTree.from_root(tree)
    change = plan_stub_host(t.operations_dir, t.native_dir, find_stubs(t.native_dir)["exp_stub"], "exp")
    added = [l for kind, l in changed_lines(change.old, change.new) if kind == "+"]
    assert added == ["REGISTER_UNARY_TI_DISPATCH(exp);"]
    assert change.new.index("REGISTER_UNARY_TI_DISPATCH(neg);") < change.new.index("REGISTER_UNARY_TI_DISPATCH(exp);")


def test_only_the_unimplemented_entry_goes_and_the_others_are_listed(tree):
    common = tree / COMMON
    text = common.read_text()
    text = text.replace('        SKIPLIST = {\n', '        SKIPLIST = {\n            # crashes the compiler\n'
                        '            "heaviside": [torch.float16],\n')
    text = text.replace('        ON_MPS_XFAILLIST: dict[str, list | None] = {\n',
                        '        ON_MPS_XFAILLIST: dict[str, list | None] = {\n'
                        '            "heaviside": [torch.bfloat16],  # precision\n')
    common.write_text(text)
    result = add(tree, "heaviside")
    assert result.exit_code == 0, result.output
    after = common.read_text()
    assert '"heaviside": None' not in after
    assert after.count('"heaviside": [torch.float16],') == 1 and '"heaviside": [torch.bfloat16],' in after
    compile(after, COMMON, "exec")
    assert "removed common_mps.py entry UNIMPLEMENTED_XFAILLIST['heaviside']" in result.output
    assert "common_mps.py entries left in place, review them" in result.output
    assert re.search(r"SKIPLIST\['heaviside'\] = \[torch.float16\] \(line \d+\)", result.output)
    assert re.search(r"ON_MPS_XFAILLIST\['heaviside'\] = \[torch.bfloat16\] \(line \d+\)", result.output)


def test_an_unimplemented_entry_for_other_dtypes_too_is_narrowed(tree):
    common = tree / COMMON
    common.write_text(common.read_text().replace('"heaviside": None,', '"heaviside": [torch.float32, torch.complex64],'))
    result = add(tree, "heaviside", "--json")
    assert result.exit_code == 0, result.output
    assert '"heaviside": [torch.complex64],' in common.read_text()
    assert json.loads(result.output)["removed_xfails"][0].endswith("kept for [torch.complex64]")


def test_dry_run_prints_a_diff_and_writes_nothing(tree):
    before = snapshot(tree)
    result = add(tree, "special_ndtri", "--dry-run")
    assert result.exit_code == 0, result.output
    assert snapshot(tree) == before
    assert f"--- a/{YAML}" in result.output
    assert "+    CPU, CUDA, MPS: special_ndtri_out" in result.output
    assert f"+++ b/{KERNELS}/UnaryKernel.metal" in result.output
    data = json.loads(add(tree, "special_ndtri", "--dry-run", "--json").output)
    assert data["kernel"] == "ndtri" and "+struct ndtri_functor {" in data["diff"]


def test_add_creates_missing_kernel_and_host_files_with_boilerplate(tree):
    (tree / KERNELS / "UnaryKernel.metal").unlink()
    (tree / OPS / "UnaryKernel.mm").unlink()
    assert add(tree, "special_airy_ai").exit_code == 0
    metal = (tree / KERNELS / "UnaryKernel.metal").read_text()
    assert metal.startswith("#include <c10/metal/indexing.h>")
    assert metal.index("struct airy_ai_functor") < metal.index("REGISTER_UNARY_OP(airy_ai, float, float);")
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
    assert set(after) == set(before)
    assert not [p for p in tree.rglob(".*.tmp")]
    assert after[str(Path(calls[1]).relative_to(tree))] == before[str(Path(calls[1]).relative_to(tree))]


def test_not_a_checkout_is_one_message_and_exit_2(tmp_path):
    (tmp_path / "somefile").write_text("x")
    before = snapshot(tmp_path)
    result = run("add", "heaviside", "--pytorch", tmp_path, *HEAVISIDE)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: {tmp_path}: not a PyTorch checkout: missing {YAML}"]
    assert snapshot(tmp_path) == before


def test_unknown_op_is_one_message_and_exit_2(tree):
    before = snapshot(tree)
    result = run("add", "no_such_op", "--pytorch", tree, "--expr", "x")
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "unknown operator 'no_such_op'" in result.output and "native_functions.yaml" in result.output
    assert snapshot(tree) == before


def test_functor_file_without_the_struct_is_rejected_with_its_path(tree, tmp_path):
    bad = tmp_path / "bad.metal"
    bad.write_text("struct something_else_functor {};\n")
    before = snapshot(tree)
    result = run("add", "special_ndtri", "--pytorch", tree, "--functor", bad)
    assert result.exit_code == 2
    assert f"error: {bad}: no struct ndtri_functor" in result.output
    assert snapshot(tree) == before


def test_unknown_dtype_is_a_user_error(tree):
    result = run("add", "special_ndtri", "--pytorch", tree, *functor("ndtri"), "--dtype", "float99")
    assert result.exit_code == 2 and "unknown dtype float99" in result.output
    assert torch.float32  # torch names are the accepted spelling
